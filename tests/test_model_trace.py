"""``loclab.model.trace`` against real execution.

The ground truth is Python itself: each example function runs with its arrays replaced by
:class:`Recorder` objects that log every ``__getitem__``/``__setitem__`` (local arrays made
with ``np.empty`` too), and the generated nests of :mod:`tests.nestgen` run in its oracle's
interpreter. The vectorized trace must give the same sequence of (address, write), each
reference index mapped through the trace's own layout: same accesses, same order. (In every
nest here the IR's order inside a statement, reads then the write, is Python's order too:
``C[i, j] += e`` reads C first, then ``e`` left to right, then stores.)
"""

from __future__ import annotations

import importlib.util
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loclab.errors import UsageError
from loclab.model.trace import Trace, trace_nest
from loclab.nest import load_file, load_function, load_source
from tests.nestgen import nests
from tests.nestgen import trace as oracle_trace

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
PROPERTY = settings(deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow])

Log = list[tuple[str, tuple[int, ...], bool]]


class Recorder:
    """A stand-in array: logs each element access; ``A[i]`` of a 2-D ``A`` is a row."""

    def __init__(self, name: str, rank: int, log: Log, prefix: tuple[int, ...] = ()) -> None:
        self._name, self._rank, self._log, self._prefix = name, rank, log, prefix

    def _index(self, key: int | tuple[int, ...]) -> tuple[int, ...]:
        return self._prefix + (tuple(key) if isinstance(key, tuple) else (int(key),))

    def __getitem__(self, key: int | tuple[int, ...]) -> Any:
        index = self._index(key)
        if len(index) < self._rank:
            return Recorder(self._name, self._rank, self._log, index)
        self._log.append((self._name, index, False))
        return 1.0

    def __setitem__(self, key: int | tuple[int, ...], value: Any) -> None:
        self._log.append((self._name, self._index(key), True))


def ranks(nest: Any) -> dict[str, int]:
    return {a.variable.name: len(a.subscripts) for s in nest.statements for a in s.accesses
            if a.variable.is_array}


def record(func: Callable[..., Any], params: Mapping[str, int], rank: Mapping[str, int],
           local_arrays: Sequence[str] = ()) -> Log:
    """Runs ``func`` for real: array arguments are Recorders, and so are the arrays it makes
    with ``np.empty`` (named ``local_arrays``, in the order it makes them)."""
    log: Log = []
    names: Iterator[str] = iter(local_arrays)

    def empty(shape: Any, dtype: Any = None) -> Recorder:
        name = next(names)
        return Recorder(name, rank[name], log)

    fake_np = types.SimpleNamespace(empty=empty, float32=None, float64=None, int64=None)
    run = types.FunctionType(func.__code__, {**func.__globals__, "np": fake_np})
    arguments = func.__code__.co_varnames[:func.__code__.co_argcount]
    run(*(params[a] if a in params else Recorder(a, rank.get(a, 1), log) for a in arguments))
    return log


def expected(trace: Trace, log: Log) -> tuple[np.ndarray, np.ndarray]:
    addresses = np.array([trace.layout[name].address(index) for name, index, _ in log],
                         dtype=np.int64)
    return addresses, np.array([write for _, _, write in log], dtype=bool)


def assert_same(trace: Trace, log: Log) -> None:
    addresses, writes = expected(trace, log)
    assert len(trace) == len(log)
    first = np.flatnonzero((trace.addresses != addresses) | (trace.writes != writes))
    assert first.size == 0, f"first difference at access {first[:1]}: {log[first[0]]}"


