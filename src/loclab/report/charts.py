"""Charts of a run (matplotlib, imported only inside these functions: ``loclab --help`` and a
run without ``--report`` never load it).

Each case is charted in its own metric (``loclab.report.metric``): GB/s against the copy roof,
GFlop/s against the fp32 peak and the library, or its unit per second against that unit's
roof. A swept case also gets its time against the swept dimension. The roofline puts every
timed row against its device's roofs, each point numbered and listed in a key, so that
variants sharing an intensity stay apart. Every axis names its unit and writes its ticks as a
person would (4,000; 2.5; 5 T), never as an offset or in scientific notation.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loclab.cases.base import dims_text
from loclab.report.metric import Metric, case_metric
from loclab.report.text import number, per_second, percent, prefixed

Row = dict[str, Any]
Figure = Any  # matplotlib.figure.Figure, not imported here

DPI = 110  # the HTML page shows a PNG at its own size up to the page's width
COLUMN_INCHES = 6.0  # one device's column of a chart: two fit a page 1,320 px wide
BAR_INCHES = 0.25  # a bar, or a reference line's label above the bars
PANEL_INCHES = 0.55  # a panel's title and ticks
REACH = 3.0  # a roof this many times beyond the fastest bar is marked at the edge instead
FONT = 8
ROLE_COLOURS = {"naive": "#d62728", "optimized": "#1f77b4", "library": "#7f7f7f",
                "golden": "#2ca02c"}
INVALID = "#c00000"
SKIPPED = "#808080"
LABEL_BOX = {"boxstyle": "square,pad=0.1", "facecolor": "white", "edgecolor": "none"}
REFERENCE_STYLES = {"roof": ("black", "--"), "library": ("#555555", ":")}
ROOFLINE_INCHES = 4.2  # a device's strip and roofline, without its key
KEY_COLUMNS = 3
KEY_LINE_INCHES = 0.16
MARKER_POINTS = 3.5  # half a roofline marker's size
NUMBER_FONT = 7
# Rings of places tried for a point's number (in label widths from it, and how many
# directions): beside it first, then further out.
RINGS = ((1.0, 8), (1.8, 8), (2.7, 12), (3.8, 16), (5.2, 16), (7.0, 24), (9.0, 24), (12.0, 32))
# One marker and colour per case on the roofline, in the document's case order.
CASE_MARKERS = "osD^vP*Xhd<>p"
CASE_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
                "#17becf", "#bcbd22", "#7f7f7f")


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


# -- numbers on axes -------------------------------------------------------------------------


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


def _format_axis(axis: Any, text: Callable[[float], str] = tick_text,
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


def _dims_label(size: dict[str, int], names: Iterable[str]) -> str:
    """'rows=4,194,304, cols=64': the named dimensions of a size, thousands grouped."""
    return ", ".join(f"{name}={size[name]:,}" for name in names)


def _size_text(size: dict[str, int], names: Sequence[str]) -> str:
    """The dimensions ``names`` of a size, as a table writes a matrix or product size
    ('4194304x64') where they are all of them, else named ('bins=12,288')."""
    if list(names) == list(size):
        text = dims_text(size)
        if "=" not in text:
            return text
    return _dims_label(size, names)


def _varying(sizes: Sequence[dict[str, int]]) -> list[str]:
    """The dimensions that differ between ``sizes`` (those that tell panels apart)."""
    names = list(dict.fromkeys(name for size in sizes for name in size))
    return [name for name in names if len({size.get(name) for size in sizes}) > 1]


def _device_title(document: dict[str, Any], device: str) -> str:
    """'GPU: NVIDIA H200', or just 'CPU' where the machine is not recorded."""
    found = (document.get("machine") or {}).get(device) or {}
    name = found.get("name") or found.get("model")
    return f"{device.upper()}: {name}" if name else device.upper()


def _column_title(document: dict[str, Any], device: str, sizes: list[dict[str, int]]) -> str:
    """The device, and below it the dimensions its panels share ('keys=4,194,304, ...'):
    each panel's own title then names only what differs."""
    varying = _varying(sizes)
    common = [name for name in sizes[0] if name not in varying]
    title = _device_title(document, device)
    return f"{title}\n{_dims_label(sizes[0], common)}" if common else title


# -- a case in its own metric ---------------------------------------------------------------


@dataclass(frozen=True)
class Reference:
    """A value a panel's bars are judged against (a roof, or the library a user would call
    instead), drawn as a labelled vertical line."""

    value: float
    label: str
    kind: str  # "roof" or "library"
    name: str  # what a heading calls it: 'the copy roof', 'cublas'


def axis_label(metric: Metric) -> str:
    """The bar axis's label: the metric's unit, and the work it counts."""
    work = {"memory": "bytes", "compute": "flops"}.get(metric.limit, metric.unit)
    return f"{metric.rate_header}: the golden algorithm's {work} / median time"


def rate_text(metric: Metric, value: float) -> str:
    """A rate in the metric's unit, as the tables write it: '4,126', '5.49 T'."""
    return prefixed(value) if metric.limit == "unit" else number(value)


