"""``loclab.analyze`` against the brute-force oracle of :mod:`tests.nestgen`.

The oracle is tested first on its own (hand-derived answers, and real Python execution of
the generated functions); then the analyzer must equal it at fixed sizes (EXACT), cover it
with symbolic sizes (SAFE) and cover it on non-affine nests (CONSERVATIVE).  Dependences
are compared as (source line, sink line, kind, array, concrete direction vector), loops by
header line.  Examples are derandomized so that CI is reproducible.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import FrameType
from typing import Any, NamedTuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import loclab
from tests.nestgen import (INDEX_ARRAY, SCALARS, Access, Dep, Truth, index_value, nests, oracle,
                           parse, trace)
from tests.reorder import (Flow, Plan, Step, carried, executions, flow, guarded_scalar_nests,
                           privatizing_nests, steps, visible_names)

PROPERTY = settings(deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow])

SIZE = st.integers(0, 7)
SIZE_PAIRS = st.lists(st.tuples(SIZE, SIZE), min_size=1, max_size=2, unique=True)
SEEDS = st.lists(st.integers(0, 2**16), min_size=2, max_size=3, unique=True)

SLIDE_INTERCHANGE = """\
def f(A, N, M):
    for i in range(N):
        for j in range(M):
            A[j][i] = A[j][i] + 1
"""
SLIDE_INNER_CARRIED = """\
def f(A, N, M):
    for i in range(N):
        for j in range(1, M):
            A[j][i] = A[j - 1][i]
"""
SLIDE_OUTER_CARRIED = """\
def f(A, N, M):
    for i in range(1, N):
        for j in range(M - 1):
            A[i][j] = A[i - 1][j + 1]
"""


class Slide(NamedTuple):
    """A loop example of the "Loop Parallelism I" slides with its one dependence."""

    source: str
    dep: Dep
    parallel: dict[int, bool]  # per loop line
    distance: tuple[int, ...]
    carried_by: str | None


SLIDES = [
    Slide(SLIDE_INTERCHANGE, Dep(4, 4, "WAR", "A", ("=", "=")), {2: True, 3: True}, (0, 0), None),
    Slide(SLIDE_INNER_CARRIED, Dep(4, 4, "RAW", "A", ("=", "<")), {2: True, 3: False}, (0, 1),
          "L2"),
    Slide(SLIDE_OUTER_CARRIED, Dep(4, 4, "RAW", "A", ("<", ">")), {2: False, 3: True}, (1, -1),
          "L1"),
]


# --------------------------------------------------------------------------- helpers


def listing(source: str) -> str:
    """The source with line numbers: dependences name statements by line."""
    return "\n".join(f"{n:3}| {text}" for n, text in enumerate(source.splitlines(), 1))


def analyzer_deps(analysis: Any) -> frozenset[Dep]:
    """The analyzer's dependences in the oracle's terms, each ``*`` expanded."""
    line = {statement.id: statement.line for statement in analysis.statements}
    return frozenset(Dep(line[d.source], line[d.sink], d.kind, d.array, tuple(vector))
                     for d in analysis.dependences for vector in d.vectors())


def analyzer_parallel(analysis: Any) -> dict[int, bool]:
    """The verdicts for distinct arrays, which is what the oracle runs (aliased calls:
    tests/test_alias_oracle.py)."""
    return {loop.line: loop.parallel_if_distinct for loop in analysis.loops}


def union(truths: Iterable[Truth]) -> Truth:
    """What holds for SOME run: the dependences and carrying loops of all of them."""
    truths = list(truths)
    return Truth(deps=frozenset().union(*(t.deps for t in truths)),
                 carried=frozenset().union(*(t.carried for t in truths)),
                 loops=truths[0].loops, statements=truths[0].statements)


def _bullets(title: str, items: Iterable[object]) -> list[str]:
    items = sorted(map(str, items))
    return [f"{title}:", *(f"    {item}" for item in items)] if items else []


def problems(truth: Truth, analysis: Any, *, exact: bool) -> list[str]:
    """How the analyzer departs from the oracle: any way at all when ``exact``, else only
    where it is unsafe (a dependence missed, a loop called parallel that carries one)."""
    got, parallel = analyzer_deps(analysis), analyzer_parallel(analysis)
    out: list[str] = []
    if sorted(parallel) != list(truth.loops):
        out.append(f"loops at lines {sorted(parallel)}, expected {list(truth.loops)}")
    lines = sorted(statement.line for statement in analysis.statements)
    if lines != list(truth.statements):
        out.append(f"statements at lines {lines}, expected {list(truth.statements)}")
    out += _bullets("missed (oracle has, analyzer lacks)", truth.deps - got)
    unsafe = {line for line, verdict in parallel.items() if verdict and line in truth.carried}
    timid = {line for line, verdict in parallel.items()
             if exact and not verdict and line not in truth.carried}
    out += [f"loop at line {line}: analyzer parallel={parallel[line]}, oracle {not parallel[line]}"
            for line in sorted(unsafe | timid)]
    if exact:
        out += _bullets("spurious (analyzer has, oracle lacks)", got - truth.deps)
        out += _bullets("marked inexact in an affine nest",
                        (d.id for d in analysis.dependences if not d.exact))
    return out


def report(source: str, params: Mapping[str, int] | str, found: list[str],
           analysis: Any) -> str:
    """The failure message: everything the analyzer's author needs to reproduce and debug."""
    raw = [f"{d.id} {d.source}->{d.sink} {d.kind} {d.array} {d.direction} "
           f"distance={d.distance} carried_by={d.carried_by}" for d in analysis.dependences]
    return "\n".join([f"params={params}", listing(source), *found,
                      *_bullets("analyzer's dependences", raw)])