@lru_cache(maxsize=None)
def example_module(name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(f"examples_{name}", EXAMPLES / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# (file, function, local arrays made with np.empty)
TRACEABLE = [
    ("recipes", "transpose", ()), ("recipes", "mmm", ()), ("recipes", "mmm_accumulate", ()),
    ("recipes", "array_expansion", ()), ("recipes", "eliminating_war", ()),
    ("recipes", "putting_everything_together", ("A",)),
    ("case_studies", "nearest_neighbor", ()), ("case_studies", "matmul", ()),
    ("case_studies", "mmm_golden", ()), ("case_studies", "loop_distribution", ()),
    ("case_studies", "transposition", ()), ("case_studies", "contrived_program", ()),
    ("case_studies", "coalescing_motivation", ()), ("case_studies", "batch_mmm", ()),
    ("loops", "three_loops_1", ()), ("loops", "three_loops_2", ()),
    ("loops", "three_loops_3", ()), ("loops", "disambiguation", ()),
    ("loops", "vectorization", ()), ("reductions", "scan_sum", ()),
    ("reductions", "scan_rows", ()), ("privatization", "eliminating_war_by_copy", ()),
]
SIZES = ((3, 4, 5), (6, 2, 7), (1, 1, 1))


@pytest.mark.parametrize("sizes", SIZES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("module, function, local_arrays", TRACEABLE,
                         ids=[f"{m}.{f}" for m, f, _ in TRACEABLE])
def test_examples_trace_as_python_runs_them(module: str, function: str,
                                           local_arrays: tuple[str, ...],
                                           sizes: tuple[int, ...]) -> None:
    """Same accesses in the same order as CPython executing the function, at three sizes
    (one with size-1 loops), with element sizes that differ per array."""
    func = getattr(example_module(module), function)
    nest = load_function(func)
    params = {p: sizes[n % len(sizes)] for n, p in enumerate(nest.parameters)}
    rank = ranks(nest)
    elem = {name: 4 if n % 2 else 8 for n, name in enumerate(sorted(rank))}
    trace = trace_nest(nest, params, elem)
    assert_same(trace, record(func, params, rank, local_arrays))
    assert all(a.base % 4096 == 0 for a in trace.layout.values())


def test_layout_is_row_major_and_page_aligned() -> None:
    nest = load_file(EXAMPLES / "recipes.py", "mmm")[0]
    trace = trace_nest(nest, {"heightA": 3, "widthB": 5, "widthA": 4}, {"A": 4})
    a, b, c = (trace.layout[name] for name in "ABC")
    assert (a.extents, b.extents, c.extents) == ((3, 4), (4, 5), (3, 5))
    assert (a.base, b.base, c.base) == (0, 4096, 8192)
    assert (a.elem_bytes, b.elem_bytes, a.size_bytes) == (4, 8, 48)
    assert b.address((1, 2)) == 4096 + 7 * 8
    assert trace.scalars == ("c",) and "registers" in trace.notes[0]
    assert len(trace) == 3 * 5 * (2 * 4 + 1) and int(trace.writes.sum()) == 15


def test_declared_extents_and_negative_indices() -> None:
    """A local ``np.empty((N, N))`` keeps its declared shape; an index below 0 gets its own
    element (the dimension starts there)."""
    nest = load_file(EXAMPLES / "recipes.py", "putting_everything_together")[0]
    trace = trace_nest(nest, {"M": 1, "N": 4, "T": 1})
    assert trace.layout["A"].extents == (4, 4)
    source = "def f(A, N):\n    for i in range(-3, N):\n        A[i - 1] = A[2 * i]\n"
    trace = trace_nest(load_source(source)[0], {"N": 2})
    assert trace.layout["A"].origin == (-6,) and trace.layout["A"].extents == (9,)
    indices = {2 * i for i in range(-3, 2)} | {i - 1 for i in range(-3, 2)}
    assert set(trace.addresses.tolist()) == {8 * (x + 6) for x in indices}


QUASI_AFFINE = """\
def f(A, B, N, M):
    for i in range(-N, N, 2):
        for j in range(max(i, 0), min(N, i + M) + 1):
            if i % 3 != 1 and not (j > N - 2):
                A[i // 2 + N, j % 3] = B[(i + j) // 4 + N, max(j - 1, 0)]
            else:
                B[N - i, j] = A[i % 4, i * j % 5]
    for k in range(N - 1, -1, -3):
        A[k, k] += 1
"""


@pytest.mark.parametrize("n, m", [(5, 3), (7, 1), (4, 6), (0, 2)])
def test_floor_mod_minmax_guards_and_negative_steps(n: int, m: int) -> None:
    """Floor division and modulo of negative values, min/max bounds, ``and``/``not``/``else``
    guards, a product of loop variables and a negative step, as Python computes them."""
    namespace: dict[str, Any] = {}
    exec(compile(QUASI_AFFINE, "<quasi>", "exec"), namespace)  # noqa: S102 - our own code
    nest = load_source(QUASI_AFFINE)[0]
    trace = trace_nest(nest, {"N": n, "M": m})
    assert_same(trace, record(namespace["f"], {"N": n, "M": m}, {"A": 2, "B": 2}))


@settings(PROPERTY, max_examples=300)
@given(source=st.one_of(nests(), nests(nonaffine=True)), n=st.integers(0, 6),
       m=st.integers(0, 6))
def test_generated_nests_trace_as_the_oracle_runs_them(source: str, n: int, m: int) -> None:
    """Random nests (imperfect, guarded, triangular, strided, negative steps, min/max bounds,
    ``i * j`` and ``i % 3`` subscripts): the trace is the oracle interpreter's sequence of
    array accesses exactly, or, where a subscript, bound or guard of an array access reads
    data (``X[i]``), a UsageError that says so."""
    nest = load_source(source)[0]
    params = {p: {"N": n, "M": m}[p] for p in nest.parameters}
    log = [(a.location[0], a.location[1], a.write)
           for a in oracle_trace(source, {"N": n, "M": m}) if a.location[1]]
    try:
        trace = trace_nest(nest, params)
    except UsageError as err:
        assert "depends on data" in str(err) and "<source>:" in str(err)
        return
    assert_same(trace, log)


def test_data_dependent_subscripts_and_guards_are_errors() -> None:
    nest = load_file(EXAMPLES / "recipes.py", "histogram")[0]
    with pytest.raises(UsageError, match=r"recipes\.py:71: cannot trace hist\[ind\] \+= val: its "
                                         r"guard `ind < H` depends on data"):
        trace_nest(nest, {"N": 4, "H": 2})
    source = "def f(A, X, N):\n    for i in range(N):\n        A[X[i]] = 1\n"
    with pytest.raises(UsageError, match=r"<source>:3: cannot trace A\[X\[i\]\]: its "
                                         "subscript depends on data"):
        trace_nest(load_source(source)[0], {"N": 3})


def test_data_dependent_bounds_are_errors() -> None:
    source = "def f(A, X, N):\n    for i in range(N):\n        for j in range(X[i]):\n" \
             "            A[j] = 0\n"
    with pytest.raises(UsageError, match=r"<source>:3: cannot trace loop j: its stop "
                                         "depends on data"):
        trace_nest(load_source(source)[0], {"N": 3})


def test_parameter_errors() -> None:
    nest = load_file(EXAMPLES / "recipes.py", "mmm")[0]
    with pytest.raises(UsageError, match="give a value for heightA, widthA"):
        trace_nest(nest, {"widthB": 4})
    with pytest.raises(UsageError, match="no parameter n "):
        trace_nest(nest, {"n": 4, "heightA": 1, "widthB": 1, "widthA": 1})
    with pytest.raises(UsageError, match="element size of A must be a positive integer"):
        trace_nest(nest, {"heightA": 1, "widthB": 1, "widthA": 1}, {"A": 0})
    with pytest.raises(UsageError, match="elem_bytes names no array of the nest: Z"):
        trace_nest(nest, {"heightA": 1, "widthB": 1, "widthA": 1}, {"Z": 4})


def test_json_and_lines() -> None:
    nest = load_file(EXAMPLES / "recipes.py", "transpose")[0]
    trace = trace_nest(nest, {"rows": 3, "cols": 2})
    data = trace.to_json()
    assert (data["accesses"], data["reads"], data["writes"]) == (12, 6, 6)
    assert [a["name"] for a in data["arrays"]] == ["A", "B"]
    assert all(len(line) <= 80 for line in trace.lines())
