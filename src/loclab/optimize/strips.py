"""A parallel loop run in strips, its strips in parallel and the loop itself sunk innermost:
outer-loop vectorization, planned beside the plans that run a loop in parallel untiled.

PolyBench symm runs ``j`` in parallel (``temp2`` private), and each iteration walks ``i`` and
``k`` below it: ``C[k, j] += alpha * B[i, j] * A[i, k]`` and ``temp2 += B[k, j] * A[i, k]``
read down columns of ``C`` and ``B``, one cache line per multiply-add, and no loop order of
``i, k`` makes them unit-stride. ``j`` makes them unit-stride, but it is the parallel loop, and
its body is no perfect nest to move it into. Strip-mined, the strips run in parallel, and the
loop over a strip moves below ``i`` (it carries no dependence: any place is legal), is
distributed over ``i``'s body (``temp2`` expanded to a row) and sunk below ``k``:

    for j_strip in prange(...):           # the strips in parallel
        for i in range(M):
            for j in strip: temp2[j] = 0.0
            for k in range(i):
                for j in strip: C[k, j] += ...; temp2[j] += ...   # rows, in vector lanes
            for j in strip: C[i, j] = ...

42.7 ms -> 14.0 ms at M = 500, N = 600 on 2 cores (NumPy 7.2 ms), bit-identical: every
element sees the same operations in the same order. The same holds for column sums
(correlation's means: ``for j: for i: mean[j] += data[i, j]``) and Gram-Schmidt's column
updates. Each variant is proved by the transformer as a whole when planned (the plan is
dropped where a step is refused) and measured beside the plan it extends.
"""

from __future__ import annotations

from dataclasses import replace
from math import ceil

from loclab.nest.ir import Loop, Statement
from loclab.optimize.build import Source, _refusals
from loclab.optimize.locality import array_accesses, order_score, stride
from loclab.optimize.planner import Context, Decision, NestPlan, chain_of, label
from loclab.transform.recipe import Step, make_step

# the plans whose one parallel loop is untiled
LEVELS = ("as written", "reordered")

# Strip sizes tried, longest first: 64 float64 (a 512-byte row piece, 8 lines of a row) down
# to one AVX-512 vector; the longest whose strips the threads share evenly enough is kept
STRIPS = (64, 32, 16, 8)

# The most a thread's share of strips may run past an even split of the iterations
# (symm's 1,200 columns on 16 threads: 19 strips of 64 give some threads 2, where 1.2 is
# the even share; 75 of 16 give at most 5 where 4.7 is)
IMBALANCE = 1.25


def with_strips(source: Source, context: Context, plans: list[NestPlan]) -> list[NestPlan]:
    """``plans`` with, before each plan that runs one loop in parallel untiled above loops
    it would make unit-stride innermost, the same plan running that loop in strips, the
    loop sunk innermost."""
    out: list[NestPlan] = []
    for plan in plans:
        if plan.level in LEVELS and plan.band is None and len(plan.parallel) == 1 \
                and not plan.copies:
            variant = _in_strips(source, context, plan)
            if variant is not None:
                out.append(variant)
        out.append(plan)
    return out


def strip_size(extent: int, threads: int) -> int:
    """The longest strip whose count the threads share within ``IMBALANCE`` of an even
    split of ``extent`` iterations (static scheduling: each thread a run of strips)."""
    for size in STRIPS:
        per_thread = ceil(ceil(extent / size) / threads) * size
        if per_thread <= IMBALANCE * extent / threads:
            return size
    return STRIPS[-1]


