"""``parallel(i)``: run a loop's iterations at once (Numba ``prange``, OpenMP ``parallel
for``).

Legal when the loop carries no dependence in the current order (after the recipe's
privatizations), or only dependences of a reduction: every statement inside it that touches
the variable updates it with one associative operator (``s += e``, ``hist[k] += v``). A
scalar reduction is combined per thread; an array element is updated atomically (a
generalized reduction), or, with ``copies=True``, in a copy of the whole array per thread,
the copies combined into the array after the loop (the lectures' privatized generalized
reduction: no atomics, at the cost of a copy per thread to fill and to add up; which is
faster depends on the array against the loop's work, so ``loclab optimize`` measures both).
With ``dynamic=True`` the iterations are handed out one at a time as threads free up (Numba's
``set_parallel_chunksize(1)``, OpenMP's ``schedule(dynamic)``), where an equal run of them per
thread would leave the first threads most of a triangle's work; with ``cyclic=N`` they are
dealt in turn into N slots (iteration k into slot k mod N), the slots split among the
threads as a loop's iterations are (OpenMP's ``schedule(static, 1)``): with N the threads,
each thread takes every N-th row of a triangle. Numba caches a function with ``cyclic`` (it
names no thread count at run time), not one with ``dynamic``. Scheduling only, no legality.
Anything else names the dependence and what would remove it.
"""

from __future__ import annotations

from dataclasses import replace

from loclab.transform.legality import Carried
from loclab.transform.recipe import Step
from loclab.transform.steps import (Applied, Context, IllegalStep, expect_args, find_loops,
                                    reductions_of, require_plain, switches, witness)
from loclab.transform.tree import Chunks, LoopNode, Program, Reduction

NAMES = ("parallel",)


# the most slots ``cyclic=N`` deals a loop's iterations into
MAX_SLOTS = 4096


def apply(program: Program, step: Step, context: Context) -> Applied:
    expect_args(step, 1, 1, "parallel(loop[, copies=True][, dynamic=True][, cyclic=N])")
    slots = _slots(step)
    options = switches(step, ("copies", "dynamic"), valued=("cyclic",))
    copies, dynamic = options["copies"], options["dynamic"]
    if sum([copies, dynamic, slots > 0]) > 1:
        raise step.error("copies=True, dynamic=True and cyclic=N each split the iterations "
                         "their own way: give one")
    new = program.clone()
    nodes = find_loops(new, step.args[0], step)
    if copies:
        require_plain(new, nodes, step)
    marked, refused, reason = mark_parallel(new, nodes, step, context)
    if copies:
        reason = _with_copies(new, marked, step)
    if dynamic:
        for node in marked:
            node.dynamic = True
        reason += "; its iterations handed out one at a time as threads free up"
    if slots:
        for node in marked:
            node.cyclic = slots
        reason += f"; its iterations dealt in turn into {slots} slots, a run of slots a thread"
    if refused:  # copies of one loop (distributed): the others stay sequential
        lines = ", ".join(str(_first_line(n)) for n in marked)
        reason += f" in the loop{'s' if len(marked) > 1 else ''} holding line {lines}; " \
                  f"the other{'s' if len(refused) > 1 else ''} stay sequential: " \
                  + "; ".join(text for text, _, _ in refused)
    return Applied(new, reason)


def _slots(step: Step) -> int:
    """``cyclic=N``'s N (0 where not given): a whole number of slots, 1 to MAX_SLOTS."""
    for key, value in step.keywords:
        if str(key) == "cyclic":
            if isinstance(value, bool) or not isinstance(value, int) \
                    or not 1 <= value <= MAX_SLOTS:
                raise step.error(f"cyclic={value}: give the number of slots, 1 to "
                                 f"{MAX_SLOTS:,} (the threads, for a triangle's rows)")
            return value
    return 0


