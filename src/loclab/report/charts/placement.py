"""Labels placed where they overlap nothing, once a figure's layout is fixed (in pixels): the
roofs' labels at the least crowded of a few places along their lines, and each roofline
point's number in the nearest free place around it, so that points sharing an intensity stay
apart. Matplotlib places text where it is told, overlaps or not."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from loclab.report.charts.points import Point
from loclab.report.charts.style import FONT, INVALID

MARKER_POINTS = 3.5  # half a roofline marker's size
NUMBER_FONT = 7
# Rings of places tried for a point's number (in label widths from it, and how many
# directions): beside it first, then further out.
RINGS = ((1.0, 8), (1.8, 8), (2.7, 12), (3.8, 16), (5.2, 16), (7.0, 24), (9.0, 24), (12.0, 32))


@dataclass(frozen=True)
class Spot:
    """A place to try a label: an anchor in data coordinates, an offset from it in points,
    the alignment and a rotation in degrees."""

    xy: tuple[float, float]
    offset: tuple[float, float]
    ha: str
    va: str
    rotation: float = 0.0


def slope_spots(ax: Any, copy: float, ridge: float | None) -> list[Spot]:
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


def level_spots(ax: Any, level: float, start: float | None = None) -> list[Spot]:
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


def label_panel(ax: Any, points: list[Point], roof_texts: list[tuple[str, list[Spot]]]) -> None:
    """Once the layout is fixed: the roofs' labels where they cover fewest markers, then the
    points' numbers where they cover nothing."""
    renderer = ax.figure.canvas.get_renderer()
    taken = _marker_boxes(ax, points) + [text.get_window_extent(renderer) for text in ax.texts]
    for text, spots in roof_texts:
        label = _least_crowded(ax, text, spots, taken, renderer)
        if label:
            taken.append(label.get_window_extent(renderer))
    number_points(ax, points, renderer, taken)