def used(source: str, params: Mapping[str, int]) -> dict[str, int]:
    """The sizes the body mentions: the analyzer rejects fixing an argument it never uses."""
    names = {node.id for node in ast.walk(parse(source)) if isinstance(node, ast.Name)}
    return {name: value for name, value in params.items() if name in names}


def check(source: str, truth: Truth, params: Mapping[str, int] | None, *, exact: bool) -> Any:
    """Analyze ``source`` (sizes fixed to ``params``, or symbolic) and compare; the analysis."""
    analysis = loclab.analyze(source, params=used(source, params) if params is not None else None,
                              assume_distinct=True)  # the oracle runs distinct arrays
    found = problems(truth, analysis, exact=exact)
    assert not found, report(source, params if params is not None else "symbolic", found,
                             analysis)
    return analysis


def sizes(n: int, m: int) -> dict[str, int]:
    return {"N": n, "M": m}


# --------------------------------------------------------------------------- the oracle alone


@pytest.mark.parametrize("slide", SLIDES)
def test_oracle_finds_the_slide_answers(slide: Slide) -> None:
    truth = oracle(slide.source, sizes(4, 5))
    assert truth.deps == {slide.dep}
    assert truth.parallel == slide.parallel


# source, sizes, every dependence (derived by hand in the comments)
SEMANTICS = [
    # counting down, the read of A[i + 1] follows its write: "<" although i + 1 > i
    pytest.param("def f(A, N):\n"
                 "    for i in range(N - 1, -1, -1):\n"
                 "        A[i] = A[i + 1]\n",
                 {"N": 4}, {Dep(3, 3, "RAW", "A", ("<",))}, id="counting-down"),
    # a descending inner loop: a larger j runs first
    pytest.param("def f(A, N):\n"
                 "    for i in range(N):\n"
                 "        for j in range(N - 1, 0, -1):\n"
                 "            A[j] = A[j - 1]\n",
                 {"N": 3}, {Dep(4, 4, "WAR", "A", ("=", "<")), Dep(4, 4, "RAW", "A", ("<", ">")),
                            Dep(4, 4, "WAR", "A", ("<", "<")), Dep(4, 4, "WAW", "A", ("<", "="))},
                 id="descending-inner"),
    # a scalar is one location for the whole function; sibling loops share no loop
    pytest.param("def f(A, B, N):\n"
                 "    for i in range(N):\n"
                 "        s = A[i]\n"
                 "    for i in range(N):\n"
                 "        B[i] = s\n",
                 {"N": 3}, {Dep(3, 3, "WAW", "s", ("<",)), Dep(3, 5, "RAW", "s", ())},
                 id="scalar-in-siblings"),
    # op= reads then writes its target; all pairs count, not only the nearest writer
    pytest.param("def f(A, N):\n"
                 "    for i in range(N):\n"
                 "        t += A[i]\n",
                 {"N": 3}, {Dep(3, 3, "WAR", "t", ("=",)), Dep(3, 3, "WAR", "t", ("<",)),
                            Dep(3, 3, "RAW", "t", ("<",)), Dep(3, 3, "WAW", "t", ("<",))},
                 id="augmented"),
    # A[i, j] and A[j][i] name the same elements
    pytest.param("def f(A, N):\n"
                 "    for i in range(N):\n"
                 "        for j in range(N):\n"
                 "            A[i, j] = A[j][i]\n",
                 {"N": 3}, {Dep(4, 4, "RAW", "A", ("<", ">")), Dep(4, 4, "WAR", "A", ("<", ">")),
                            Dep(4, 4, "WAR", "A", ("=", "="))},
                 id="tuple-and-chained-subscripts"),
    # step 2, a triangular min bound and if/else; directions compare values of j, not
    # iteration counts (A[2] is written at i=0, j=2 and read at i=2, j=2: "=" on j)
    pytest.param("def f(A, N):\n"
                 "    for i in range(0, N, 2):\n"
                 "        for j in range(i, min(N, i + 3)):\n"
                 "            if j > i:\n"
                 "                A[j] = 1.0\n"
                 "            else:\n"
                 "                A[j + 1] = A[j]\n",
                 {"N": 5}, {Dep(7, 5, "WAW", "A", ("=", "<")), Dep(5, 7, "RAW", "A", ("<", "="))},
                 id="step-min-if-else"),
]


