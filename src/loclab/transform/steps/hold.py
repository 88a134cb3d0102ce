"""``hold(q)``: the elements that the loop inside ``q`` updates, held in vector registers
for ``q``'s whole run (the lectures' register tiling; BLIS's micro-kernel).

After ``tile``, ``stripmine(j, 32, jv)``, ``interchange(q, jv)`` and ``unroll(i, 8,
jam=True)``, a product's innermost loops are ``for q: for j in range(jv, jv + 32):`` with
eight updates ``C[i + r, j] += A[i + r, q] * B[q, j]``. Each run of ``q`` updates the same
8 x 32 block of ``C``; written as it is, every update loads and stores its row of ``C``
(the compiler may not prove that nothing else in the loop meets it). Held, the block is
loaded into vector registers before the run, updated there, and stored after it: per ``q``
one vector of ``B`` and eight values of ``A`` feed eight vector multiply-adds.

Legal when every statement inside ``q`` updates an element of an array whose every access
there is that statement's own target or another row of it, the target's subscripts do
not move with ``q`` and take ``j`` in the last alone (a row of lanes), and the other reads
take ``j`` in the last subscript alone or not at all: then no access in the run meets a
held element, and deferring its stores to the end of the run changes no value read. A
read of another row (trmm's ``B[k, j]`` beside the held ``B[i, j]``, ``k > i``) may meet a
held row at some points of the loops: the emitted code checks at each run's start that it
does not in that run, and runs the loops as written where it might. Each element is
updated by the same operations in the same order (a lane each), so the result is
bit-identical.

Numba only (``--emit numba``, ``loclab.cpu.lanes``): where the strip is whole and every
target is a row of its own, as emitted; a partial strip, or code the emitter cannot hold,
runs as written. Python and C emit the loops unchanged.
"""

from __future__ import annotations

import ast

from loclab.nest.expr import Poly
from loclab.transform.lanes_code import held_subscripts
from loclab.transform.recipe import Step
from loclab.transform.steps import (Applied, Context, expect_args, find_loops, no_keywords,
                                    require_plain)
from loclab.transform.tree import LoopNode, Program, Unit

NAMES = ("hold",)
MAX_LANES = 64  # a strip past this is no longer registers' worth
# not ``/``: Numba's scalar division by zero raises, a vector's gives infinity
OPERATORS = (ast.Add, ast.Sub, ast.Mult)


def apply(program: Program, step: Step, context: Context) -> Applied:
    expect_args(step, 1, 1, "hold(loop)")
    no_keywords(step)
    new = program.clone()
    nodes = find_loops(new, step.args[0], step)  # each copy an unroll made of it
    require_plain(new, nodes, step)
    targets: set[str] = set()
    for node in nodes:
        inner = _inner_strip(node, step)
        units = list(inner.units())
        for unit in units:
            why = _unheld(new, unit, node.origin.var, inner.origin.var, units)
            if why:
                raise step.error(f"{node.label} cannot hold {inner.name}'s updates: {why}")
        node.hold = inner.within.tile if inner.within is not None else 0
        targets.update(unit.first.writes[0].variable.name for unit in units)
    name, lanes = nodes[0].name, nodes[0].hold
    return Applied(new, f"every statement inside {name} updates an element of "
                        f"{', '.join(sorted(targets))} that stays put along {name}, and "
                        f"nothing else there touches those arrays: the elements stay in "
                        f"{lanes} vector lanes for its run, updated in the same order")


def _inner_strip(node: LoopNode, step: Step) -> LoopNode:
    """The loop ``node`` holds: its body alone, innermost, a strip of a constant width
    (``stripmine``'s) whose tile loop is around ``node``, neither's range moving with the
    other's variable."""
    body = node.body
    if len(body) != 1 or not isinstance(body[0], LoopNode) or any(
            isinstance(child, LoopNode) for child in body[0].body):
        raise step.error(f"{node.label} must hold exactly one loop, and that loop no loop")
    inner = body[0]
    strip = inner.within
    if strip is None or not 2 <= strip.tile <= MAX_LANES \
            or not any(loop is node for loop in strip.loops()):  # the strip's loop is around
        raise step.error(f"{inner.label} must be a strip of 2 to {MAX_LANES} iterations "
                         f"(stripmine({inner.name}, 32) outside {node.name} first)")
    if inner.parallel or node.parallel or inner.vectorized or not inner.plain:
        raise step.error(f"{node.label} and {inner.label} must be plain sequential loops")
    for outer, moving in ((node, inner), (inner, node)):
        bounds = [b for b in (outer.origin.start, outer.origin.stop) if b is not None]
        if len(bounds) < 2 or any(moving.origin.var in b.symbols() for b in bounds):
            raise step.error(f"{outer.label}'s range must be known and not move with "
                             f"{moving.name}")
    return inner


