"""What limits a case, and so which rate a report shows first for it.

A case declares its limit (``Case.limit``, written to ``cases[NAME]["limit"]`` of a results
document): ``memory`` (rated in GB/s of the golden algorithm's bytes against the copy measured
on the same device), ``compute`` (GFlop/s against the fp32 peak and the library row) or
``unit`` (the case's own unit per second, pairs or keys, against that unit's roof) or
``interconnect`` (GB/s of the bytes to and from host memory, as a fraction of the ideal time:
the link's measured roofs and the compute overlapped, ``loclab.bench.interconnect``). Tables
and charts show that metric first and leave out the rates that mean nothing for it (GB/s of a
matrix product, % of copy of a hash table build).

A results file written before cases declared a limit still renders: the limit is derived from
its rows (a unit, else a fraction of peak, else memory).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

LIMITS = ("memory", "compute", "unit", "interconnect")


@dataclass(frozen=True)
class Metric:
    """The rate a case is judged by: the row key of the rate and of its fraction of the roof,
    and the column headers that show them."""

    limit: str
    rate_key: str
    percent_key: str
    rate_header: str
    percent_header: str
    unit: str | None = None  # the case's unit (pairs, keys) when ``limit`` is "unit"


def case_limit(document: dict[str, Any], case: str) -> str:
    """The limit ``case`` declared in ``document``, or the one its rows imply."""
    declared = (document.get("cases") or {}).get(case, {}).get("limit")
    if declared in LIMITS:
        return declared
    rows = [row for row in document["results"] if row["case"] == case]
    if any(row.get("unit") for row in rows):
        return "unit"
    if any(row.get("pct_of_peak") is not None for row in rows):
        return "compute"
    return "memory"


def case_metric(document: dict[str, Any], case: str) -> Metric:
    """The metric ``case``'s rows are shown in first."""
    limit = case_limit(document, case)
    if limit == "unit":
        unit = next((row["unit"] for row in document["results"]
                     if row["case"] == case and row.get("unit")), None)
        if unit:
            return Metric("unit", "items_per_s", "pct_of_unit_roof", f"{unit}/s", "% limit",
                          unit)
        limit = "memory"  # a unit declared but no row says which: fall back on bytes
    if limit == "compute":
        return Metric("compute", "gflops", "pct_of_peak", "GFlop/s", "% peak")
    if limit == "interconnect":
        return Metric("interconnect", "gbps", "pct_of_ideal", "GB/s", "% ideal")
    return Metric("memory", "gbps", "pct_of_copy", "GB/s", "% copy")
