"""Scalar temporaries written into their uses, so that a band they break becomes perfect.

Textbook code names a value before a loop that uses it: the saxpy form of the matrix
product, ``for k: a = alpha * A[i, k]; for j: C[i, j] += a * B[k, j]``. The assignment sits
between ``k`` and ``j``, so ``i, k, j`` is no perfect band, and the GPU mapping (which maps
and reorders perfect bands of the code as written) cannot put ``j`` beside ``i`` in the grid:
the product ran on one thread per row. Writing ``(alpha * A[i, k])`` where ``a`` was read,
and ``pass`` where it was assigned, changes no value (the same operations on the same
operands, in the same order) and leaves every other line where it was, so the explanation's
line numbers still name the user's file.

Code ported from C also names an index before the accesses that use it (Rodinia's hotspot3D:
``c = x + nx * y + nx * ny * z; tOut[c] = ... tIn[c] ...``): the analysis cannot see through
a scalar in a subscript, so every access of ``tOut`` looked like any element and no loop was
parallel. Written into the subscripts, the index is affine (and delinearized) again.

A temporary is written into its uses only where that is an identity, whatever the loops do,
and where it gains something: it breaks a band (a loop follows it in the body that holds it),
or it is an index (a subscript reads it, and its value reads no array: integer arithmetic of
loops and sizes). Elsewhere it is left alone, a register the compiler keeps anyway. It is
assigned once in the function, by a plain statement directly in a loop's body; it is
read only by the statements after it in that body; its value is arithmetic (``abs``, ``min``,
``max`` allowed) of constants, loop variables of the loops around it, names the function
never assigns, and elements of arrays it never writes; and no loop after it in that body
rebinds a name the value reads. Anything else is left as written.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

PURE_CALLS = frozenset({"abs", "min", "max"})


@dataclass(frozen=True)
class Inlined:
    """One temporary written into its uses: its name, its line and its value's text."""

    name: str
    line: int
    value: str
    index: bool = False  # an index (its subscripts become affine), not a band's breaker

    def text(self) -> str:
        gain = "the subscripts that read it are then affine" if self.index else \
            "the loop around it then holds a perfect band"
        return f"{self.name} (line {self.line}) written as ({self.value}) where it is read: {gain}"


def inline_temporaries(source: str, function: str) -> tuple[str, tuple[Inlined, ...]]:
    """``source`` with the temporaries of ``function`` that may be (see the module) written
    into their uses, and those temporaries; ``source`` itself where there are none."""
    found = function_named(source, function)
    if found is None:
        return source, ()
    edits: list[tuple[int, int, int, str]] = []
    inlined = []
    for assign, body, index in _candidates(found):
        name = assign.targets[0].id  # type: ignore[attr-defined]
        value = f"({ast.unparse(assign.value)})"
        uses = [n for after in body[body.index(assign) + 1:] for n in ast.walk(after)
                if isinstance(n, ast.Name) and n.id == name]
        edits += [(n.lineno, n.col_offset, n.end_col_offset or n.col_offset, value)
                  for n in uses]
        edits.append((assign.lineno, assign.col_offset, -1, "pass"))
        for extra in range(assign.lineno + 1, (assign.end_lineno or assign.lineno) + 1):
            edits.append((extra, 0, -1, ""))
        inlined.append(Inlined(name, assign.lineno, ast.unparse(assign.value), index))
    if not inlined:
        return source, ()
    return spliced(source, edits), tuple(inlined)


def function_named(source: str, function: str) -> ast.FunctionDef | None:
    """The definition of ``function`` in ``source``, if it has one."""
    return next((node for node in ast.walk(ast.parse(source))
                 if isinstance(node, ast.FunctionDef) and node.name == function), None)


def spliced(source: str, edits: list[tuple[int, int, int, str]]) -> str:
    """``source`` with each edit (line, start column, end column, text) made, the rest of
    every line where it was (end -1: to the end of the line, its newline kept), so that the
    line numbers still name the user's file."""
    lines = source.splitlines(keepends=True)
    for line, start, end, text in sorted(edits, key=lambda e: (e[0], -e[1])):
        old = lines[line - 1]
        rest = old[end:] if end >= 0 else old[len(old.rstrip("\n")):]
        lines[line - 1] = old[:start] + text + rest
    return "".join(lines)