def mark_parallel(program: Program, nodes: list[LoopNode], step: Step, context: Context
                  ) -> tuple[list[LoopNode], list[tuple[str, LoopNode, Carried]], str]:
    """Mark each of ``nodes`` that carries nothing but reductions parallel (with what it
    combines): the marked loops, the refused ones (why, the loop, what it carries) and why
    the marked are legal. None marked is an IllegalStep naming the first refusal's
    dependence (``parallel``; the GPU's ``grid`` and ``block`` map loops the same way)."""
    checker = context.checker(program)
    reductions: dict[str, Reduction] = {}
    refused: list[tuple[str, LoopNode, Carried]] = []
    marked: list[LoopNode] = []
    for node in nodes:
        carried = checker.carried(node)
        blocking = [c for c in carried if c.reduction is None]
        if blocking:
            refused.append((f"{node.name} carries {_listed(blocking[0])}"
                            f"{_remedy(program, node, blocking[0], context)}", node,
                            blocking[0]))
            continue
        node.reductions = reductions_of(carried)
        reductions.update({r.key: r for r in node.reductions})
        marked.append(node)
    if not marked:
        text, node, carried = refused[0]
        raise IllegalStep(f"{step} is illegal: {text}", carried=witness(program, node, carried))
    for node in marked:
        node.parallel = True
    name = marked[0].name
    reason = f"{name} carries no dependence"
    if reductions:
        combined = ", ".join(f"{'reduction' if r.scalar else 'atomic updates'} {r.op} on "
                             f"{r.name}" for r in reductions.values())
        reason = f"{name} carries only reductions ({combined})"
    return marked, refused, reason


def _with_copies(program: Program, marked: list[LoopNode], step: Step) -> str:
    """Give each marked loop's reductions into arrays a copy per thread (names for the
    copies and the chunks); why that is legal."""
    arrays = sorted({r.name for node in marked for r in node.reductions if not r.scalar})
    if not arrays:
        raise step.error(f"{marked[0].name} updates no array by a reduction: there is "
                         "nothing to copy (drop copies=True)")
    for node in marked:
        ranks = [program.rank(r.key) for r in node.reductions if not r.scalar]
        if not ranks:
            continue
        node.reductions = tuple(r if r.scalar else replace(
            r, copy=program.fresh_name(f"{r.name}_copies")) for r in node.reductions)
        node.chunks = Chunks(program.fresh_name(f"{node.name}_chunk"),
                             program.fresh_name(f"{node.name}_chunks"),
                             program.fresh_name(f"{node.name}_index"),
                             tuple(program.fresh_name(f"{node.name}_e{d}")
                                   for d in range(max(ranks))))
    combined = ", ".join(f"{r.op} on {r.name}" for r in marked[0].reductions if r.copy)
    return (f"{marked[0].name} carries only reductions: {combined} in a copy per thread, "
            "the copies combined after the loop"
            + "".join(f"; reduction {r.op} on {r.name}" for r in marked[0].reductions
                      if r.scalar))


def _first_line(node: LoopNode) -> int:
    return min(s.line for u in node.units() for s in u.statements)


def _listed(carried: Carried) -> str:
    if not carried.dependences:
        return f"a dependence on {carried.name}"
    d = carried.dependences[0]
    more = len(carried.dependences) - 1
    return (f"{d.id} {d.source}->{d.sink} {d.kind} on {d.array} [{','.join(d.direction)}]"
            + (f" (and {more} more on {carried.name})" if more else ""))


def _remedy(program: Program, node: LoopNode, carried: Carried, context: Context) -> str:
    remedies = context.remedies
    loop = node.origin
    if program.privates_near(carried.key, loop):
        return ""
    if remedies.privatizable(loop, carried.key):
        if not remedies.live_out(loop, carried.key):
            return f": privatize({carried.name}) first"
        if any(v.key == carried.key and v.is_array for v in program.nest.variables):
            return (f": privatize({carried.name}, {node.name}) first, where its last "
                    "iteration writes all that any iteration writes (its copy then goes "
                    "back)")
    dependences = list(carried.dependences)
    if dependences and all(d.kind == "WAR" for d in dependences) \
            and remedies.copy(loop, carried.key, dependences) is not None:
        return f": copy({carried.name}, {node.name}) first"
    if remedies.scan(loop, carried.key, dependences) is not None:
        return " (a scan: parallel only as a prefix scan, not as a DOALL loop)"
    return ""
