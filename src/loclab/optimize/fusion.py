"""Producer/consumer fusion (issue 33): two adjacent nests of the function, each parallel at
its outer loop, the second reading element for element what the first writes (``tmp[i] =
...`` then ``... = tmp[i]``), run as one parallel loop.

Apart, the first nest writes its array out to memory and the second reads it back: one pass
over the array more than needed once it is past the caches. Fused, each iteration reads what
it has just written. The plan is offered only where every dependence between the two nests
joins instances of the same iteration (the outer loops' values equal), so that the fused
loop stays parallel; a consumer that reads a neighbour (``tmp[i + 1]``) would need a shift,
and the shifted loop would carry a dependence. The plan takes the second nest with it
(``NestPlan.absorbs``): ``build.choose`` records that nest as fused and plans nothing for
it. The transformer proves both steps; the search measures the plan against the nests apart.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from loclab.nest.ir import Loop
from loclab.model.cache import format_bytes
from loclab.optimize.planner import Context, Decision, NestPlan, label
from loclab.optimize.timetile import nest_deltas
from loclab.transform.recipe import make_step

if TYPE_CHECKING:
    import islpy as isl


def fused_plans(context: Context, tops: list[Loop]) -> dict[int, NestPlan]:
    """The fused plan of each top loop (by id) whose next sibling consumes what it
    produces."""
    body = context.analysis.nest.body
    out: dict[int, NestPlan] = {}
    for first, second in zip(tops, tops[1:]):
        index = next(k for k, node in enumerate(body) if node is first)
        if index + 1 < len(body) and body[index + 1] is second:
            plan = _fused(context, first, second)
            if plan is not None:
                out[id(first)] = plan
    return out


def _fused(context: Context, first: Loop, second: Loop) -> NestPlan | None:
    if any(loop.step != 1 or loop.stride is not None or not context.report(loop).parallel
           for loop in (first, second)):
        return None
    shared = _produced(first, second)
    if not shared:
        return None
    delta = nest_deltas(context, None, (first, second)).get((0, 1))
    if delta is None or not _same_iteration(delta):
        return None
    passed = sum(_elements(context, first, key) for key in shared) * context.element_bytes
    names = ", ".join(sorted(shared.values()))
    fuse = Decision(make_step("fuse", label(first), label(second)),
                    f"the nest at line {second.line} reads {names} element for element as "
                    f"this one writes it: in one loop, its {format_bytes(passed)} are read "
                    "back from the cache, not from memory")
    why = (f"{first.var} carries no dependence, and the nest fused into it reads only what "
           "the same iteration wrote")
    return NestPlan(first, "fused", (fuse,), parallel=((first, why),), absorbs=second)


def _produced(first: Loop, second: Loop) -> dict[str, str]:
    """The arrays the first nest writes and the second reads (key: name)."""
    written = {a.variable.key: a.variable.name for s in first.statements() for a in s.accesses
               if a.write and a.variable.is_array}
    return {a.variable.key: a.variable.name for s in second.statements() for a in s.accesses
            if not a.write and a.variable.key in written}


def _same_iteration(delta: "isl.Set") -> bool:
    """Whether every dependence joins instances of one value of the outer loops."""
    import islpy as isl

    apart = isl.Set("{ [dt, di] : di < 0 or di > 0 }").align_params(delta.get_space())
    return delta.intersect(apart).is_empty()


def _elements(context: Context, nest: Loop, key: str) -> int:
    """How many elements of the array the nest writes, at the tuning sizes: for each write,
    the iterations of the loops its subscripts name (not those of a sum around it)."""
    most = 0
    for statement in nest.statements():
        for access in statement.accesses:
            if access.write and access.variable.key == key:
                named = {name for sub in access.subscripts if sub is not None
                         for name in sub.symbols()}
                count = 1
                for loop in statement.loops:
                    if loop.var in named:
                        count *= max(context.extents.get(label(loop), 1), 1)
                most = max(most, count)
    return most
