"""A Python function as a :class:`~loclab.transform.tree.Program`: its loop nest and syntax.

The IR is built here from the very ``ast`` nodes the emitter prints later, so every original
loop and statement is matched with its syntax by position (line and column). A statement
becomes a unit of its own; an ``if`` whose condition is affine and reads no memory dissolves
into the conditions of the statements under it (isl then emits it where it belongs); an
``if`` loclab cannot express exactly, and a loop whose bounds depend on data, are kept as
written, as one opaque unit: nothing moves inside them, and the notes say so. Code outside
the loop nest (a docstring, an allocation before the loops) keeps its place.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from loclab.deps.model import Model
from loclab.nest.ir import Guard, Loop, Nest, Statement
from loclab.nest.python import build_python, python_function
from loclab.nest.source import SourceLines
from loclab.transform.tree import Node, Program, Unit
from loclab.transform.walker import Walker


@dataclass(eq=False)
class FunctionSyntax:
    """What the Python emitter needs of the original: the function's ``ast`` and the module
    lines (imports, globals) the function relies on."""

    source: str
    filename: str
    function: ast.FunctionDef
    offset: int  # lines before the source (a function read from inside its file)
    docstring: ast.stmt | None = None
    allocations: dict[str, ast.Assign] = field(default_factory=dict)  # arrays, by name

    def imports(self) -> list[str]:
        """The module's top-level imports, as code: what the function's names may need
        wherever a copy of it is emitted."""
        return [ast.unparse(node) for node in ast.parse(self.source).body
                if isinstance(node, (ast.Import, ast.ImportFrom))]


def python_program(source: str, filename: str, function: str,
                   line_offset: int = 0) -> Program:
    """The Program of the function named ``function`` (``Class.method`` for a method)."""
    node = python_function(source, filename, function, line_offset)
    nest = build_python(SourceLines(source), node, filename, line_offset, function)
    syntax = FunctionSyntax(source, filename, node, line_offset)
    builder = _Builder(nest, syntax)
    body = builder.block(node.body, (), (), top=True)
    program = Program(nest, Model(nest), body, syntax, notes=builder.notes,
                      names=_identifiers(node))
    return program


class _Builder(Walker):
    def __init__(self, nest: Nest, syntax: FunctionSyntax) -> None:
        super().__init__()
        self.nest = nest
        self.syntax = syntax
        self.statements = {(s.line, s.column): s for s in nest.statements}
        self.loops = {(l.line, l.column): l for l in nest.loops}

    def at(self, node: ast.AST) -> tuple[int, int]:
        return node.lineno + self.syntax.offset, node.col_offset + 1  # type: ignore[attr-defined]

    def block(self, body: list[ast.stmt], loops: tuple[Loop, ...], guards: tuple[Guard, ...],
              top: bool = False) -> list[Node]:
        out: list[Node] = []
        for index, node in enumerate(body):
            if top and index == 0 and isinstance(node, ast.Expr) \
                    and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                self.syntax.docstring = node
                continue
            out += self.node(node, loops, guards)
        return out

    def node(self, node: ast.stmt, loops: tuple[Loop, ...],
             guards: tuple[Guard, ...]) -> list[Node]:
        if isinstance(node, ast.For):
            return [self.loop(node, loops, guards)]
        if isinstance(node, ast.If):
            return self.branch(node, loops, guards)
        statement = self.statements.get(self.at(node))
        if statement is not None:
            return [Unit((statement,), loops, guards, node)]
        if isinstance(node, ast.Pass) or (isinstance(node, ast.Expr)
                                          and isinstance(node.value, ast.Constant)):
            return []
        if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name):  # an allocation
            self.syntax.allocations[node.targets[0].id] = node
            if loops:  # the array is local to the loop: allocated where its storage goes
                return []
        return [Unit((), (), (), node)]  # before the loops (an allocation, a bare return)

    def loop(self, node: ast.For, loops: tuple[Loop, ...],
             guards: tuple[Guard, ...]) -> Node:
        return self.loop_node(node, self.loops[self.at(node)], node.body, loops, guards)

    def branch(self, node: ast.If, loops: tuple[Loop, ...],
               guards: tuple[Guard, ...]) -> list[Node]:
        inside = [s for s in self.nest.statements if _within(s, node, self.syntax.offset)]
        return self.branches(node, self.statements.get(self.at(node)), inside,
                             [(node.body, False), (node.orelse, True)], loops, guards)

    def line_of(self, node: ast.stmt) -> int:
        return self.at(node)[0]


def _within(statement: Statement, node: ast.stmt, offset: int) -> bool:
    first = node.lineno + offset  # type: ignore[attr-defined]
    last = node.end_lineno + offset  # type: ignore[attr-defined]
    return first < statement.line <= last or (
        statement.line == first and statement.column > node.col_offset + 1)


def _identifiers(function: ast.FunctionDef) -> set[str]:
    names = {n.id for n in ast.walk(function) if isinstance(n, ast.Name)}
    names |= {a.arg for a in ast.walk(function) if isinstance(a, ast.arg)}
    return names | {function.name}
