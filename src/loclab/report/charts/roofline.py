"""Every timed variant against its device's roofs, at its largest size, a row of panels per
device: a strip of the rows that only move data (GB/s under the copy roof) beside the classic
roofline (GFlop/s against flop/byte under the copy roof and the fp32 peak). Points are
numbered and listed in a key beneath, since variants sharing an intensity would hide each
other's labels; the key gives the size of a case that ran at several."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from loclab.report.charts.placement import Spot, label_panel, level_spots, slope_spots
from loclab.report.charts.points import Point, roofline_points, timed_rows
from loclab.report.charts.style import (CASE_COLOURS, CASE_MARKERS, COLUMN_INCHES, DPI, FONT,
                                        INVALID, SKIPPED, Figure, Row, format_axis, pyplot)
from loclab.report.charts.titles import device_title, size_text, varying
from loclab.report.text import number

ROOFLINE_INCHES = 4.2  # a device's strip and roofline, without its key
KEY_COLUMNS = 3
KEY_LINE_INCHES = 0.16


def _case_styles(document: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """A marker and a colour for each case, in the document's case order."""
    cases = dict.fromkeys(row["case"] for row in document["results"])
    return {case: (CASE_MARKERS[i % len(CASE_MARKERS)], CASE_COLOURS[i % len(CASE_COLOURS)])
            for i, case in enumerate(cases)}


def key_label(point: Point, sizes: dict[str, list[str]]) -> str:
    """A key entry: '23 matvec gpu-optimized rows=16,384, cols=16,384: 2,174 GFlop/s'; the
    size only where the case ran at several, by the dimensions that vary."""
    row = point.row
    differing = sizes.get(row["case"]) or []
    size = f" {size_text(row['size'], differing)}" if differing else ""
    rate = (f"{number(row['gflops'])} GFlop/s" if row["flops"] else
            f"{number(row['gbps'])} GB/s")
    flag = " INVALID" if not row["valid"] else ""
    return f"{point.number} {row['case']} {row['variant']}{size}: {rate}{flag}"


def _marker(ax: Any, point: Point, styles: dict[str, tuple[str, str]]) -> None:
    """A point in its case's marker and colour, ringed in red where its output was wrong."""
    marker, colour = styles[point.row["case"]]
    ax.plot(point.x, point.y, marker=marker, color=colour, markersize=6, linestyle="none",
            markeredgecolor=INVALID if not point.row["valid"] else "black",
            markeredgewidth=1.6 if not point.row["valid"] else 0.4, zorder=4)


def predicted_y(point: Point) -> float | None:
    """Where the row would be at its predicted time (the time model: loclab model)."""
    row = point.row
    if not row.get("predicted_s") or not row.get("median_s"):
        return None
    return point.y * row["median_s"] / row["predicted_s"]


def _prediction(ax: Any, point: Point, styles: dict[str, tuple[str, str]]) -> None:
    """The row's predicted rate, hollow, joined to its measured point by a thin line."""
    y = predicted_y(point)
    if y is None:
        return
    marker, colour = styles[point.row["case"]]
    ax.plot([point.x, point.x], [point.y, y], color=colour, linewidth=0.6, linestyle=":",
            zorder=3)
    ax.plot(point.x, y, marker=marker, markerfacecolor="none", markeredgecolor=colour,
            markersize=6, linestyle="none", markeredgewidth=1.0, zorder=3)


def _ys(points: list[Point]) -> list[float]:
    """Measured and predicted rates: what the axes must show."""
    return [point.y for point in points] + [y for y in map(predicted_y, points) if y]


def _span(values: Iterable[float], low: float = 0.5, high: float = 2.0) -> tuple[float, float]:
    """A log axis's limits around the positive ``values``: ``low`` times the least, ``high``
    times the greatest; (0.1, 10) without any, since a log axis needs a range."""
    values = [value for value in values if value and value > 0]
    return (min(values) * low, max(values) * high) if values else (0.1, 10.0)


