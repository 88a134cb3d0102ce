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
import time
from dataclasses import dataclass, replace
from typing import Any

from loclab.nest.ir import Loop
from loclab.optimize.build import _refusals
from loclab.optimize.planner import _band_at, label
from loclab.transform.recipe import Step, make_step

REWRITTEN = "{name} (as loclab transform rewrote it)"  # the rewritten code's file name
# the most a rewrite may spend proving orders (each a transform of the whole function: a
# second for a 4-deep window of 8 pieces, which tried 56 of them in 70 s); past it the nests
# are mapped as the user wrote them
REWRITE_SECONDS = 20.0


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
    deadline = time.perf_counter() + REWRITE_SECONDS
    for top in weak:
        done += _pieces(source, planned.context.analysis, top, done, deadline) or []
    if not done:
        return None
    printed = replace(source, assume_distinct=True).transform(done, emit="python")
    return Rewrite(tuple(done), printed.source)


def weak_nests(analysis: Any, mappings: Any) -> list[Loop]:
    """The top loops whose band of two loops or more got a grid of fewer than two, or whose
    grid no access is unit-stride along while loops inside it are left (a batched product
    written ``Y[b, i, o] = 0`` and ``Y[b, i, o] += X[b, i, k] * W[k, o]`` over ``k, o``:
    threads over ``b, i`` walk rows of ``Y`` each), with no loop split across threads (a
    row sum a warp shares is as it should be)."""
    out: list[Loop] = []
    for mapping in mappings:
        if mapping.split is not None or mapping.host or mapping.top in out:
            continue
        few = len(mapping.grid) < 2 and len(_band_at(analysis, mapping.top)) >= 2
        inside = [loop for loop in analysis.nest.loops
                  if mapping.top in loop.enclosing and loop not in mapping.grid]
        if few or (mapping.grid and not mapping.coalesced and inside):
            out.append(mapping.top)
    return out


def _pieces(source: Any, analysis: Any, top: Loop, done: list[Step],
            deadline: float) -> list[Step] | None:
    """The steps that expand ``top``'s scalars over the loops around all their statements,
    distribute each of its loops that holds a loop or several statements (innermost first),
    and permute each piece whose two outermost loops are not parallel apart; None where
    the transformer refuses the distribution or nothing is gained (one piece), or where
    proving the orders would run past ``deadline`` (``time.perf_counter``'s)."""
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
        permute = _outer_parallel(source, [*done, *steps], piece, deadline)
        if permute is None:
            return None
        steps += permute
    return steps


def _outer_parallel(source: Any, done: list[Step], piece: Any,
                    deadline: float) -> list[Step] | None:
    """The permutation of ``piece``'s band (none: as it is) that the transformer proves and
    that puts the most loops outermost (three at most, two at least), each parallel with no
    reduction, the first such order on a tie; [] for a band of one loop; None where no
    order does, or none before ``deadline``. The loops after the outermost ones keep their
    order. (Three: a batched product's ``b, i, k, o`` goes to ``b, i, o, k``, whose grid
    reaches ``o``, along which its rows are unit-stride.)"""
    chain = [piece]
    while len(chain[-1].body) == 1 and hasattr(chain[-1].body[0], "origin"):
        chain.append(chain[-1].body[0])
    if len(chain) < 2:
        return []
    line = min(unit.line for unit in piece.units())
    names = [f"{node.origin.var}@{line}" for node in chain]
    for depth in range(min(3, len(names)), 1, -1):
        for outer in itertools.permutations(names, depth):
            if time.perf_counter() > deadline:
                return None
            order = (*outer, *(n for n in names if n not in outer))
            permute = [make_step("permute", *order)] if list(order) != names else []
            if _parallel_apart(source, [*done, *permute], order[:depth], line):
                return permute
    return None


def _parallel_apart(source: Any, done: list[Step], loops: tuple[str, ...], line: int) -> bool:
    """Whether the transformer proves ``loops`` parallel after ``done`` with no reduction
    among the piece's loops (at ``line``)."""
    try:
        result = source.transform([*done, *(make_step("parallel", name) for name in loops)])
    except _refusals():
        return False
    return not any(node.parallel and node.reductions for node in result.program.loops()
                   if any(unit.line == line for unit in node.units()))
