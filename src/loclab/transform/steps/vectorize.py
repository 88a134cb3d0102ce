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
verification allows.

A sum into one array element the loop never moves (``A[i, j] -= A[i, k] * A[j, k]`` along
``k``: a dot product written into the matrix) is a scalar sum in disguise: the element is
held in a scalar for the loop's run (loaded before it, stored after it: scalar replacement,
``Reduction.held``), which the compiler can keep in lanes; written to memory each iteration
it cannot, since it may not prove that no other access of the array meets the element. The
element must be the only one of its array the loop's iterations carry a dependence on, and
updated by one piece of the loop's body. A generalized reduction (``hist[k] += 1``: the
element moves with the loop) is refused: lanes would update one element at once.
"""

from __future__ import annotations

from dataclasses import replace

from loclab.transform.legality import Carried
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
        held: dict[str, str] = {}
        for item in carried:
            why = held_element(new, node, item) if item.reduction and not item.scalar else ""
            if why is None:
                held[item.key] = new.fresh_name(f"{item.name}_sum")
            elif item.reduction is None or not item.scalar:
                what = (f"a generalized reduction on {item.name} ({why})"
                        if item.reduction is not None
                        else f"a dependence that is not a reduction on {item.name}")
                raise IllegalStep(f"{step} is illegal: {node.name} carries {what}: its "
                                  "iterations cannot run in lanes",
                                  carried=witness(new, node, item))
        node.reductions = tuple(replace(r, held=held.get(r.key, ""))
                                for r in reductions_of(carried))
        node.vectorized = True
        reductions.update({r.key: r for r in node.reductions})
    name = nodes[0].name
    if not reductions:
        return Applied(new, f"{name} carries no dependence: its iterations may run in lanes")
    summed = ", ".join(f"{r.op} on {r.name}" + (f", held in {r.held} for the loop's run"
                                                 if r.held else "")
                       for r in reductions.values())
    return Applied(new, f"{name} carries only reductions ({summed}): partial results per "
                        "lane, combined at the end (reassociated: within the bound of a "
                        "reordered sum)")


def held_element(program: Program, node: LoopNode, carried: Carried) -> str | None:
    """Why the array element a loop sums into cannot be held in a scalar for the loop's run
    (None: it can). It must be one element for the whole run: written by the updates of one
    piece of the body (a copy made by unrolling holds an element of its own), all with one
    target as written, whose subscripts are affine in the sizes and the loops around the
    loop; and neither the loop nor one around it a parallel loop that sums into the array
    (its threads update it atomically or in copies)."""
    if node.parallel:
        return f"{node.name} runs in parallel"
    threads = next((outer for outer in program.loops() if outer.parallel and any(
        r.key == carried.key for r in outer.reductions) and node in outer.loops()), None)
    if threads is not None:
        return f"the threads of {threads.label} update it"
    units = [unit for unit in node.units()
             if any(a.variable.key == carried.key for s in unit.statements for a in s.accesses)]
    if len(units) != 1:
        return f"{len(units)} pieces of the loop's body update it"
    writes = [s.writes[0] for s in units[0].statements if s.writes
              and s.writes[0].variable.key == carried.key]
    targets = {write.text for write in writes}
    if len(targets) != 1:
        return f"{len(targets)} elements are updated"
    outside = {loop.var for unit in units for loop in unit.loops if loop is not node.origin}
    allowed = outside | set(program.nest.parameters)
    for write in writes:
        if not write.affine:
            return f"{write.text} is not affine"
        symbols = set().union(*(s.symbols() for s in write.subscripts if s is not None))
        if node.origin.var in symbols or not symbols <= allowed:
            return f"{write.text} moves with the loop"
    return None
