"""What a case's bars are judged against, in the case's own metric: the copy roof of a
memory-bound case, the fp32 peak and the library of a compute-bound one, the unit's roof of a
case rated in its own unit; and how such a line is drawn across a panel."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loclab.report.charts.style import FONT, LABEL_BOX, Row
from loclab.report.metric import Metric
from loclab.report.text import LINK_PARTS, number, peak_text, per_second

REFERENCE_STYLES = {"roof": ("black", "--"), "library": ("#555555", ":")}


@dataclass(frozen=True)
class Reference:
    """A value a panel's bars are judged against (a roof, or the library a user would call
    instead), drawn as a labelled vertical line."""

    value: float
    label: str
    kind: str  # "roof" or "library"
    name: str  # what a heading calls it: 'the copy roof', 'cublas'


def case_references(document: dict[str, Any], metric: Metric, device: str,
                    rows: list[Row]) -> list[Reference]:
    """The lines a panel of ``rows`` (one device and size) is drawn against: the copy roof of
    a memory-bound case; the fp32 peak and the library rows of a compute-bound one; the link's
    pinned roofs (to the device, back, both ways) of a case rated against the link; the unit's
    roof of a case rated in its own unit, where one is known."""
    refs = document["references"]
    if metric.limit == "interconnect":
        return [Reference(refs[key], f"pinned {label} {number(refs[key])} GB/s", "roof",
                          f"the link's pinned {label} roof")
                for key, label in LINK_PARTS if refs.get(key)]
    if metric.limit == "memory":
        copy = refs.get(f"{device}_copy_gbps")
        return ([Reference(copy, f"copy roof {number(copy)} GB/s", "roof", "the copy roof")]
                if copy else [])
    if metric.limit == "compute":
        peak = refs.get(f"{device}_peak_gflops_fp32")
        lines = [Reference(peak, f"fp32 peak {peak_text(refs, device)}", "roof",
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


def draw_reference(ax: Any, y: float, reference: Reference, limit: float) -> None:
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