def case_references(document: dict[str, Any], metric: Metric, device: str,
                    rows: list[Row]) -> list[Reference]:
    """The lines a panel of ``rows`` (one device and size) is drawn against: the copy roof of
    a memory-bound case; the fp32 peak and the library rows of a compute-bound one; the unit's
    roof of a case rated in its own unit, where one is known."""
    refs = document["references"]
    if metric.limit == "memory":
        copy = refs.get(f"{device}_copy_gbps")
        return ([Reference(copy, f"copy roof {number(copy)} GB/s", "roof", "the copy roof")]
                if copy else [])
    if metric.limit == "compute":
        peak = refs.get(f"{device}_peak_gflops_fp32")
        estimate = " (estimate)" if device == "cpu" else ""
        lines = [Reference(peak, f"fp32 peak {number(peak)} GFlop/s{estimate}", "roof",
                           "the fp32 peak")] if peak else []
        return lines + [Reference(row["gflops"], f"{row['variant']} {number(row['gflops'])} "
                                  "GFlop/s", "library", row["variant"])
                        for row in rows if row["role"] == "library" and row["valid"]
                        and row.get("gflops")]
    roof = next((row["unit_roof"] for row in rows if row.get("unit_roof")), None)
    if not roof:
        return []
    return [Reference(roof["per_s"], f"{roof['what']}: {per_second(roof['per_s'], metric.unit)}",
                      "roof", f"the {roof['what']}")]


def whisker_times(row: Row) -> tuple[float, float] | None:
    """The faster and slower time a row's whisker spans: its quartiles where the run recorded
    them (the spread of most runs), else its fastest and slowest run."""
    if row.get("q1_s") and row.get("q3_s"):
        return row["q1_s"], row["q3_s"]
    if row.get("min_s") and row.get("max_s"):
        return row["min_s"], row["max_s"]
    return None


def _whisker_meaning(rows: Iterable[Row]) -> str:
    rows = list(rows)
    if any(row.get("q1_s") and row.get("q3_s") for row in rows):
        return "whiskers: quartiles of the runs"
    return "whiskers: fastest and slowest run"


def _rate(row: Row, metric: Metric) -> float | None:
    """The row's rate in its case's metric, None where it was not timed."""
    return row.get(metric.rate_key) if row.get("median_s") else None


def _rate_span(row: Row, metric: Metric) -> tuple[float, float] | None:
    """The rates at the ends of the row's whisker (a rate is inverse to its time)."""
    rate, times = _rate(row, metric), whisker_times(row)
    if rate is None or times is None:
        return None
    fast, slow = times
    return rate * row["median_s"] / slow, rate * row["median_s"] / fast


def _sections(rows: list[Row]) -> dict[str, list[tuple[dict[str, int], list[Row]]]]:
    """The rows of each device, by size, devices and sizes in run order: a panel each."""
    grouped: dict[str, dict[str, tuple[dict[str, int], list[Row]]]] = {}
    for row in rows:
        key = repr(sorted(row["size"].items()))
        panels = grouped.setdefault(row["device"], {})
        panels.setdefault(key, (row["size"], []))[1].append(row)
    return {device: list(panels.values()) for device, panels in grouped.items()}


def _bar_end(row: Row, metric: Metric) -> float:
    """How far a row's bar and whisker reach along the axis (0 without a rate)."""
    span = _rate_span(row, metric)
    return span[1] if span else _rate(row, metric) or 0.0


def _axis_limit(metric: Metric, rows: list[Row], references: list[Reference]) -> float:
    """The bar axis's end, shared by a device's panels: past the longest whisker, and past
    the references within REACH of it (one further off is marked at the edge, so that bars
    are never flattened against a far roof)."""
    top = max((_bar_end(row, metric) for row in rows), default=0.0)
    near = [ref.value for ref in references if not top or ref.value <= REACH * top]
    return 1.06 * max([top, *near]) or 1.0


def _bar_label(row: Row, metric: Metric) -> str:
    """What a bar says beside it: its rate and its fraction of the roof; INVALID first for a
    wrong output, since its rate means nothing."""
    text = rate_text(metric, _rate(row, metric))
    share = row.get(metric.percent_key)
    if share is not None:
        text += f" ({percent(share)})"
    return text if row["valid"] else f"INVALID output: {text}"


def _missing_note(row: Row, metric: Metric) -> str:
    """Why a row has no bar: it did not apply, it failed before a time, or it has no rate in
    this metric."""
    if row.get("skipped"):
        return "not applicable at this size"
    if not row.get("median_s"):
        return "FAILED: no time"
    return f"no rate in {metric.rate_header}" + ("" if row["valid"] else ": INVALID output")


def _bar(ax: Any, y: float, row: Row, metric: Metric, limit: float) -> None:
    """One variant: a bar in its role's colour with its whisker and value, hatched and red if
    its output was wrong; a note instead of a bar where it has no time."""
    rate = _rate(row, metric)
    if rate is None:
        ax.annotate(_missing_note(row, metric), (0, y), xytext=(4, 0),
                    textcoords="offset points", va="center", fontsize=FONT, style="italic",
                    color=SKIPPED if row.get("skipped") or row["valid"] else INVALID)
        return
    ax.barh(y, rate, height=0.7, color=ROLE_COLOURS.get(row["role"], "#1f77b4"),
            hatch=None if row["valid"] else "xxx",
            edgecolor="none" if row["valid"] else INVALID, linewidth=0 if row["valid"] else 1)
    span = _rate_span(row, metric)
    if span:
        ax.errorbar(rate, y, xerr=[[rate - span[0]], [span[1] - rate]], fmt="none",
                    ecolor="black", capsize=2.5, linewidth=0.9)
    inside = rate >= 0.45 * limit  # then written over the bar, from its start
    plain = inside and row["valid"]  # white on the bar; else on a white box (the hatching)
    ax.annotate(_bar_label(row, metric), (0 if inside else (span[1] if span else rate), y),
                xytext=(4, 0), textcoords="offset points", va="center", fontsize=FONT,
                color="white" if plain else (INVALID if not row["valid"] else "#222222"),
                fontweight="bold" if inside or not row["valid"] else "normal", zorder=4,
                bbox=None if plain else LABEL_BOX)


