"""What every chart shares: matplotlib itself (loaded on first use, so that ``loclab --help``
and a run without ``--report`` never pay for it), sizes, fonts and colours, ticks written as a
person would write them, and saving a figure.

Every axis names its unit and writes its ticks plainly (4,000; 2.5; 5 T), never as an offset
or in scientific notation: matplotlib's defaults do both.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

Row = dict[str, Any]
Figure = Any  # matplotlib.figure.Figure, not imported here

DPI = 110  # the HTML page shows a PNG at its own size up to the page's width
COLUMN_INCHES = 6.0  # one device's column of a chart: two fit a page 1,320 px wide
FONT = 8
INVALID = "#c00000"
SKIPPED = "#808080"
LABEL_BOX = {"boxstyle": "square,pad=0.1", "facecolor": "white", "edgecolor": "none"}
# One marker and colour per case on the roofline, in the document's case order (and per
# variant on a sweep chart).
CASE_MARKERS = "osD^vP*Xhd<>p"
CASE_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
                "#17becf", "#bcbd22", "#7f7f7f")


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend: charts are written to files, never shown."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def tick_text(value: float) -> str:
    """A tick as a person writes it: '4,000', '250', '2.5', '0.001'. Matplotlib's defaults
    write large values against an offset ('4.24216 x 10^3') and log ticks as powers."""
    if abs(value) >= 999.5:
        return f"{value:,.0f}"
    rounded = float(f"{value:.3g}")
    if abs(rounded) < 1e-12:  # 0, or what is left of it after adding up tick steps
        return "0"
    decimals = max(0, 2 - math.floor(math.log10(abs(rounded))))
    text = f"{rounded:.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


SI_PREFIXES = (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3))


def si_tick_text(value: float) -> str:
    """A tick of a rate in a case's unit with an SI prefix, as plain as ``tick_text``: '2 G',
    '500 M', '12.5 k' (the tables' prefixed numbers keep trailing zeros, ticks do not)."""
    for prefix, scale in SI_PREFIXES:
        if abs(value) >= scale * 0.9995:
            return f"{tick_text(value / scale)} {prefix}"
    return tick_text(value)


def binary_tick_text(value: float) -> str:
    """A tick of a size in bytes with a binary prefix: '4 KiB', '256 MiB', '1 GiB'."""
    for prefix, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(value) >= scale:
            return f"{tick_text(value / scale)} {prefix}"
    return f"{tick_text(value)} B"


def format_axis(axis: Any, text: Callable[[float], str] = tick_text,
                at: Sequence[float] | None = None) -> None:
    """Plain tick labels on ``axis`` (an XAxis or YAxis whose scale and limits are set): at the
    values ``at`` where given (a sweep's sizes), else at 1, 2 and 5 per decade of a log axis
    spanning little, 1 per decade of a longer one, or matplotlib's steps on a linear one."""
    from matplotlib.ticker import (FixedLocator, FuncFormatter, LogLocator, NullFormatter,
                                   NullLocator)

    if at is not None:
        axis.set_major_locator(FixedLocator(list(at)))
        axis.set_minor_locator(NullLocator())
    elif axis.get_scale() == "log":
        low, high = sorted(axis.get_view_interval())
        decades = math.log10(high / low) if low > 0 else 10
        axis.set_major_locator(LogLocator(base=10, subs=(1, 2, 5) if decades < 2.5 else (1,)))
        axis.set_minor_locator(LogLocator(base=10, subs="auto"))
    axis.set_major_formatter(FuncFormatter(lambda value, _: text(value)))
    axis.set_minor_formatter(NullFormatter())


def save(fig: Figure, path: Path) -> None:
    """Write ``fig`` as a PNG and close it: a report draws many figures, pyplot keeps each
    open until closed."""
    fig.savefig(path, dpi=DPI)
    pyplot().close(fig)
