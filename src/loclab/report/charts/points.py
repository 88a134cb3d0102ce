"""Which timed rows go where on the roofline, and by what number the key lists them: rows
that do arithmetic at their flop/byte, rows that only move data (0 flop/byte, off any log
axis) in a strip of their own beside it; rows whose data crosses the link between host and
device are left out (the device's roofs do not bound them). A variant run at several sizes
is one point, at its largest: a point per size would stack them at one intensity (a scan
swept over n: 44 points in one column), hiding each other and the predictions."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from loclab.report.charts.style import Row


@dataclass(frozen=True)
class Point:
    """A timed row on the roofline, by its number in the key; ``x`` is its flop/byte, or its
    place in the data-movement strip."""

    number: int
    row: Row
    x: float
    y: float


def roofline_points(document: dict[str, Any]) -> dict[str, tuple[list[Point], list[Point]]]:
    """Every timed variant of each device at its largest size, numbered in run order across
    devices: (data-movement rows, placed in a strip per case; rows that do arithmetic, at
    their flop/byte)."""
    found: dict[str, tuple[list[Point], list[Point]]] = {}
    count = 0
    for device in ("cpu", "gpu"):
        rows = largest_rows(timed_rows(document, device))
        if not rows:
            continue
        moving = Counter(row["case"] for row in rows if not _computes(row))
        cases, seen = list(moving), Counter[str]()
        strip, roofline = [], []
        for row in rows:
            count += 1
            if _computes(row):
                roofline.append(Point(count, row, row["flops"] / row["bytes"], row["gflops"]))
                continue
            many, index = moving[row["case"]], seen[row["case"]]
            seen[row["case"]] += 1
            place = cases.index(row["case"]) + min(0.8 / many, 0.2) * (index - (many - 1) / 2)
            strip.append(Point(count, row, place, row["gbps"]))
        found[device] = (strip, roofline)
    return found


def timed_rows(document: dict[str, Any], device: str) -> list[Row]:
    """The rows of ``device`` with a time and a rate the roofs bound, in run order."""
    return [row for row in document["results"] if row["device"] == device
            and row.get("median_s") and (row.get("gflops") or row.get("gbps"))
            and not _crosses_link(row)]


def largest_rows(rows: list[Row]) -> list[Row]:
    """One row per case and variant, at its largest size: the most golden bytes, then flops;
    the last run among equals (a sweep over threads: the most). In the order the variants
    first ran."""
    largest: dict[tuple[str, str], Row] = {}
    for row in rows:
        key = (row["case"], row["variant"])
        if key not in largest or _size(row) >= _size(largest[key]):
            largest[key] = row
    return list(largest.values())


def _size(row: Row) -> tuple[int, int]:
    return row["bytes"], row["flops"]


def _crosses_link(row: Row) -> bool:
    """A row whose data starts or ends in host memory: the device's roofs do not bound it
    (its own table rates it against the link's)."""
    return bool(row.get("to_device_bytes") or row.get("to_host_bytes"))


def _computes(row: Row) -> bool:
    """Whether a row belongs on the roofline proper: it does arithmetic on bytes it reads."""
    return bool(row["flops"] and row["bytes"] and row.get("gflops"))
