"""The time of every statement instance under a new loop tree, as isl relations.

A unit's instance is a point ``x`` of its original loops' iteration space. Its time is the
"2d+1" vector of the tree: the position of each node among its siblings, interleaved with the
value each loop around it takes at ``x``. A loop's value is written in *order coordinates*
(``x`` for a loop counting up, ``-x`` for one counting down), so that time always grows:

* a variable loop takes ``x`` itself;
* a tile loop of ``T`` iterations takes the first value of ``x``'s tile:
  ``b + T*s*floor((x - b) / (T*s))``, where ``s`` is the step and ``b`` the first value of
  the range being cut (the loop's lower bound, or the enclosing tile's first value; 0 where
  the lower bound moves with a loop around it: a triangle's tiles line up across its rows).

Codegen reads one relation per unit (``U3[x] -> [t]``); legality reads one per statement of
each unit (``S5u3[x] -> [t]``, the unit's time followed by the statement's place inside a
block kept as written), and ``restrict`` maps the analysis' instances (``S5[x]``) onto the
copies that run them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING

from loclab.nest.ir import Loop, Node as IrNode, Statement
from loclab.transform.tree import LoopNode, Node, Program, Unit

if TYPE_CHECKING:
    import islpy as isl

POSITION_STRIDE = 2  # children sit at odd positions: a marker fits before any of them


@dataclass(eq=False)
class Placed:
    """A unit with where it is: the loops around it and its time (isl text per dimension)."""

    unit: Unit
    number: int
    path: list[LoopNode]
    positions: list[int]  # position among siblings at each level (len(path) + 1 of them)
    times: list[str]  # the 2d+1 time, isl expressions in x0, x1, ...

    @property
    def name(self) -> str:
        return f"U{self.number}"

    def coords(self, role: str = "x") -> str:
        return ", ".join(f"{role}{k}" for k in range(len(self.unit.loops)))


class Schedule:
    """Every unit of a program, placed; relations for legality and codegen."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self.model = program.model
        self.placed: list[Placed] = []
        self._place(program.body, [], [])
        self.by_unit = {id(p.unit): p for p in self.placed}
        self.depth = max((len(p.times) for p in self.placed), default=1)
        self.length = self.depth + max(
            (len(_inner_times(s, p.unit, program.nest.body)) for p in self.placed
             for s in p.unit.statements), default=0)

    def _place(self, body: list[Node], path: list[LoopNode], positions: list[int]) -> None:
        for index, child in enumerate(body):
            here = positions + [POSITION_STRIDE * index + 1]
            if isinstance(child, LoopNode):
                self._place(child.body, path + [child], here)
            else:
                number = len(self.placed)
                placed = Placed(child, number, path, here, [])
                placed.times = self._times(placed)
                self.placed.append(placed)

    # -- values of loops --------------------------------------------------------------------
    def sign(self, loop: Loop) -> str:
        return "" if loop.step > 0 else "-"

    def coordinate(self, node: LoopNode, unit: Unit) -> str:
        """The order coordinate of the node's variable at the unit's instance: of the
        original loop around the unit it runs (one of a fused loop's), shifted, plus the
        values of the loops it is skewed by."""
        origin, shift = next((loop, shift) for loop, shift in ((node.origin, 0), *node.fused)
                             if loop in unit.loops)
        text = f"{self.sign(origin)}x{unit.loops.index(origin)}"
        if shift:
            text += f" + {shift}"
        for other, factor in node.skew:
            text += f" + {factor}*({self.value(other, unit)})"
        return text

    def lower(self, node: LoopNode, unit: Unit) -> str:
        """The first value (order coordinates) of the range the node runs over.

        Inside a tile whose width is a multiple of this node's, tiles (or groups) counted from
        the loop's own first value start at the same places as those counted from the tile's:
        the simpler expression keeps isl's work small."""
        within = node.within
        while within is not None and node.tile and within.tile % node.tile == 0:
            within = within.within
        if within is not None:
            return self.value(within, unit)
        if not node.plain:  # one first value for every loop it runs, whatever its bounds
            return "0"
        if node.tile and node.origin.start is not None and node.origin.start.symbols() & {
                loop.var for loop in node.origin.enclosing if loop is not node.origin}:
            # a range that starts where a loop around it is (a triangle's j from i + 1): its
            # tiles counted from 0 line up for every value of that loop, so that it may be
            # jammed with them, where tiles counted from its start cut it anew for each
            return "0"
        bound = self.model.render(node.origin.start, unit.first, "x")
        assert bound is not None, "affine bounds only"
        return f"{self.sign(node.origin)}({bound})"

    def upper(self, node: LoopNode, unit: Unit, group: int = 1) -> list[str]:
        """Exclusive upper limits (order coordinates) of the range the node runs over; a
        tile's end is left out where groups of ``group`` iterations never cross it."""
        bound = self.model.render(node.origin.stop, unit.first, "x")
        assert bound is not None, "affine bounds only"
        limits = [f"{self.sign(node.origin)}({bound})"]
        if node.within is not None and node.within.tile % group:
            width = node.within.tile * abs(node.origin.step)
            limits.append(f"{self.value(node.within, unit)} + {width}")
        return limits

    def value(self, node: LoopNode, unit: Unit) -> str:
        x = self.coordinate(node, unit)
        if not node.tile:
            return x
        base = self.lower(node, unit)
        width = node.tile * abs(node.origin.step)
        return f"({base}) + {width}*floor(({x} - ({base}))/{width})"

    def _times(self, placed: Placed) -> list[str]:
        times = [str(placed.positions[0])]
        for level, node in enumerate(placed.path):
            times += [self.value(node, placed.unit), str(placed.positions[level + 1])]
        return times

    # -- relations --------------------------------------------------------------------------
    def unit_domain(self, placed: Placed) -> str:
        """isl text of the unit's instances (those of its copy)."""
        unit = placed.unit
        if not unit.statements:
            return f"{{ {placed.name}[] }}"
        parts = [self.model.constraints(unit.first, unit.loops, unit.guards, "x")]
        parts += list(unit.restriction)
        return (f"{self.model.header}{{ {placed.name}[{placed.coords()}] : "
                f"{' and '.join(parts)} }}")

    def unit_schedule(self, placed: Placed) -> str:
        times = placed.times + ["0"] * (self.depth - len(placed.times))
        coords = placed.coords() if placed.unit.statements else ""
        return (f"{self.model.header}{{ {placed.name}[{coords}] -> "
                f"[{', '.join(times)}] }}")

    def codegen_schedule(self, left_out: set[int]) -> "isl.UnionMap":
        """Every unit's instances -> their time, for isl's AST generator (the domain is the
        map's); units ``left_out`` (by number) are not in it (codegen writes them itself)."""
        import islpy as isl

        out = isl.UnionMap(f"{self.model.header}{{ }}")
        for placed in self.placed:
            if placed.number not in left_out:
                out = _simplified(out, self.unit_domain(placed), self.unit_schedule(placed))
        return out

    def instance(self, statement: Statement, placed: Placed, role: str = "x") -> str:
        coords = ", ".join(f"{role}{k}" for k in range(len(statement.loops)))
        return f"S{statement.ordinal}u{placed.number}[{coords}]"

    @cached_property
    def time(self) -> "isl.UnionMap":
        """Statement instances of every copy -> their time (one space for all)."""
        return self.time_of(self._time_texts)

    def time_of(self, instances: Iterable[str]) -> "isl.UnionMap":
        """``time`` for the copies named (``S5u3``) alone: a legality question about two
        statements needs their times, not the whole program's (3mm register-tiled holds a
        hundred copies; parsing all their times took 0.2 s a step)."""
        import islpy as isl

        out = isl.UnionMap(f"{self.model.header}{{ }}")
        for name in instances:
            out = out.union(_parsed(self._time_texts[name]))
        return out

    @cached_property
    def _time_texts(self) -> dict[str, str]:
        """Each copy's time relation as isl text, by the copy's name."""
        out = {}
        for placed in self.placed:
            for statement in placed.unit.statements:
                times = placed.times + ["0"] * (self.depth - len(placed.times))
                times += _inner_times(statement, placed.unit, self.program.nest.body)
                times += ["0"] * (self.length - len(times))
                instance = self.instance(statement, placed)
                out[instance.split("[")[0]] = (
                    f"{self.model.header}{{ {instance} -> [{', '.join(times)}] : "
                    f"{self.model.domain(statement, 'x')}"
                    f"{''.join(' and ' + r for r in placed.unit.restriction)} }}")
        return out

    @cached_property
    def restrict(self) -> "isl.UnionMap":
        """Analysis instances ``S5[x]`` -> the copies that run them ``S5u3[x]``."""
        return self.restrict_of(self._restrict_texts)

    def restrict_of(self, statements: Iterable[Statement]) -> "isl.UnionMap":
        """``restrict`` for those statements' instances alone (see ``time_of``)."""
        import islpy as isl

        out = isl.UnionMap(f"{self.model.header}{{ }}")
        for statement in statements:
            for text in self._restrict_texts.get(statement, ()):
                out = out.union(_parsed(text))
        return out

    @cached_property
    def _restrict_texts(self) -> dict[Statement, list[str]]:
        """Each statement's relations to its copies as isl text."""
        out: dict[Statement, list[str]] = {}
        for placed in self.placed:
            for statement in placed.unit.statements:
                condition = " and ".join(placed.unit.restriction) or "true"
                out.setdefault(statement, []).append(
                    f"{self.model.header}{{ {self.model.point(statement, 'x')} -> "
                    f"{self.instance(statement, placed)} : {condition} }}")
        return out


