"""Running a traced nest in a transformed order: the brute-force judge of interchange,
distribution and privatization verdicts.

Subscripts, bounds and conditions of the nests of :mod:`tests.nestgen` never depend on what
the program computes (index arrays are read-only), so interchanging or distributing loops
executes the very same statement instances, only in another order. A transformation is
therefore a new order of the instances of a traced run (:func:`steps`), plus private copies:
a privatized variable gets a fresh, undefined copy per iteration of the transformed loops, and
its last value written is copied back where the analysis says it may be used later.

Two runs compute the same thing, whatever each statement computes, iff every read of every
instance sees the value of the same write instance (or the same initial value) and every
location the caller can see ends with the value of the same write instance: :class:`Flow`.
A loop is parallel in a run iff no two of its iterations touch one location (after renaming
to private copies), one of them writing: :func:`carried`.
"""

from __future__ import annotations

import ast
import copy
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from hypothesis import strategies as st

from tests.nestgen import SCALARS, Access, Location, nests, parse

Instance = tuple[int, tuple[int, ...]]  # (statement line, values of its loop variables)
UNDEFINED = "undefined"  # what a fresh private copy holds before its first write


@dataclass(frozen=True)
class Step:
    """One statement instance of a traced run, with its accesses in execution order."""

    line: int
    loops: tuple[int, ...]  # header lines of the enclosing loops, outermost first
    iteration: tuple[int, ...]
    order: tuple[int, ...]  # values times the sign of the step: grows with execution
    accesses: tuple[tuple[Location, bool], ...]
    position: int  # index in the original run
    texts: tuple[str, ...] = ()  # each access as Python prints it (``A[i + 1]``)

    @property
    def instance(self) -> Instance:
        return self.line, self.iteration

    def inside(self, loop: int, depth: int) -> bool:
        """Whether the loop with header line ``loop`` at ``depth`` encloses this instance."""
        return len(self.loops) > depth and self.loops[depth] == loop


def steps(trace: Iterable[Access]) -> list[Step]:
    """The statement instances of a trace (consecutive accesses of one line and iteration)."""
    groups: list[list[Access]] = []
    for access in trace:
        last = groups[-1][-1] if groups else None
        if last is None or (last.line, last.iteration, last.loops) != (
                access.line, access.iteration, access.loops):
            groups.append([])
        groups[-1].append(access)
    return [Step(g[0].line, g[0].loops, g[0].iteration, g[0].order,
                 tuple((a.location, a.write) for a in g), position,
                 tuple(a.text for a in g))
            for position, g in enumerate(groups)]


def executions(run: Sequence[Step], loop: int, depth: int) -> list[list[Step]]:
    """The executions of one loop: maximal runs of consecutive instances inside it with the
    same iteration of the loops around it."""
    out: list[list[Step]] = []
    previous: Step | None = None
    for step in run:
        if step.inside(loop, depth):
            if previous is None or previous.iteration[:depth] != step.iteration[:depth]:
                out.append([])
            out[-1].append(step)
            previous = step
        else:
            previous = None
    return out


@dataclass(frozen=True)
class Plan:
    """A transformation of the executions of one loop (header ``loop`` at ``depth``).

    ``key`` orders the instances of one execution (a stable sort: equal keys keep the
    original order). Variables in ``private`` get a copy per value of ``iteration[:copy]``
    inside the loop; those in ``copy_out`` are copied back after each execution, from the
    copy of the iteration that wrote them last in the original order.
    """

    loop: int
    depth: int
    key: Callable[[Step], tuple[int, ...]] = lambda step: ()
    private: frozenset[str] = frozenset()
    copy: int = 0
    copy_out: frozenset[str] = frozenset()

    def place(self, step: Step, location: Location) -> tuple[object, ...]:
        """Where an access of ``step`` goes: its location, or a private copy of it."""
        if location[0] in self.private and step.inside(self.loop, self.depth):
            return (*location, step.iteration[:self.copy])
        return location

    def schedule(self, run: Sequence[Step]) -> list[Step | list[Step]]:
        """The new order; after each execution, the execution itself (for copying out)."""
        chunks = {id(chunk[0]): chunk for chunk in executions(run, self.loop, self.depth)}
        out: list[Step | list[Step]] = []
        skip: set[int] = set()
        for step in run:
            if id(step) in chunks:
                chunk = chunks[id(step)]
                out += sorted(chunk, key=self.key)
                out.append(chunk)
                skip |= {id(s) for s in chunk}
            elif id(step) not in skip:
                out.append(step)
        return out


