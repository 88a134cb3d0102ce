"""A nest whose band no GPU grid of two loops holds, rewritten by the transformer before it is
mapped: its scalars expanded, its loops distributed (the transformer orders the pieces by
their dependences, so a piece may move after one written below it), and each piece's band
permuted where that puts two loops outermost that are parallel without atomic updates. The
GPU planner then maps the code the transformer prints, nest by nest, as if the user had
written it.

Why: symm's ``C[k, j] += ...`` for every ``k < i`` beside the sum into ``temp2`` leaves only
``j`` parallel (1,200 threads, each running a million statements in order). Distributed, the
updates of earlier rows run after the rows are computed, as the sum over later rows
``i > k`` of a kernel over ``k, j``: four kernels, each a grid of two loops. The kernels
mapping the user's syntax cannot move a statement after one below it, nor rewrite a
triangle's bounds for another loop order; the transformer does both, and proves them.

The rewritten function is a plan of its own (``plan`` of the printed text); the function's
results are still checked against the user's original at the tuning sizes, and the printed
code's lines are the ones the nests' explanations name.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from typing import Any

from loclab.nest.ir import Loop
from loclab.optimize.build import _refusals
from loclab.optimize.planner import _band_at, label
from loclab.transform.recipe import Step, make_step

REWRITTEN = "{name} (as loclab transform rewrote it)"  # the rewritten code's file name


@dataclass(frozen=True)
class Rewrite:
    """The steps (proved on the user's function) and the Python they print."""

    steps: tuple[Step, ...]
    text: str

    def note(self) -> str:
        return ("nests no grid of two loops held were rewritten first: the kernels map the "
                "code loclab transform --assume-distinct --apply "
                f"\"{'; '.join(map(str, self.steps))}\" prints, and the nests' lines are "
                "its lines")


def rewrite(planned: Any, weak: list[Loop]) -> Rewrite | None:
    """The rewrite of the nests at ``weak`` (top loops of ``planned``'s function whose band
    got fewer than two grid loops) that the transformer proves, where it changes the code;
    else None."""
    source = planned.code
    done: list[Step] = []
    for top in weak:
        done += _pieces(source, planned.context.analysis, top, done) or []
    if not done:
        return None
    printed = replace(source, assume_distinct=True).transform(done, emit="python")
    return Rewrite(tuple(done), printed.source)


def weak_nests(analysis: Any, mappings: Any) -> list[Loop]:
    """The top loops whose band of two loops or more got a grid of fewer than two, with no
    loop split across threads (a row sum a warp shares is as it should be)."""
    out: list[Loop] = []
    for mapping in mappings:
        if len(mapping.grid) < 2 and mapping.split is None and not mapping.host \
                and len(_band_at(analysis, mapping.top)) >= 2 and mapping.top not in out:
            out.append(mapping.top)
    return out


def _pieces(source: Any, analysis: Any, top: Loop, done: list[Step]) -> list[Step] | None:
    """The steps that expand ``top``'s scalars over the loops around all their statements,
    distribute each of its loops that holds a loop or several statements (innermost first),
    and permute each piece whose two outermost loops are not parallel apart; None where
    the transformer refuses the distribution or nothing is gained (one piece)."""
    statements = top.statements()
    steps = []
    for name in sorted({a.variable.name for s in statements for a in s.accesses
                        if a.write and not a.variable.is_array}):
        users = [s for s in statements if any(a.variable.name == name for a in s.accesses)]
        around = [loop for loop in users[0].loops if all(loop in s.loops for s in users)]
        steps.append(make_step("expand", name, *(label(loop) for loop in around)))
    loops = [loop for loop in analysis.nest.loops if loop is top or top in loop.enclosing]
    steps += [make_step("distribute", label(loop)) for loop in
              sorted(loops, key=lambda loop: -loop.depth)
              if len(loop.body) > 1 or any(isinstance(child, Loop) for child in loop.body)]
    try:
        result = source.transform([*done, *steps])
    except _refusals():
        return None
    pieces = [node for node in result.program.body if getattr(node, "origin", None) is not None
              and (node.origin.line, node.origin.var) == (top.line, top.var)]
    if len(pieces) < 2:
        return None
    for piece in pieces:
        permute = _outer_parallel(source, [*done, *steps], piece)
        if permute is None:
            return None
        steps += permute
    return steps


def _outer_parallel(source: Any, done: list[Step], piece: Any) -> list[Step] | None:
    """The permutation of ``piece``'s band (none: as it is) that the transformer proves and
    that puts two loops outermost, each parallel with no reduction; [] for a band of one
    loop; None where no order does."""
    chain = [piece]
    while len(chain[-1].body) == 1 and hasattr(chain[-1].body[0], "origin"):
        chain.append(chain[-1].body[0])
    if len(chain) < 2:
        return []
    line = min(unit.line for unit in piece.units())
    names = [f"{node.origin.var}@{line}" for node in chain]
    for order in itertools.permutations(names):
        permute = [make_step("permute", *order)] if list(order) != names else []
        grid = [make_step("parallel", name) for name in order[:2]]
        try:
            result = source.transform([*done, *permute, *grid])
        except _refusals():
            continue
        if not any(node.parallel and node.reductions for node in result.program.loops()
                   if any(unit.line == line for unit in node.units())):
            return permute
    return None
