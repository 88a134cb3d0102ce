"""``unroll(j, 4)`` and ``unroll(i, 4, jam=True)``: copies of a loop's body per iteration.

Unrolling ``j`` by 4 makes ``j`` advance by 4 and its body four copies, for ``j``, ``j + 1``,
``j + 2`` and ``j + 3``, followed by a remainder loop for the iterations left when the trip
count is not a multiple of 4. A loop of at most 4 iterations (inside a tile of 4) needs no
remainder: each copy runs where its iteration exists (a guard on the last tile), which keeps
every copy inside the loops around it (a GPU thread's register tile). Unroll-and-jam of an outer loop puts the copies innermost
instead: the loops inside run once for four iterations of ``i``, each statement four times in
a row (the slides' register tiling as a sequence of steps). Each copy's private variables get
names of their own (``c_0`` ... ``c_3``): scalar replacement, values kept in registers.

Plain unrolling keeps the order of every instance (always legal); jamming reorders them and
is legal when every dependence keeps its source first.
"""

from __future__ import annotations

from dataclasses import replace

from loclab.transform.recipe import Step
from loclab.transform.schedule import Schedule
from loclab.transform.steps import (Applied, Context, expect_args, find_loops,
                                    replace_node, require_plain, size_argument, switch)
from loclab.transform.tree import LoopNode, Node, Program, Unit

NAMES = ("unroll",)
MAX_FACTOR = 64  # past this, the copies would not fit in registers anyway
MAX_COPIES = 128  # statements (copies included) an unrolled function may hold


def apply(program: Program, step: Step, context: Context) -> Applied:
    expect_args(step, 2, 2, "unroll(loop, factor[, jam=True])")
    jam = switch(step, "jam")
    new = program.clone()
    # A loop that an earlier unroll copied (its group and its remainder) is unrolled in
    # every copy: register tiling unrolls and jams two loops, the second inside both.
    factor = size_argument(step.args[1], step, "unroll factor", MAX_FACTOR)
    nodes = find_loops(new, step.args[0], step)
    for node in nodes:
        require_plain(new, list(node.loops()), step)
        if node.tile:
            raise step.error(f"{node.label} runs over tiles: unroll the loop over "
                             f"{node.origin.var} inside it")
        trips = trip_count(node)
        if trips is not None and factor > trips:
            raise step.error(f"bad unroll factor {factor}: {node.label} runs only {trips} "
                             "iterations")
    _check_copies(new, nodes, factor, step)
    if factor == 1:
        return Applied(new, "unrolling by 1 changes nothing")
    for node in nodes:
        trips = trip_count(node)
        _unroll(new, node, factor, jam, guarded=trips is not None and trips <= factor)
    name = nodes[0].name
    if jam:
        context.require_order(new, step, nodes)
        return Applied(new, f"unroll-and-jam of {name} by {factor}: every dependence "
                            "keeps its source first with the copies innermost")
    return Applied(new, f"unrolling {name} by {factor} keeps every iteration in its "
                        "place")


def trip_count(node: LoopNode) -> int | None:
    """The most iterations a loop runs, where its bounds are constants or a tile bounds it
    (None: it depends on the sizes)."""
    loop = node.origin
    start, stop = (None if bound is None else bound.constant_value()
                   for bound in (loop.start, loop.stop))
    counts = [len(range(start, stop, loop.step))] if start is not None \
        and stop is not None else []
    if node.within is not None:
        counts.append(node.within.tile)
    return min(counts, default=None)


def _check_copies(program: Program, nodes: list[LoopNode], factor: int, step: Step) -> None:
    """Refuse an unrolling after which the function would hold more than MAX_COPIES
    statements: generating and checking the code grows faster than their number (and
    unrollings multiply: 8 by 8 holds 81 copies of a statement, with the remainders)."""
    units = len(program.units())
    copied = sum(1 for node in nodes for _ in node.units())
    after = units + factor * copied
    if after > MAX_COPIES:
        raise step.error(f"unrolling by {factor} would turn {units} statements into "
                         f"{after}: loclab makes at most {MAX_COPIES} (unroll by less)")


def _unroll(program: Program, node: LoopNode, factor: int, jam: bool,
            guarded: bool = False) -> None:
    """Replace ``node`` in ``program`` by a loop over groups of ``factor`` iterations (the
    copies of its body, jammed innermost or one after another) and a remainder loop; or,
    ``guarded`` (the loop runs at most ``factor`` iterations), by the group alone, each copy
    restricted to where its iteration exists."""
    schedule = Schedule(program)
    restriction = {id(u): _restrictions(schedule, node, u, factor, guarded)
                   for u in node.units()}
    group = LoopNode(node.name, node.origin, [], tile=factor, within=node.within,
                     parallel=node.parallel, reductions=node.reductions, copies=factor)
    remainder = _copy_tree(node, lambda u: [_restricted(u, restriction[id(u)][-1], None)])
    if jam:
        group.body = _copy_body(node.body, lambda u: [
            _restricted(u, restriction[id(u)][r], (node.origin.id, r)) for r in range(factor)],
            node, group)
    else:
        group.body = [child for r in range(factor) for child in _copy_body(
            node.body, lambda u, r=r: [_restricted(u, restriction[id(u)][r],
                                                   (node.origin.id, r))], node, group)]
    replace_node(program, node, [group] if guarded else [group, remainder])


def _restrictions(schedule: Schedule, node: LoopNode, unit: Unit, factor: int,
                  guarded: bool = False) -> list[str]:
    """isl constraints selecting copy 0, 1, ... of a unit, and (last) the remainder; a
    ``guarded`` copy is every instance of its place in a group, whole or not."""
    step = abs(node.origin.step)
    width = factor * step
    x = schedule.coordinate(node, unit)
    probe = LoopNode(node.name, node.origin, tile=factor, within=node.within)
    base = schedule.lower(probe, unit)  # where groups of the factor start
    start = f"(({base}) + {width}*floor(({x} - ({base}))/{width}))"
    whole = " and ".join(f"{start} + {(factor - 1) * step} < {limit}"
                         for limit in schedule.upper(node, unit, factor))
    if guarded:
        return [f"({x} = {start} + {r * step})" for r in range(factor)] + ["false"]
    copies = [f"({x} = {start} + {r * step} and {whole})" for r in range(factor)]
    return copies + [f"(not ({whole}))"]


def _restricted(unit: Unit, condition: str, copy: tuple[str, int] | None) -> Unit:
    return replace(unit, restriction=unit.restriction + (condition,),
                   copy=unit.copy + ((copy,) if copy is not None else ()))


def _copy_body(body: list[Node], units, old: LoopNode, new: LoopNode) -> list[Node]:
    """A copy of a loop body, each unit replaced by ``units(unit)``; loops inside that were
    bounded by ``old`` are bounded by ``new``."""
    out: list[Node] = []
    mapping: dict[int, LoopNode] = {id(old): new}
    for child in body:
        if isinstance(child, Unit):
            out += units(child)
        else:
            out.append(_copy_tree(child, units, mapping))
    return out


def _copy_tree(node: LoopNode, units, mapping: dict[int, LoopNode] | None = None) -> LoopNode:
    mapping = {} if mapping is None else mapping
    copy = replace(node, body=[], within=mapping.get(id(node.within), node.within)
                   if node.within is not None else None)
    mapping[id(node)] = copy
    for child in node.body:
        if isinstance(child, Unit):
            copy.body += units(child)
        else:
            copy.body.append(_copy_tree(child, units, mapping))
    return copy
