"""The Numba text of a ``hold`` loop's run: its inner strip's updates as operations on
vector lanes (``loclab.cpu.lanes``), the held elements loaded before the run and stored
after it.

``lanes_run`` gets the statements as the emitter rewrote them (loop variables, copies,
expanded scalars, staged buffers and unsigned casts already in place) and returns None
wherever the text falls outside what the step proved or what lanes can say: then the
emitter prints the loops as they are, which is exact. A held element is named by its
first lane (the strip's variable replaced by the strip's start); two held elements must
be the same row or rows apart by a constant (``distinct_rows``), else one lane's update
would meet another's.

Where isl put guards inside the strip (an unroll-and-jam of rows of a triangle: ``if k >=
i + 2``), the run is held only where they all hold (``guard_range``): a guard that moves
with the run's variable cuts the run, whose first and last iterations then run as written
around the held part; one that does not is checked once at the run's start, with every
lane. Where a statement reads a held array (trmm's ``B[k, j]`` beside the held ``B[i,
j]``), the start checks that the row read is apart from every held row for the whole held
part (``run_conditions``). Both are affine over the run's box of points, so each holds
everywhere in it if it holds at the corner where it is least. Elsewhere the loops run as
written.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from loclab.nest.expr import BoolOp, Compare, Condition, Poly, Symbol, atom_symbols
from loclab.nest.ir import Access
from loclab.transform.tree import Buffer, Program, Unit

LANE_FUNCTIONS = ("lanes_like", "lanes_load", "lanes_store")
ORDERED = ("<", "<=", ">", ">=")  # comparisons a box's corners decide

# an array element as a statement touches it: the array's name and its subscripts as
# Polys of the new loops' variables (None where one is not a polynomial)
Touch = tuple[str, "tuple[Poly, ...] | None"]


@dataclass
class LanesRun:
    """What the emitter prints around and inside the run: ``loads`` before it (one per held
    element), ``updates`` inside (one per statement, in order), ``stores`` after it."""

    loads: list[str] = field(default_factory=list)
    updates: list[str] = field(default_factory=list)
    stores: list[str] = field(default_factory=list)


def lanes_run(statements: Sequence[ast.stmt], targets: Sequence[tuple[Poly, ...] | None],
              lane: str, start: str, width: int, names: list[str]) -> LanesRun | None:
    """The run's text for ``statements`` (their targets' subscripts as Polys of the new
    loops' variables, None where unknown), the strip's variable ``lane`` from ``start``
    for ``width`` lanes; ``names`` gives the held elements' variables (taken from the
    front). None where it cannot be held."""
    first = ast.parse(start, mode="eval").body
    held: dict[str, str] = {}  # a held element's first lane, as text -> its variable
    rows: dict[str, tuple[Poly, ...]] = {}
    run = LanesRun()
    for statement, where in zip(statements, targets):
        if isinstance(statement, ast.AugAssign):
            target, value = statement.target, statement.value
        elif isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            target, value = statement.targets[0], statement.value
        else:
            return None
        if not isinstance(target, ast.Subscript) or where is None \
                or not _along_lanes(target, lane):
            return None
        array = _at_start(target, lane, first)
        key = ast.unparse(array)
        if key not in held:
            if any(not distinct_rows(where, other) for other in rows.values()):
                return None
            held[key], rows[key] = names.pop(0), where
            run.loads.append(f"{held[key]} = lanes_load({_base(array)}, {_indices(array)}, "
                             f"{width})")
            run.stores.append(f"lanes_store({_base(array)}, {_indices(array)}, {held[key]})")
        converted = _InLanes(lane, first, width, held).convert(value)
        if converted is None:
            return None
        name = held[key]
        if isinstance(statement, ast.AugAssign):
            converted = ast.BinOp(ast.Name(name, ast.Load()), statement.op, converted)
        elif not _has_lanes(converted, held.values()):
            return None  # an element set to a value of no lane: a scalar, not lanes
        run.updates.append(f"{name} = lanes_like({ast.unparse(converted)}, {name})")
    return run


@dataclass(frozen=True)
class Box:
    """The points of a run: the held loop's variable ``run`` from ``low`` to ``last`` and
    the lanes' ``lane`` from ``first`` to ``first + width - 1``; every other variable is
    fixed while it runs."""

    run: str
    low: Poly
    last: Poly
    lane: str
    first: Poly
    width: int

    def everywhere(self, difference: Poly, op: str) -> Compare | None:
        """``difference op 0`` at every point of the box, as one comparison at the corner
        where ``difference`` is least (``>``, ``>=``) or greatest (``<``, ``<=``): it is
        affine in the box's variables. None where it is not."""
        coefficients = self.coefficients(difference)
        if coefficients is None:
            return None
        least = op in (">", ">=")
        corner = {self.run: self.low if (coefficients[0] >= 0) == least else self.last,
                  self.lane: self.lane_corner(coefficients[1], least)}
        return Compare(op, difference.substitute(corner), Poly.const(0))

    def coefficients(self, expression: Poly) -> tuple[int, int] | None:
        """``expression``'s coefficients of the run's and the lanes' variables; None where
        it is not affine in them."""
        found = {self.run: 0, self.lane: 0}
        for monomial, coefficient in expression.terms:
            moving = [a for a in monomial if atom_symbols(a) & set(found)]
            if not moving:
                continue
            if len(monomial) != 1 or not isinstance(moving[0], Symbol):
                return None
            found[moving[0].name] += coefficient
        return found[self.run], found[self.lane]

    def lane_corner(self, coefficient: int, least: bool) -> Poly:
        """The lane where an expression of this coefficient is least (or greatest)."""
        return self.first if (coefficient >= 0) == least \
            else self.first + Poly.const(self.width - 1)


