"""Time: what a variant should take if it ran at its device's limits, from the bytes the
models say it moves and the flops its golden algorithm does.

    predicted time = max(traffic / measured copy bandwidth, flops / peak, link)

This is the lectures' memory-bound time model and the roofline's two roofs in one line; for a
row whose data starts or ends in host memory, ``link`` is the farthest memory's term: bytes to
the device over the measured host-to-device bandwidth, or back over device-to-host, whichever
is longer (the two directions overlap at best). The
traffic is the models' (sectors per warp request for GPU kernels, cache misses for CPU loops),
not the golden bytes, so a kernel that moves eight times the bytes it needs is predicted eight
times slower than a copy of them. The copy bandwidth counts bytes read plus bytes written, as
the traffic does. What the model leaves out (latency with too few threads in flight, atomics
serialized on one address, instruction issue) makes a measured time longer than predicted:
the ratio of the two says how much a row is bound by something other than its bytes and
flops.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

Bound = Literal["memory", "compute", "link"]


@dataclass(frozen=True)
class Traffic:
    """Bytes a variant moves to and from memory in one run, and the model that says so."""

    bytes: float
    model: str  # "sectors: coalescing model of 2 kernels", "cache: ..."


@dataclass(frozen=True)
class Prediction:
    seconds: float
    bound: Bound
    traffic: Traffic
    flops: float

    def to_json(self) -> dict[str, Any]:
        return {"predicted_s": self.seconds, "bound": self.bound,
                "traffic_bytes": self.traffic.bytes, "traffic_model": self.traffic.model}


def predict(traffic: Traffic, flops: float, copy_gbps: float | None,
            peak_gflops: float | None, link_s: float = 0.0) -> Prediction | None:
    """The time at the device's two roofs and, where the data crosses it, the link's
    (``link_s``); None where no roof is known."""
    memory = traffic.bytes / (copy_gbps * 1e9) if copy_gbps else None
    compute = flops / (peak_gflops * 1e9) if peak_gflops and flops else 0.0
    if memory is None and not compute and not link_s:
        return None
    if link_s and link_s >= max(memory or 0.0, compute):
        return Prediction(link_s, "link", traffic, flops)
    if memory is not None and memory >= compute:
        return Prediction(memory, "memory", traffic, flops)
    return Prediction(compute, "compute", traffic, flops)


def link_seconds(to_device: float, to_host: float, h2d_gbps: float | None,
                 d2h_gbps: float | None) -> float:
    """The link's term: the longer of the two directions at their measured bandwidths (0
    where a direction with bytes has no measured bandwidth: then nothing is predicted of
    it)."""
    inbound = to_device / (h2d_gbps * 1e9) if to_device and h2d_gbps else 0.0
    outbound = to_host / (d2h_gbps * 1e9) if to_host and d2h_gbps else 0.0
    return max(inbound, outbound)


def sector_traffic(kernels: list[dict[str, Any]], cache_bytes: int) -> Traffic | None:
    """The bytes a GPU row's kernels move by the coalescing model: every declared global
    access runs ``executions`` times a launch (or a run: ``count_per_run``), and a warp
    request of 32 of them moves its predicted mean sectors of 32 bytes. An access that
    declares its footprint moves only that, where it fits half of ``cache_bytes`` (the L2:
    the other half holds the streams), from memory once. None where a kernel declares no
    global access with a count (its bytes would be unknown)."""
    total = 0.0
    for kernel in kernels:
        accesses = [a for a in kernel.get("accesses", []) if a["space"] == "global"]
        if kernel.get("error") or not accesses or any(
                a.get("error") or a.get("executions") is None for a in accesses):
            return None
        for access in accesses:
            moved = access["executions"] / 32 * access["mean_sectors_per_request"] * 32
            footprint = access.get("footprint_bytes")
            if footprint is not None and footprint <= cache_bytes / 2:
                moved = min(moved, footprint)
            total += moved * (1 if access.get("count_per_run") else
                              kernel.get("launches_per_run", 1))
    names = ", ".join(sorted({k["kernel"].partition("<")[0] for k in kernels}))
    return Traffic(total, f"coalescing model: 32-byte sectors of {names}")