@pytest.mark.parametrize(("source", "params", "deps"), SEMANTICS)
def test_oracle_follows_the_contract(source: str, params: dict[str, int],
                                     deps: set[Dep]) -> None:
    assert oracle(source, params).deps == deps


def test_oracle_reads_index_arrays_in_subscripts_and_conditions() -> None:
    source = ("def f(A, X, N):\n"
              "    for i in range(N):\n"
              "        if X[i] > 0:\n"
              "            A[X[i]] += 1.0\n")
    accesses = trace(source, {"N": 3}, seed=7)
    assert {(a.line, a.location[0]) for a in accesses if not a.write} >= {(3, "X"), (4, "X")}
    written = {a.location[1] for a in accesses if a.write}
    assert written == {(index_value(7, "X", (i,)),) for i in range(3)
                       if index_value(7, "X", (i,)) > 0}


class _Recorder:
    """A stand-in array for real execution: logs each element access with the line and
    loop variables of the running generated function, as the oracle's trace has them."""

    def __init__(self, name: str, rank: int, log: Callable[[str, tuple[int, ...], bool], None],
                 contents: Callable[[tuple[int, ...]], Any], prefix: tuple[int, ...] = ()) -> None:
        self._name, self._rank, self._log, self._contents = name, rank, log, contents
        self._prefix = prefix

    def _index(self, key: int | tuple[int, ...]) -> tuple[int, ...]:
        return self._prefix + (key if isinstance(key, tuple) else (key,))

    def __getitem__(self, key: int | tuple[int, ...]) -> Any:
        index = self._index(key)
        if len(index) < self._rank:  # A[i] of a 2-D A: a row, not an access
            return _Recorder(self._name, self._rank, self._log, self._contents, index)
        self._log(self._name, index, False)
        return self._contents(index)

    def __setitem__(self, key: int | tuple[int, ...], value: Any) -> None:
        self._log(self._name, self._index(key), True)


def _instances(accesses: Iterable[tuple[int, tuple[int, ...], Any]]) -> list[tuple[Any, ...]]:
    """Accesses grouped per statement instance (line, iteration), in execution order: the
    order inside one instance and repeated reads of one element do not matter."""
    out: list[tuple[Any, ...]] = []
    for line, iteration, access in accesses:
        if not out or out[-1][:2] != (line, iteration):
            out.append((line, iteration, set()))
        out[-1][2].add(access)
    return out


