"""Reductions into arrays: atomic updates, or a copy of the array per thread?

A loop that carries only ``y[f(j)] += e`` runs in parallel either way (the lectures'
generalized reductions). Atomics cost every update (a locked add, and contention where two
threads hit one element); copies cost memory and a combine after the loop (each thread's copy
added into the array: threads x elements). So the model offers copies where each thread's
copy stays in its L2 while the loop updates it and the combine is small against the loop's
updates, and says so with the numbers; where the array's size cannot be told (a histogram's
bins come from the data), copies are offered after atomics; where a copy outgrows the L2 or
the combine outweighs the work, not at all. The search (``loclab.optimize.search``) then
measures what was offered: the model orders and prunes, the clock decides.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from loclab.nest.ir import Loop
from loclab.optimize.locality import coefficient
from loclab.optimize.planner import Context, NestPlan, label, parallel_reason


@dataclass(frozen=True)
class CopiesVerdict:
    """Whether to offer copies for a parallel loop's reductions into arrays: ``favoured``
    (before atomics), offered after them (``favoured`` False), and why."""

    favoured: bool
    reason: str


def with_copies(context: Context, plans: list[NestPlan]) -> list[NestPlan]:
    """``plans`` with, beside each whose parallel loops reduce into arrays, the same plan with
    a copy per thread: before it where the model favours the copies, after it where it
    cannot tell, not at all where they would not fit."""
    out: list[NestPlan] = []
    for plan in plans:
        verdicts = {id(loop): copies_verdict(context, loop) for loop, _ in plan.parallel}
        if not any(verdicts.values()):
            out.append(plan)
            continue
        variant = replace(plan, copies=tuple(
            loop for loop, _ in plan.parallel if verdicts[id(loop)]), parallel=tuple(
            (loop, _reason(context, loop, verdicts[id(loop)]) or why)
            for loop, why in plan.parallel))
        favoured = all(v.favoured for v in verdicts.values() if v is not None)
        out += [variant, plan] if favoured else [plan, variant]
    return out


def _reason(context: Context, loop: Loop, verdict: CopiesVerdict | None) -> str | None:
    """Why the loop may run in parallel with copies: its other remedies, then the copies
    where the plan as written says atomic updates."""
    if verdict is None:
        return None
    report = context.report(loop)
    others = [r for r in report.remedies if r.kind != "generalized reduction"]
    prefix = parallel_reason(replace(report, remedies=others)) if others \
        else f"{report.var} is parallel once"
    return f"{prefix}{'; ' if others else ' '}{verdict.reason}"


def copies_verdict(context: Context, loop: Loop) -> CopiesVerdict | None:
    """The model's verdict on copies for ``loop`` (None: it reduces into no array, or copies
    would not fit or would cost more than they save)."""
    arrays = [r.variable for r in context.report(loop).remedies
              if r.kind == "generalized reduction"]
    if not arrays:
        return None
    work = max((_instances(context, loop, s.loops) for s in loop.statements()), default=1)
    elements = [_elements(context, loop, name) for name in arrays]
    named = ", ".join(arrays)
    if any(count is None for count in elements):
        return CopiesVerdict(False, f"{named} in a copy per thread, combined after the loop "
                                    "(its size depends on the data: measured after atomics)")
    total = sum(count for count in elements if count is not None)
    copy_bytes = total * context.element_bytes
    combine = context.threads * total
    if copy_bytes > context.l2_bytes or combine > work:
        return None
    return CopiesVerdict(True, f"{named} in a copy per thread ({_bytes(copy_bytes)} each, "
                               f"within the L2's {_bytes(context.l2_bytes)}), combined after "
                               f"the loop: {combine:,} additions against {work:,} updates")


def _instances(context: Context, loop: Loop, loops: tuple[Loop, ...]) -> int:
    """How often a statement inside ``loop`` runs in all of ``loop``'s iterations."""
    inner = loops[loops.index(loop):] if loop in loops else (loop,)
    return math.prod(_count(context, l) for l in inner)


def _count(context: Context, loop: Loop) -> int:
    return context.extents.get(label(loop), context.extents.get(loop.var, 1))


def _elements(context: Context, loop: Loop, name: str) -> int | None:
    """How many elements of ``name`` the loop's updates can reach: the product of the
    ranges of their affine subscripts over the loops inside ``loop`` (None: a subscript
    that is not affine, such as a histogram's key)."""
    largest = 0
    for statement in loop.statements():
        for access in statement.accesses:
            if access.variable.name != name or not access.write:
                continue
            subscripts = context.model.subscripts.get(id(access)) or access.subscripts
            if any(s is None or not s.is_affine() for s in subscripts):
                return None
            inner = [l for l in statement.loops if l is not loop and loop in l.enclosing]
            count = 1
            for subscript in subscripts:
                steps = [coefficient(subscript, l.var) for l in inner]
                if any(step is None for step in steps):
                    return None
                count *= 1 + sum(abs(step or 0) * (_count(context, l) - 1)
                                 for step, l in zip(steps, inner))
            largest = max(largest, count)
    return largest or None


def _bytes(count: int) -> str:
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= size:
            return f"{count / size:.3g} {unit}"
    return f"{count} B"
