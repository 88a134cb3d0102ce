"""Where private storage lives in the emitted code, and what expanded arrays look like.

A variable private to each iteration of a loop ``P`` (privatized, or declared or allocated
in ``P``'s body) needs, in the emitted code, one location per iteration of ``P`` and of the
loops around it. It gets one when some loop of the new tree fixes all of them for every
statement that touches the variable: a variable loop over each of them (or a copy of an
unrolled one) around those statements, the innermost of which they all share. The
declaration (C) or allocation (an array) goes at the start of that loop's body, and each copy
of an unroll-and-jam of those loops gets a name of its own (``c_0``, ``c_1``): the slides'
scalar replacement. Where no loop fixes them (a distribution split its uses over two loops,
an interchange moved an outer loop inside), a single location would be shared by iterations
that now interleave, and the recipe is refused: ``expand(x)`` gives each iteration its
element instead.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING
from dataclasses import dataclass, replace

from loclab.errors import LoclabError
from loclab.nest.ir import Loop
from loclab.transform.codegen import Value, parameter_value
from loclab.transform.schedule import Schedule
from loclab.transform.tree import LoopNode, Private, Program, Unit

if TYPE_CHECKING:
    import islpy as isl


class StorageError(LoclabError):
    """Private storage the new loop tree cannot give (the recipe is refused, exit 1)."""

    exit_code = 1


@dataclass(frozen=True)
class Placement:
    private: Private
    nodes: tuple[LoopNode, ...]  # declared at the start of these loops' bodies (none: the
    # function's); each holds the uses of a different set of iterations
    copies: tuple[str, ...]  # ids of the unrolled loops whose copies get names of their own
    # copied back: the values of the loops around (outermost first) at the last iteration
    last: tuple[Value, ...] = ()


@dataclass(frozen=True)
class Expansion:
    """An expanded variable's array: per expanding loop, the smallest value and the extent."""

    private: Private
    offsets: tuple[Value, ...]
    extents: tuple[Value, ...]


def touching(program: Program, key: str) -> list[Unit]:
    return [u for u in program.units()
            if any(a.variable.key == key for s in u.statements for a in s.accesses)]


def placements(program: Program, schedule: Schedule) -> dict[str, Placement]:
    """Where each private (or local) variable is declared; refuses what cannot be."""
    out: dict[str, Placement] = {}
    for key, private in program.private.items():
        if private.kind == "expand":
            continue
        units = [u for u in touching(program, private.variable.key)
                 if private.loop in u.loops]
        if not units:
            continue
        placement = _place(program, private, units)
        if private.last and (placement.copies or len(placement.nodes) != 1):
            raise StorageError(
                f"{private.variable.name} is private to each iteration of "
                f"{private.loop.var}@{private.loop.line} and copied back from the last one, "
                "but its uses are now in several loops or unrolled copies: privatize it "
                "after unrolling no loop around it, or leave it shared")
        out[key] = replace(placement, last=tuple(parameter_value(schedule, text)
                                                 for text in private.last))
    return out


def _place(program: Program, private: Private, units: list[Unit]) -> Placement:
    """The loops whose every iteration holds the uses of one iteration of the private
    variable's loop (and of the loops around it), and the unrolled ones among them."""
    copies: set[str] = set()
    name, loop = private.variable.name, private.loop
    groups: dict[int, tuple[LoopNode, list[Unit]]] = {}
    for unit in units:
        path = program.path(unit)
        nodes: list[LoopNode] = []
        for outer in loop.enclosing:
            node = _fixing(path, outer)
            if node is None:
                raise StorageError(
                    f"{name} is private to each iteration of {loop.var}@{loop.line}, but the "
                    f"new loops no longer keep one iteration of {outer.var}@{outer.line} "
                    f"together around its use at line {unit.line}: expand({name}) gives each "
                    "iteration an element of its own")
            nodes.append(node)
            if node.copies:
                copies.add(node.origin.id)
        deepest = max(nodes, key=path.index)
        groups.setdefault(id(deepest), (deepest, []))[1].append(unit)
    placed = list(groups.values())
    for (_, first), (_, second) in itertools.combinations(placed, 2):
        if _share_iterations(program, loop, first, second):
            raise StorageError(
                f"{name} is private to each iteration of {loop.var}@{loop.line}, but its uses "
                f"at lines {first[0].line} and {second[0].line} are now in different loops: "
                f"expand({name}) gives each iteration an element of its own")
    return Placement(private, tuple(node for node, _ in placed), tuple(sorted(copies)))


