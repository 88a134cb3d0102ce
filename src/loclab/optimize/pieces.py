"""Plans that distribute a nest into pieces, each piece run in parallel its own way.

A band whose body holds several statements and loops (atax's ``tmp[i] = 0``, its row sum
into ``tmp[i]`` and its column update ``y[j] += A[i, j] * tmp[i]``) may have no loop that
is parallel for all of them without atomic updates (``i`` updates ``y`` from every
iteration). Distributed (``distribute`` of each loop whose body holds several statements or
loops, innermost first, where the transformer proves it: bicg's two sums in one ``j`` loop
come apart too), each piece gets the first of: its outer loop parallel without atomic
updates; its inner loop strip-mined and the strips run in parallel outside the outer loop
(atax's column update: each thread owns a strip of ``y`` and reads each row a strip at a
time); its two loops interchanged and the new outer one parallel; its outer loop parallel
with atomic updates; else it stays sequential. Each choice is probed with the transformer
after the ones before it, so the plan holds as built; measurement then decides between it
and the planner's other plans (``loclab.optimize.planner``).
"""

from __future__ import annotations

from typing import Any

from loclab.nest.ir import Loop
from loclab.optimize.build import Source, _refusals
from loclab.optimize.planner import Context, Decision, NestPlan, label
from loclab.transform.recipe import Step, make_step


# Iterations of a piece's inner loop a strip, where the strips run in parallel with the
# outer loop inside them: 2 KiB of float64 of a row at a time, and of the strip of results
# each thread owns (atax's y), well inside L1
STRIP = 256


def piece_plans(source: Source, context: Context, top: Loop) -> list[NestPlan]:
    """The plan distributing the nest at ``top`` into pieces; none where its top loop runs
    in parallel without atomic updates already, where nothing distributes, or where a piece
    that holds a loop (where the work is) gets no parallel loop without atomic updates."""
    report = context.report(top)
    if report.parallel or (report.remedies and not report.unresolved and not any(
            r.kind in ("generalized reduction", "scan") for r in report.remedies)):
        return []
    steps: list[Step] = []
    for loop in _post_order(top):  # inner loops first: their pieces become the outer's
        if len(loop.body) < 2:
            continue
        step = make_step("distribute", label(loop))
        try:
            source.transform([*steps, step])
        except _refusals():
            continue
        steps.append(step)
    if not steps:
        return []
    program = source.transform(steps).program
    pieces = [node for node in program.loops() if label(node.origin) == label(top)]
    if len(pieces) < 2 or not any(_holds_loop(piece) for piece in pieces):
        return []  # (pieces of statements alone: a histogram's gains nothing)
    before = [Decision(step, "the body holds statements and loops that no one loop runs in "
                             "parallel without atomic updates: each a nest of its own")
              for step in steps]
    after: list[Decision] = []
    sequential: list[str] = []
    for piece in pieces:
        line = min(s.line for unit in piece.units() for s in unit.statements)
        chosen = _piece_choice(source, steps, piece, line)
        if _holds_loop(piece) and (chosen is None or chosen[2]):
            return []  # the work is in the pieces with loops: each must run in parallel
        if chosen is None:
            sequential.append(f"the piece at line {line} stays sequential: no loop of it "
                              "runs in parallel")
            continue
        moves, parallel, _ = chosen
        steps += [d.step for d in (*moves, parallel) if d.step]
        before += moves
        after.append(parallel)
    return [NestPlan(top, "distributed into pieces", tuple(before), None, tuple(after),
                     sequential=tuple(sequential))]


def _post_order(loop: Loop) -> list[Loop]:
    """The loops of the nest at ``loop``, each after the loops inside it."""
    return [*(inner for child in loop.body if isinstance(child, Loop)
              for inner in _post_order(child)), loop]


def _piece_choice(source: Source, done: list[Step], piece: Any, line: int
                  ) -> tuple[list[Decision], Decision, bool] | None:
    """How one piece (its loops named by ``line``, a statement of it) runs in parallel: the
    steps moving its loops, its parallel step and whether that updates arrays atomically,
    the first the transformer proves after ``done`` (atomic updates last); None: no way."""
    name = f"{piece.origin.var}@{line}"
    outer = piece.origin.var
    options: list[tuple[list[Decision], str]] = [([], name)]
    inner = _only_loop(piece)
    if inner is not None:
        var = inner.origin.var
        inner_name, strips = f"{var}@{line}", f"{var}{var}@{line}"
        options.append(([Decision(make_step("stripmine", inner_name, STRIP),
                                  f"strips of {STRIP} iterations of {var}"),
                         Decision(make_step("permute", strips, name, inner_name),
                                  f"each strip a thread's, {outer} inside it: a strip of "
                                  f"the results each, the rows read {STRIP} elements at a "
                                  "time")], strips))
        options.append(([Decision(make_step("permute", inner_name, name),
                                  f"{var} outermost: each of its iterations keeps its own "
                                  f"sum over {outer}")], inner_name))
    atomic: tuple[list[Decision], Decision, bool] | None = None
    for decisions, loop in options:
        step = make_step("parallel", loop)
        try:
            result = source.transform([*done, *(d.step for d in decisions if d.step), step])
        except _refusals():
            continue
        marked = [n for n in result.program.loops() if n.parallel and line in {
            s.line for unit in n.units() for s in unit.statements}]
        updates = sorted({r.name for n in marked for r in n.reductions if not r.scalar})
        if updates:
            atomic = atomic or (decisions, Decision(
                step, f"{loop} runs in parallel with atomic updates of {', '.join(updates)}"),
                True)
            continue
        return decisions, Decision(step, f"{loop} carries no dependence"
                                         + (" in this order" if decisions else "")), False
    return atomic


def _holds_loop(piece: Any) -> bool:
    return any(hasattr(child, "origin") for child in piece.body)


def _only_loop(piece: Any) -> Any:
    """The loop alone in the piece's body (a band of two to interchange), or None."""
    body = piece.body
    return body[0] if len(body) == 1 and hasattr(body[0], "origin") else None