def _reference(ax: Any, y: float, reference: Reference, limit: float) -> None:
    """A reference line across the panel, labelled in its own row above the bars; one beyond
    the axis is only named, at the edge, with an arrow."""
    colour, style = REFERENCE_STYLES[reference.kind]
    if reference.value > limit:
        ax.annotate(f"{reference.label}: beyond the axis \u2192", (1, y),
                    xycoords=("axes fraction", "data"), xytext=(-3, 0),
                    textcoords="offset points", ha="right", va="center", fontsize=FONT,
                    color=colour, bbox=LABEL_BOX)
        return
    ax.axvline(reference.value, color=colour, linestyle=style, linewidth=1.2, zorder=3)
    left = reference.value > 0.5 * limit
    ax.annotate(reference.label, (reference.value, y), xytext=(-3 if left else 3, 0),
                textcoords="offset points", ha="right" if left else "left", va="center",
                fontsize=FONT, color=colour, bbox=LABEL_BOX)


def _bar_panel(ax: Any, rows: list[Row], metric: Metric, references: list[Reference],
               limit: float) -> None:
    """The variants of one device and size, top to bottom in run order, under a row per
    reference line's label."""
    slots = len(references)
    for y, row in enumerate(rows, start=slots):
        _bar(ax, y, row, metric, limit)
    for y, reference in enumerate(references):
        _reference(ax, y, reference, limit)
    ax.set_yticks(range(slots, slots + len(rows)), [row["variant"] for row in rows],
                  fontsize=FONT)
    for label, row in zip(ax.get_yticklabels(), rows):
        if row.get("skipped"):
            label.set_color(SKIPPED)
        elif not row["valid"]:
            label.set_color(INVALID)
            label.set_fontweight("bold")
    ax.set_ylim(slots + len(rows) - 0.5, -0.5)
    ax.set_xlim(0, limit)
    ax.tick_params(axis="y", length=0)
    ax.grid(axis="x", color="#e6e6e6", linewidth=0.6)
    ax.set_axisbelow(True)


@dataclass(frozen=True)
class Column:
    """A device's part of a case chart: a panel per size, each with its reference lines."""

    device: str
    panels: list[tuple[dict[str, int], list[Row]]]
    references: list[list[Reference]]

    @property
    def lines(self) -> int:
        """Bars and reference labels, each a line of the chart's height."""
        return sum(len(rows) + len(refs) for (_, rows), refs in zip(self.panels, self.references))

    def inches(self) -> float:
        return BAR_INCHES * self.lines + PANEL_INCHES * len(self.panels)


def _columns(document: dict[str, Any], metric: Metric, rows: list[Row]) -> list[Column]:
    return [Column(device, panels, [case_references(document, metric, device, section)
                                    for _, section in panels])
            for device, panels in _sections(rows).items()]


def _device_column(subfig: Any, document: dict[str, Any], metric: Metric, column: Column,
                   spare: float) -> None:
    """A device's panels, one per size, stacked on a shared bar axis; ``spare`` inches left
    empty below, so that a bar is as thick in every column."""
    panels, references = column.panels, column.references
    limit = _axis_limit(metric, [row for _, rows in panels for row in rows],
                        [ref for refs in references for ref in refs])
    varying = _varying([size for size, _ in panels])
    ratios = [BAR_INCHES * (len(rows) + len(refs)) + PANEL_INCHES
              for (_, rows), refs in zip(panels, references)]
    grid = subfig.add_gridspec(len(panels) + 1, 1, height_ratios=[*ratios, spare + 1e-6])
    axes: list[Any] = []
    for index, ((size, rows), refs) in enumerate(zip(panels, references)):
        ax = subfig.add_subplot(grid[index], sharex=axes[0] if axes else None)
        axes.append(ax)
        _bar_panel(ax, rows, metric, refs, limit)
        ax.tick_params(axis="x", labelbottom=index == len(panels) - 1, labelsize=FONT)
        if varying:
            ax.set_title(_size_text(size, varying), fontsize=FONT + 1, loc="left")
    axes[-1].set_xlabel(axis_label(metric), fontsize=FONT + 1)
    _format_axis(axes[-1].xaxis, si_tick_text if metric.limit == "unit" else tick_text)
    subfig.suptitle(_column_title(document, column.device, [size for size, _ in panels]),
                    fontsize=FONT + 2)


