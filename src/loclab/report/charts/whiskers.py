"""The spread a whisker shows, on the bar charts and the sweep charts alike: the quartiles of
the runs where the run recorded them, else the fastest and slowest run."""

from __future__ import annotations

from collections.abc import Iterable

from loclab.report.charts.style import Row


def whisker_times(row: Row) -> tuple[float, float] | None:
    """The faster and slower time a row's whisker spans: its quartiles where the run recorded
    them (the spread of most runs), else its fastest and slowest run."""
    if row.get("q1_s") and row.get("q3_s"):
        return row["q1_s"], row["q3_s"]
    if row.get("min_s") and row.get("max_s"):
        return row["min_s"], row["max_s"]
    return None


def whisker_meaning(rows: Iterable[Row]) -> str:
    """What the whiskers of ``rows`` span, for a legend: not every results file has quartiles."""
    rows = list(rows)
    if any(row.get("q1_s") and row.get("q3_s") for row in rows):
        return "whiskers: quartiles of the runs"
    return "whiskers: fastest and slowest run"
