"""``vectorize(j)``: let the compiler reorder a sum that a loop carries, so that it can run
the loop in vector lanes.

A loop whose iterations feed one scalar sum (``s += a[i, j] * x[j]`` along ``j``) is a chain
of dependent adds: the compiler may not vectorize it, since adding in lanes changes the order
of the additions and so the rounding (the lectures' "reduction": partial sums per lane,
combined at the end). The step is legal when the loop carries no dependence but those of
scalar reductions (as ``parallel`` judges it); it marks the loop, and the Numba emitter lets
LLVM reassociate floating-point arithmetic (``fastmath={"reassoc"}``, for the whole function:
Numba has no finer switch), the C emitter writes ``#pragma omp simd reduction(op: s)``. The
results then differ from the original's within the bound of a reordered sum, which is what
verification allows. A generalized reduction (``hist[k] += 1``) is refused: lanes would
update one element at once.
"""

from __future__ import annotations

from loclab.transform.recipe import Step
from loclab.transform.steps import (Applied, Context, IllegalStep, expect_args, find_loops,
                                    no_keywords, reductions_of, require_plain, witness)
from loclab.transform.tree import LoopNode, Program, Reduction

NAMES = ("vectorize",)


def apply(program: Program, step: Step, context: Context) -> Applied:
    expect_args(step, 1, 1, "vectorize(loop)")
    no_keywords(step)
    new = program.clone()
    nodes = find_loops(new, step.args[0], step)
    require_plain(new, nodes, step)
    checker = context.checker(new)
    reductions: dict[str, Reduction] = {}
    for node in nodes:
        if any(isinstance(child, LoopNode) for child in node.body):
            raise step.error(f"{node.label} holds loops: only an innermost loop runs in "
                             "vector lanes")
        carried = checker.carried(node)
        for item in carried:
            if item.reduction is None or not item.scalar:
                what = ("a generalized reduction" if item.reduction is not None
                        else "a dependence that is not a reduction")
                raise IllegalStep(f"{step} is illegal: {node.name} carries {what} on "
                                  f"{item.name}: its iterations cannot run in lanes",
                                  carried=witness(new, node, item))
        node.reductions = reductions_of(carried)
        node.vectorized = True
        reductions.update({r.key: r for r in node.reductions})
    name = nodes[0].name
    if not reductions:
        return Applied(new, f"{name} carries no dependence: its iterations may run in lanes")
    summed = ", ".join(f"{r.op} on {r.name}" for r in reductions.values())
    return Applied(new, f"{name} carries only reductions ({summed}): partial results per "
                        "lane, combined at the end (reassociated: within the bound of a "
                        "reordered sum)")