def _share_iterations(program: Program, loop: Loop, first: list[Unit],
                      second: list[Unit]) -> bool:
    """Whether some iteration of ``loop`` (with the loops around it) runs units of both."""
    import islpy as isl

    def iterations(units: list[Unit]) -> "isl.Set":
        model = program.model
        depth = loop.depth + 1
        out = isl.Set(f"{model.header}{{ [{', '.join(f'y{k}' for k in range(depth))}] : "
                      "1 = 0 }")
        for unit in units:
            coords = [f"x{k}" for k in range(len(unit.loops))]
            condition = " and ".join([model.constraints(unit.first, unit.loops, unit.guards,
                                                        "x")] + list(unit.restriction))
            equal = " and ".join(f"y{k} = x{k}" for k in range(depth))
            out = out.union(isl.Set(
                f"{model.header}{{ [{', '.join(f'y{k}' for k in range(depth))}] : exists "
                f"({', '.join(coords)} : {equal} and {condition}) }}"))
        return out

    return not iterations(first).intersect(iterations(second)).is_empty()


def _fixing(path: list[LoopNode], loop: Loop) -> LoopNode | None:
    """The loop around the unit that fixes one iteration of ``loop``: a variable loop over
    it, or an unrolled one of which the unit is a copy."""
    for node in reversed(path):
        if node.origin is loop and (node.tile == 0 or node.copies):
            return node
    return None


def copy_suffix(unit: Unit, placement: Placement) -> str:
    """``_1`` (or ``_1_0``) for a copy of the unrolled loops that give names per copy."""
    indices = [str(index) for loop_id, index in unit.copy if loop_id in placement.copies]
    return "".join(f"_{k}" for k in indices)


def expansions(program: Program, schedule: Schedule) -> dict[str, Expansion]:
    """The shape of every expanded variable's array: an element per value of each expanding
    loop's variable that a statement touching it runs with."""
    import islpy as isl

    out: dict[str, Expansion] = {}
    model = program.model
    for key, private in program.private.items():
        if private.kind != "expand":
            continue
        offsets: list[Value] = []
        extents: list[Value] = []
        statements = {id(s): s for u in touching(program, private.variable.key)
                      for s in u.statements
                      if private.loop in s.loops}
        for loop in private.expand_by:
            values = isl.Set(f"{model.header}{{ [v] : 1 = 0 }}")
            for statement in statements.values():
                depth = statement.loops.index(loop)
                coords = ", ".join(f"x{k}" for k in range(len(statement.loops)))
                values = values.union(isl.Set(
                    f"{model.header}{{ [v] : exists ({coords} : v = x{depth} and "
                    f"{model.domain(statement, 'x')}) }}"))
            low = single(values.dim_min(0), model.header)
            high = values.dim_max(0)
            extent = single(high.sub(values.dim_min(0)).add_constant_val(
                isl.Val.int_from_si(values.get_ctx(), 1)), model.header)
            offsets.append(parameter_value(schedule, str(low)))
            extents.append(parameter_value(schedule, str(extent)))
        out[key] = Expansion(private, tuple(offsets), tuple(extents))
    return out


def single(function: "isl.PwAff", header: str) -> "isl.PwAff":
    """A function of the sizes for every size: its one expression where it has one (the
    sizes where it is undefined run no statement that uses it), else 0 there."""
    import islpy as isl

    pieces = function.get_pieces()
    if len(pieces) == 1:
        return isl.PwAff.from_aff(pieces[0][1])
    rest = isl.Set(f"{header}{{ : }}").subtract(function.domain())
    zero = isl.PwAff(f"{header}{{ [(0)] }}").intersect_domain(rest)
    return zero if function.is_empty() else function.union_max(zero)
