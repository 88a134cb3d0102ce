"""``loclab devices``: what was detected, plus the copy bandwidth measured through the harness."""

from __future__ import annotations

from typing import Any

from loclab.bench.runner import configure_threads, run
from loclab.cases import ROOF_CASE
from loclab.hw import detect_machine


def devices(measure: bool = True, threads: int | None = None) -> dict[str, Any]:
    """Machine description; with ``measure``, the multi-core and device copy bandwidths.

    The copy is the ``copy`` case at its default size, the same measurement ``loclab run``
    uses as its roof, so the two commands always agree on what the roof is.
    """
    if not measure:
        machine = detect_machine().to_json()
        machine["cpu"]["numba_threads"] = configure_threads(threads)
        return {"machine": machine, "references": None, "copies": []}
    document = run(cases=[ROOF_CASE], device="all", size="default", threads=threads,
                   tuned=False)
    return {"machine": document["machine"], "references": document["references"],
            "copies": [{key: row[key] for key in ("variant", "device", "gbps", "valid", "error")}
                       for row in document["results"]]}