@dataclass(frozen=True)
class Flow:
    """What a run computes: the write each read sees, the write each visible location ends
    with (None: the initial value; UNDEFINED: a private copy never written)."""

    reads: dict[tuple[Instance, Location], object]
    final: dict[Location, object]

    def differences(self, other: Flow) -> list[str]:
        out = [f"{instance} reads {location} from {self.reads.get((instance, location))}, "
               f"now from {other.reads.get((instance, location))}"
               for instance, location in sorted(set(self.reads) | set(other.reads))
               if self.reads.get((instance, location)) != other.reads.get((instance, location))]
        out += [f"{location} ends with {self.final.get(location)}, now with "
                f"{other.final.get(location)}"
                for location in sorted(set(self.final) | set(other.final))
                if self.final.get(location) != other.final.get(location)]
        return out


def flow(run: Sequence[Step], plan: Plan | None, visible: Callable[[str], bool]) -> Flow:
    """Replay ``run`` as ``plan`` transforms it (as is without one)."""
    writer: dict[tuple[object, ...], object] = {}
    written_at: dict[tuple[object, ...], int] = {}  # original position of the last write
    reads: dict[tuple[Instance, Location], object] = {}
    for item in (plan.schedule(run) if plan else run):
        if isinstance(item, list):
            _copy_out(item, plan, writer, written_at)  # type: ignore[arg-type]
            continue
        for location, write in item.accesses:
            place = plan.place(item, location) if plan else location
            if write:
                writer[place] = item.instance
                written_at[place] = item.position
            else:
                fresh = UNDEFINED if len(place) > len(location) else None
                reads[item.instance, location] = writer.get(place, fresh)
    final = {place: value for place, value in writer.items()
             if len(place) == 2 and visible(place[0])}  # type: ignore[misc]
    return Flow(reads, final)  # type: ignore[arg-type]


def _copy_out(execution: list[Step], plan: Plan, writer: dict[tuple[object, ...], object],
              written_at: dict[tuple[object, ...], int]) -> None:
    """lastprivate: each copied-out location takes the value of its copy written last in
    the original order."""
    copies = {plan.place(step, location)
              for step in execution for location, _ in step.accesses
              if location[0] in plan.copy_out}
    latest: dict[tuple[object, ...], tuple[object, ...]] = {}
    for place in copies:
        if place in written_at and len(place) > 2:
            shared = place[:-1]
            if shared not in latest or written_at[place] > written_at[latest[shared]]:
                latest[shared] = place
    for shared, place in latest.items():
        writer[shared] = writer[place]
        written_at[shared] = written_at[place]


def carried(run: Iterable[Step], coords: Callable[[Step], tuple[int, ...]], level: int,
            place: Callable[[Step, Location], tuple[object, ...]]) -> list[str]:
    """The conflicts that make the loop at ``coords`` position ``level`` carry a dependence:
    two instances with equal coordinates before ``level`` and different ones at it touch
    one location (after ``place``), one of them writing. ``run``: one execution."""
    seen: dict[tuple[object, ...], dict[int, tuple[bool, Step]]] = defaultdict(dict)
    out: list[str] = []
    for step in run:
        point = coords(step)
        for location, write in step.accesses:
            where = (place(step, location), point[:level])
            mine = point[level]
            for other, (other_write, other_step) in seen[where].items():
                if other != mine and (write or other_write):
                    out.append(f"line {other_step.line} {other_step.iteration} and line "
                               f"{step.line} {step.iteration} on {location}")
            if write or mine not in seen[where]:
                seen[where][mine] = (write, step)
    return out


# --------------------------------------------------------------------------- nests


def visible_names(source: str) -> Callable[[str], bool]:
    """The arguments of the generated function: what its caller sees after it returns."""
    arguments = {arg.arg for arg in parse(source).args.args}
    return lambda name: name in arguments


@st.composite
def privatizing_nests(draw: Callable[[st.SearchStrategy[object]], object],
                      nonaffine: bool = False) -> str:
    """Nests of :func:`tests.nestgen.nests` where some loop bodies start by defining a scalar
    (``s = A[i][j]``): privatizable scalars mixed with the generated dependences; sometimes
    the scalar is also read just before or after that loop (``t = s``), where a privatized
    copy's last value is needed (before: in the next iteration of the loop around)."""
    func = parse(draw(nests(nonaffine=nonaffine)))  # type: ignore[arg-type]
    parents = {id(child): node for node in ast.walk(func) if isinstance(node, ast.For)
               for child in node.body}
    loops = [node for node in ast.walk(func) if isinstance(node, ast.For)]
    for loop in loops:
        banded = len(loop.body) == 1 and isinstance(loop.body[0], ast.For)
        if draw(st.integers(0, 3)) >= (3 if banded else 1):  # keep perfect bands common
            scalar = draw(st.sampled_from(SCALARS))
            value: ast.expr = ast.Constant(1.0)
            elements = _elements([s for s in loop.body if not isinstance(s, ast.For)])
            if elements and draw(st.booleans()):
                value = _load(draw(st.sampled_from(elements)))  # type: ignore[arg-type]
            loop.body.insert(0, _assign(scalar, value))
            if draw(st.integers(0, 2)) == 0:
                body = parents.get(id(loop), func).body
                other = next(name for name in SCALARS if name != scalar)
                use = _assign(other, ast.Name(scalar, ast.Load()))
                body.insert(body.index(loop) + draw(st.integers(0, 1)), use)
    return ast.unparse(ast.fix_missing_locations(func)) + "\n"