def _unheld(program: Program, unit: Unit, run: str, lane: str, units: list[Unit]) -> str:
    """Why ``unit`` cannot be held ('' where it can)."""
    if unit.opaque or len(unit.statements) != 1 or unit.guards:
        return f"line {unit.line} is not one unguarded statement"
    statement = unit.first
    syntax = unit.syntax
    if not (isinstance(syntax, ast.AugAssign) and isinstance(syntax.op, OPERATORS)
            or isinstance(syntax, ast.Assign) and len(syntax.targets) == 1):
        return f"line {unit.line} is not an assignment or an update by + - *"
    if len(statement.writes) != 1:
        return f"line {unit.line} does not write one array element"
    target = statement.writes[0]
    where = held_subscripts(program, target, unit)
    if where is None:
        return f"line {unit.line} does not write one array element"
    if not _row(where, run, lane, moves=False):
        return (f"{target.text} must take {lane} in its last subscript alone and not "
                f"move with {run}")
    why = _expression(syntax.value, lane)
    if why:
        return f"line {unit.line}: {why}"
    targets = {u.first.writes[0].variable.key for u in units if u.first.writes}
    for access in statement.reads:
        variable = access.variable
        subscripts = held_subscripts(program, access, unit)
        if variable.key in targets and (variable.key != target.variable.key
                                        or subscripts != where) and not _other_row(
                                            subscripts, where):
            return (f"{access.text} reads an array the loop holds elements of, in the "
                    "same row")
        if subscripts is None and variable.is_array:
            return f"{access.text} is not affine"
        if subscripts and not _row(subscripts, run, lane, moves=True):
            return f"{access.text} must take {lane} in its last subscript alone, or not at all"
    return ""


def _other_row(read: tuple[Poly | None, ...] | None, held: tuple[Poly | None, ...]) -> bool:
    """Whether a read of a held array is written as another row than the held one (some
    subscript but the last differs): the emitted run checks at its start that the two
    never meet in it (``lanes_code.run_conditions``)."""
    return read is not None and len(read) == len(held) and any(
        a != b for a, b in zip(read[:-1], held[:-1]))


def _row(subscripts: tuple[Poly | None, ...], run: str, lane: str, moves: bool) -> bool:
    """Whether an access reads along the lanes' row: ``lane`` with coefficient 1 in the
    last subscript and nowhere else (or nowhere, for a read), and (a target) not ``run``."""
    if any(s is None for s in subscripts) or not subscripts:
        return False
    last = subscripts[-1]
    if any(lane in s.symbols() for s in subscripts[:-1]):
        return False
    if not moves and any(run in s.symbols() for s in subscripts):
        return False
    if lane not in last.symbols():
        return moves
    rest = last - Poly.symbol(lane)
    return lane not in rest.symbols()


def _expression(value: ast.expr, lane: str) -> str:
    """Why an update's value cannot be computed in lanes ('' where it can): only numbers,
    names, subscripts and + - *."""
    for part in ast.walk(value):
        if isinstance(part, ast.BinOp) and not isinstance(part.op, OPERATORS):
            return f"{ast.unparse(part)} is not + - *"
        if isinstance(part, (ast.Call, ast.Compare, ast.BoolOp, ast.IfExp, ast.Attribute,
                             ast.Lambda, ast.Starred)):
            return f"{ast.unparse(part)} is not + - * of numbers and elements"
        if isinstance(part, ast.UnaryOp) and not isinstance(part.op, ast.USub):
            return f"{ast.unparse(part)} is not + - *"
        if isinstance(part, ast.Name) and part.id == lane:
            if not any(part in ast.walk(s.slice) for s in ast.walk(value)
                       if isinstance(s, ast.Subscript)):
                return f"{lane} is used as a value"
    return ""
