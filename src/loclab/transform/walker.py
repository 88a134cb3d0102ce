"""What both frontends do when they turn a function's syntax into a tree of units.

A language's builder walks its own syntax and calls these for the parts that do not depend
on the language: a loop whose bounds isl cannot read, and a condition that reads memory or is
not affine, become one opaque unit (kept as written, moved whole, and noted); an affine
condition that reads no memory dissolves into the conditions of the statements in its
branches.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from loclab.nest.expr import condition_polys
from loclab.nest.ir import Guard, Loop, Statement
from loclab.transform.tree import LoopNode, Node, Unit


class Walker(ABC):
    """The language-independent half of a builder; a subclass supplies ``block`` (the units
    of a branch's syntax) and ``line_of`` (a node's line in the user's file)."""

    def __init__(self) -> None:
        self.notes: list[str] = []

    @abstractmethod
    def block(self, part: Any, loops: tuple[Loop, ...], guards: tuple[Guard, ...]) -> list[Node]:
        """The units of a branch's or a loop body's syntax."""

    @abstractmethod
    def line_of(self, node: Any) -> int:
        """The line of a node in the user's file."""

    def loop_node(self, node: Any, loop: Loop, body: Any, loops: tuple[Loop, ...],
                  guards: tuple[Guard, ...]) -> Node:
        """The loop as a loop of the tree, or whole as written when a bound depends on data."""
        if any(b is None or not b.is_affine() for b in (loop.start, loop.stop)):
            return self.opaque(node, loop.statements(), loops, guards,
                               f"the loop at line {loop.line} has a bound that depends on data")
        tree = LoopNode(loop.var, loop)
        tree.body = self.block(body, loops + (loop,), guards)
        return tree

    def branches(self, node: Any, test: Statement | None, inside: list[Statement],
                 parts: list[tuple[Any, bool]], loops: tuple[Loop, ...],
                 guards: tuple[Guard, ...]) -> list[Node]:
        """The units of an ``if`` (``parts``: each branch's syntax and whether it is the else
        branch): its branches' units under their conditions, or one opaque unit."""
        line = self.line_of(node)
        if test is not None or not inside:
            members = ([test] if test is not None else []) + inside
            if not members:
                return []
            return [self.opaque(node, members, loops, guards,
                                f"the condition at line {line} {_what_it_reads(test)}")]
        if not _affine(inside[0].guards[len(guards)]):
            return [self.opaque(node, inside, loops, guards,
                                f"the condition at line {line} is not affine")]
        out: list[Node] = []
        for part, negated in parts:
            members = [s for s in inside if s.guards[len(guards)].negated == negated]
            if members and part is not None:  # the branch's own (maybe negated) condition
                out += self.block(part, loops, guards + (members[0].guards[len(guards)],))
        return out

    def opaque(self, node: Any, members: list[Statement], loops: tuple[Loop, ...],
               guards: tuple[Guard, ...], why: str) -> Unit:
        note = f"line {self.line_of(node)}: kept as written ({why})"
        if note not in self.notes:
            self.notes.append(note)
        return Unit(tuple(sorted(members, key=lambda s: s.ordinal)), loops, guards, node,
                    opaque=why)


def _what_it_reads(test: Statement | None) -> str:
    """What makes a condition depend on data: the arrays it reads, else the scalars (values
    computed in the function, not sizes isl can reason about)."""
    if test is None:
        return "reads memory"
    arrays = sorted({r.variable.name for r in test.reads if r.variable.is_array})
    if arrays:
        return f"reads memory ({', '.join(arrays)})"
    scalars = sorted({r.variable.name for r in test.reads})
    return f"reads {', '.join(scalars)}, computed at run time" if scalars else "reads memory"


def _affine(guard: Guard) -> bool:
    return guard.condition is not None and all(
        p.is_affine() for p in condition_polys(guard.condition))