# conditions on data (the index array) and on indices that isl cannot place
GUARDS = ("X[j] > 0", "X[i] > 0", "X[i] == j", "i * j < N", "X[j] > 1")


@st.composite
def guarded_scalar_nests(draw: Callable[[st.SearchStrategy[object]], object]) -> str:
    """Two loops whose body defines and reads scalars (``s``, ``t``) under conditions isl
    takes as possibly true (``if X[j] > 0:``): a read after a definition in the same block
    (fed in the iteration: where the read runs, the same test ran the definition), before
    it, in the other branch, after the block, in a block nested in it or around it, an
    update ``s = s + ...``; sometimes a definition before everything."""
    scalars = SCALARS[:2]

    def block(depth: int, indent: str) -> list[str]:
        lines: list[str] = []
        for _ in range(draw(st.integers(1, 3))):  # type: ignore[arg-type]
            kind = draw(st.sampled_from(  # type: ignore[arg-type]
                ["define", "read", "update"] + (["if"] if depth < 2 else [])))
            name = draw(st.sampled_from(scalars))
            if kind == "define":
                lines.append(f"{indent}{name} = A[i][j]")
            elif kind == "read":
                lines.append(f"{indent}B[i][j] = {name} + 1.0")
            elif kind == "update":
                lines.append(f"{indent}{name} = {name} + C[i][j]")
            else:
                lines.append(f"{indent}if {draw(st.sampled_from(GUARDS))}:")
                lines += block(depth + 1, indent + "    ")
                if draw(st.booleans()):
                    lines.append(f"{indent}else:")
                    lines += block(depth + 1, indent + "    ")
        return lines

    lines = ["def f(A, B, C, X, N, M):", "    for i in range(N):"]
    if draw(st.booleans()):
        lines.append(f"        {draw(st.sampled_from(scalars))} = 0.5")
    lines.append("        for j in range(M):")
    lines += block(0, " " * 12)
    return "\n".join(lines) + "\n"


def _assign(scalar: str, value: ast.expr) -> ast.Assign:
    return ast.Assign([ast.Name(scalar, ast.Store())], value, lineno=0)


def _elements(statements: list[ast.stmt]) -> list[ast.Subscript]:
    """The whole array references (``A[i][j]``, not its row ``A[i]``) in some statements:
    their subscripts use only the loop variables in scope there."""
    found = [node for statement in statements for node in ast.walk(statement)
             if isinstance(node, ast.Subscript)]
    rows = {id(node.value) for node in found}
    return [node for node in found if id(node) not in rows]


def _load(node: ast.expr) -> ast.expr:
    """A copy of a reference to read (a target's copy would still say Store)."""
    node = copy.deepcopy(node)
    for child in ast.walk(node):
        if isinstance(child, (ast.Name, ast.Subscript)):
            child.ctx = ast.Load()
    return node


# the ranges a scratch row is written and read over (M or more elements are sized by loclab)
# (shrinking with i, "i, M" and "0, M - i" leave the last iteration short of what earlier
# ones write: no copy of one iteration holds the final values)
SCRATCH_RANGES = ("0, M", "1, M", "0, M - 1", "0, i", "i, M", "0, M - i", "0, 2", "M - 2, M")


@st.composite
def scratch_nests(draw: Callable[[st.SearchStrategy[object]], object]) -> str:
    """An argument row ``t`` each iteration of ``i`` (and of ``j`` inside, sometimes) writes
    over one range and then reads over another (doitgen's ``total``): privatizable where
    every read lands on a write of its own iteration, its final value the caller's where the
    last iteration writes all that any writes; sometimes read after the loops too, or each
    write reading the element before it."""
    write = draw(st.sampled_from(SCRATCH_RANGES))
    read = write if draw(st.booleans()) else draw(st.sampled_from(SCRATCH_RANGES))
    inner = draw(st.booleans())
    chained = " + t[p - 1]" if draw(st.integers(0, 3)) == 0 and write.startswith("1") else ""
    pad = "        " if inner else "    "
    lines = ["def f(A, B, t, N, M):", "    for i in range(N):"]
    if inner:
        lines.append("        for j in range(2):")
    lines += [f"{pad}    for p in range({write}):",
              f"{pad}        t[p] = A[i, p] * 2.0{chained}",
              f"{pad}    for p in range({read}):",
              f"{pad}        B[i, p] = t[p] + 1.0"]
    if draw(st.integers(0, 3)) == 0:
        lines.append("    B[0, 0] = t[1]")
    return "\n".join(lines) + "\n"