def _case_legend(fig: Any, rows: list[Row]) -> None:
    """What colours, hatching and whiskers mean, once under the whole chart."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    roles = list(dict.fromkeys(row["role"] for row in rows))
    handles = [Patch(color=ROLE_COLOURS.get(role, "#1f77b4"), label=role) for role in roles]
    if any(not row["valid"] and not row.get("skipped") for row in rows):
        handles.append(Patch(facecolor="white", edgecolor=INVALID, hatch="xxx",
                             label="invalid output"))
    handles.append(Line2D([], [], color="black", marker="|", markersize=8, linewidth=0.9,
                          label=_whisker_meaning(rows)))
    fig.legend(handles=handles, loc="outside lower center", ncols=len(handles),
               fontsize=FONT, frameon=False)


def case_figure(document: dict[str, Any], case: str) -> Figure:
    """Each variant of ``case`` in the case's metric: a column per device, a panel per size,
    bars with their spread against the roof (and library) lines of that metric."""
    plt = _pyplot()
    metric = case_metric(document, case)
    rows = [row for row in document["results"] if row["case"] == case]
    columns = _columns(document, metric, rows)
    tallest = max(column.inches() for column in columns)
    fig = plt.figure(figsize=(max(COLUMN_INCHES * len(columns), 7.0), 1.5 + tallest),
                     dpi=DPI, layout="constrained")
    for subfig, column in zip(fig.subfigures(1, len(columns), squeeze=False)[0], columns):
        _device_column(subfig, document, metric, column, tallest - column.inches())
    _case_legend(fig, rows)
    return fig


def case_title(document: dict[str, Any], case: str) -> str:
    """The chart's heading: the metric, and what it is measured against in this run."""
    metric = case_metric(document, case)
    rows = [row for row in document["results"] if row["case"] == case]
    references = [ref for column in _columns(document, metric, rows)
                  for refs in column.references for ref in refs]
    roofs = list(dict.fromkeys(ref.name for ref in references if ref.kind == "roof"))
    libraries = list(dict.fromkeys(ref.name for ref in references if ref.kind == "library"))
    if libraries:
        roofs.append(f"the library ({', '.join(libraries)})")
    against = f" against {' and '.join(roofs)}" if roofs else ""
    return f"{case}: {metric.rate_header} of each variant{against}"


# -- time against a swept dimension ---------------------------------------------------------


def _lines(rows: list[Row], dimension: str) -> list[list[Row]]:
    """Each variant's rows in order of the swept dimension, variants in run order."""
    variants = dict.fromkeys(row["variant"] for row in rows)
    return [sorted((row for row in rows if row["variant"] == variant),
                   key=lambda row: row["size"][dimension]) for variant in variants]


def _line_label(line: list[Row]) -> str:
    """A variant's legend entry; it says at how many sizes it did not apply or failed."""
    label = line[0]["variant"]
    skipped = sum(1 for row in line if row.get("skipped"))
    failed = sum(1 for row in line if not row["valid"] and not row.get("skipped"))
    notes = ([f"n/a at {skipped} of {len(line)}"] if skipped else []) + (
        [f"FAILED at {failed} of {len(line)}"] if failed else [])
    return f"{label} ({', '.join(notes)})" if notes else label


def _time_panel(ax: Any, lines: list[list[Row]], dimension: str, colours: list[str]) -> None:
    """Median ms of each variant against ``dimension`` (log-log) with whiskers; a wrong
    output's point crossed out in red."""
    for index, (line, colour) in enumerate(zip(lines, colours)):
        timed = [row for row in line if row["median_s"]]
        xs = [row["size"][dimension] for row in timed]
        ms = [row["median_s"] * 1e3 for row in timed]
        spans = [whisker_times(row) or (row["median_s"], row["median_s"]) for row in timed]
        ax.errorbar(xs, ms, yerr=[[m - fast * 1e3 for m, (fast, _) in zip(ms, spans)],
                                  [slow * 1e3 - m for m, (_, slow) in zip(ms, spans)]],
                    marker=CASE_MARKERS[index % len(CASE_MARKERS)], markersize=5, capsize=2.5,
                    linewidth=1.3, color=colour, label=_line_label(line),
                    linestyle="--" if line[0]["role"] == "library" else "-")
        wrong = [row for row in timed if not row["valid"]]
        if wrong:
            ax.plot([row["size"][dimension] for row in wrong],
                    [row["median_s"] * 1e3 for row in wrong], "x", color=INVALID,
                    markersize=11, markeredgewidth=2, zorder=5)
    ax.set_ylabel("median time (ms, log scale)", fontsize=FONT + 1)


def _param_panel(ax: Any, lines: list[list[Row]], dimension: str, key: str, label: str,
                 colours: list[str]) -> None:
    """What each variant pays in theory for a size (``params[key]``) against ``dimension``."""
    for index, (line, colour) in enumerate(zip(lines, colours)):
        known = [row for row in line if (row.get("params") or {}).get(key) is not None]
        ax.plot([row["size"][dimension] for row in known], [row["params"][key] for row in known],
                marker=CASE_MARKERS[index % len(CASE_MARKERS)], markersize=5, color=colour,
                linewidth=1.3, linestyle="--" if line[0]["role"] == "library" else "-")
    ax.set_ylabel(f"{label} (log scale)", fontsize=FONT + 1)


