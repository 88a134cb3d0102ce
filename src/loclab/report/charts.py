"""Charts of a run (matplotlib, imported only here): one bar chart per case with the copy roof
drawn, and a roofline of all rows."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loclab.cases.base import dims_text
from loclab.report.text import per_second

ROLE_COLOURS = {"naive": "#d62728", "optimized": "#1f77b4", "library": "#7f7f7f",
                "golden": "#2ca02c"}
DEVICE_COLOURS = {"cpu": "#ff7f0e", "gpu": "#2ca02c"}


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


@dataclass(frozen=True)
class Measure:
    """What a case chart's bars show: the golden work ``work`` (a row key: bytes, or the items
    of the case's unit) over a time, in ``scale`` per second."""

    label: str
    work: str
    scale: float = 1e9

    def rate(self, row: dict[str, Any], seconds: float) -> float:
        return row[self.work] / seconds / self.scale

    def bounds(self, row: dict[str, Any]) -> tuple[float, float]:
        """How far below and above the median's rate the slowest and fastest runs lie."""
        median = self.rate(row, row["median_s"])
        return median - self.rate(row, row["max_s"]), self.rate(row, row["min_s"]) - median


def _measure_and_roof(document: dict[str, Any], rows: list[dict[str, Any]],
                      device: str) -> tuple[Measure, tuple[float, str] | None]:
    """GB/s under the device's copy roof; for a case rated in its own unit (pairs, keys), G of
    that unit per second under the unit's roof on the device, where one is known."""
    unit = rows[0].get("unit")
    if not unit:
        copy = document["references"].get(f"{device}_copy_gbps")
        return (Measure("GB/s (golden bytes / median time)", "bytes"),
                (copy, f"copy roof {copy:,.0f} GB/s") if copy else None)
    measure = Measure(f"G {unit}/s (golden {unit} / median time)", "items")
    roof = next((row["unit_roof"] for row in rows if row.get("unit_roof")), None)
    if not roof:
        return measure, None
    return measure, (roof["per_s"] / measure.scale,
                     f"{roof['what']}: {per_second(roof['per_s'], unit)}")


def _panels(rows: list[dict[str, Any]]) -> list[tuple[str, dict[str, int]]]:
    """(device, size) of each panel, in run order."""
    seen: dict[tuple[str, str], tuple[str, dict[str, int]]] = {}
    for row in rows:
        seen.setdefault((row["device"], dims_text(row["size"])), (row["device"], row["size"]))
    return list(seen.values())


def case_chart(document: dict[str, Any], case: str, path: Path) -> None:
    """GB/s of each variant of ``case`` (or G of its unit per second), a panel per device
    (column) and size (row), the device's copy roof (or the unit's roof) dashed."""
    plt = _pyplot()
    rows = [row for row in document["results"] if row["case"] == case]
    panels = _panels(rows)
    devices = list(dict.fromkeys(device for device, _ in panels))
    depth = max(sum(1 for d, _ in panels if d == device) for device in devices)
    fig, axes = plt.subplots(depth, len(devices), figsize=(5.5 * len(devices), 4 * depth),
                             squeeze=False)
    for column, device in enumerate(devices):
        sizes = [size for d, size in panels if d == device]
        for line in range(depth):
            ax = axes[line][column]
            if line >= len(sizes):
                ax.set_axis_off()
                continue
            mine = [row for row in rows if row["device"] == device and row["size"] == sizes[line]]
            _bars(ax, mine, *_measure_and_roof(document, mine, device))
            ax.set_title(f"{case} on the {device.upper()}\n{dims_text(sizes[line])}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _bars(ax: Any, rows: list[dict[str, Any]], measure: Measure,
          roof: tuple[float, str] | None) -> None:
    timed = [row for row in rows if row["median_s"]]
    heights = [measure.rate(row, row["median_s"]) if row["median_s"] else 0.0 for row in rows]
    bars = ax.bar([row["variant"] for row in rows], heights,
                  color=[ROLE_COLOURS[row["role"]] for row in rows])
    for bar, row in zip(bars, rows):
        if not row["valid"]:
            bar.set_hatch("//" if row.get("skipped") else "xx")
            bar.set_edgecolor("gray" if row.get("skipped") else "red")
            ax.annotate("n/a" if row.get("skipped") else "invalid",
                        (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center",
                        va="bottom", color="gray" if row.get("skipped") else "red", fontsize=8)
    if timed:
        low, high = zip(*(measure.bounds(row) for row in timed))
        ax.errorbar([row["variant"] for row in timed],
                    [measure.rate(row, row["median_s"]) for row in timed],
                    yerr=[low, high], fmt="none", ecolor="black", capsize=3, linewidth=1)
    if roof:
        ax.axhline(roof[0], linestyle="--", color="black", linewidth=1)
        ax.annotate(roof[1], (0.01, roof[0]), xycoords=("axes fraction", "data"), va="bottom",
                    fontsize=8)
    ax.set_ylabel(measure.label)
    ax.tick_params(axis="x", rotation=30)
    for label in ax.get_xticklabels():
        label.set_horizontalalignment("right")


def sweep_chart(document: dict[str, Any], case: str, dimension: str, path: Path,
                param: tuple[str, str] | None = None) -> None:
    """Median time of each variant against ``dimension`` (log-log), a panel per device, with
    the slowest and fastest runs as error bars: where each variant's locality gives out.
    ``param`` (a key of the rows' params, its label) adds a panel below each of what the
    variants pay for it in theory (partitioning: hash computations per key)."""
    plt = _pyplot()
    rows = [row for row in document["results"]
            if row["case"] == case and row["median_s"] and dimension in row["size"]]
    devices = list(dict.fromkeys(row["device"] for row in rows))
    depth = 2 if param else 1
    fig, axes = plt.subplots(depth, len(devices), figsize=(6 * len(devices), 4.5 * depth),
                             squeeze=False)
    for column, device in enumerate(devices):
        mine = [row for row in rows if row["device"] == device]
        lines = [sorted((row for row in mine if row["variant"] == variant),
                        key=lambda row: row["size"][dimension])
                 for variant in dict.fromkeys(row["variant"] for row in mine)]
        ax = axes[0][column]
        for line in lines:
            xs = [row["size"][dimension] for row in line]
            ms = [row["median_s"] * 1e3 for row in line]
            spread = [[m - row["min_s"] * 1e3 for m, row in zip(ms, line)],
                      [row["max_s"] * 1e3 - m for m, row in zip(ms, line)]]
            ax.errorbar(xs, ms, yerr=spread, marker="o", capsize=3, label=line[0]["variant"],
                        linestyle="--" if line[0]["role"] == "library" else "-")
        _sweep_axes(ax, dimension, "median time (ms)",
                    f"{case} on the {device.upper()}: time against {dimension}")
        if param:
            key, label = param
            below = axes[1][column]
            for line in lines:
                below.plot([row["size"][dimension] for row in line],
                           [row["params"][key] for row in line], marker="o",
                           label=line[0]["variant"])
            _sweep_axes(below, dimension, label, f"{label} against {dimension}", ybase=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _sweep_axes(ax: Any, dimension: str, ylabel: str, title: str, ybase: int = 10) -> None:
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=ybase)
    ax.set_xlabel(dimension)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8)


