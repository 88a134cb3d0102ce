"""The case studies, by name. Listing names imports nothing heavy.

Each case is a subpackage whose ``CASE`` is a :class:`loclab.cases.base.Case`.
``copy`` is the roof: the harness always runs it first.
"""

from __future__ import annotations

import importlib

from loclab.cases.base import Case

CASE_MODULES = {
    "copy": "loclab.cases.copy",
    "transpose": "loclab.cases.transpose",
    "partitioning": "loclab.cases.partitioning",
    "nearest-neighbour": "loclab.cases.nearest_neighbour",
    "coalescing": "loclab.cases.coalescing",
    "matvec": "loclab.cases.matvec",
    "histogram": "loclab.cases.histogram",
    "mmm": "loclab.cases.mmm",
    "bmmm": "loclab.cases.bmmm",
    "scan": "loclab.cases.scan",
    "compaction": "loclab.cases.compaction",
    "segmented-scan": "loclab.cases.segmented_scan",
    "summed-area": "loclab.cases.summed_area",
    "radix-sort": "loclab.cases.radix_sort",
    "spmv": "loclab.cases.spmv",
}
ROOF_CASE = "copy"


def case_names() -> list[str]:
    return list(CASE_MODULES)


def get_case(name: str) -> Case:
    """The case called ``name`` (names are checked by the caller against ``case_names``)."""
    return importlib.import_module(CASE_MODULES[name]).CASE
