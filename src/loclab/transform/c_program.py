"""A C function as a :class:`~loclab.transform.tree.Program`: its loop nest and syntax.

The file is preprocessed and parsed as ``loclab analyze`` reads it; the IR is built from the
same pycparser tree, and every original loop and statement is matched with its node by its
place in the user's text. As for Python: a statement is a unit, an affine ``if`` that reads no
memory dissolves into its statements' conditions, a condition loclab cannot express or a
loop with a bound that depends on data is kept as written. With a ``#pragma scop`` region
only the region is the nest; code outside it is kept, in order, around the new loops.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loclab.deps.model import Model
from loclab.nest.c import build_c
from loclab.nest.cunit import CUnit, has_scop, is_pragma, parse_c
from loclab.nest.ir import Guard, Loop, Nest, Statement
from loclab.transform.tree import Node, Program, Unit
from loclab.transform.walker import Walker


@dataclass(eq=False)
class CFunctionSyntax:
    """What the C emitter needs: the parsed unit, the function's node, and the code outside
    the nest (``before`` and ``after`` it, pycparser nodes in order)."""

    unit: CUnit
    function: Any
    text: str  # the user's file, as written
    before: list[Any] = field(default_factory=list)
    after: list[Any] = field(default_factory=list)
    declarations: dict[str, Any] = field(default_factory=dict)  # local variables, by name


def c_program(source: str, filename: str, function: str,
              include_dirs: Iterable[str | Path] = (),
              defines: Mapping[str, str] | None = None) -> Program:
    unit = parse_c(source, filename, include_dirs, defines)
    node = unit.function(function)
    nest = build_c(node, unit)
    syntax = CFunctionSyntax(unit, node, source)
    parameters = node.decl.type.args
    for parameter in (parameters.params if parameters else []):
        if getattr(parameter, "name", None):
            syntax.declarations[parameter.name] = parameter
    builder = _Builder(nest, syntax)
    body = builder.compound(node.body, (), (), top=True)
    return Program(nest, Model(nest), body, syntax, notes=builder.notes,
                   names=_identifiers(node))


class _Builder(Walker):
    def __init__(self, nest: Nest, syntax: CFunctionSyntax) -> None:
        super().__init__()
        self.nest = nest
        self.syntax = syntax
        self.unit = syntax.unit
        self.statements = {(s.file, s.line, s.column): s for s in nest.statements}
        self.loops = {(l.file, l.line, l.column): l for l in nest.loops}
        self.active = not has_scop(syntax.function.body)
        self.seen_nest = False

    def at(self, node: Any) -> tuple[str, int, int]:
        return self.unit.locate(getattr(node, "coord", None))

    def compound(self, node: Any, loops: tuple[Loop, ...], guards: tuple[Guard, ...],
                 top: bool = False) -> list[Node]:
        from pycparser import c_ast

        out: list[Node] = []
        for item in node.block_items or []:
            if is_pragma(item, "scop") or is_pragma(item, "endscop"):
                self.active = is_pragma(item, "scop")
                continue
            if top and not self.active:
                (self.syntax.after if self.seen_nest else self.syntax.before).append(item)
                continue
            if top:
                self.seen_nest = True
            if isinstance(item, c_ast.Compound):
                out += self.compound(item, loops, guards)
            else:
                out += self.node(item, loops, guards, top)
        return out

    def node(self, item: Any, loops: tuple[Loop, ...], guards: tuple[Guard, ...],
             top: bool) -> list[Node]:
        from pycparser import c_ast

        if isinstance(item, c_ast.For):
            return [self.loop(item, loops, guards)]
        if isinstance(item, c_ast.If):
            return self.branch(item, loops, guards)
        if isinstance(item, (c_ast.Decl, c_ast.DeclList)):
            return self.declarations(item, loops, guards, top)
        statement = self.statements.get(self.at(item))
        if statement is not None:
            return [Unit((statement,), loops, guards, item)]
        if isinstance(item, c_ast.Pragma):  # it annotated an original loop
            note = (f"line {self.at(item)[1]}: #pragma {item.string} left out: the new "
                    "loops carry their own")
            if note not in self.notes:
                self.notes.append(note)
        return []

    def declarations(self, item: Any, loops: tuple[Loop, ...], guards: tuple[Guard, ...],
                     top: bool) -> list[Node]:
        """A declaration with a value is a statement; every declared name is noted so that
        the emitter can declare it where its storage goes."""
        from pycparser import c_ast

        decls = item.decls if isinstance(item, c_ast.DeclList) else [item]
        out: list[Node] = []
        for decl in decls:
            self.syntax.declarations.setdefault(decl.name, decl)
            statement = self.statements.get(self.at(decl))
            if statement is not None and decl.init is not None:
                out.append(Unit((statement,), loops, guards, decl))
            elif top and not loops and decl.init is None:
                self.syntax.before.append(decl)
        return out

    def loop(self, node: Any, loops: tuple[Loop, ...], guards: tuple[Guard, ...]) -> Node:
        return self.loop_node(node, self.loops[self.at(node)], node.stmt, loops, guards)

    def block(self, node: Any, loops: tuple[Loop, ...], guards: tuple[Guard, ...]) -> list[Node]:
        from pycparser import c_ast

        if isinstance(node, c_ast.Compound):
            return self.compound(node, loops, guards)
        return self.node(node, loops, guards, top=False)

    def branch(self, node: Any, loops: tuple[Loop, ...],
               guards: tuple[Guard, ...]) -> list[Node]:
        inside = [s for s in self.nest.statements if _within(self.unit, s, node)]
        return self.branches(node, self.statements.get(self.at(node)), inside,
                             [(node.iftrue, False), (node.iffalse, True)], loops, guards)

    def line_of(self, node: Any) -> int:
        return self.at(node)[1]


def _within(unit: CUnit, statement: Statement, node: Any) -> bool:
    """Whether a statement is inside an ``if`` node (its branches' subtrees)."""
    from pycparser import c_ast

    places = set()

    class Visitor(c_ast.NodeVisitor):
        def generic_visit(self, child: Any) -> None:
            coord = getattr(child, "coord", None)
            if coord is not None:
                places.add(unit.locate(coord))
            super().generic_visit(child)

    for part in (node.iftrue, node.iffalse):
        if part is not None:
            Visitor().visit(part)
    return (statement.file, statement.line, statement.column) in places


def _identifiers(function: Any) -> set[str]:
    from pycparser import c_ast

    names: set[str] = set()

    class Visitor(c_ast.NodeVisitor):
        def visit_ID(self, node: Any) -> None:
            names.add(node.name)

        def visit_Decl(self, node: Any) -> None:
            names.add(node.name)
            self.generic_visit(node)

    Visitor().visit(function)
    return names