def _candidates(function: ast.FunctionDef
                ) -> Iterator[tuple[ast.Assign, list[ast.stmt], bool]]:
    """Each assignment that may be written into its uses, with the loop body holding it and
    whether it is an index (else it breaks a band)."""
    bindings = _bindings(function)
    assigned = _parameters(function) + bindings
    stored = set(bindings)
    written = _written_arrays(function)
    loads = [n for n in ast.walk(function) if isinstance(n, ast.Name)
             and isinstance(n.ctx, ast.Load)]
    for loop, outer in _loops(function):
        for statement in loop.body:
            if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1
                    and isinstance(statement.targets[0], ast.Name)):
                continue
            name = statement.targets[0].id
            if assigned.count(name) != 1:
                continue
            after = loop.body[loop.body.index(statement) + 1:]
            index = _index_value(statement.value) and any(
                n.id == name for s in after for sub in ast.walk(s)
                if isinstance(sub, ast.Subscript) for n in ast.walk(sub.slice)
                if isinstance(n, ast.Name))
            if not index and not any(isinstance(s, ast.For) for s in after):
                continue  # beside no loop, in no subscript: nothing to gain
            later = {id(n) for s in after for n in ast.walk(s)}
            if any(n.id == name and id(n) not in later for n in loads):
                continue  # read before it, after the loop, or elsewhere
            if not any(n.id == name for n in loads):
                continue
            if _invariant(statement.value, {*outer, loop}, stored, written) and not (
                    _names(statement.value) & _rebound(after)):
                yield statement, loop.body, index


def _index_value(value: ast.expr) -> bool:
    """Whether ``value`` reads no array (an index made of loops, sizes and constants)."""
    return not any(isinstance(n, ast.Subscript) for n in ast.walk(value))


def _loops(function: ast.FunctionDef) -> Iterator[tuple[ast.For, list[ast.For]]]:
    """Every ``for`` loop of the function with the loops around it, outermost first."""
    def visit(body: list[ast.stmt], outer: list[ast.For]) -> Iterator[tuple[ast.For,
                                                                           list[ast.For]]]:
        for statement in body:
            if isinstance(statement, ast.For):
                yield statement, outer
                yield from visit(statement.body, [*outer, statement])
            for field in ("body", "orelse"):
                if not isinstance(statement, ast.For) and isinstance(
                        getattr(statement, field, None), list):
                    yield from visit(getattr(statement, field), outer)
    return visit(function.body, [])


def _invariant(value: ast.expr, around: set[ast.For], stored: set[str],
               written: set[str]) -> bool:
    """Whether ``value`` is arithmetic of constants, the loops' variables ``around``, names
    the function never assigns (its arguments among them), and elements of arrays it never
    writes."""
    loop_vars = {loop.target.id for loop in around if isinstance(loop.target, ast.Name)}
    for node in ast.walk(value):
        if isinstance(node, ast.Name):
            if node.id in stored and node.id not in loop_vars:
                return False
        elif isinstance(node, ast.Subscript):
            if not isinstance(node.value, ast.Name) or node.value.id in written:
                return False
        elif isinstance(node, ast.Call):
            if not (isinstance(node.func, ast.Name) and node.func.id in PURE_CALLS) \
                    or node.keywords:
                return False
        elif not isinstance(node, (ast.BinOp, ast.UnaryOp, ast.Constant, ast.Tuple,
                                   ast.Load, ast.operator, ast.unaryop)):
            return False
    return True


def _parameters(function: ast.FunctionDef) -> list[str]:
    """The function's named parameters."""
    return [a.arg for a in (*function.args.posonlyargs, *function.args.args,
                            *function.args.kwonlyargs)]


def _bindings(function: ast.FunctionDef) -> list[str]:
    """Every binding of a name but the named parameters, once per binding: the body's
    (a parameter rebound among them), ``*args`` and ``**kwargs``."""
    names = [a.arg for a in (function.args.vararg, function.args.kwarg) if a is not None]
    for node in ast.walk(function):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.append(node.id)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            names += node.names
        elif isinstance(node, (ast.FunctionDef, ast.Lambda)) and node is not function:
            names.append("<nested function>")
    return names


def _written_arrays(function: ast.FunctionDef) -> set[str]:
    """The names whose elements the function writes (or that it passes to a call: the call
    may write them)."""
    out = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, (ast.Store, ast.Del)):
            base = node.value
            while isinstance(base, ast.Subscript):
                base = base.value
            if isinstance(base, ast.Name):
                out.add(base.id)
        elif isinstance(node, ast.Call):
            out |= {a.id for a in node.args if isinstance(a, ast.Name)}
    return out


def _names(value: ast.expr) -> set[str]:
    return {n.id for n in ast.walk(value) if isinstance(n, ast.Name)}


def _rebound(statements: list[ast.stmt]) -> set[str]:
    """The names the statements bind (loop variables, assignments)."""
    return {n.id for s in statements for n in ast.walk(s)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