def _execute(source: str, params: Mapping[str, int], seed: int,
             oracle_trace: list[Access]) -> list[tuple[int, tuple[int, ...], Any]]:
    """Array accesses of a real run of the generated function (scalars become arguments so
    that a read before any write is legal; the line numbers do not move)."""
    func = parse(source)
    loop_var = {n.lineno: n.target.id for n in ast.walk(func) if isinstance(n, ast.For)}
    enclosing = {a.line: [loop_var[line] for line in a.loops] for a in oracle_trace}
    ranks = {a.location[0]: len(a.location[1]) for a in oracle_trace if a.location[1]}
    header, rest = source.split("\n", 1)
    namespace: dict[str, Any] = {}
    scalars = "".join(f", {name}=0" for name in SCALARS)
    exec(compile(header.replace("):", f"{scalars}):") + "\n" + rest, "<nest>", "exec"),
         namespace)  # noqa: S102 - our own generated code
    code = namespace["f"].__code__
    log: list[tuple[int, tuple[int, ...], Any]] = []

    def record(name: str, index: tuple[int, ...], write: bool) -> None:
        frame: FrameType | None = sys._getframe(1)
        while frame is not None and frame.f_code is not code:
            frame = frame.f_back
        assert frame is not None
        iteration = tuple(frame.f_locals[var] for var in enclosing[frame.f_lineno])
        log.append((frame.f_lineno, iteration, ((name, index), write)))

    def contents(name: str) -> Callable[[tuple[int, ...]], Any]:
        if name == INDEX_ARRAY:
            return lambda index: index_value(seed, name, index)
        return lambda _: 1.0

    args = {arg.arg: _Recorder(arg.arg, ranks.get(arg.arg, 1), record, contents(arg.arg))
            for arg in func.args.args if arg.arg not in params}
    namespace["f"](**args, **params)
    return log


@settings(PROPERTY, max_examples=150)
@given(source=st.one_of(nests(), nests(nonaffine=True)), size=st.tuples(SIZE, SIZE),
       seed=st.integers(0, 2**16))
def test_oracle_runs_the_source_as_python_does(source: str, size: tuple[int, int],
                                               seed: int) -> None:
    """The interpreter against CPython: same array accesses, same instances, same order."""
    accesses = trace(source, sizes(*size), seed)
    ours = [(a.line, a.iteration, (a.location, a.write)) for a in accesses if a.location[1]]
    theirs = _execute(source, sizes(*size), seed, accesses)
    assert _instances(ours) == _instances(theirs), listing(source)


# --------------------------------------------------------------------------- the analyzer


@pytest.mark.parametrize("slide", SLIDES)
@pytest.mark.parametrize("params", [None, sizes(4, 5)], ids=["symbolic", "fixed"])
def test_slide_examples(slide: Slide, params: dict[str, int] | None) -> None:
    analysis = check(slide.source, oracle(slide.source, sizes(4, 5)), params, exact=True)
    (reported,) = analysis.dependences
    assert (reported.direction, reported.distance, reported.carried_by) == (
        slide.dep.vector, slide.distance, slide.carried_by)


@settings(PROPERTY, max_examples=200)
@given(source=nests(), size_pairs=SIZE_PAIRS)
def test_exact_at_fixed_sizes(source: str, size_pairs: list[tuple[int, int]]) -> None:
    """EXACT: with the sizes fixed, the analyzer's dependences and verdicts are the oracle's."""
    for n, m in size_pairs:
        check(source, oracle(source, sizes(n, m)), sizes(n, m), exact=True)


@settings(PROPERTY, max_examples=120)
@given(source=nests(), size_pairs=st.lists(st.tuples(SIZE, SIZE), min_size=2, max_size=4,
                                           unique=True))
def test_symbolic_sizes_are_safe(source: str, size_pairs: list[tuple[int, int]]) -> None:
    """SAFE: symbolic analysis reports every dependence of every run; its parallel loops
    carry nothing in any run."""
    truth = union(oracle(source, sizes(n, m)) for n, m in size_pairs)
    check(source, truth, None, exact=False)