def _strip_panel(ax: Any, points: list[Point], copy: float | None,
                 styles: dict[str, tuple[str, str]]) -> None:
    """Rows that only move data (0 flop/byte, off any log axis): GB/s per case against the
    device's copy roof."""
    cases = list(dict.fromkeys(point.row["case"] for point in points))
    for point in points:
        _marker(ax, point, styles)
        _prediction(ax, point, styles)
    ax.set_yscale("log")
    ax.set_ylim(*_span(_ys(points) + ([copy] if copy else []), high=3.0))
    ax.set_xlim(-0.5, max(len(cases), 1) - 0.5)
    if copy:
        ax.axhline(copy, color="black", linestyle="--", linewidth=1.2)
    ax.set_xticks(range(len(cases)), cases, fontsize=FONT, rotation=20, ha="right",
                  rotation_mode="anchor")
    format_axis(ax.yaxis)
    ax.tick_params(axis="y", labelsize=FONT)
    ax.set_ylabel("GB/s of the golden bytes (log scale)", fontsize=FONT + 1)
    ax.set_title("data movement only (0 flop/byte); hollow: predicted", fontsize=FONT + 1)
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


def _roofline_panel(ax: Any, points: list[Point], copy: float | None, peak: float | None,
                    styles: dict[str, tuple[str, str]]) -> None:
    """Rows that do arithmetic: GFlop/s against their golden flop/byte, under the roofs."""
    ridge = [peak / copy] if copy and peak else []
    xlim = _span([point.x for point in points] + ridge, low=0.25, high=4.0)
    ylim = _span(_ys(points) + ([peak] if peak else []), high=4.0)
    for point in points:
        _marker(ax, point, styles)
        _prediction(ax, point, styles)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    _roof(ax, copy, peak, xlim)
    format_axis(ax.xaxis)
    format_axis(ax.yaxis)
    ax.tick_params(labelsize=FONT)
    ax.grid(color="#ececec", linewidth=0.6)
    ax.set_xlabel("arithmetic intensity (flop/byte of the golden algorithm, log scale)",
                  fontsize=FONT + 1)
    ax.set_ylabel("GFlop/s (log scale)", fontsize=FONT + 1)
    ax.set_title("roofline; hollow: the time model's prediction", fontsize=FONT + 1)
    if not points:
        ax.text(0.5, 0.5, "no row here does arithmetic", ha="center", va="center",
                transform=ax.transAxes, fontsize=FONT, color=SKIPPED)


def _strip_texts(ax: Any, copy: float | None, peak: float | None) -> list[tuple[str, list[Spot]]]:
    """The data-movement strip's one label, the copy roof's, and where it may go."""
    return [(f"copy roof {number(copy)} GB/s", level_spots(ax, copy))] if copy else []


def _roof_texts(ax: Any, copy: float | None, peak: float | None) -> list[tuple[str, list[Spot]]]:
    """The roofline's roof labels and where each may go: the copy roof along its slope, the
    fp32 peak (with the ridge point) along the ceiling."""
    ridge = peak / copy if copy and peak else None
    texts = [(f"copy {number(copy)} GB/s", slope_spots(ax, copy, ridge))] if copy else []
    y0, y1 = ax.get_ylim()
    if peak and y0 < peak < y1:
        ridge_text = f" (ridge at {number(ridge)} flop/byte)" if ridge else ""
        texts.append((f"fp32 peak {number(peak)} GFlop/s{ridge_text}",
                      level_spots(ax, peak, ridge and ridge * 1.1)))
    return texts


def case_sizes(rows: list[Row]) -> dict[str, list[str]]:
    """The dimensions that vary between the sizes each case of ``rows`` ran at (none where
    it ran at one): what a key entry must name of its point's size."""
    return {case: varying([row["size"] for row in rows if row["case"] == case])
            for case in dict.fromkeys(row["case"] for row in rows)}


def _key(subfig: Any, points: list[Point], sizes: dict[str, list[str]],
         styles: dict[str, tuple[str, str]], columns: int) -> None:
    """Every point's number, case, variant, size and rate, with its marker: what no label on
    a crowded roofline could say."""
    from matplotlib.lines import Line2D

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
    """Every timed variant (at its largest size) against the roofs of its device, a row of
    panels per device: a strip of rows that only move data (GB/s under the copy roof) beside
    the classic roofline, and beneath them a key of the numbered points."""
    plt = pyplot()
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
        # in number order: the key is read alongside the points, strip and roofline mixed
        _key(subfig, sorted(strip + roofline, key=lambda point: point.number),
             case_sizes(timed_rows(document, device)), styles, KEY_COLUMNS)
        subfig.suptitle(device_title(document, device), fontsize=FONT + 2)
        panels += [(left, strip, _strip_texts, copy, peak),
                   (right, roofline, _roof_texts, copy, peak)]
    fig.canvas.draw()  # fix the layout: labels are placed, and roofs rotated, in pixels
    fig.set_layout_engine("none")
    for ax, points, roof_texts, copy, peak in panels:
        label_panel(ax, points, roof_texts(ax, copy, peak))
    return fig
