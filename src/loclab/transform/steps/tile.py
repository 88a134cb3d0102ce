"""``tile(i=32, j=32)``: block tiling. Strip-mine each loop, then move the tile loops
outside the band of point loops, in the order given (the slides' ``ii, jj, i, j``).

Legal when that order keeps every dependence's source first (for a rectangular band: every
direction vector stays lexicographically positive once the tile loops lead).
"""

from __future__ import annotations

from loclab.transform.recipe import Step
from loclab.transform.steps import (Applied, Context, band_of, find_loop, rebuild_band,
                                    require_distinct, size_argument)
from loclab.transform.steps.stripmine import stripmine
from loclab.transform.tree import Program

NAMES = ("tile",)


def apply(program: Program, step: Step, context: Context) -> Applied:
    if step.args or not step.keywords:
        raise step.error("usage tile(loop=size, ...), e.g. tile(i=32, j=32)")
    sizes = [size_argument(size, step) for _, size in step.keywords]
    new = program.clone()
    points = [find_loop(new, ref, step) for ref, _ in step.keywords]
    require_distinct(points, step)
    band = band_of(new, points, step)
    if len(band) != len(points):
        between = ", ".join(n.label for n in band if n not in points)
        raise step.error(f"the tiled loops must be adjacent in one perfect nest "
                         f"({between} is between them)")
    tiles = [stripmine(new, node, size, None, step) for node, size in zip(points, sizes)]
    rebuild_band(new, band_of(new, tiles + band, step), tiles + band)
    context.require_order(new, step, tiles)
    shape = " x ".join(str(s) for s in sizes)
    return Applied(new, f"tiles of {shape}: every dependence keeps its source first with "
                        f"the tile loops ({', '.join(t.name for t in tiles)}) outside")