@settings(PROPERTY, max_examples=100)
@given(source=nests(nonaffine=True), size_pairs=SIZE_PAIRS, seeds=SEEDS)
def test_nonaffine_nests_are_conservative(source: str, size_pairs: list[tuple[int, int]],
                                          seeds: list[int]) -> None:
    """CONSERVATIVE: with i * j, i % 3, X[i] subscripts and X[i] > 0 conditions, whatever X
    holds, the analyzer misses nothing, at fixed sizes and with symbolic ones."""
    runs = {(n, m): union(oracle(source, sizes(n, m), seed) for seed in seeds)
            for n, m in size_pairs}
    for (n, m), truth in runs.items():
        check(source, truth, sizes(n, m), exact=False)
    check(source, union(runs.values()), None, exact=False)


# Minimised from generated nests: isl's compute_flow fails on these ("affine expression
# involves some of the domain dimensions", an isl bug with nested strides); the analyzer must
# still answer, conservatively, and say so.
FLOW_CRASHES = [
    ("def f(N):\n"
     "    for i in range(0, N, 2):\n"
     "        for j in range(i, 0, -2):\n"
     "            s += 1.0\n",
     {"N": 6}),
    ("def f(A, N):\n"
     "    for i in range(0, N, 2):\n"
     "        for j in range(i):\n"
     "            for k in range(N):\n"
     "                A[i - 4] = 1.0\n"
     "                A[0] += 1.0\n",
     None),
]


@pytest.mark.parametrize(("source", "params"), FLOW_CRASHES, ids=["down-by-2", "three-deep"])
def test_strided_nests_found_by_the_generator(source: str,
                                              params: dict[str, int] | None) -> None:
    if params is None:
        check(source, union(oracle(source, sizes(n, 0)) for n in range(8)), None, exact=False)
    else:
        check(source, oracle(source, params), params, exact=True)


# --------------------------------------------------------------------------- transformations
#
# Verdicts about transformed code, judged by running it (tests.reorder): every order called
# legal (as written, or after privatizing variables) and every distribution plan computes what
# the original computes, and every loop called parallel in them carries nothing. Sizes are
# fixed for the analysis, or symbolic with the verdicts run at several sizes.


def _remedy_names(remedies: Iterable[Any]) -> frozenset[str]:
    return frozenset(r.variable for r in remedies)


def band_plan(option: Any, privatized: Iterable[Any] = ()) -> Plan:
    """The interchange ``option`` (with ``privatized`` remedies applied) as a run order:
    each execution of the band in the permuted order, private copies per band iteration."""
    band, privatized = option.band, list(privatized)
    depth = band[0].depth
    positions = [band.index(loop) for loop in option.order]
    return Plan(band[0].line, depth, lambda step: tuple(step.order[depth + k] for k in positions),
                _remedy_names(privatized), depth + len(band),
                _remedy_names(r for r in privatized if r.live_out))


def distribution_plan(loop: Any, pieces: list[Any]) -> Plan:
    """The distribution of ``loop`` into ``pieces`` as a run order: each execution runs the
    pieces one after the other; expanded and privatized variables get a copy per iteration."""
    piece_of = {statement.line: k for k, piece in enumerate(pieces)
                for statement in piece.statements}
    private = {name for piece in pieces for name in piece.expand if name.isidentifier()}
    private |= {r.variable for piece in pieces for r in piece.parallel_after}
    copy_out = {name for piece in pieces for name in piece.copy_out}
    copy_out |= {r.variable for piece in pieces for r in piece.parallel_after if r.live_out}
    return Plan(loop.line, loop.depth, lambda step: (piece_of[step.line],), frozenset(private),
                loop.depth + 1, frozenset(copy_out))


def loop_plan(report: Any) -> Plan:
    """A loop whose only remedies are privatizations, with them applied (same order)."""
    loop = report.loop
    return Plan(loop.line, loop.depth, private=_remedy_names(report.remedies),
                copy=loop.depth + 1, copy_out=_remedy_names(r for r in report.remedies
                                                            if r.live_out))


def _same_flow(original: Flow, run: list[Step], plan: Plan, visible: Callable[[str], bool],
               what: str) -> list[str]:
    differences = original.differences(flow(run, plan, visible))
    return [f"{what} computes something else:", *differences[:6]] if differences else []


def _conflicts(chunks: Iterable[list[Step]], coords: Callable[[Step], tuple[int, ...]],
               level: int, plan: Plan, what: str) -> list[str]:
    found = [c for chunk in chunks for c in carried(chunk, coords, level, plan.place)]
    return [f"{what} is called parallel but carries:", *found[:4]] if found else []


