"""``interchange(i, j)`` and ``permute(k, i, j)``: reorder the loops of a perfect band.

Legal when every dependence keeps its source first: the slides' theorem (no direction vector
may lead with ``>`` once permuted), decided here on the exact dependences of the new order,
bounds of non-rectangular nests included (isl computes the new ones).
"""

from __future__ import annotations

from loclab.transform.recipe import Step
from loclab.transform.steps import (Applied, Context, band_of, expect_args, find_loop,
                                    no_keywords, rebuild_band, require_distinct)
from loclab.transform.tree import LoopNode, Program

NAMES = ("interchange", "permute")


def apply(program: Program, step: Step, context: Context) -> Applied:
    no_keywords(step)
    if step.name == "interchange":
        expect_args(step, 2, 2, "interchange(loop, loop)")
    else:
        expect_args(step, 2, 16, "permute(loop, loop, ...) (the new order, outermost first)")
    new = program.clone()
    nodes = [find_loop(new, ref, step) for ref in step.args]
    require_distinct(nodes, step)
    band = band_of(new, nodes, step)
    if step.name == "interchange":
        a, b = nodes
        order = [b if n is a else a if n is b else n for n in band]
    else:
        order = permuted(band, nodes, step)
    rebuild_band(new, band, order)
    context.require_order(new, step, order)
    names = ", ".join(n.name for n in order)
    return Applied(new, f"every dependence keeps its source first in the order ({names})")


def permuted(band: list[LoopNode], nodes: list[LoopNode], step: Step) -> list[LoopNode]:
    """The band with the named loops, contiguous in it, in the order given."""
    positions = sorted(band.index(n) for n in nodes)
    if positions != list(range(positions[0], positions[0] + len(nodes))):
        between = [n.label for n in band[positions[0]:positions[-1] + 1] if n not in nodes]
        raise step.error(f"the loops to permute must be adjacent; name {', '.join(between)} "
                         "too")
    return band[:positions[0]] + nodes + band[positions[-1] + 1:]
