"""The link between host and device: its roof, and the ideal time of a row whose data starts
or ends in host memory.

The roof is measured by the ``host-device`` case in the same run (the best valid copy of each
direction and host memory: pinned and pageable, host to device and back, and both ways at
once). A row that moves ``to_device`` bytes in and ``to_host`` bytes out and computes could at
best overlap all three: its ideal time is max(to_device / H2D, to_host / D2H, compute), where
H2D and D2H are the pinned roofs and compute is the fastest compute phase measured at its
size (``Bound.steps``: the kernels alone, on data already on the device); with no overlap at
all it takes their sum. A link is not quite full duplex (PCIe's acknowledgements share the
lanes): where a row crosses both ways and the run measured the copy both ways at once, the
ideal is also at least (to_device + to_host) / that bandwidth. Rows report ``pct_of_ideal`` =
ideal / median time.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from loclab.cases import LINK_ROOF_CASE
from loclab.cases.base import COMPUTE, HOST_MEMORY, Variant, Work, dims_text

Row = dict[str, Any]
# The references a host-device row sets, by where its inputs and output live.
LINK_REFERENCES = {
    ("pinned", "device"): "gpu_h2d_gbps",
    ("device", "pinned"): "gpu_d2h_gbps",
    ("pageable", "device"): "gpu_h2d_pageable_gbps",
    ("device", "pageable"): "gpu_d2h_pageable_gbps",
    ("pinned", "pinned"): "gpu_bidirectional_gbps",
}


def link_bytes(variant: Variant, work: Work) -> tuple[int, int]:
    """Bytes a GPU variant must move to the device (the golden algorithm's inputs, where its
    placement keeps them in host memory) and back to the host (its output, where it is written
    to host memory)."""
    if variant.device != "gpu":
        return 0, 0
    return (work.to_device if variant.placement.inputs in HOST_MEMORY else 0,
            work.to_host if variant.placement.output in HOST_MEMORY else 0)


def link_references(rows: Iterable[Row]) -> dict[str, float | None]:
    """The best valid host-device copy of each kind, in GB/s of link traffic (both directions
    counted for the copy that runs both ways at once)."""
    found: dict[str, float | None] = dict.fromkeys(LINK_REFERENCES.values())
    for row in rows:
        memory = row.get("memory") or {}
        key = LINK_REFERENCES.get((memory.get("inputs"), memory.get("output")))
        if row["case"] == LINK_ROOF_CASE and key and row["valid"] and row.get("link_gbps"):
            found[key] = max(found[key] or 0.0, row["link_gbps"])
    return found


def _fastest_compute(rows: list[Row]) -> dict[tuple[str, str, str], tuple[float, str]]:
    """The fastest compute phase of a valid row, and its variant, per case, device and size."""
    fastest: dict[tuple[str, str, str], tuple[float, str]] = {}
    for row in rows:
        seconds = (row.get("phases") or {}).get(COMPUTE)
        if seconds is None or not row["valid"]:
            continue
        group = (row["case"], row["device"], dims_text(row["size"]))
        if group not in fastest or seconds < fastest[group][0]:
            fastest[group] = (seconds, row["variant"])
    return fastest


def add_ideals(rows: list[Row], references: dict[str, Any]) -> None:
    """``ideal_s``, ``no_overlap_s``, ``ideal`` (its parts: seconds to the device, to the host,
    both ways at once, computing, and whose compute phase) and ``pct_of_ideal`` of every
    timed row that crosses the link, where the run measured the link's roofs."""
    h2d, d2h = references.get("gpu_h2d_gbps"), references.get("gpu_d2h_gbps")
    both = references.get("gpu_bidirectional_gbps")
    compute = _fastest_compute(rows)
    for row in rows:
        row.update(ideal_s=None, no_overlap_s=None, ideal=None, pct_of_ideal=None)
        crossing = row["to_device_bytes"] + row["to_host_bytes"]
        if not crossing or not row["median_s"]:
            continue
        if (row["to_device_bytes"] and not h2d) or (row["to_host_bytes"] and not d2h):
            continue
        seconds, source = compute.get((row["case"], row["device"], dims_text(row["size"])),
                                      (0.0, None))
        crossing_both = row["to_device_bytes"] and row["to_host_bytes"]
        parts = {"to_device_s": row["to_device_bytes"] / (h2d * 1e9) if h2d else 0.0,
                 "to_host_s": row["to_host_bytes"] / (d2h * 1e9) if d2h else 0.0,
                 "both_ways_s": crossing / (both * 1e9) if both and crossing_both else 0.0,
                 "compute_s": seconds, "compute_of": source}
        ideal = max(parts["to_device_s"], parts["to_host_s"], parts["both_ways_s"], seconds)
        row.update(ideal_s=ideal, ideal=parts, pct_of_ideal=100.0 * ideal / row["median_s"],
                   no_overlap_s=parts["to_device_s"] + parts["to_host_s"] + seconds)
