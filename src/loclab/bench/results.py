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
    return document
