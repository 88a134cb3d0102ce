"""The JSON document of a run (ARCHITECTURE.md, "loclab run --json FILE"): build, write, load.

Keys may be added, never renamed: users' scripts read them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from loclab.errors import LoclabError, UsageError

# The keys every result row carries (the contract), in the order they are written.
ROW_KEYS = ("case", "variant", "device", "role", "size", "params", "median_s", "min_s", "max_s",
            "runs", "bytes", "flops", "gbps", "gflops", "valid", "max_rel_err", "pct_of_copy",
            "pct_of_peak", "speedup_vs_naive", "vs_library")
REFERENCE_KEYS = ("gpu_copy_gbps", "gpu_peak_gflops_fp32", "cpu_copy_gbps")


def build_document(*, machine: dict[str, Any], references: dict[str, Any],
                   cases: dict[str, dict[str, str]], rows: list[dict[str, Any]], size: str,
                   devices: list[str]) -> dict[str, Any]:
    from loclab.version import __version__

    return {
        "loclab": __version__,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "size": size,
        "devices": devices,
        "machine": machine,
        "references": references,
        "cases": cases,
        "results": rows,
        "failures": sum(1 for row in rows if not row["valid"] and not row.get("skipped")),
    }


def write_json(document: dict[str, Any], path: Path) -> None:
    """Write a document (a run's, a comparison's, a tuning's) as loclab writes every JSON file:
    whole or not at all, with the digest that tells a later write whether it was edited
    (``loclab.outputs.json_text``)."""
    from loclab.outputs import json_text, replace_file

    try:
        replace_file(path, json_text(document).encode())
    except OSError as err:
        raise LoclabError(f"{path}: cannot write: {err.strerror or err}") from None


TOP_KEYS = {"loclab": str, "created": str, "size": str, "devices": list, "machine": dict,
            "references": dict, "results": list}


def load_json(path: Path) -> dict[str, Any]:
    """Read a results file, with a one-line error if it is not one (:func:`check_results`)."""
    try:
        document = json.loads(path.read_text())
    except OSError as err:
        raise UsageError(f"{path}: cannot read: {err.strerror}") from None
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not a text file") from None
    except json.JSONDecodeError as err:
        raise UsageError(f"{path}:{err.lineno}: not JSON: {err.msg}") from None
    return check_results(document, str(path))


def check_results(document: Any, source: str) -> dict[str, Any]:
    """``document`` as a results document the renderers and ``loclab compare`` can trust, or
    a one-line UsageError naming ``source`` (the file), the row and the key."""
    if not isinstance(document, dict):
        raise UsageError(f"{source}: not a loclab results file (not a JSON object)")
    for key, kind in TOP_KEYS.items():
        if not isinstance(document.get(key), kind):
            raise UsageError(f"{source}: not a loclab results file ('{key}' missing or not a "
                             f"{kind.__name__})")
    if not isinstance(document["machine"].get("cpu"), dict):
        raise UsageError(f"{source}: not a loclab results file (no machine.cpu)")
    for number, row in enumerate(document["results"], 1):
        missing = [key for key in ROW_KEYS if key not in row] if isinstance(row, dict) else None
        if missing is None or missing:
            what = ", ".join(missing) if missing else "is not an object"
            raise UsageError(f"{source}: result {number} {'lacks ' if missing else ''}{what}")
        _check_row(source, number, row)
    _check_references(source, document["references"])
    return document


def _check_row(source: str, number: int, row: dict[str, Any]) -> None:
    """A row holds what the renderers and ``loclab compare`` compute with, and nothing that
    makes no sense: a time at or below zero, a negative count or rate, NaN or infinity,
    timings out of order."""
    wrong = next((key for key, check in ROW_CHECKS.items()
                  if key in row and not check(row[key])), None)
    if wrong:
        raise UsageError(f"{source}: result {number}: '{wrong}' is {row[wrong]!r}, not "
                         f"{ROW_CHECK_NAMES[wrong]}")
    timings = [(key, row[key]) for key in ORDERED_TIMES if row.get(key) is not None]
    for (low, faster), (high, slower) in zip(timings, timings[1:]):
        if faster > slower * (1 + ROUNDING):
            raise UsageError(f"{source}: result {number}: '{low}' {faster!r} is above '{high}' "
                             f"{slower!r} (the timings are out of order)")


def _check_references(source: str, references: dict[str, Any]) -> None:
    """The roofs every rate is measured against: no negative, NaN or infinite one."""
    for key, value in references.items():
        if _is_number(value) and not _at_least(0)(value):
            raise UsageError(f"{source}: references: '{key}' is {value!r}, not a number >= 0 "
                             "or null")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _at_least(low: float, strictly: bool = False) -> Callable[[Any], bool]:
    """A check: a finite number above ``low`` (or equal to it, unless ``strictly``)."""
    return lambda value: (_is_number(value) and math.isfinite(value)
                          and (value > low or value == low and not strictly))


def _or_none(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda value: value is None or check(value)


def _size(value: Any) -> bool:
    return isinstance(value, dict) and all(
        isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value.values())


# Timings a row summarizes, fastest first: each at most the next (within float rounding).
ORDERED_TIMES = ("min_s", "q1_s", "median_s", "q3_s", "max_s")
ROUNDING = 1e-9
POSITIVE = ("median_s", "min_s", "max_s", "q1_s", "q3_s", "speedup_vs_naive", "vs_library")
NOT_NEGATIVE = ("iqr_s", "bytes", "flops", "items", "gbps", "gflops", "items_per_s",
                "link_gbps", "pct_of_copy", "pct_of_peak", "pct_of_unit_roof", "ideal_s",
                "no_overlap_s", "pct_of_ideal")

# What the renderers and ``loclab compare`` compute with: a hand-edited file that breaks one
# of these is named in one line rather than failing half-way through a report, or printing a
# negative time.
ROW_CHECKS: dict[str, Callable[[Any], bool]] = {
    "case": lambda v: isinstance(v, str), "variant": lambda v: isinstance(v, str),
    "device": lambda v: v in ("cpu", "gpu"), "role": lambda v: isinstance(v, str),
    "size": _size, "valid": lambda v: isinstance(v, bool),
    **{key: _or_none(_at_least(0, strictly=True)) for key in POSITIVE},
    **{key: _or_none(_at_least(0)) for key in NOT_NEGATIVE},
    "runs": _or_none(lambda v: isinstance(v, int) and _at_least(0)(v)),
    "phases": lambda v: isinstance(v, dict) and all(map(_or_none(_at_least(0)), v.values())),
}
ROW_CHECK_NAMES = {**{key: "a positive number or null" for key in POSITIVE},
                   **{key: "a number >= 0 or null" for key in NOT_NEGATIVE},
                   "runs": "a whole number >= 0 or null",
                   "phases": "an object of seconds by phase",
                   "case": "a name", "variant": "a name", "role": "a name",
                   "device": "'cpu' or 'gpu'", "size": "an object of whole numbers >= 0",
                   "valid": "true or false"}
