"""``skew(j, t[, 2])``: the loop ``j`` runs over ``j + 2*t``, ``t`` a loop around it.

The slides' loop skewing: for each ``t`` the same iterations of ``j`` run in the same order,
so the step alone changes nothing in the order and is always legal. What it changes is the
shape later steps see: a stencil's dependence ``(1, -1)`` becomes ``(1, 1)``, after which
``tile(t, j)`` is legal (time tiling), and a skewed tile loop interchanged with the tile loop
it is skewed by becomes a wavefront whose inner loop runs in parallel. A tile loop made
later keeps the skew (the tiles are parallelograms); a tile loop skewed by a tile loop adds
the other's first value inside its floor (with equal widths: tile ``(tt, ii)`` runs in
wave ``tt + ii``).
"""

from __future__ import annotations

from loclab.transform.recipe import Step
from loclab.transform.steps import Applied, Context, loop_pair
from loclab.transform.tree import Program

NAMES = ("skew",)


def apply(program: Program, step: Step, context: Context) -> Applied:
    new, node, by, factor = loop_pair(program, step, "skew(loop, a loop around it[, factor])",
                                      "skew factor", 1)
    if by not in new.path(node):
        raise step.error(f"{by.label} is not around {node.label}: skew a loop by one outside "
                         "it")
    if node.parallel or node.vectorized or node.gpu or node.copies:
        raise step.error(f"{node.label} is already parallel, mapped or unrolled: skew first")
    if factor:
        node.skew += ((by, factor),)
    return Applied(new, f"skewing keeps every iteration's order ({node.name} now runs over "
                        f"{node.name} + {factor}*{by.name}, and {by.name} is outside it)")