def _sweep_handles(ax: Any, rows: list[Row]) -> list[Any]:
    """The variants' lines, and the red cross of a wrong output where there is one."""
    from matplotlib.lines import Line2D

    handles = ax.get_legend_handles_labels()[0]
    if any(row["median_s"] and not row["valid"] for row in rows):
        handles.append(Line2D([], [], marker="x", color=INVALID, linestyle="none",
                              markersize=8, markeredgewidth=2, label="wrong output"))
    return handles


def _sweep_axes(ax: Any, dimension: str, values: list[int]) -> None:
    """Log-log with a tick at each swept size, plain numbers on both axes."""
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    if not any(len(line.get_xdata()) for line in ax.get_lines()):
        ax.set_ylim(1, 10)  # a log axis needs a range even with nothing on it
        ax.text(0.5, 0.5, "no variant has a value here", ha="center", va="center",
                transform=ax.transAxes, fontsize=FONT, color=SKIPPED)
    ax.autoscale_view()
    ax.set_xlim(min(values) / 1.25, max(values) * 1.25)
    # Sizes in the millions (histogram bins) are too long to stand side by side in full.
    _format_axis(ax.xaxis, si_tick_text if max(values) >= 1e6 else tick_text, at=values)
    _format_axis(ax.yaxis)
    if ax.get_subplotspec().is_last_row():
        ax.set_xlabel(f"{dimension} (log scale)", fontsize=FONT + 1)
    ax.tick_params(labelsize=FONT)
    ax.grid(color="#e6e6e6", linewidth=0.6)


def sweep_figure(document: dict[str, Any], case: str, dimension: str,
                 param: tuple[str, str] | None = None) -> Figure:
    """Median time of each variant against ``dimension``, a column per device: where each
    variant's locality gives out. ``param`` (a key of the rows' params, its label) adds a
    panel below of what each variant pays for the size in theory (partitioning: hash
    computations per key)."""
    plt = _pyplot()
    rows = [row for row in document["results"]
            if row["case"] == case and dimension in row["size"]]
    devices = list(dict.fromkeys(row["device"] for row in rows))
    depth = 2 if param else 1
    fig, axes = plt.subplots(depth, len(devices), squeeze=False, sharex="col", dpi=DPI,
                             figsize=(max(COLUMN_INCHES * len(devices), 7.0), 0.9 + 3.6 * depth),
                             layout="constrained")
    for column, device in enumerate(devices):
        mine = [row for row in rows if row["device"] == device]
        lines = _lines(mine, dimension)
        colours = [CASE_COLOURS[index % len(CASE_COLOURS)] for index in range(len(lines))]
        values = sorted({row["size"][dimension] for row in mine})
        _time_panel(axes[0][column], lines, dimension, colours)
        if param:
            _param_panel(axes[1][column], lines, dimension, *param, colours)
        for ax in axes[:, column]:
            _sweep_axes(ax, dimension, values)
        axes[0][column].set_title(_column_title(document, device, [row["size"] for row in mine]),
                                  fontsize=FONT + 1)
        axes[-1][column].legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=2,
                                fontsize=FONT, frameon=False, handles=_sweep_handles(
                                    axes[0][column], mine),
                                title=_whisker_meaning(mine), title_fontsize=FONT)
    return fig


# -- the roofline ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Point:
    """A timed row on the roofline, by its number in the key; ``x`` is its flop/byte, or its
    place in the data-movement strip."""

    number: int
    row: Row
    x: float
    y: float


