"""The loop-nest IR both frontends produce and the dependence analysis reads.

A function becomes a tree of loops and statements. Every statement lists its memory accesses
in execution order (reads, then the write; a chained assignment ``a = b = e`` is one statement
with two writes, in the order the language stores them), the loops around it, and the
conditions that guard it. Subscripts are polynomials (``loclab.nest.expr``) or ``None`` where
the frontend could not express them (data-dependent, like ``hist[ind[i]]``); the analysis
treats those conservatively.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Union

from loclab.nest.expr import Condition, Poly


@dataclass(eq=False)
class Variable:
    """One declared (or implied) variable: an array or a scalar.

    ``scope`` holds the loops around the declaration: a variable declared inside a loop body
    (a C local, a NumPy allocation in Python) is a fresh location in every iteration of them.
    """

    key: str  # unique within the function (shadowed declarations get distinct keys)
    name: str  # what the user wrote
    is_array: bool
    scope: tuple["Loop", ...] = ()
    extents: tuple[Poly | None, ...] | None = None  # declared sizes, when known
    line: int = 0
    is_argument: bool = False  # a function parameter: may be live after the function
    # Whose memory it may share: arrays of one class may overlap when one of them is an
    # argument (C: the element type, "any" for char and void pointers; Python: "array", an
    # argument may be another argument or a view of it). None: memory of its own (a local,
    # a restrict pointer, a scalar).
    overlap_class: str | None = None


@dataclass(eq=False)
class Access:
    """A read or a write of one variable by one statement."""

    variable: Variable
    write: bool
    subscripts: tuple[Poly | None, ...]  # None: unknown (non-affine or data-dependent)
    text: str  # as written, e.g. "A[j - 1][i]"

    @property
    def affine(self) -> bool:
        return all(s is not None and s.is_affine() for s in self.subscripts)


@dataclass(eq=False)
class Guard:
    """A condition around a statement; ``condition`` is None when it is not affine."""

    condition: Condition | None
    negated: bool  # True in the else branch
    text: str
    test: "Statement | None" = None  # the statement that reads memory to evaluate it


@dataclass(eq=False)
class Update:
    """``target op= value`` (or ``target = target op value``, ``target = max(target, v)``).

    Also ``A[i] = A[i-1] op value`` with ``same_location`` False: a recurrence, perhaps a scan.
    The analysis recognizes reductions and scans from these. ``target_elsewhere`` is True when
    the target variable also occurs in the value or in the target's own subscripts.
    """

    op: str  # "+", "*", "min", "max", "&", "|", "^", "-"
    target_elsewhere: bool
    same_location: bool = True


@dataclass(eq=False)
class Statement:
    id: str
    ordinal: int  # program order among statements
    line: int
    column: int
    source: str
    loops: tuple["Loop", ...]
    guards: tuple[Guard, ...]
    accesses: list[Access]
    update: Update | None = None
    file: str = ""  # the file that holds it, as the user named it (a header, for included code)

    @property
    def writes(self) -> list[Access]:
        return [a for a in self.accesses if a.write]

    @property
    def reads(self) -> list[Access]:
        return [a for a in self.accesses if not a.write]

    @property
    def exact_domain(self) -> bool:
        return all(g.condition is not None for g in self.guards)


@dataclass(eq=False)
class Loop:
    """``for var in range(start, stop, step)``: start inclusive, stop exclusive.

    A bound is None when it depends on data (``range(count[i])``): the analysis then leaves
    that side unbounded, which is safe. A step that is a size (``i += inc``) is ``stride``,
    with ``step`` its sign as assumed (``signed``: the code fixes it, as C's condition
    ``i < n`` does; else the analysis tries both): the loop is analyzed over every value
    between its bounds, a superset of its iterations.
    """

    id: str
    var: str
    start: Poly | None
    stop: Poly | None
    step: int
    line: int
    column: int
    depth: int
    parent: "Loop | None"
    guards: tuple[Guard, ...] = ()
    body: list[Union["Loop", Statement]] = field(default_factory=list)
    header: str = ""
    file: str = ""  # the file that holds it, as the user named it (a header, for included code)
    stride: Poly | None = None  # a step that is a size: its expression (step is its sign)
    signed: bool = True  # whether the code fixes the sign of a stride

    @property
    def enclosing(self) -> tuple["Loop", ...]:
        """The loops around this one and itself, outermost first."""
        chain: list[Loop] = []
        node: Loop | None = self
        while node is not None:
            chain.append(node)
            node = node.parent
        return tuple(reversed(chain))

    def bound_symbols(self) -> set[str]:
        """The names its known bounds read (sizes, outer loops' variables)."""
        return {name for bound in (self.start, self.stop) if bound is not None
                for name in bound.symbols()}

    def statements(self) -> list[Statement]:
        """Every statement inside, in program order."""
        out: list[Statement] = []
        for child in self.body:
            out.extend(child.statements() if isinstance(child, Loop) else [child])
        return out


Node = Union[Loop, Statement]


@dataclass(eq=False)
class Nest:
    """One analyzed function."""

    name: str
    filename: str
    language: str  # "python" or "c"
    line: int
    body: list[Node]
    loops: list[Loop]
    statements: list[Statement]
    variables: list[Variable]
    parameters: list[str]  # size parameters (symbols that are not loop variables)
    notes: list[str] = field(default_factory=list)  # what was treated conservatively, why
    # sizes that stand for a local's value loclab could not express (``k = n >> 1``): their
    # ties to the other sizes are lost, so nothing that uses one is exact
    opaque: list[str] = field(default_factory=list)
    # of those, the ones computed from the function's scalar arguments alone (``M = N // S``,
    # ``OH = (H - P) // S + 1``): the value's Python text, evaluated where the arguments are
    # known (``transform.inputs.settled_sizes``) instead of chosen as a size of its own
    derived: dict[str, str] = field(default_factory=dict)


def common_loops(first: Statement, second: Statement) -> tuple[Loop, ...]:
    """The loops enclosing both statements (the same loop nodes), outermost first."""
    return _shared(first.loops, second.loops)


def loops_around_all(statements: Sequence[Statement]) -> tuple[Loop, ...]:
    """The loops enclosing every one of ``statements``, outermost first (none where there
    is no statement)."""
    if not statements:
        return ()
    return functools.reduce(lambda loops, s: _shared(loops, s.loops), statements[1:],
                            tuple(statements[0].loops))


def _shared(first: Sequence[Loop], second: Sequence[Loop]) -> tuple[Loop, ...]:
    """The leading loops two chains of enclosing loops share (the same loop nodes)."""
    common: list[Loop] = []
    for a, b in zip(first, second):
        if a is not b:
            break
        common.append(a)
    return tuple(common)
