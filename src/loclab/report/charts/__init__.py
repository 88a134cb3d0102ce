"""Charts of a run, as PNG files beside the report's pages (matplotlib, imported only when a
chart is drawn: ``loclab --help`` and a run without ``--report`` never load it).

Each case is charted in its own metric (``loclab.report.metric``; ``bars``): GB/s against the
copy roof, GFlop/s against the fp32 peak and the library, or its unit per second against that
unit's roof. A swept case also gets its time against the swept dimension (``sweep``), and a
case whose rows compute in phases a chart of where their time goes (``phases``). The
roofline (``roofline``) puts every timed variant, at its largest size, against its device's
roofs, each point numbered and listed in a key, its numbers placed where they overlap nothing
(``placement``). What the charts share (pyplot, fonts, colours, plain ticks) is in ``style``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from loclab.report.charts.bars import case_figure, case_title
from loclab.report.charts.phases import phases_figure
from loclab.report.charts.roofline import roofline_figure
from loclab.report.charts.style import save, tick_text
from loclab.report.charts.sweep import sweep_figure
from loclab.report.charts.whiskers import whisker_times
from loclab.report.metric import case_metric

__all__ = ["case_figure", "case_title", "phases_figure", "roofline_figure", "sweep_figure",
           "tick_text", "whisker_times", "write_charts"]


def write_charts(document: dict[str, Any], directory: Path) -> list[tuple[str, str]]:
    """Write every chart into ``directory``; return (title, file name) pairs in page order."""
    charts = []
    for case in dict.fromkeys(row["case"] for row in document["results"]):
        name = f"{case}.png"
        save(case_figure(document, case), directory / name)
        charts.append((case_title(document, case), name))
        declared = (document.get("cases") or {}).get(case, {})
        dimension, param = declared.get("sweep"), declared.get("sweep_param")
        rate = bool(declared.get("sweep_rate"))
        if dimension and any(dimension in row["size"] for row in document["results"]
                             if row["case"] == case):
            name = f"{case}-{dimension}.png"
            save(sweep_figure(document, case, dimension, tuple(param) if param else None,
                              rate), directory / name)
            shown = case_metric(document, case).rate_header if rate else "time"
            charts.append((f"{case}: {shown}" + (f" and {param[1]}" if param else "") +
                           f" against {dimension}", name))
        figure = phases_figure(document, case)
        if figure is not None:
            name = f"{case}-phases.png"
            save(figure, directory / name)
            charts.append((f"{case}: where the time goes (copies, compute) against the ideal "
                           "and no-overlap times", name))
    save(roofline_figure(document), directory / "roofline.png")
    charts.append(("Roofline: every timed variant, at its largest size, against its device's "
                   "roofs (numbers: the key below each device)", "roofline.png"))
    return charts