def order_problems(option: Any, run: list[Step], original: Flow,
                   visible: Callable[[str], bool]) -> list[str]:
    """Whether an interchange verdict holds in this run (legal: same result; parallel: no
    conflict between iterations), as written and after the privatizations it names."""
    name = f"({' '.join(loop.var for loop in option.order)})"
    claims = [("as written", option.legal, (), option.parallel)]
    if option.legal_once_privatized:
        claims.append((f"after {', '.join(r.label() for r in option.legal_after)}"
                       f"{' + ' if option.legal_after else ''}"
                       f"{', '.join(r.label() for r in option.privatizing)}",
                       True, (*option.legal_after, *option.privatizing),
                       option.parallel_after_privatizing))
    out: list[str] = []
    for label, legal, privatized, parallel in claims:
        if not legal:
            continue
        plan = band_plan(option, privatized)
        out += _same_flow(original, run, plan, visible, f"{name} {label}")
        chunks = executions(run, plan.loop, plan.depth)
        for loop in parallel:
            out += _conflicts(chunks, plan.key, option.order.index(loop), plan,
                              f"{name} {label}: loop {loop.var}")
    return out


def distribution_problems(analysis: Any, run: list[Step], original: Flow,
                          visible: Callable[[str], bool]) -> list[str]:
    """Whether each distribution plan holds in this run: the pieces in order (with their
    expansions) compute the same, and each loop called parallel in a piece carries nothing."""
    out: list[str] = []
    for loop in dict.fromkeys(piece.loop for piece in analysis.pieces):
        pieces = [piece for piece in analysis.pieces if piece.loop is loop]
        plan = distribution_plan(loop, pieces)
        out += _same_flow(original, run, plan, visible, f"distributing {loop.var}")
        for k, piece in enumerate(pieces):
            lines = {statement.line for statement in piece.statements}
            chunks = [[step for step in chunk if step.line in lines]
                      for chunk in executions(run, plan.loop, plan.depth)]
            what = f"distributing {loop.var}, {{{' '.join(s.id for s in piece.statements)}}}"
            if piece.parallel:
                out += _conflicts(chunks, lambda step: step.order, loop.depth, plan,
                                  f"{what}: loop {loop.var}")
            for inner in piece.parallel_loops:
                if inner is not loop:
                    inside = [[s for s in chunk if s.inside(inner.line, inner.depth)]
                              for chunk in chunks]
                    out += _conflicts(inside, lambda step: step.order, inner.depth, plan,
                                      f"{what}: loop {inner.var}")
    return out


def privatization_problems(analysis: Any, run: list[Step], original: Flow,
                           visible: Callable[[str], bool]) -> list[str]:
    """Loops called parallel after privatizing variables: with a copy per iteration they
    compute the same and carry nothing."""
    out: list[str] = []
    for report in analysis.loops:
        if report.parallel_after and all(r.kind == "privatize" for r in report.remedies):
            plan = loop_plan(report)
            what = f"loop {report.var} after {', '.join(report.parallel_after)}"
            out += _same_flow(original, run, plan, visible, what)
            out += _conflicts(executions(run, plan.loop, plan.depth), lambda step: step.order,
                              report.depth, plan, what)
    return out


def transformation_problems(source: str, analysis: Any, params: Mapping[str, int],
                            seed: int = 0) -> list[str]:
    run = steps(trace(source, params, seed))
    visible = visible_names(source)
    original = flow(run, None, visible)
    out = [p for option in analysis.interchange_options
           for p in order_problems(option, run, original, visible)]
    out += distribution_problems(analysis, run, original, visible)
    return out + privatization_problems(analysis, run, original, visible)


def check_transformations(source: str, size_pairs: list[tuple[int, int]],
                          seeds: Iterable[int] = (0,)) -> None:
    """The verdicts of the analysis at each fixed size, and of the symbolic analysis at
    every size, hold when run."""
    symbolic = loclab.analyze(source, assume_distinct=True)
    for n, m in size_pairs:
        fixed = loclab.analyze(source, params=used(source, sizes(n, m)), assume_distinct=True)
        for analysis, label in ((fixed, sizes(n, m)), (symbolic, "symbolic")):
            for seed in seeds:
                found = transformation_problems(source, analysis, sizes(n, m), seed)
                assert not found, report(source, f"{label}, run at {sizes(n, m)}", found,
                                         analysis)