def roofline_chart(document: dict[str, Any], path: Path) -> None:
    """All rows against the roofs of their device.

    Rows that do arithmetic sit on the classic roofline (GFlop/s over flop/byte, log-log);
    rows that only move data (0 flop/byte, off any log axis) are drawn in a strip on the left
    as GB/s under their device's copy roof.
    """
    plt = _pyplot()
    rows = [row for row in document["results"] if row["gbps"]]
    refs = document["references"]
    fig, (moves, computes) = plt.subplots(1, 2, figsize=(11, 4.5),
                                          gridspec_kw={"width_ratios": [1, 2.2]})
    devices = [d for d in ("cpu", "gpu") if d in document.get("devices", [])]
    for position, device in enumerate(devices):
        colour = DEVICE_COLOURS[device]
        roof = refs.get(f"{device}_copy_gbps")
        if roof:
            moves.hlines(roof, position - 0.4, position + 0.4, colors=colour, linestyles="--")
        data_rows = [row for row in rows if row["device"] == device and not row["flops"]]
        for offset, row in enumerate(data_rows):
            x = position - 0.3 + 0.6 * offset / max(len(data_rows) - 1, 1)
            moves.plot(x, row["gbps"], "o", color=ROLE_COLOURS[row["role"]],
                       markeredgecolor="red" if not row["valid"] else "none")
            moves.annotate(f"{row['case']} {row['variant']}", (x, row["gbps"]), fontsize=6,
                           rotation=60, xytext=(2, 2), textcoords="offset points")
        peak = refs.get(f"{device}_peak_gflops_fp32")
        if roof and peak:
            intensity = sorted([2.0 ** k for k in range(-6, 11)] + [peak / roof])
            computes.plot(intensity, [min(peak, i * roof) for i in intensity], color=colour,
                          label=f"{device.upper()} roof: {roof:,.0f} GB/s, {peak:,.0f} GFlop/s")
        for row in rows:
            if row["device"] == device and row["flops"]:
                ai = row["flops"] / row["bytes"]
                computes.plot(ai, row["gflops"], "o", color=ROLE_COLOURS[row["role"]])
                computes.annotate(f"{row['case']} {row['variant']}", (ai, row["gflops"]),
                                  fontsize=6, xytext=(3, 3), textcoords="offset points")
    moves.set_yscale("log")
    moves.set_xticks(range(len(devices)), [d.upper() for d in devices])
    moves.set_xlim(-0.6, len(devices) - 0.4)
    moves.set_title("data movement (0 flop/byte)")
    moves.set_ylabel("GB/s; dashed: copy roof")
    computes.set_xscale("log", base=2)
    computes.set_yscale("log")
    computes.set_xlabel("arithmetic intensity (flop/byte of the golden algorithm)")
    computes.set_ylabel("GFlop/s")
    computes.set_title("roofline")
    if not any(row["flops"] for row in rows):
        computes.text(0.5, 0.08, "no row in this run does arithmetic", ha="center",
                      transform=computes.transAxes, fontsize=9, color="gray")
    if computes.get_legend_handles_labels()[0]:
        computes.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_charts(document: dict[str, Any], directory: Path) -> list[tuple[str, str]]:
    """Write every chart into ``directory``; return (title, file name) pairs in page order."""
    charts = []
    for case in dict.fromkeys(row["case"] for row in document["results"]):
        name = f"{case}.png"
        case_chart(document, case, directory / name)
        unit = next(row.get("unit") for row in document["results"] if row["case"] == case)
        charts.append((f"{case}: G {unit}/s per variant" if unit else
                       f"{case}: GB/s per variant against the copy roof", name))
        declared = document.get("cases", {}).get(case, {})
        dimension, param = declared.get("sweep"), declared.get("sweep_param")
        if dimension:
            name = f"{case}-{dimension}.png"
            sweep_chart(document, case, dimension, directory / name,
                        tuple(param) if param else None)
            charts.append((f"{case}: time" + (f" and {param[1]}" if param else "") +
                           f" against {dimension}", name))
    roofline_chart(document, directory / "roofline.png")
    charts.append(("Roofline of all rows", "roofline.png"))
    return charts
