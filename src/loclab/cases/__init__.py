"""The case studies, by name. Listing names imports nothing heavy.

Each case is a subpackage whose ``CASE`` is a :class:`loclab.cases.base.Case`.
``copy`` is the roof: the harness always runs it first. ``host-device`` is the roof of the
cases rated against the link between host and device: it runs (at its ``roof_dims``) before
them. A family names several cases a user asks for together (``--case transfers``).
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
    "host-device": "loclab.cases.host_device",
    "overlap": "loclab.cases.overlap",
    "gemm-chain": "loclab.cases.gemm_chain",
    "kernel-chain": "loclab.cases.kernel_chain",
}
ROOF_CASE = "copy"
LINK_ROOF_CASE = "host-device"
# Locality between host and device: the link's roof, overlapping copies with compute, and
# data that stays on the device between calls.
CASE_FAMILIES = {"transfers": ("host-device", "overlap", "gemm-chain", "kernel-chain")}


def case_names() -> list[str]:
    return list(CASE_MODULES)


def case_choices() -> list[str]:
    """What ``--case`` accepts: every case, and every family of cases."""
    return case_names() + list(CASE_FAMILIES)


def family_of(name: str) -> str | None:
    """The family case ``name`` belongs to, or None."""
    return next((family for family, cases in CASE_FAMILIES.items() if name in cases), None)


def expand_families(names: list[str]) -> list[str]:
    """``names`` with each family replaced by its cases, in order, each case once."""
    return list(dict.fromkeys(case for name in names
                              for case in CASE_FAMILIES.get(name, (name,))))


def get_case(name: str) -> Case:
    """The case called ``name`` (names are checked by the caller against ``case_names``)."""
    return importlib.import_module(CASE_MODULES[name]).CASE
