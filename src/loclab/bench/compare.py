"""Two runs row by row (``loclab compare BASE.json NEW.json``): what changed, and whether the
change is larger than the noise the runs themselves measured.

Rows match by case, variant, device and size (equal dimension dicts). Each matched row gets
the speedup of NEW over BASE, ``base median / new median`` (above 1: NEW is faster), the
convention of ``speedup_vs_naive`` and ``vs_library``, and a verdict from the two runs'
spreads (:data:`RULE`). A results file only records summaries of its timings (median,
quartiles, extremes, how many), often of batch means, so the verdict is a rule on those
summaries, not a test on samples, and it is deliberately conservative: a benchmark's noise
between runs is larger than the spread inside one.

The document is JSON-serializable (``loclab compare --json`` writes it). Files from other
loclab versions compare too: keys beyond ``results.ROW_KEYS`` are read with ``.get``, and a
file written before rows carried quartiles has them approximated as median -/+ IQR/2.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

Row = dict[str, Any]

MIN_TIMINGS = 4  # fewer in either run: no verdict ('?')
QUARTILE_TIMINGS = 10  # from this many in both runs the interquartile ranges are compared
MIN_CHANGE = 0.02  # medians closer than this are the same whatever the spreads say

SPEEDUP = "base median / new median: above 1 the new run is faster"
RULE = (f"faster or slower: the medians differ by {MIN_CHANGE:.0%} or more and the two runs' "
        f"timings separate: their interquartile ranges do not overlap (both runs with "
        f"{QUARTILE_TIMINGS} or more timings) or, with fewer, their whole ranges (fastest to "
        f"slowest) do not; same: within the noise; ?: fewer than {MIN_TIMINGS} timings in a "
        f"run, no verdict; -: a run did not time it.")

# Verdicts of a matched row, in the order a summary counts them.
VERDICTS = ("faster", "slower", "same", "undecided", "not timed")

# What the two machines and runs are, side by side: (key, label, value of a document, kind).
# A difference of a 'machine' field makes the runs' machines differ, of a 'setting' their
# settings (what was asked of loclab, on one machine or two). References are measured in each
# run and always differ a little; they are shown, not judged.
MACHINE_FIELDS: tuple[tuple[str, str, Any, str], ...] = (
    ("cpu", "CPU", lambda d: d["machine"]["cpu"].get("model"), "machine"),
    ("gpu", "GPU", lambda d: (d["machine"].get("gpu") or {}).get("name"), "machine"),
    ("cpu_threads", "CPU threads", lambda d: d["machine"]["cpu"].get("numba_threads"),
     "setting"),
    ("loclab", "loclab", lambda d: d["loclab"], "setting"),
    ("size", "size preset", lambda d: d["size"], "setting"),
    ("devices", "devices", lambda d: ", ".join(d["devices"]), "setting"),
    ("cpu_copy_gbps", "CPU copy GB/s", lambda d: d["references"].get("cpu_copy_gbps"),
     "reference"),
    ("gpu_copy_gbps", "GPU copy GB/s", lambda d: d["references"].get("gpu_copy_gbps"),
     "reference"),
    ("cpu_peak_gflops_fp32", "CPU fp32 peak GFlop/s",
     lambda d: d["references"].get("cpu_peak_gflops_fp32"), "reference"),
    ("gpu_peak_gflops_fp32", "GPU fp32 peak GFlop/s",
     lambda d: d["references"].get("gpu_peak_gflops_fp32"), "reference"),
)


def compare(base: dict[str, Any], new: dict[str, Any], *, base_label: str = "base",
            new_label: str = "new") -> dict[str, Any]:
    """The comparison of two results documents (``results.load_json`` checked them)."""
    from loclab.version import __version__

    pairs, only_base, only_new = match(base["results"], new["results"])
    rows = [compared_row(old, now) for old, now in pairs]
    return {
        "loclab": __version__,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "speedup": SPEEDUP,
        "rule": {"text": RULE, "min_timings": MIN_TIMINGS, "quartile_timings": QUARTILE_TIMINGS,
                 "min_change": MIN_CHANGE},
        "base": _run(base, base_label),
        "new": _run(new, new_label),
        "machines": machines(base, new),
        "cases": cases(base, new),
        "rows": rows,
        "only_in_base": [_unmatched(row) for row in only_base],
        "only_in_new": [_unmatched(row) for row in only_new],
        "summary": _summary(rows, only_base, only_new),
    }


def _key(row: Row) -> tuple[str, str, str, str]:
    return (row["case"], row["variant"], row["device"], json.dumps(row["size"], sort_keys=True))


def match(base: list[Row], new: list[Row]) -> tuple[list[tuple[Row, Row]], list[Row], list[Row]]:
    """(base row, new row) pairs in BASE's order, then the rows of each file without a partner.
    A key repeated in a file (the same size asked twice) pairs in order of appearance."""
    waiting: dict[tuple[str, str, str, str], list[Row]] = {}
    for row in new:
        waiting.setdefault(_key(row), []).append(row)
    pairs, only_base = [], []
    for row in base:
        partners = waiting.get(_key(row))
        if partners:
            pairs.append((row, partners.pop(0)))
        else:
            only_base.append(row)
    paired = {id(now) for _, now in pairs}
    return pairs, only_base, [row for row in new if id(row) not in paired]


def _state(row: Row) -> str:
    if row.get("skipped"):
        return "skipped"
    return "valid" if row["valid"] else "invalid"


def side(row: Row) -> dict[str, Any]:
    """What one run measured of a row: the median and the spreads the verdict compares.
    ``quartiles`` says whether q1_s and q3_s were recorded ('measured'), or approximated as
    median -/+ iqr_s/2 for a file written before rows carried them; None when not timed."""
    median, q1, q3 = row["median_s"], row.get("q1_s"), row.get("q3_s")
    quartiles = None
    if median is not None:
        if q1 is not None and q3 is not None:
            quartiles = "measured"
        elif row.get("iqr_s") is not None:
            q1, q3 = median - row["iqr_s"] / 2, median + row["iqr_s"] / 2
            quartiles = "approximated"
    return {"median_s": median, "q1_s": q1, "q3_s": q3,
            "iqr_s": row.get("iqr_s"), "quartiles": quartiles,
            "min_s": row["min_s"], "max_s": row["max_s"], "runs": row["runs"],
            "batch": row.get("batch"), "valid": row["valid"], "skipped": row.get("skipped"),
            "error": row.get("error")}


def compared_row(base: Row, new: Row) -> dict[str, Any]:
    """A matched row: both sides, the speedup and its verdict, any validation change."""
    old, now = side(base), side(new)
    states = _state(base), _state(new)
    return {"case": base["case"], "variant": base["variant"], "device": base["device"],
            "size": base["size"], "role": new.get("role") or base.get("role"),
            "base": old, "new": now, **verdict(old, now),
            "validation": ({"base": states[0], "new": states[1]}
                           if states[0] != states[1] else None)}


def verdict(base: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """The speedup of ``new`` over ``base`` and whether it is beyond the noise (:data:`RULE`).

    ``compared`` names the spreads compared ('interquartile' or 'range'); ``speedup_range`` is
    the speedup between them, [base low / new high, base high / new low]: it leaves out 1
    exactly when they separate (a chart draws it as the whisker)."""
    if not base["median_s"] or not new["median_s"]:
        return {"speedup": None, "speedup_range": None, "compared": None,
                "change": "not timed", "reason": "not timed in "
                + " and ".join(name.upper() for name, one in (("base", base), ("new", new))
                               if not one["median_s"])}
    speedup = base["median_s"] / new["median_s"]
    timings = min(base["runs"] or 0, new["runs"] or 0)
    if timings < MIN_TIMINGS:
        return {"speedup": speedup, "speedup_range": None, "compared": None,
                "change": "undecided",
                "reason": f"{timings} timings (a verdict needs {MIN_TIMINGS} in each run)"}
    quartiles = timings >= QUARTILE_TIMINGS and base["quartiles"] and new["quartiles"]
    low, high = ("q1_s", "q3_s") if quartiles else ("min_s", "max_s")
    span = [base[low] / new[high], base[high] / new[low]]
    what = "interquartile ranges" if quartiles else "ranges"
    if span[0] <= 1 <= span[1]:
        change, reason = "same", f"{what} overlap"
    elif max(speedup, 1 / speedup) < 1 + MIN_CHANGE:
        change, reason = "same", f"medians within {MIN_CHANGE:.0%}"
    else:
        change, reason = ("faster" if speedup > 1 else "slower"), f"{what} separate"
    return {"speedup": speedup, "speedup_range": span,
            "compared": "interquartile" if quartiles else "range",
            "change": change, "reason": reason}


def _run(document: dict[str, Any], label: str) -> dict[str, Any]:
    return {"label": label, "loclab": document["loclab"], "created": document["created"],
            "size": document["size"], "devices": document["devices"]}


def machines(base: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """The two machines and settings key by key. ``differ`` when a machine field (CPU, GPU)
    or a setting (CPU threads, loclab version, size preset, devices) differs, as before;
    ``machine`` names the machine fields that differ, ``settings`` the settings (not the
    references, which each run measures)."""
    fields = [{"key": key, "label": label, "base": value(base), "new": value(new),
               "differs": value(base) != value(new), "identity": kind != "reference",
               "kind": kind}
              for key, label, value, kind in MACHINE_FIELDS]
    differing = {kind: [f["label"] for f in fields if f["differs"] and f["kind"] == kind]
                 for kind in ("machine", "setting")}
    return {"differ": any(differing.values()), "machine": differing["machine"],
            "settings": differing["setting"], "fields": fields}


def cases(base: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """The cases each run has rows of, in run order, and those only one of them has: runs of
    different cases on one machine differ in their cases, not their machines."""
    ran = {name: list(dict.fromkeys(row["case"] for row in document["results"]))
           for name, document in (("base", base), ("new", new))}
    return {**ran, "only_in_base": [case for case in ran["base"] if case not in ran["new"]],
            "only_in_new": [case for case in ran["new"] if case not in ran["base"]]}


def _unmatched(row: Row) -> dict[str, Any]:
    return {"case": row["case"], "variant": row["variant"], "device": row["device"],
            "size": row["size"], "role": row.get("role"), "median_s": row["median_s"],
            "valid": row["valid"], "skipped": row.get("skipped")}


def _summary(rows: list[dict[str, Any]], only_base: list[Row],
             only_new: list[Row]) -> dict[str, Any]:
    counts = {name.replace(" ", "_"): sum(1 for row in rows if row["change"] == name)
              for name in VERDICTS}
    return {"matched": len(rows), **counts,
            "validation_changes": sum(1 for row in rows if row["validation"]),
            "only_in_base": len(only_base), "only_in_new": len(only_new),
            "approximated_quartiles": {
                name: sum(1 for row in rows if row[name]["quartiles"] == "approximated")
                for name in ("base", "new")}}