def _in_strips(source: Source, context: Context, plan: NestPlan) -> NestPlan | None:
    """The variant of ``plan`` that runs its parallel loop in strips and sinks the loop
    below the loops under it (each loop chain of its body, after distributing it); None
    where no chain gains unit-stride accesses by it, or the transformer refuses a step."""
    loop, why = plan.parallel[0]
    below, bottom = _below(context, plan, loop)
    chains = [chain_of(child) for child in bottom if isinstance(child, Loop)]
    gaining = [chain for chain in chains if _gains(context, loop, below, chain)]
    # no loop chain at the bottom: the loops below are the chain (lu's row update
    # ``for j: for k: A[i, j] -= A[i, k] * A[k, j]`` under its sequential ``i``)
    if not gaining and (chains or not below
                        or not _gains(context, loop, [], below, _statements(bottom))):
        return None
    extent = context.extents.get(label(loop), 1)
    size = strip_size(extent, context.threads)
    name = f"{loop.var}_strip{loop.line}"  # (two nests' strip loops differ by their line)
    steps = list(plan.before)
    steps.append(Decision(make_step("stripmine", label(loop), size, name),
                          f"strips of {size} iterations of {loop.var} "
                          f"({ceil(extent / size)} for {context.threads} threads), each "
                          "strip a thread's"))
    if below:
        steps.append(Decision(make_step("permute", *(label(v) for v in below), label(loop)),
                              f"{loop.var} inside the strip sunk below "
                              f"{', '.join(v.var for v in below)}: it carries no dependence"))
    distributed = len(bottom) >= 2 and bool(gaining)
    if distributed:
        steps.append(Decision(make_step("distribute", label(loop)),
                              f"{loop.var} distributed over its body, so that it can sink "
                              "below the loops there"))
    for chain in gaining:
        inner = chain[-1].body
        line = min(s.line for s in inner if isinstance(s, Statement))
        moved = f"{loop.var}@{line}" if distributed else label(loop)
        accesses = array_accesses(context.model, _statements(inner))
        units = sorted({a.text for a in accesses
                        if stride(a.subscripts, loop.var) == "unit"})
        steps.append(Decision(make_step("permute", *(label(v) for v in chain), moved),
                              f"{loop.var} innermost below "
                              f"{', '.join(v.var for v in chain)}: {', '.join(units)} "
                              "unit-stride, in vector lanes"))
    parallel = make_step("parallel", name)
    try:
        source.transform([*(d.step for d in steps if d.step), *_after(plan), parallel])
    except _refusals():
        return None
    return replace(plan, level="in strips", before=tuple(steps),
                   parallel=((loop, f"{why}; its strips run in parallel"),),
                   names=((label(loop), name),), registers=(), lanes=())


def _below(context: Context, plan: NestPlan, loop: Loop) -> tuple[list[Loop], list[object]]:
    """The loops below ``loop`` in the plan's order (a perfect band: the plan's permute,
    or the chain as written), and the body at the bottom of that band."""
    for decision in plan.before:
        step = decision.step
        named = [str(arg) for arg in step.args] if step is not None else []
        if step is not None and step.name == "permute" and label(loop) in named:
            by_label = {label(v): v for v in context.analysis.nest.loops}
            order = [by_label[name] for name in named if name in by_label]
            if len(order) != len(named):
                return [], []  # a permute naming loops the planner renamed: not handled
            deepest = max(order, key=lambda v: v.depth)
            return order[order.index(loop) + 1:], list(deepest.body)
    chain = chain_of(loop)
    return chain[1:], list(chain[-1].body)


def _gains(context: Context, loop: Loop, below: list[Loop], chain: list[Loop],
           statements: list[Statement] | None = None) -> bool:
    """Whether sinking ``loop`` below ``chain`` scores better locality for the chain's
    statements (a perfect chain ending in statements alone), or for ``statements`` where
    given: the ones at the bottom of a band the plan reordered (a column scan's ``i, j`` run
    as ``j, i``, whose ``i`` holds ``j`` as written)."""
    if statements is None:
        inner = chain[-1].body
        if not inner or any(isinstance(c, Loop) for c in inner):
            return False
        statements = _statements(inner)
    if not statements:
        return False
    accesses = array_accesses(context.model, statements)
    planned = (loop, *below, *chain)
    sunk = (*below, *chain, loop)
    return order_score(accesses, planned, sunk) > order_score(accesses, planned, planned)


def _statements(body: list[object]) -> list[Statement]:
    return [s for s in body if isinstance(s, Statement)]


def _after(plan: NestPlan) -> list[Step]:
    return [d.step for d in plan.after if d.step]