@lru_cache(maxsize=4096)
def _parsed(text: str) -> "isl.UnionMap":
    """A relation's text parsed once: a step changes one nest, and the next steps' schedules
    give the others' copies the same times, written the same way."""
    import islpy as isl

    return isl.UnionMap(text)


def _simplified(out: "isl.UnionMap", domain: str, schedule: str) -> "isl.UnionMap":
    """``out`` with one more schedule map, restricted to its domain and simplified first:
    isl's AST generator misplaced instances (ran one a loop iteration early) on a schedule
    whose tiles and copies were still written as nested floors, and places them right once
    their equalities are explicit."""
    import islpy as isl

    restricted = isl.UnionMap(schedule).intersect_domain(isl.UnionSet(domain))
    if restricted.is_empty():
        return out
    simple = isl.Map.from_union_map(restricted).coalesce().detect_equalities()
    return out.union(isl.UnionMap.from_map(simple))


def unit_number(instance_name: str) -> int:
    """3 of ``S5u3``: the copy (placed unit) an instance belongs to (``Schedule.instance``
    names them)."""
    return int(instance_name.split("u")[-1])


def _inner_times(statement: Statement, unit: Unit, top: list[IrNode]) -> list[str]:
    """The statement's time inside a block kept as written (positions and its inner loops'
    variables below the unit's loops); a plain statement unit adds nothing. A block of one
    statement inside loops of its own (a CSR row's ``for k in range(indptr[i], ...)``) has
    their times too: without them two of its iterations ran at one time, and a dependence
    between them looked broken (privatize(total) was refused for a CSR matvec)."""
    depth = len(unit.loops)
    if len(unit.statements) == 1 and len(statement.loops) == depth:
        return []
    path = _ir_path(statement, top)
    times = [str(path[depth])]
    for level in range(depth, len(statement.loops)):
        loop = statement.loops[level]
        times += [f"{'' if loop.step > 0 else '-'}x{level}", str(path[level + 1])]
    return times


def _ir_path(statement: Statement, top: list[IrNode]) -> list[int]:
    """Child indices from the function body (``top``) to the statement in the original IR."""
    chain: list[int] = []
    node: IrNode = statement
    for loop in reversed(statement.loops):
        chain.append(_index(loop.body, node))
        node = loop
    chain.append(_index(top, node))
    return list(reversed(chain))


def _index(body: list[IrNode], node: IrNode) -> int:
    return next(k for k, child in enumerate(body) if child is node)
