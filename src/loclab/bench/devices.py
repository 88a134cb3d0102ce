"""``loclab devices``: what was detected, plus the copy bandwidths measured through the
harness: each device's memory, and on a GPU the link between host and device."""

from __future__ import annotations

from typing import Any

from loclab.bench.runner import execute, plan
from loclab.cpu.threads import configure_threads
from loclab.cases import LINK_ROOF_CASE, ROOF_CASE
from loclab.hw import detect_machine


def devices(measure: bool = True, threads: int | None = None) -> dict[str, Any]:
    """Machine description; with ``measure``, the multi-core and device copy bandwidths and
    the host-device copies (pinned and pageable, each way, both ways at once).

    The copy is the ``copy`` case at its default size and the link the ``host-device`` case
    at 256 MiB, the measurements ``loclab run`` uses as its roofs, so the two commands always
    agree on what the roofs are.
    """
    if not measure:
        machine = detect_machine().to_json()
        machine["cpu"]["numba_threads"] = configure_threads(threads)
        return {"machine": machine, "references": None, "copies": [], "links": []}
    document = execute(plan(cases=[ROOF_CASE], device="all", size="default", threads=threads,
                            tuned=False, link_roof=True))
    rows = document["results"]
    return {"machine": document["machine"], "references": document["references"],
            "copies": [{key: row[key] for key in ("variant", "device", "gbps", "valid",
                                                  "error")}
                       for row in rows if row["case"] == ROOF_CASE],
            "links": [{key: row[key] for key in ("variant", "size", "memory", "link_gbps",
                                                  "valid", "error")}
                      for row in rows if row["case"] == LINK_ROOF_CASE]}
