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
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from loclab.nest.expr import Poly
from loclab.nest.ir import Access
from loclab.transform.tree import Program, Unit

LANE_FUNCTIONS = ("lanes_like", "lanes_load", "lanes_store")


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
    """An access's subscripts as emitted: an expanded scalar's its expanding loops'
    variables, another scalar's none; None where one is not affine, or for a scalar with
    storage of its own per iteration (not an array element the loop could hold)."""
    variable = access.variable
    if variable.is_array:
        return tuple(access.subscripts) if access.affine else None  # type: ignore[arg-type]
    private = program.private_in(variable.key, unit.loops)
    if private is None:
        return ()
    if private.kind != "expand":
        return None
    return tuple(Poly.symbol(loop.var) for loop in private.expand_by)