MATMUL = """\
def f(A, B, C, N, M):
    for i in range(N):
        for j in range(M):
            t = 0.0
            for k in range(N):
                t += A[i][k] * B[k][j]
            C[i][j] = t
"""
MATMUL_BAND = """\
def f(A, B, C, N, M):
    for i in range(N):
        for j in range(M):
            s = A[i][j]
            C[i][j] = s * s
"""
# the next i reads what the last j left in s: privatizing s in j needs the copy out
LIVE_BEFORE = """\
def f(A, B, N, M):
    for i in range(N):
        A[i] = s
        for j in range(M):
            s = B[j]
"""
# t is used in one new loop only: that loop is parallel after privatizing t, and says so
ONE_PIECE_PRIVATE = """\
def f(A, B, C, N, M):
    for i in range(N):
        for j in range(M):
            t = A[i][j]
            B[i][j] = t
        C[i] = 1.0
"""


def test_the_replay_rejects_wrong_transformations() -> None:
    """The judge itself: an illegal interchange, a privatization that a read before the
    write breaks, a distribution against a dependence, and a loop that carries one."""
    outer = oracle_run(SLIDE_OUTER_CARRIED, sizes(4, 5))
    swapped = Plan(2, 0, lambda step: (step.order[1], step.order[0]))
    assert outer.original.differences(flow(outer.run, swapped, outer.visible))
    reads_first = oracle_run("def f(A, N):\n    for i in range(N):\n        A[i] = s\n"
                             "        s = A[i + 1]\n", sizes(3, 0))
    private = Plan(2, 0, private=frozenset({"s"}), copy=1)
    assert reads_first.original.differences(flow(reads_first.run, private, reads_first.visible))
    backwards = Plan(2, 0, lambda step: (-step.line,))
    assert reads_first.original.differences(flow(reads_first.run, backwards,
                                                 reads_first.visible))
    inner = oracle_run(SLIDE_INNER_CARRIED, sizes(4, 5))
    [chunk] = executions(inner.run, 2, 0)
    assert carried(chunk, lambda step: step.order, 1, lambda step, loc: loc)
    assert not carried(chunk, lambda step: step.order, 0, lambda step, loc: loc)


class OracleRun(NamedTuple):
    run: list[Step]
    original: Flow
    visible: Callable[[str], bool]


def oracle_run(source: str, params: Mapping[str, int]) -> OracleRun:
    run = steps(trace(source, params))
    visible = visible_names(source)
    return OracleRun(run, flow(run, None, visible), visible)


def test_matmul_j_i_is_legal_after_privatizing_t_and_the_replay_agrees() -> None:
    analysis = loclab.analyze(MATMUL)
    [ij, ji] = analysis.interchange_options
    assert ij.legal and not ij.parallel and [l.var for l in ij.parallel_after_privatizing] == [
        "i", "j"]
    assert not ji.legal and [r.label() for r in ji.legal_after] == ["privatize t"]
    assert [l.var for l in ji.parallel_after_privatizing] == ["j", "i"]
    for n, m in [(3, 4), (1, 1), (0, 2)]:
        found = transformation_problems(MATMUL, analysis, sizes(n, m))
        assert not found, found
    # the memory-based verdict stays exact: one t for all (i, j) is overwritten in another
    # order (which only t's last value, unseen by the caller, would show)
    assert ji.blocking is not None and ji.blocking.array == "t"


def test_privatizing_a_value_read_before_the_loop_copies_it_out() -> None:
    j = loclab.analyze(LIVE_BEFORE).loop("j")
    assert j.parallel_after == ["privatize s (copy out the last value written if it is used "
                                "after the loop)"]


def test_a_piece_parallel_only_after_privatizing_names_the_step() -> None:
    pieces = loclab.analyze(ONE_PIECE_PRIVATE).to_json()["distribution"]
    [nest_piece, tail] = [piece for piece in pieces if piece["loop"] == "L1"]
    assert nest_piece["parallel"] and nest_piece["expand"] == []
    assert nest_piece["parallel_after"] == ["privatize t"]
    assert tail["parallel"] and tail["parallel_after"] == []


