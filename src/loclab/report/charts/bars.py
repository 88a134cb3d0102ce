"""A case in its own metric (``loclab.report.metric``): a column per device, a panel per size,
a bar per variant with its whisker and its value, against the lines of that metric's
references. A roof far beyond the bars is named at the edge rather than drawn, so that the
bars are never flattened against it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loclab.report.charts.references import Reference, case_references, draw_reference
from loclab.report.charts.style import (COLUMN_INCHES, DPI, FONT, INVALID, LABEL_BOX, SKIPPED,
                                        Figure, Row, format_axis, pyplot, si_tick_text,
                                        tick_text)
from loclab.report.charts.titles import column_title, size_text, varying
from loclab.report.charts.whiskers import whisker_meaning, whisker_times
from loclab.report.metric import Metric, case_metric
from loclab.report.text import number, percent, prefixed

BAR_INCHES = 0.25  # a bar, or a reference line's label above the bars
PANEL_INCHES = 0.55  # a panel's title and ticks
REACH = 3.0  # a roof this many times beyond the fastest bar is marked at the edge instead
ROLE_COLOURS = {"naive": "#d62728", "optimized": "#1f77b4", "library": "#7f7f7f",
                "golden": "#2ca02c"}


def axis_label(metric: Metric) -> str:
    """The bar axis's label: the metric's unit, and the work it counts."""
    work = {"memory": "bytes", "compute": "flops",
            "interconnect": "bytes to and from host memory"}.get(metric.limit, metric.unit)
    return f"{metric.rate_header}: the golden algorithm's {work} / median time"


def rate_text(metric: Metric, value: float) -> str:
    """A rate in the metric's unit, as the tables write it: '4,126', '5.49 T'."""
    return prefixed(value) if metric.limit == "unit" else number(value)


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


def _bar_panel(ax: Any, rows: list[Row], metric: Metric, references: list[Reference],
               limit: float) -> None:
    """The variants of one device and size, top to bottom in run order, under a row per
    reference line's label."""
    slots = len(references)
    for y, row in enumerate(rows, start=slots):
        _bar(ax, y, row, metric, limit)
    for y, reference in enumerate(references):
        draw_reference(ax, y, reference, limit)
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
        """The column's height: the tallest column sets the figure's, the others leave the
        rest empty, so that a bar is as thick in every column."""
        return BAR_INCHES * self.lines + PANEL_INCHES * len(self.panels)


def _columns(document: dict[str, Any], metric: Metric, rows: list[Row]) -> list[Column]:
    """A column per device of the case's ``rows``, each panel with its references: the chart
    draws them, and its heading names what they are measured against."""
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
    differing = varying([size for size, _ in panels])
    ratios = [BAR_INCHES * (len(rows) + len(refs)) + PANEL_INCHES
              for (_, rows), refs in zip(panels, references)]
    grid = subfig.add_gridspec(len(panels) + 1, 1, height_ratios=[*ratios, spare + 1e-6])
    axes: list[Any] = []
    for index, ((size, rows), refs) in enumerate(zip(panels, references)):
        ax = subfig.add_subplot(grid[index], sharex=axes[0] if axes else None)
        axes.append(ax)
        _bar_panel(ax, rows, metric, refs, limit)
        ax.tick_params(axis="x", labelbottom=index == len(panels) - 1, labelsize=FONT)
        if differing:
            ax.set_title(size_text(size, differing), fontsize=FONT + 1, loc="left")
    axes[-1].set_xlabel(axis_label(metric), fontsize=FONT + 1)
    format_axis(axes[-1].xaxis, si_tick_text if metric.limit == "unit" else tick_text)
    subfig.suptitle(column_title(document, column.device, [size for size, _ in panels]),
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
                          label=whisker_meaning(rows)))
    fig.legend(handles=handles, loc="outside lower center", ncols=len(handles),
               fontsize=FONT, frameon=False)


def case_figure(document: dict[str, Any], case: str) -> Figure:
    """Each variant of ``case`` in the case's metric: a column per device, a panel per size,
    bars with their spread against the roof (and library) lines of that metric."""
    plt = pyplot()
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
