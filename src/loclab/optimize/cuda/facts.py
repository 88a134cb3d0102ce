"""What the GPU planner and the kernel writer read off a nest's Python syntax: the scalars
it assigns and the arrays it writes, the loops a block's threads share and how each
statement runs beside them (``block_role``), the array elements a loop may keep in a
register (``promotable``), the locals that only hold indices, the reads and stores a
tile may serve (``read_forms``, ``write_stages``).

Why a module of its own: the planner decides with the same facts the writer emits from,
and neither should reach into the other (the planner imported these from the 1,700-line
kernel writer before).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from loclab.transform.cuda_syntax import shape_of, subscript_parts


@dataclass(frozen=True)
class Offset:
    """A subscript dimension ``var + offset`` (``var`` None: the constant ``offset``)."""

    var: str | None
    offset: int


def block_role(node: ast.stmt, is_split: Callable[[ast.AST], bool]) -> str:
    """How one block runs a statement of a nest whose loops ``is_split`` names its threads'
    shares of (``NestMapping.block_splits``): ``"split"``, such a loop; ``"around"``, a loop
    or ``if`` holding one, which every thread runs, its body by these roles in turn;
    ``"lead"``, anything else that writes an array, which thread 0 runs alone; ``"all"``,
    the rest (scalars every thread computes alike)."""
    if is_split(node):
        return "split"
    if isinstance(node, (ast.For, ast.If)) and any(is_split(n) for n in ast.walk(node)):
        return "around"
    return "lead" if written_arrays([node]) else "all"


def promotable(node: ast.For, redirected: Mapping[int, str] | None = None,
               apart: bool = False) -> dict[str, ast.Subscript]:
    """Array elements the loop updates at one subscript that does not change in it: every
    access of the array in the loop is that one, its indices are neither assigned nor loop
    variables inside, and none is under an ``if`` (Python may never touch the element).
    Kept in a register across the loop (scalar replacement), they are what a loop split
    across threads may reduce besides scalars (``plan``'s split). Reads ``redirected`` to a
    copy (by node id) are the copy's accesses, not the array's (trmm's ``B[k, j]``). With
    ``apart``, the array may also be read at other subscripts, where the caller knows from
    the transformer that the loop never makes them meet the element (a reduction whose
    carried dependences join its target alone: a triangular solve's ``x[j]``, ``j < i``)."""
    redirected = redirected or {}
    inside = assigned(node.body) | loop_vars(node.body) | {
        node.target.id}  # type: ignore[attr-defined]
    groups: dict[str, list[ast.Subscript]] = {}
    for sub in subscripts(node.body):
        groups.setdefault(redirected.get(id(sub), subscript_parts(sub)[0]), []).append(sub)
    written, conditional = written_arrays(node.body), conditional_arrays(node.body)
    found = {}
    for name, subs in groups.items():
        stored = [s for s in subs if isinstance(s.ctx, ast.Store)] if apart else subs
        if stored and len({ast.unparse(s) for s in stored}) == 1 and name in written \
                and not names_in(stored[:1]) & inside and name not in conditional:
            found[name] = stored[0]
    return found


def range_args(node: ast.For) -> tuple[ast.expr | None, ast.expr, int]:
    """(start, stop, step) of ``for v in range(...)`` (step a constant)."""
    args = node.iter.args  # type: ignore[attr-defined]
    if len(args) == 1:
        return None, args[0], 1
    step = 1
    if len(args) == 3:
        value = args[2]
        if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.USub):
            step = -value.operand.value  # type: ignore[attr-defined]
        else:
            step = value.value  # type: ignore[attr-defined]
    return args[0], args[1], step


def offset_of(index: ast.expr) -> Offset | None:
    """``v``, ``v + c``, ``v - c``, ``c + v`` or ``c`` as var and offset; else None."""
    if isinstance(index, ast.Name):
        return Offset(index.id, 0)
    if isinstance(index, ast.Constant) and isinstance(index.value, int) \
            and not isinstance(index.value, bool):
        return Offset(None, index.value)
    if isinstance(index, ast.BinOp) and isinstance(index.op, (ast.Add, ast.Sub)):
        left, right = index.left, index.right
        sign = -1 if isinstance(index.op, ast.Sub) else 1
        if isinstance(left, ast.Name) and isinstance(right, ast.Constant) \
                and isinstance(right.value, int):
            return Offset(left.id, sign * right.value)
        if sign == 1 and isinstance(right, ast.Name) and isinstance(left, ast.Constant) \
                and isinstance(left.value, int):
            return Offset(right.id, left.value)
    return None


def read_forms(body: Sequence[ast.stmt], arrays: set[str],
                redirected: Mapping[int, str] | None = None
                ) -> dict[tuple[str, tuple[str | None, ...]], list[tuple[Offset | None, ...]]]:
    """The reads of ``arrays`` in ``body`` as ``var + offset`` per dimension, grouped by
    array (the copy a read is ``redirected`` to, by node id: trmm's ``B_copy``) and by the
    variables their dimensions move with (a dimension no such form describes: ``?``)."""
    found: dict[tuple[str, tuple[str | None, ...]], list[tuple[Offset | None, ...]]] = {}
    for sub in reads(body):
        name, indices = subscript_parts(sub)
        name = (redirected or {}).get(id(sub), name)
        if name in arrays:
            offsets = tuple(offset_of(i) for i in indices)
            form = tuple(o.var if o is not None else "?" for o in offsets)
            found.setdefault((name, form), []).append(offsets)
    return found


def write_stages(loop: ast.For, body: Sequence[ast.stmt]
                 ) -> dict[str, tuple[Offset | None, ...]]:
    """The arrays ``loop`` may store through a tile in shared memory (copied out coalesced
    after each strip), with their store's subscript: each stored once in the thread's whole
    code ``body``, by a plain assignment directly in ``loop``'s body (every iteration stores
    one element, under no condition: a strip that every thread of a block runs fills the
    tile), every dimension ``var + offset``, and never read in ``body`` (nothing reads the
    tile back, or memory before the tile is copied out)."""
    read = {subscript_parts(sub)[0] for sub in reads(body)}
    stores: dict[str, int] = {}
    for sub in subscripts(body):
        if not isinstance(sub.ctx, ast.Load):
            name = subscript_parts(sub)[0]
            stores[name] = stores.get(name, 0) + 1
    found: dict[str, tuple[Offset | None, ...]] = {}
    for node in loop.body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Subscript)):
            continue
        name, indices = subscript_parts(node.targets[0])
        offsets = tuple(offset_of(i) for i in indices)
        if name not in read and stores.get(name) == 1 and None not in offsets:
            found[name] = offsets
    return found