@pytest.mark.parametrize("source", [MATMUL, MATMUL_BAND, LIVE_BEFORE, ONE_PIECE_PRIVATE,
                                    SLIDE_INTERCHANGE, SLIDE_INNER_CARRIED,
                                    SLIDE_OUTER_CARRIED] + [s for s, _ in FLOW_CRASHES])
def test_transformations_of_hand_written_nests_hold(source: str) -> None:
    check_transformations(source, [(4, 3), (2, 5)])


@settings(PROPERTY, max_examples=300)
@given(source=privatizing_nests(), size_pairs=SIZE_PAIRS)
def test_transformation_verdicts_hold_when_run(source: str,
                                               size_pairs: list[tuple[int, int]]) -> None:
    """Interchange (as written and after privatization), distribution (with expansion) and
    privatized loops, on nests whose loop bodies often start by defining a scalar."""
    check_transformations(source, size_pairs)


@settings(PROPERTY, max_examples=100)
@given(source=privatizing_nests(nonaffine=True), size_pairs=SIZE_PAIRS, seeds=SEEDS)
def test_transformation_verdicts_hold_on_nonaffine_nests(source: str,
                                                         size_pairs: list[tuple[int, int]],
                                                         seeds: list[int]) -> None:
    """Whatever the index array holds, the conservative verdicts hold too."""
    check_transformations(source, size_pairs, seeds)


# molecular dynamics' cutoff: inv2 and f set and read under one test on data, per pair
CUTOFF = """\
def f(A, B, C, X, N, M):
    for i in range(N):
        for j in range(M):
            r2 = A[i][j] * A[i][j]
            if X[j] > 0:
                inv2 = 1.0 / (r2 + 1.0)
                g = inv2 * inv2
                B[i][j] = g * r2
"""


def test_scalars_set_and_read_under_one_test_on_data_are_private() -> None:
    analysis = loclab.analyze(CUTOFF, assume_distinct=True)
    for var in ("i", "j"):
        assert analysis.loop(var).parallel_after == ["privatize r2", "privatize inv2",
                                                     "privatize g"]
    # read after the test too: where it failed, the value is an older iteration's
    later = CUTOFF + "            C[i][j] = g\n"
    assert loclab.analyze(later, assume_distinct=True).loop("j").parallel_after == []
    check_transformations(CUTOFF, [(3, 4)], [0, 5])


@settings(PROPERTY, max_examples=150)
@given(source=guarded_scalar_nests(), size_pairs=SIZE_PAIRS, seeds=SEEDS)
def test_privatization_under_conditions_on_data_holds_when_run(
        source: str, size_pairs: list[tuple[int, int]], seeds: list[int]) -> None:
    """A scalar defined and read in one block under a test isl cannot place is private to
    the iteration (the read runs only where the definition ran); read anywhere the
    definition may not have run, it is not."""
    check_transformations(source, size_pairs, seeds)


EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
# what the oracle's interpreter cannot run: a condition or subscript reading computed data,
# a local NumPy allocation, a return
NOT_RUN = {"nearest_neighbor", "histogram", "eliminating_waw", "eliminating_waw_privatized",
           "reduction"}


def example_functions() -> list[Any]:
    """The lectures' Python nests, without their docstrings (the oracle runs statements)."""
    out = []
    for path in sorted(EXAMPLES.glob("*.py")):
        for func in ast.parse(path.read_text()).body:
            if isinstance(func, ast.FunctionDef) and func.name not in NOT_RUN:
                if ast.get_docstring(func):
                    func.body = func.body[1:]
                out.append(pytest.param(ast.unparse(func) + "\n", id=func.name))
    return out


@pytest.mark.parametrize("source", example_functions())
def test_transformations_of_the_lectures_examples_hold(source: str) -> None:
    """E.g. Python matmul: (j i) after privatizing tmp, the distribution of j with tmp
    expanded, i and j parallel after privatizing tmp, all compute what matmul computes."""
    analysis = loclab.analyze(source)
    for size in (2, 3):
        found = transformation_problems(source, analysis, dict.fromkeys(analysis.nest.parameters,
                                                                         size))
        assert not found, report(source, f"all sizes {size}", found, analysis)
