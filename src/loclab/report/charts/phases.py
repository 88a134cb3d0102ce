"""Where each row's time goes, drawn: a stacked bar per variant of its phases (copy in,
compute, copy out: each timed on its own), a column per device and a panel per size, against
the ideal time (the copies and the compute overlapped) and the time with no overlap at all.
The device-centric ``A x B x C`` is mostly copies; a pipeline on streams has no phases of its
own, only its median, which lies between the two lines. A bar of phases is their sum, each
timed alone, which is not the row's median (the whole run timed at once: pageable copies
timed alone took 65 ms where the run took 52.7): a tick marks the median on it, and its label
gives both."""

from __future__ import annotations

from typing import Any

from loclab.report.charts.style import (CASE_COLOURS, COLUMN_INCHES, DPI, FONT, Figure, Row,
                                        format_axis, pyplot)
from loclab.report.charts.titles import column_title, size_text, varying
from loclab.report.phases import shown_rows

BAR_INCHES = 0.3
PANEL_INCHES = 0.6
MEDIAN_COLOUR = "#bbbbbb"  # a row timed only whole: its median, unsplit
MEDIAN_TICK = "|"  # where a bar of phases has its row's median
BOUNDS = (("ideal_s", "ideal", "--"), ("no_overlap_s", "no overlap", ":"))


def _panels(rows: list[Row]) -> dict[str, list[tuple[dict[str, int], list[Row]]]]:
    """The shown rows of each device, by size, in run order."""
    grouped: dict[str, dict[str, tuple[dict[str, int], list[Row]]]] = {}
    for row in shown_rows(rows):
        panels = grouped.setdefault(row["device"], {})
        panels.setdefault(repr(sorted(row["size"].items())), (row["size"], []))[1].append(row)
    return {device: list(panels.values()) for device, panels in grouped.items()}


def bar_label(row: Row) -> str:
    """What the end of a row's bar says: its median, and for a bar of phases their sum too
    where it differs (each phase timed alone, they need not add up to the run timed whole)."""
    median = f"{row['median_s'] * 1e3:.3g} ms"
    phases = f"{sum((row.get('phases') or {}).values()) * 1e3:.3g} ms"
    if not row.get("phases") or phases == median:
        return median
    return f"phases {phases}, whole run {median}"


def _panel(ax: Any, rows: list[Row], colours: dict[str, str]) -> None:
    """A stacked bar of each row's phases in ms, its median ticked on it (its median alone
    where it has none), and the ideal and no-overlap times of the size as vertical lines."""
    reach = 0.0
    for y, row in enumerate(rows):
        phases = row.get("phases") or {}
        start = 0.0
        for phase, seconds in phases.items():
            ax.barh(y, seconds * 1e3, left=start, height=0.6, color=colours[phase])
            start += seconds * 1e3
        if phases:
            ax.scatter([row["median_s"] * 1e3], [y], marker=MEDIAN_TICK, s=150,
                       color="black", linewidths=1.6, zorder=3)
        else:
            ax.barh(y, row["median_s"] * 1e3, height=0.6, color=MEDIAN_COLOUR)
        end = max(start, row["median_s"] * 1e3)
        ax.annotate(bar_label(row), (end, y), xytext=(4, 0), textcoords="offset points",
                    va="center", fontsize=FONT)
        reach = max(reach, end)
    for key, _, style in BOUNDS:
        value = next((row[key] for row in rows if row.get(key)), None)
        if value:
            ax.axvline(value * 1e3, color="black", linestyle=style, linewidth=1.1)
    ax.set_yticks(range(len(rows)), [row["variant"] for row in rows], fontsize=FONT)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlim(0, 1.15 * reach)  # room for the last label
    ax.tick_params(axis="x", labelsize=FONT)
    ax.grid(axis="x", color="#e6e6e6", linewidth=0.6)
    ax.set_axisbelow(True)


def _legend(fig: Any, colours: dict[str, str], rows: list[Row]) -> None:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles = [Patch(color=colour, label=phase) for phase, colour in colours.items()]
    if any(row.get("phases") for row in rows):
        handles.append(Line2D([], [], color="black", marker=MEDIAN_TICK, linestyle="none",
                              markersize=10, markeredgewidth=1.6,
                              label="median of the whole run"))
    if any(not row.get("phases") for row in rows):
        handles.append(Patch(color=MEDIAN_COLOUR, label="median (no phases: all at once)"))
    handles += [Line2D([], [], color="black", linestyle=style, label=label)
                for key, label, style in BOUNDS if any(row.get(key) for row in rows)]
    fig.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 4),
               fontsize=FONT, frameon=False)


def phases_figure(document: dict[str, Any], case: str) -> Figure | None:
    """``case``'s rows that compute, each split into its phases; None where none has any."""
    rows = [row for row in document["results"] if row["case"] == case and row["median_s"]]
    columns = _panels(rows)
    if not columns:
        return None
    phases = list(dict.fromkeys(phase for panels in columns.values() for _, shown in panels
                                for row in shown for phase in row.get("phases") or {}))
    colours = {phase: CASE_COLOURS[i % len(CASE_COLOURS)] for i, phase in enumerate(phases)}
    tallest = max(sum(BAR_INCHES * len(shown) + PANEL_INCHES for _, shown in panels)
                  for panels in columns.values())
    plt = pyplot()
    fig = plt.figure(figsize=(max(COLUMN_INCHES * len(columns), 7.0), 1.4 + tallest),
                     dpi=DPI, layout="constrained")
    shown_all = [row for panels in columns.values() for _, shown in panels for row in shown]
    for subfig, (device, panels) in zip(fig.subfigures(1, len(columns), squeeze=False)[0],
                                        columns.items()):
        differing = varying([size for size, _ in panels])
        axes = subfig.subplots(len(panels), 1, squeeze=False, height_ratios=[
            BAR_INCHES * len(shown) + PANEL_INCHES for _, shown in panels])[:, 0]
        for ax, (size, shown) in zip(axes, panels):
            _panel(ax, shown, colours)
            format_axis(ax.xaxis)
            if differing:
                ax.set_title(size_text(size, differing), fontsize=FONT + 1, loc="left")
        axes[-1].set_xlabel("ms (each phase timed on its own)", fontsize=FONT + 1)
        subfig.suptitle(column_title(document, device, [size for size, _ in panels]),
                        fontsize=FONT + 2)
    _legend(fig, colours, shown_all)
    return fig