@dataclass
class RunRange:
    """Where in a run every guard holds: the run's variable from the greatest of ``lower``
    to before the least of ``upper`` (each list empty where no guard bounds it that way),
    and ``fixed``, the guards that do not move with it, true throughout the box."""

    lower: list[Poly] = field(default_factory=list)
    upper: list[Poly] = field(default_factory=list)
    fixed: list[Compare] = field(default_factory=list)


def guard_range(box: Box, guards: Sequence[Sequence[Condition]]) -> RunRange | None:
    """The part of the run where isl's ``guards`` (conjunctions of comparisons affine in
    the run's and the lanes' variables) hold for every lane: a guard that moves with the
    run bounds it from below or above; the others are checked at the box's corners. None
    where a guard is of another form, or false throughout."""
    found = RunRange()
    for condition in dict.fromkeys(c for some in guards for c in some):
        for compare in _conjuncts(condition):
            if compare is None or compare.op not in ORDERED:
                return None
            difference = compare.left - compare.right  # made ``difference >= 0``
            difference = {">=": difference, ">": difference - Poly.const(1),
                          "<=": -difference, "<": -difference - Poly.const(1)}[compare.op]
            coefficients = box.coefficients(difference)
            if coefficients is None:
                return None
            run, lane = coefficients
            if run == 0:
                check = box.everywhere(difference, ">=")
                if check is None or _known(check) is False:
                    return None
                if _known(check) is None:
                    found.fixed.append(check)
                continue
            # the rest at the lane where it is least: run * k + rest >= 0
            rest = (difference - Poly.symbol(box.run) * Poly.const(run)).substitute(
                {box.lane: box.lane_corner(lane, least=True)})
            if run > 0:  # k >= ceil(-rest / run)
                found.lower.append(-(rest if run == 1 else rest.floordiv(run)))
            else:  # k <= floor(rest / -run)
                found.upper.append((rest if run == -1 else rest.floordiv(-run))
                                   + Poly.const(1))
    return found


def _known(compare: Compare) -> bool | None:
    """A corner's comparison with zero where its value is a constant, else None."""
    value = compare.left.constant_value()
    if value is None:
        return None
    return {"<": value < 0, "<=": value <= 0, ">": value > 0, ">=": value >= 0}[compare.op]


def run_conditions(box: Box, targets: Sequence[Touch], reads: Sequence[Sequence[Touch]]
                   ) -> list[Condition] | None:
    """What the run's start must check for its statements to be held (the element each
    writes in ``targets``, what each ``reads``): every read of a held array either its
    statement's own target or a row apart from every held element throughout the box.
    None where no check can say so: a difference of rows not affine in the box, a read of
    another statement's held element, a read of a held row at other lanes."""
    found: dict[Condition, None] = {}
    held = {array for array, _ in targets}
    for own, touched in zip(targets, reads):
        for array, subscripts in touched:
            if array not in held:
                continue
            for target in (t for t in targets if t[0] == array):
                if (array, subscripts) == own and target == own:
                    continue
                apart = _apart(box, subscripts, target[1])
                if apart is None:
                    return None
                found.update(dict.fromkeys(apart))
    return list(found)


def _conjuncts(condition: Condition) -> list[Compare | None]:
    if isinstance(condition, Compare):
        return [condition]
    if condition.op != "and":
        return [None]
    return [c for part in condition.args for c in _conjuncts(part)]


def _apart(box: Box, read: tuple[Poly, ...] | None, target: tuple[Poly, ...] | None
           ) -> list[Condition] | None:
    """Checks that a read and a held element never meet in the box: some subscript but
    the lanes' a constant apart (no check), or of one sign throughout it."""
    if read is None or target is None or len(read) != len(target):
        return None
    differences = [a - b for a, b in zip(read[:-1], target[:-1]) if a != b]
    if any(d.constant_value() is not None for d in differences):
        return []
    for difference in differences:
        sides = [box.everywhere(difference, op) for op in (">", "<")]
        if any(side is None for side in sides):
            continue
        possible = [side for side in sides if _known(side) is not False]  # type: ignore
        if any(_known(side) for side in possible):  # type: ignore[arg-type]
            return []
        return [possible[0] if len(possible) == 1 else BoolOp("or", tuple(possible))] \
            if possible else None  # type: ignore[list-item]
    return None


def distinct_rows(first: tuple[Poly, ...], second: tuple[Poly, ...]) -> bool:
    """Whether two held elements' rows never meet: the same subscripts, or some subscript
    but the last (the lanes') a nonzero constant apart."""
    if first == second:
        return True
    if len(first) != len(second) or first[-1] != second[-1]:
        return False
    return any((a - b).constant_value() not in (None, 0)
               for a, b in zip(first[:-1], second[:-1]))