def walk(body: Sequence[ast.AST]) -> Iterator[ast.AST]:
    for node in body:
        yield from ast.walk(node)


def assigned(body: Sequence[ast.stmt]) -> set[str]:
    """The scalars assigned anywhere under ``body``."""
    out = set()
    for node in walk(body):
        if isinstance(node, ast.Assign):
            out |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and isinstance(node.target,
                                                                             ast.Name):
            out.add(node.target.id)
    return out


def index_locals(body: Sequence[ast.stmt], integers: set[str], locals_: set[str]) -> set[str]:
    """The locals every assignment of which is a loop variable, a size, a constant of 32
    bits or another such local (an arg-min's ``best_j = j``, ``best_j = -1``): they hold
    indices, so the kernel declares them in its index type (32 bits where the launch's
    sizes allow), not as Python's 64-bit integers (a 64-bit select a pair cost nearest
    neighbour's inner loop an instruction); arithmetic on them is widened as on any
    integer."""
    values: dict[str, list[ast.expr | None]] = {}
    for node in walk(body):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                for name in names_in([target]) if not isinstance(target, ast.Subscript) else ():
                    values.setdefault(name, []).append(
                        node.value if isinstance(target, ast.Name) else None)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) \
                and isinstance(node.target, ast.Name):
            values.setdefault(node.target.id, []).append(None)
        elif isinstance(node, ast.For):
            for name in names_in([node.target]):
                values.setdefault(name, []).append(None)
    found = {name for name in locals_ if values.get(name)}
    changed = True
    while changed:
        changed = False
        for name in sorted(found):
            if not all(_an_index(value, integers | found) for value in values[name]):
                found.discard(name)
                changed = True
    return found


def _an_index(value: ast.expr | None, indexes: set[str]) -> bool:
    if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.USub):
        value = value.operand
    if isinstance(value, ast.Name):
        return value.id in indexes
    return isinstance(value, ast.Constant) and type(value.value) is int \
        and abs(value.value) < 2**31


def loop_vars(body: Sequence[ast.stmt]) -> set[str]:
    return {n.target.id for n in walk(body) if isinstance(n, ast.For)
            and isinstance(n.target, ast.Name)}


def names_in(body: Sequence[ast.AST]) -> set[str]:
    return {n.id for n in walk(body) if isinstance(n, ast.Name)}


def subscripts(body: Sequence[ast.AST]) -> list[ast.Subscript]:
    """Array element accesses (not ``A.shape[d]``), outermost only."""
    nodes = [n for n in walk(body) if isinstance(n, ast.Subscript)]
    inner = {id(n.value) for n in nodes if isinstance(n.value, ast.Subscript)}
    return [n for n in nodes if id(n) not in inner and shape_of(n) is None]


def reads(body: Sequence[ast.stmt]) -> list[ast.Subscript]:
    return [s for s in subscripts(body) if isinstance(s.ctx, ast.Load)]


def arrays_in(body: Sequence[ast.stmt]) -> set[str]:
    return {subscript_parts(s)[0] for s in subscripts(body)}


def written_arrays(body: Sequence[ast.stmt]) -> set[str]:
    out = set()
    for node in walk(body):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if \
            isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
        for target in targets:
            if isinstance(target, ast.Subscript):
                out.add(subscript_parts(target)[0])
    return out


def conditional_arrays(body: Sequence[ast.stmt]) -> set[str]:
    """Arrays accessed under an ``if`` (Python may never touch the element at all)."""
    return {subscript_parts(s)[0] for node in walk(body) if isinstance(node, ast.If)
            for s in subscripts(node.body + node.orelse + [ast.Expr(node.test)])}


def uniform_loops(body: Sequence[ast.stmt], varying: set[str]) -> Iterator[ast.For]:
    """Loops of the thread code whose bounds are the same in every thread of a block."""
    for node in body:
        if isinstance(node, ast.For):
            if not (names_in([node.iter]) & varying):
                yield node
                yield from uniform_loops(node.body, varying)