def _case_styles(document: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """A marker and a colour for each case, in the document's case order."""
    cases = dict.fromkeys(row["case"] for row in document["results"])
    return {case: (CASE_MARKERS[i % len(CASE_MARKERS)], CASE_COLOURS[i % len(CASE_COLOURS)])
            for i, case in enumerate(cases)}


def roofline_points(document: dict[str, Any]) -> dict[str, tuple[list[Point], list[Point]]]:
    """Every timed row of each device, numbered in run order across devices: (data-movement
    rows, placed in a strip per case; rows that do arithmetic, at their flop/byte)."""
    found: dict[str, tuple[list[Point], list[Point]]] = {}
    count = 0
    for device in ("cpu", "gpu"):
        rows = [row for row in document["results"] if row["device"] == device
                and row.get("median_s") and (row.get("gflops") or row.get("gbps"))]
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


def _computes(row: Row) -> bool:
    """Whether a row belongs on the roofline proper: it does arithmetic on bytes it reads."""
    return bool(row["flops"] and row["bytes"] and row.get("gflops"))


def key_label(point: Point, sizes: dict[str, list[str]]) -> str:
    """A key entry: '23 matvec gpu-optimized rows=16,384, cols=16,384: 2,174 GFlop/s'; the
    size only where the case ran at several, by the dimensions that vary."""
    row = point.row
    varying = sizes.get(row["case"]) or []
    size = f" {_size_text(row['size'], varying)}" if varying else ""
    rate = (f"{number(row['gflops'])} GFlop/s" if row["flops"] else
            f"{number(row['gbps'])} GB/s")
    flag = " INVALID" if not row["valid"] else ""
    return f"{point.number} {row['case']} {row['variant']}{size}: {rate}{flag}"


def _marker(ax: Any, point: Point, styles: dict[str, tuple[str, str]]) -> None:
    marker, colour = styles[point.row["case"]]
    ax.plot(point.x, point.y, marker=marker, color=colour, markersize=6, linestyle="none",
            markeredgecolor=INVALID if not point.row["valid"] else "black",
            markeredgewidth=1.6 if not point.row["valid"] else 0.4, zorder=4)


def _span(values: Iterable[float], low: float = 0.5, high: float = 2.0) -> tuple[float, float]:
    values = [value for value in values if value and value > 0]
    return (min(values) * low, max(values) * high) if values else (0.1, 10.0)


def _strip_panel(ax: Any, points: list[Point], copy: float | None,
                 styles: dict[str, tuple[str, str]]) -> None:
    """Rows that only move data (0 flop/byte, off any log axis): GB/s per case against the
    device's copy roof."""
    cases = list(dict.fromkeys(point.row["case"] for point in points))
    for point in points:
        _marker(ax, point, styles)
    ax.set_yscale("log")
    ax.set_ylim(*_span([point.y for point in points] + ([copy] if copy else []), high=3.0))
    ax.set_xlim(-0.5, max(len(cases), 1) - 0.5)
    if copy:
        ax.axhline(copy, color="black", linestyle="--", linewidth=1.2)
    ax.set_xticks(range(len(cases)), cases, fontsize=FONT, rotation=20, ha="right",
                  rotation_mode="anchor")
    _format_axis(ax.yaxis)
    ax.tick_params(axis="y", labelsize=FONT)
    ax.set_ylabel("GB/s of the golden bytes (log scale)", fontsize=FONT + 1)
    ax.set_title("data movement only (0 flop/byte)", fontsize=FONT + 1)
    if not points:
        ax.text(0.5, 0.5, "no row here only moves data", ha="center", va="center",
                transform=ax.transAxes, fontsize=FONT, color=SKIPPED)


def _roof(ax: Any, copy: float | None, peak: float | None, xlim: tuple[float, float]) -> None:
    """The device's roofs: copy bandwidth times intensity up to the ridge, the fp32 peak
    beyond it."""
    import numpy as np

    xs = np.geomspace(*xlim, 200)
    ys = np.minimum(xs * (copy or np.inf), peak or np.inf)
    if copy or peak:
        ax.plot(xs, ys, color="black", linewidth=1.4, zorder=2)


@dataclass(frozen=True)
class Spot:
    """A place to try a label: an anchor in data coordinates, an offset from it in points,
    the alignment and a rotation in degrees."""

    xy: tuple[float, float]
    offset: tuple[float, float]
    ha: str
    va: str
    rotation: float = 0.0


def _slope_spots(ax: Any, copy: float, ridge: float | None) -> list[Spot]:
    """Along the copy roof's slope, rotated with it (in pixels, so once the layout is
    fixed): the middle of its visible part first, then nearer its ends, above or below."""
    (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
    start, end = max(x0, y0 / copy), min(ridge or x1, x1, y1 / copy)
    spots = []
    for fraction in ((0.5, 0.3, 0.7, 0.15, 0.85) if start < end else ()):
        x = start * (end / start) ** fraction
        a, b = ax.transData.transform([(x, x * copy), (2 * x, 2 * x * copy)])
        angle = math.degrees(math.atan2(b[1] - a[1], b[0] - a[0]))
        spots += [Spot((x, x * copy), (0, 4), "center", "bottom", angle),
                  Spot((x, x * copy), (0, -4), "center", "top", angle)]
    return spots


def _level_spots(ax: Any, level: float, start: float | None = None) -> list[Spot]:
    """Along a horizontal roof: at the right end, then from ``start`` (the ridge) or the left
    end, above or below."""
    x0, x1 = ax.get_xlim()
    ends = [(x1, "right", -3), (start or x0, "left", 3)]
    return [Spot((x, level), (dx, dy), ha, va) for x, ha, dx in ends
            for dy, va in ((3, "bottom"), (-3, "top"))]


def _least_crowded(ax: Any, text: str, spots: list[Spot], taken: list[Any],
                   renderer: Any) -> Any | None:
    """Draw ``text`` at the first of ``spots`` where it covers nothing ``taken`` (marker and
    label boxes, pixels) and stays in the axes, else where it covers least; return it."""
    frame = ax.get_window_extent(renderer)
    best: tuple[int, Any] | None = None
    for spot in spots:
        label = ax.annotate(text, spot.xy, xytext=spot.offset, textcoords="offset points",
                            ha=spot.ha, va=spot.va, rotation=spot.rotation,
                            rotation_mode="anchor", fontsize=FONT, zorder=5,
                            annotation_clip=False)
        label.set_in_layout(False)
        clashes = _clashes(label.get_window_extent(renderer), taken, frame)
        if best is None or clashes < best[0]:
            if best:
                best[1].remove()
            best = (clashes, label)
        else:
            label.remove()
        if clashes == 0:
            break
    return best[1] if best else None


def _clashes(box: Any, taken: list[Any], frame: Any) -> int:
    """How many boxes ``taken`` a label's ``box`` overlaps; many more if it leaves ``frame``."""
    inside = frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 <= box.y1 <= \
        frame.y1
    return sum(1 for other in taken if box.overlaps(other)) + (0 if inside else 100)


def _strip_texts(ax: Any, copy: float | None, peak: float | None) -> list[tuple[str, list[Spot]]]:
    """The data-movement strip's one label, the copy roof's, and where it may go."""
    return [(f"copy roof {number(copy)} GB/s", _level_spots(ax, copy))] if copy else []


def _roof_texts(ax: Any, copy: float | None, peak: float | None) -> list[tuple[str, list[Spot]]]:
    """The roofline's roof labels and where each may go: the copy roof along its slope, the
    fp32 peak (with the ridge point) along the ceiling."""
    ridge = peak / copy if copy and peak else None
    texts = [(f"copy {number(copy)} GB/s", _slope_spots(ax, copy, ridge))] if copy else []
    y0, y1 = ax.get_ylim()
    if peak and y0 < peak < y1:
        ridge_text = f" (ridge at {number(ridge)} flop/byte)" if ridge else ""
        texts.append((f"fp32 peak {number(peak)} GFlop/s{ridge_text}",
                      _level_spots(ax, peak, ridge and ridge * 1.1)))
    return texts


def _roofline_panel(ax: Any, points: list[Point], copy: float | None, peak: float | None,
                    styles: dict[str, tuple[str, str]]) -> None:
    """Rows that do arithmetic: GFlop/s against their golden flop/byte, under the roofs."""
    ridge = [peak / copy] if copy and peak else []
    xlim = _span([point.x for point in points] + ridge, low=0.25, high=4.0)
    ylim = _span([point.y for point in points] + ([peak] if peak else []), high=4.0)
    for point in points:
        _marker(ax, point, styles)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    _roof(ax, copy, peak, xlim)
    _format_axis(ax.xaxis)
    _format_axis(ax.yaxis)
    ax.tick_params(labelsize=FONT)
    ax.grid(color="#ececec", linewidth=0.6)
    ax.set_xlabel("arithmetic intensity (flop/byte of the golden algorithm, log scale)",
                  fontsize=FONT + 1)
    ax.set_ylabel("GFlop/s (log scale)", fontsize=FONT + 1)
    ax.set_title("roofline", fontsize=FONT + 1)
    if not points:
        ax.text(0.5, 0.5, "no row here does arithmetic", ha="center", va="center",
                transform=ax.transAxes, fontsize=FONT, color=SKIPPED)


def _key(subfig: Any, points: list[Point], styles: dict[str, tuple[str, str]],
         columns: int) -> None:
    """Every point's number, case, variant, size and rate, with its marker: what no label on
    a crowded roofline could say."""
    from matplotlib.lines import Line2D

    rows = [point.row for point in points]
    sizes = {case: _varying([row["size"] for row in rows if row["case"] == case])
             for case in dict.fromkeys(row["case"] for row in rows)}
    handles = [Line2D([], [], marker=styles[point.row["case"]][0], linestyle="none",
                      color=styles[point.row["case"]][1], markersize=5,
                      markeredgecolor=INVALID if not point.row["valid"] else "black",
                      markeredgewidth=1.2 if not point.row["valid"] else 0.4,
                      label=key_label(point, sizes)) for point in points]
    if handles:
        subfig.legend(handles=handles, loc="outside lower center", ncols=columns,
                      fontsize=FONT - 1, frameon=False, handletextpad=0.2, columnspacing=1.2,
                      borderaxespad=0.2)


def roofline_figure(document: dict[str, Any]) -> Figure:
    """Every timed row against the roofs of its device, a row of panels per device: a strip
    of rows that only move data (GB/s under the copy roof) beside the classic roofline, and
    beneath them a key of the numbered points."""
    plt = _pyplot()
    found = roofline_points(document)
    styles = _case_styles(document)
    refs = document["references"]
    heights = [ROOFLINE_INCHES + 0.45 + KEY_LINE_INCHES * math.ceil(
        (len(strip) + len(roofline)) / KEY_COLUMNS) for strip, roofline in found.values()]
    fig = plt.figure(figsize=(2 * COLUMN_INCHES, sum(heights) or ROOFLINE_INCHES), dpi=DPI,
                     layout="constrained")
    if not found:
        fig.text(0.5, 0.5, "no timed row in this run", ha="center", fontsize=FONT + 2)
        return fig
    subfigs = fig.subfigures(len(found), 1, squeeze=False, height_ratios=heights)[:, 0]
    panels = []
    for subfig, (device, (strip, roofline)) in zip(subfigs, found.items()):
        left, right = subfig.subplots(1, 2, width_ratios=[1, 2.4])
        copy, peak = refs.get(f"{device}_copy_gbps"), refs.get(f"{device}_peak_gflops_fp32")
        _strip_panel(left, strip, copy, styles)
        _roofline_panel(right, roofline, copy, peak, styles)
        _key(subfig, strip + roofline, styles, KEY_COLUMNS)
        subfig.suptitle(_device_title(document, device), fontsize=FONT + 2)
        panels += [(left, strip, _strip_texts, copy, peak),
                   (right, roofline, _roof_texts, copy, peak)]
    fig.canvas.draw()  # fix the layout: labels are placed, and roofs rotated, in pixels
    fig.set_layout_engine("none")
    for ax, points, roof_texts, copy, peak in panels:
        _label_panel(ax, points, roof_texts(ax, copy, peak))
    return fig


def _label_panel(ax: Any, points: list[Point], roof_texts: list[tuple[str, list[Spot]]]) -> None:
    """Once the layout is fixed: the roofs' labels where they cover fewest markers, then the
    points' numbers where they cover nothing."""
    renderer = ax.figure.canvas.get_renderer()
    taken = _marker_boxes(ax, points) + [text.get_window_extent(renderer) for text in ax.texts]
    for text, spots in roof_texts:
        label = _least_crowded(ax, text, spots, taken, renderer)
        if label:
            taken.append(label.get_window_extent(renderer))
    number_points(ax, points, renderer, taken)


# -- numbers beside points, where nothing else is -------------------------------------------


def _offsets(reach: float) -> list[tuple[float, float]]:
    """Where to try a label, in pixels from its point, ring by ring (RINGS, in ``reach``):
    right, up, left and down first, then the diagonals, then the directions between."""
    found = []
    for ring, steps in RINGS:
        quarter = steps // 4
        for k in sorted(range(steps), key=lambda k: (k % quarter != 0,
                                                     k % max(quarter // 2, 1) != 0, k)):
            angle = 2 * math.pi * k / steps
            found.append((ring * reach * math.cos(angle), ring * reach * math.sin(angle)))
    return found


def _free_place(centre: tuple[float, float], size: tuple[float, float], taken: list[Any],
                frame: Any, reach: float) -> tuple[float, float]:
    """The first offset where a label of ``size`` overlaps nothing ``taken`` and stays in
    ``frame``; else the one overlapping least."""
    from matplotlib.transforms import Bbox

    best, fewest = (reach, 0.0), math.inf
    width, height = size
    for dx, dy in _offsets(reach):
        box = Bbox.from_bounds(centre[0] + dx - width / 2, centre[1] + dy - height / 2,
                               width, height)
        clashes = _clashes(box, taken, frame)
        if clashes == 0:
            return dx, dy
        if clashes < fewest:
            best, fewest = (dx, dy), clashes
    return best


def _marker_boxes(ax: Any, points: list[Point]) -> list[Any]:
    """Where each point's marker lies, in pixels of the laid-out figure."""
    from matplotlib.transforms import Bbox

    half = MARKER_POINTS * ax.figure.dpi / 72
    return [Bbox.from_bounds(x - half, y - half, 2 * half, 2 * half)
            for x, y in ax.transData.transform([(point.x, point.y) for point in points])]


def number_points(ax: Any, points: list[Point], renderer: Any, taken: list[Any]) -> None:
    """Write each point's number beside it, where it overlaps nothing ``taken`` (marker and
    label boxes, pixels; each number is added); a number pushed away from its point gets a
    leader line."""
    from matplotlib.transforms import Bbox

    if not points:
        return
    scale = ax.figure.dpi / 72
    centres = ax.transData.transform([(point.x, point.y) for point in points])
    half = MARKER_POINTS * scale
    frame = ax.get_window_extent(renderer)
    for point, centre in zip(points, centres):
        probe = ax.text(0, 0, str(point.number), fontsize=NUMBER_FONT)
        extent = probe.get_window_extent(renderer)
        probe.remove()
        size = (extent.width + 2, extent.height)
        reach = half + size[0] / 2 + 1
        dx, dy = _free_place(tuple(centre), size, taken, frame, reach)
        taken.append(Bbox.from_bounds(centre[0] + dx - size[0] / 2, centre[1] + dy - size[1] / 2,
                                      *size))
        leader = math.hypot(dx, dy) > 1.5 * reach
        label = ax.annotate(
            str(point.number), (point.x, point.y), xytext=(dx / scale, dy / scale),
            textcoords="offset points", ha="center", va="center", fontsize=NUMBER_FONT,
            color=INVALID if not point.row["valid"] else "#111111", zorder=6,
            bbox={"boxstyle": "square,pad=0.05", "facecolor": "white", "edgecolor": "none",
                  "alpha": 0.75},
            arrowprops={"arrowstyle": "-", "color": "#888888", "linewidth": 0.5,
                        "shrinkA": 0, "shrinkB": MARKER_POINTS} if leader else None)
        label.set_in_layout(False)


# -- files ----------------------------------------------------------------------------------


def _save(fig: Figure, path: Path) -> None:
    fig.savefig(path, dpi=DPI)
    _pyplot().close(fig)


def write_charts(document: dict[str, Any], directory: Path) -> list[tuple[str, str]]:
    """Write every chart into ``directory``; return (title, file name) pairs in page order."""
    charts = []
    for case in dict.fromkeys(row["case"] for row in document["results"]):
        name = f"{case}.png"
        _save(case_figure(document, case), directory / name)
        charts.append((case_title(document, case), name))
        declared = (document.get("cases") or {}).get(case, {})
        dimension, param = declared.get("sweep"), declared.get("sweep_param")
        if dimension and any(dimension in row["size"] for row in document["results"]
                             if row["case"] == case):
            name = f"{case}-{dimension}.png"
            _save(sweep_figure(document, case, dimension, tuple(param) if param else None),
                  directory / name)
            charts.append((f"{case}: time" + (f" and {param[1]}" if param else "") +
                           f" against {dimension}", name))
    _save(roofline_figure(document), directory / "roofline.png")
    charts.append(("Roofline: every timed row against its device's roofs (numbers: the key "
                   "below each device)", "roofline.png"))
    return charts