class _InLanes:
    """An update's value in lanes: a read along the lanes' row a ``lanes_load``, a held
    element its variable, anything the lanes' variable does not appear in left as a
    scalar (the lanes' operations broadcast it); + - * between them. Anything else that
    mentions the lanes' variable (a negated row, a call) is not held."""

    def __init__(self, lane: str, first: ast.expr, width: int, held: dict[str, str]) -> None:
        self.lane, self.first, self.width, self.held = lane, first, width, held

    def convert(self, value: ast.expr) -> ast.expr | None:
        if not _mentions(value, self.lane):
            return copy.deepcopy(value)
        if isinstance(value, ast.BinOp) and isinstance(value.op, (ast.Add, ast.Sub, ast.Mult)):
            left, right = self.convert(value.left), self.convert(value.right)
            if left is None or right is None:
                return None
            return ast.BinOp(left, value.op, right)
        if isinstance(value, ast.Subscript) and _along_lanes(value, self.lane):
            array = _at_start(value, self.lane, self.first)
            name = self.held.get(ast.unparse(array))
            if name is not None:
                return ast.Name(name, ast.Load())
            return ast.parse(f"lanes_load({_base(array)}, {_indices(array)}, {self.width})",
                             mode="eval").body
        return None


def _has_lanes(value: ast.expr, held: Collection[str]) -> bool:
    """Whether ``value`` holds lanes: a ``lanes_load`` or a held element's variable."""
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
               and n.func.id == "lanes_load" or isinstance(n, ast.Name) and n.id in held
               for n in ast.walk(value))


def _mentions(node: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node))


def _indices_of(node: ast.Subscript) -> list[ast.expr]:
    return list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]


def _along_lanes(node: ast.Subscript, lane: str) -> bool:
    """Whether ``node`` is one array's element whose last subscript is the lanes' variable
    plus or minus terms free of it, and no other subscript mentions it."""
    if not isinstance(node.value, ast.Name):
        return False
    *rest, last = _indices_of(node)
    return not any(_mentions(i, lane) for i in rest) and _plus(last, lane)


def _plus(node: ast.expr, lane: str) -> bool:
    """Whether ``node`` is ``lane`` plus or minus terms free of it (through ``uintp``)."""
    if isinstance(node, ast.Name):
        return node.id == lane
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
            and node.func.id == "uintp" and len(node.args) == 1 and not node.keywords:
        return _plus(node.args[0], lane)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _mentions(node.left, lane), _mentions(node.right, lane)
        return left != right and _plus(node.left if left else node.right, lane)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub):
        return not _mentions(node.right, lane) and _plus(node.left, lane)
    return False


class _Replace(ast.NodeTransformer):
    def __init__(self, name: str, by: ast.expr) -> None:
        self.name, self.by = name, by

    def visit_Name(self, node: ast.Name) -> ast.expr:
        return copy.deepcopy(self.by) if node.id == self.name else node


def _at_start(node: ast.Subscript, lane: str, first: ast.expr) -> ast.Subscript:
    """The element of the first lane: ``lane`` replaced by the strip's start."""
    out = _Replace(lane, first).visit(copy.deepcopy(node))
    ast.fix_missing_locations(out)
    return out


def _base(node: ast.Subscript) -> str:
    assert isinstance(node.value, ast.Name)
    return node.value.id


def _indices(node: ast.Subscript) -> str:
    """The element's subscripts as a tuple's text (what the lanes' functions take)."""
    texts = [ast.unparse(i) for i in _indices_of(node)]
    return f"({texts[0]},)" if len(texts) == 1 else f"({', '.join(texts)})"


def held_subscripts(program: Program, access: Access, unit: Unit) -> tuple[Poly, ...] | None:
    """An access's subscripts as emitted, up to constants and tile loops' variables: a read
    of a ``stage`` buffer's (transposed where the buffer is), an expanded scalar's its
    expanding loops' variables, another scalar's none; None where one is not affine, or for
    a scalar with storage of its own per iteration (not an array element the loop could
    hold)."""
    variable = access.variable
    if variable.is_array:
        if not access.affine:
            return None
        subscripts = tuple(access.subscripts)  # type: ignore[arg-type]
        buffer = staged(program, access, unit)
        # a staged read reads its buffer: the slice's offsets move with tile loops alone,
        # a transposed slice's subscripts reversed
        return subscripts[::-1] if buffer is not None and buffer.transposed else subscripts
    private = program.private_in(variable.key, unit.loops)
    if private is None:
        return ()
    if private.kind != "expand":
        return None
    return tuple(Poly.symbol(loop.var) for loop in private.expand_by)


def staged(program: Program, access: Access, unit: Unit) -> Buffer | None:
    """The ``stage`` or ``copy`` buffer ``unit``'s read ``access`` reads, if any."""
    return next((b for b in program.buffers if b.variable is access.variable
                 and not access.write and b.serves(access.text) and b.covers(unit)), None)
