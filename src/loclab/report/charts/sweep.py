"""A swept case's median time against the swept dimension, a column per device, log-log:
where each variant's locality gives out (with, for data that crosses the link between host and
device, the ideal and no-overlap times between which a pipeline lies); or, where the sweep is
of the problem's size (scan's n), the case's rate (GB/s), level where bandwidth bounds it. A
case may add a panel below of what each variant pays for a size in theory (partitioning: hash
computations per key)."""

from __future__ import annotations

from typing import Any

from loclab.report.charts.references import REFERENCE_STYLES, case_references
from loclab.report.charts.style import (CASE_COLOURS, CASE_MARKERS, COLUMN_INCHES, DPI, FONT,
                                        INVALID, SKIPPED, Figure, Row, binary_tick_text,
                                        format_axis, pyplot, si_tick_text, tick_text)
from loclab.report.charts.titles import column_title
from loclab.report.charts.whiskers import whisker_meaning, whisker_times
from loclab.report.metric import Metric, case_metric


BYTES = "bytes"  # a swept dimension that is a size in bytes (host-device)


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


def _time_panel(ax: Any, lines: list[list[Row]], dimension: str, colours: list[str],
                rate: Metric | None = None) -> None:
    """Median ms of each variant (or its ``rate``) against ``dimension`` (log-log) with
    whiskers; a wrong output's point crossed out in red."""
    def value(row: Row, seconds: float) -> float:
        """The plotted value had the row taken ``seconds``: ms, or the rate scaled."""
        return row[rate.rate_key] * row["median_s"] / seconds if rate else seconds * 1e3

    for index, (line, colour) in enumerate(zip(lines, colours)):
        timed = [row for row in line if row["median_s"] and (not rate or row.get(rate.rate_key))]
        xs = [row["size"][dimension] for row in timed]
        ys = [value(row, row["median_s"]) for row in timed]
        spans = [sorted(value(row, t) for t in (whisker_times(row) or (row["median_s"],) * 2))
                 for row in timed]
        ax.errorbar(xs, ys, yerr=[[y - low for y, (low, _) in zip(ys, spans)],
                                  [high - y for y, (_, high) in zip(ys, spans)]],
                    marker=CASE_MARKERS[index % len(CASE_MARKERS)], markersize=5, capsize=2.5,
                    linewidth=1.3, color=colour, label=_line_label(line),
                    linestyle="--" if line[0]["role"] == "library" else "-")
        wrong = [row for row in timed if not row["valid"]]
        if wrong:
            ax.plot([row["size"][dimension] for row in wrong],
                    [value(row, row["median_s"]) for row in wrong], "x", color=INVALID,
                    markersize=11, markeredgewidth=2, zorder=5)
    ax.set_ylabel(f"{rate.rate_header} (log scale)" if rate else "median time (ms, log scale)",
                  fontsize=FONT + 1)


def _bound_lines(ax: Any, rows: list[Row], dimension: str) -> None:
    """Where rows cross the link between host and device: at each size, the ideal time (the
    copies and the compute overlapped) and the time with no overlap (their sum), the two
    bounds a pipeline's time lies between."""
    for key, label, style in (("ideal_s", "ideal: copies and compute overlapped", "--"),
                              ("no_overlap_s", "no overlap: in + out + compute", ":")):
        points = sorted({row["size"][dimension]: row[key] for row in rows
                         if row.get(key)}.items())
        if points:
            ax.plot([x for x, _ in points], [y * 1e3 for _, y in points], style,
                    color="black", linewidth=1.1, label=label)


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
    # Sizes in the millions (histogram bins) are too long to stand side by side in full;
    # sizes in bytes read best in binary units.
    text = (binary_tick_text if dimension == BYTES else
            si_tick_text if max(values) >= 1e6 else tick_text)
    format_axis(ax.xaxis, text, at=values)
    format_axis(ax.yaxis)
    if ax.get_subplotspec().is_last_row():
        ax.set_xlabel(f"{dimension} (log scale)", fontsize=FONT + 1)
    ax.tick_params(labelsize=FONT)
    ax.grid(color="#e6e6e6", linewidth=0.6)


def sweep_figure(document: dict[str, Any], case: str, dimension: str,
                 param: tuple[str, str] | None = None, rate: bool = False) -> Figure:
    """Median time (or, with ``rate``, the case's rate) of each variant against
    ``dimension``, a column per device: where each variant's locality gives out. ``param`` (a
    key of the rows' params, its label) adds a panel below of what each variant pays for the
    size in theory (partitioning: hash computations per key)."""
    metric = case_metric(document, case) if rate else None
    plt = pyplot()
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
        _time_panel(axes[0][column], lines, dimension, colours, metric)
        if not metric:
            _bound_lines(axes[0][column], mine, dimension)
        roof = next((ref for ref in case_references(document, metric, device, mine)
                     if ref.kind == "roof"), None) if metric else None
        if roof:
            colour, style = REFERENCE_STYLES["roof"]
            axes[0][column].axhline(roof.value, color=colour, linestyle=style, linewidth=1,
                                    label=roof.label)
        if param:
            _param_panel(axes[1][column], lines, dimension, *param, colours)
        for ax in axes[:, column]:
            _sweep_axes(ax, dimension, values)
        axes[0][column].set_title(column_title(document, device, [row["size"] for row in mine]),
                                  fontsize=FONT + 1)
        axes[-1][column].legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=2,
                                fontsize=FONT, frameon=False, handles=_sweep_handles(
                                    axes[0][column], mine),
                                title=whisker_meaning(mine), title_fontsize=FONT)
    return fig
