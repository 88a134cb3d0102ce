"""The JSON document of a run (ARCHITECTURE.md, "loclab run --json FILE"): build, write, load.

Keys may be added, never renamed: users' scripts read them.
"""

from __future__ import annotations

import json
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
    from loclab import __version__

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
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(document, indent=2) + "\n")
    except OSError as err:
        raise LoclabError(f"{path}: cannot write: {err.strerror or err}") from None


TOP_KEYS = {"loclab": str, "created": str, "size": str, "devices": list, "machine": dict,
            "references": dict, "results": list}


def load_json(path: Path) -> dict[str, Any]:
    """Read a results file, with a one-line error if it is not one."""
    try:
        document = json.loads(path.read_text())
    except OSError as err:
        raise UsageError(f"{path}: cannot read: {err.strerror}") from None
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not a text file") from None
    except json.JSONDecodeError as err:
        raise UsageError(f"{path}:{err.lineno}: not JSON: {err.msg}") from None
    if not isinstance(document, dict):
        raise UsageError(f"{path}: not a loclab results file (not a JSON object)")
    for key, kind in TOP_KEYS.items():
        if not isinstance(document.get(key), kind):
            raise UsageError(f"{path}: not a loclab results file ('{key}' missing or not a "
                             f"{kind.__name__})")
    if not isinstance(document["machine"].get("cpu"), dict):
        raise UsageError(f"{path}: not a loclab results file (no machine.cpu)")
    for number, row in enumerate(document["results"], 1):
        missing = [key for key in ROW_KEYS if key not in row] if isinstance(row, dict) else None
        if missing is None or missing:
            what = ", ".join(missing) if missing else "is not an object"
            raise UsageError(f"{path}: result {number} {'lacks ' if missing else ''}{what}")
        wrong = next((key for key, check in ROW_CHECKS.items()
                      if key in row and not check(row[key])), None)
        if wrong:
            raise UsageError(f"{path}: result {number}: '{wrong}' is {row[wrong]!r}, not "
                             f"{ROW_CHECK_NAMES[wrong]}")
    return document


def _number_or_none(value: Any) -> bool:
    return value is None or isinstance(value, (int, float)) and not isinstance(value, bool)


def _size(value: Any) -> bool:
    return isinstance(value, dict) and all(
        isinstance(v, int) and not isinstance(v, bool) for v in value.values())


# What the renderers and ``loclab compare`` compute with: a hand-edited file that breaks one
# of these is named in one line rather than failing half-way through a report.
ROW_CHECKS = {
    "case": lambda v: isinstance(v, str), "variant": lambda v: isinstance(v, str),
    "device": lambda v: v in ("cpu", "gpu"), "role": lambda v: isinstance(v, str),
    "size": _size, "valid": lambda v: isinstance(v, bool),
    **{key: _number_or_none for key in ("median_s", "min_s", "max_s", "iqr_s", "q1_s",
                                        "q3_s", "bytes", "flops", "gbps", "gflops",
                                        "pct_of_copy", "pct_of_peak", "speedup_vs_naive",
                                        "vs_library", "items_per_s", "runs", "link_gbps",
                                        "ideal_s", "no_overlap_s", "pct_of_ideal")},
    "phases": lambda v: isinstance(v, dict) and all(_number_or_none(x) for x in v.values()),
}
ROW_CHECK_NAMES = {**{key: "a number or null" for key in ROW_CHECKS},
                   "phases": "an object of seconds by phase",
                   "case": "a name", "variant": "a name", "role": "a name",
                   "device": "'cpu' or 'gpu'", "size": "an object of whole numbers",
                   "valid": "true or false"}
