"""The program a recipe rewrites: the original statements under a new tree of loops.

A transformation never edits statements. It rearranges the loops around them, and each loop
of the new tree says which original loop's iterations it runs over and how:

* a *variable loop* (``tile == 0``) runs over the values of an original loop's variable,
  within the tile of the loop named by ``within`` when that loop was strip-mined;
* a *tile loop* (``tile == T``) runs over the first values of tiles of ``T`` iterations of
  that variable (strip-mining makes one; unrolling makes one whose variable loop became
  copies of the body).

The leaves are :class:`Unit` objects: an original statement, or a block kept as written
(an ``if`` whose condition loclab cannot express, a loop with a data-dependent bound), or a
copy of one made by unrolling (``restriction`` then names the iterations it runs). Because
every new loop is a function of the original iterations, the tree defines a schedule: a time
for every statement instance (:mod:`loclab.transform.schedule`), which legality checks against
the dependences and isl turns back into loops (:mod:`loclab.transform.codegen`).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Union

from loclab.deps.model import Model
from loclab.nest.ir import Guard, Loop, Nest, Statement, Variable


@dataclass(eq=False)
class LoopNode:
    """One loop of the new program."""

    name: str  # the iterator's name in the emitted code
    origin: Loop  # the original loop whose variable it runs over
    body: list["Node"] = field(default_factory=list)
    tile: int = 0  # 0: the variable's values; T: first values of tiles of T iterations
    within: "LoopNode | None" = None  # the tile loop that bounds its range
    parallel: bool = False
    # a parallel loop whose iterations are handed out one at a time as threads free up
    # (their work differs: a triangle's rows), not in one equal run per thread
    dynamic: bool = False
    cyclic: int = 0  # a parallel loop whose iterations are dealt in turn into this many slots
    reductions: tuple["Reduction", ...] = ()  # what a parallel loop combines across threads
    copies: int = 0  # a tile loop made by unrolling: its body holds this many copies
    vectorized: bool = False  # its reductions may be reordered into vector lanes
    # ``hold``: the elements its inner loop (a strip of this many iterations) updates stay in
    # vector lanes for its run (Numba); 0: in memory
    hold: int = 0
    # Where the CUDA emitter runs its iterations: "blockIdx.x" (a grid loop) or "threadIdx.y"
    # (a block loop, ``threads`` of them); "" on the host or in one thread.
    gpu: str = ""
    threads: int = 0
    chunks: "Chunks | None" = None  # a parallel loop whose reductions into arrays use copies
    # ``fuse``: the other original loops this loop runs (their statements' instances), each
    # with the shift added to its variable: an instance at ``x`` runs at ``x + shift``
    fused: tuple[tuple[Loop, int], ...] = ()
    # ``skew``: loops around it whose values, times a factor, are added to its variable
    # (inside a tile's floor, for a tile loop); its tile loops inherit them
    skew: tuple[tuple["LoopNode", int], ...] = ()

    @property
    def line(self) -> int:
        return self.origin.line

    @property
    def origins(self) -> tuple[Loop, ...]:
        """Every original loop it runs: its own, then the ones fused into it."""
        return (self.origin,) + tuple(loop for loop, _ in self.fused)

    @property
    def plain(self) -> bool:
        """Whether its value is one original loop's variable (or tile of it): not fused with
        another loop, not skewed by one."""
        return not self.fused and not self.skew

    @property
    def label(self) -> str:
        return f"{self.name}@{self.line}"

    def units(self) -> Iterator["Unit"]:
        yield from units_of(self.body)

    def loops(self) -> Iterator["LoopNode"]:
        """This loop and every loop inside it, outermost first."""
        yield self
        for child in self.body:
            if isinstance(child, LoopNode):
                yield from child.loops()


@dataclass(eq=False)
class Unit:
    """A leaf of the new tree: code emitted as one piece at one point of the loops around it.

    ``loops`` are the original loops around it: an instance is a point of their iteration
    space (``x0``, ``x1``, ... outermost first). ``syntax`` is what the emitter prints, in the
    frontend's own terms (``ast`` nodes for Python). ``restriction`` (isl constraints on those
    coordinates) selects the instances a copy made by unrolling runs; ``copy`` says which
    copy it is of each unrolled loop (its private variables get a name per copy).
    """

    statements: tuple[Statement, ...]
    loops: tuple[Loop, ...]
    guards: tuple[Guard, ...]  # affine conditions around it (inside its loops)
    syntax: Any
    opaque: str = ""  # why it is kept as written, for a block
    restriction: tuple[str, ...] = ()
    copy: tuple[tuple[str, int], ...] = ()  # (unrolled loop's id, index) per unrolling

    @property
    def first(self) -> Statement:
        return self.statements[0]

    @property
    def line(self) -> int:
        return self.first.line


Node = Union[LoopNode, Unit]


def units_of(body: list[Node]) -> Iterator[Unit]:
    for child in body:
        if isinstance(child, Unit):
            yield child
        else:
            yield from child.units()


def loops_of(body: list[Node]) -> Iterator[LoopNode]:
    for child in body:
        if isinstance(child, LoopNode):
            yield from child.loops()


@dataclass(frozen=True)
class Reduction:
    """A variable a parallel loop updates with one associative operator: a scalar is
    combined per thread (Numba's reductions, OpenMP's ``reduction`` clause), an array element
    updated atomically (a generalized reduction), or in a copy of the array per thread
    (``copy``: the name of the copies), the copies combined into the array after the
    loop. A vectorized loop's sum into one array element is held in a scalar for the loop's
    run (``held``: its name; loaded before the loop, stored after it)."""

    key: str
    name: str
    op: str
    scalar: bool
    copy: str = ""
    held: str = ""


@dataclass(frozen=True)
class Chunks:
    """The names a parallel loop with copies of arrays needs where its iterations are split
    into one chunk per thread by hand (Numba's ``prange`` gives no thread number): the chunk,
    how many, the iteration within the run of all, and an index per dimension of the arrays
    to combine."""

    chunk: str
    count: str
    index: str
    elements: tuple[str, ...]


@dataclass(frozen=True)
class Private:
    """Storage of its own for a variable: per iteration of ``loop`` (privatized, or declared
    or allocated inside it), or an array with an element per iteration of ``loops``
    (expanded)."""

    variable: Variable
    loop: Loop  # private per iteration of this loop (and of the loops around it)
    kind: str  # "privatize", "local" (declared in the loop body), "expand"
    expand_by: tuple[Loop, ...] = ()  # expanded: the loops that index its new dimensions
    name: str = ""  # expanded: the new array's name; copied back: the private copy's
    # copied back (an array the caller sees, a scratch row each iteration fills first): the
    # values of the loops around and of ``loop`` at the last iteration (isl functions of the
    # sizes), whose copy the caller's array receives
    last: tuple[str, ...] = ()


@dataclass(frozen=True)
class Buffer:
    """A read-only array read through a copy: ``stage`` (the slice one iteration of ``loop``
    reads, copied at the start of each iteration) or ``copy`` (what the whole loop reads,
    copied before it)."""

    kind: str  # "stage" or "copy"
    variable: Variable
    loop: LoopNode
    name: str  # the buffer's name
    transposed: bool = False  # a 2-D slice kept column by column (``transpose=True``)
    # the reads that read the buffer, as written (empty: every read of the array): copy's
    # reads that see no write of the loop, stage's ``using=`` reads
    reads: frozenset[str] = frozenset()

    def serves(self, text: str) -> bool:
        """Whether the read written ``text`` (as ``Access.text``) reads this buffer."""
        return not self.reads or text in self.reads

    def covers(self, unit: object) -> bool:
        """Whether the unit's reads of the array go through this buffer."""
        return any(unit is u for u in self.loop.units())


@dataclass(eq=False)
class Program:
    """The state of a recipe: the original function and its new loop tree."""

    nest: Nest
    model: Model
    body: list[Node]
    syntax: Any  # the frontend's view of the function (Python: FunctionSyntax)
    # by variable key; a variable private to two loops apart (a scalar two nests reuse)
    # holds its second under ``key@line`` (``with_private``)
    private: dict[str, Private] = field(default_factory=dict)
    buffers: list[Buffer] = field(default_factory=list)
    names: set[str] = field(default_factory=set)  # identifiers in use in the function
    notes: list[str] = field(default_factory=list)  # what was kept as written, and why
    # the compiler may fuse multiplies and adds and reorder sums throughout (``fastmath()``)
    fast_math: bool = False

    def units(self) -> list[Unit]:
        return list(units_of(self.body))

    def privates_of(self, key: str) -> list[Private]:
        """The storage of its own the variable ``key`` has, loop by loop."""
        return [p for p in self.private.values() if p.variable.key == key]

    def privates_near(self, key: str, loop: Loop) -> list[Private]:
        """The storage ``key`` has at ``loop``, at a loop around it or at one inside it
        (not at loops apart from it: another nest's)."""
        return [p for p in self.privates_of(key)
                if loop in p.loop.enclosing or p.loop in loop.enclosing]

    def private_in(self, key: str, loops: Sequence[Loop]) -> Private | None:
        """The private storage a use of ``key`` inside ``loops`` (a statement's) reads and
        writes; None where it uses the variable itself."""
        return next((p for p in self.privates_of(key) if p.loop in loops), None)

    def with_private(self, private: Private) -> None:
        """Give ``private.variable`` its storage at ``private.loop``: it replaces what the
        variable had at a loop around or inside that one, and joins what it has at loops
        apart from it (each of two nests privatizing the scalar they both use)."""
        key = private.variable.key
        replaced = self.privates_near(key, private.loop)
        kept = {k: p for k, p in self.private.items() if p not in replaced}
        taken = {k for k in kept if kept[k].variable.key == key}
        self.private = {**kept, (key if key not in taken else
                                 f"{key}@{private.loop.line}"): private}

    def loops(self) -> list[LoopNode]:
        return list(loops_of(self.body))

    def rank(self, key: str) -> int:
        """How many subscripts the accesses of an array have."""
        return max(len(a.subscripts) for s in self.nest.statements for a in s.accesses
                   if a.variable.key == key)

    def fresh_name(self, wanted: str) -> str:
        """``wanted``, or with a number when the function already uses it."""
        if wanted not in self.names:
            self.names.add(wanted)
            return wanted
        for number in itertools.count(2):
            candidate = f"{wanted}{number}"
            if candidate not in self.names:
                self.names.add(candidate)
                return candidate
        raise AssertionError("unreachable")

    def expansion_name(self, variable: Variable, loop: Loop) -> str:
        """The array an expanded variable becomes: its own name where every use is inside
        the loop (the slides' ``acc[i]``), a new one where the scalar lives on outside."""
        outside = any(loop not in s.loops for s in self.nest.statements
                      if any(a.variable is variable for a in s.accesses))
        return self.fresh_name(f"{variable.name}_x") if outside else variable.name

    def clone(self) -> "Program":
        """A copy whose tree can be rewritten without touching this one (statements, loops
        and syntax of the original function are shared: nothing rewrites them)."""
        mapping: dict[int, LoopNode] = {}

        def copy_body(body: list[Node]) -> list[Node]:
            out: list[Node] = []
            for child in body:
                if isinstance(child, Unit):
                    out.append(replace(child))
                else:
                    node = replace(child, body=[])
                    mapping[id(child)] = node
                    node.body = copy_body(child.body)
                    out.append(node)
            return out

        body = copy_body(self.body)
        for node in loops_of(body):
            if node.within is not None:
                node.within = mapping[id(node.within)]
            node.skew = tuple((mapping[id(other)], factor) for other, factor in node.skew)
        buffers = [replace(b, loop=mapping[id(b.loop)]) for b in self.buffers]
        return Program(self.nest, self.model, body, self.syntax, dict(self.private), buffers,
                       set(self.names), list(self.notes), self.fast_math)

    # -- where things are -------------------------------------------------------------------
    def path(self, target: Node) -> list[LoopNode]:
        """The loops around a node, outermost first."""
        found = _path(self.body, target, [])
        if found is None:
            raise KeyError("node not in this program")
        return found

    def parent_body(self, target: Node) -> list[Node]:
        """The list that holds a node (the function's body or a loop's)."""
        path = self.path(target)
        return path[-1].body if path else self.body


def _path(body: list[Node], target: Node, around: list[LoopNode]) -> list[LoopNode] | None:
    for child in body:
        if child is target:
            return around
        if isinstance(child, LoopNode):
            found = _path(child.body, target, around + [child])
            if found is not None:
                return found
    return None
