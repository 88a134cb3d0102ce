"""``loclab.model.cache``: the compiled simulator against the plain per-access reference,
hand-checked cases, and the model's miss counts against real execution.

The ground truth for the case studies is independent of the IR: the Python function runs
with recording arrays (tests.test_model_trace.record), and that sequence goes through the
reference simulator. The model (IR -> vectorized trace -> Numba simulator) must match it
within 2% (it matches exactly).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loclab.errors import UsageError
from loclab.model.cache import (CacheLevel, cache_report, detect_hierarchy, parse_cache_list,
                                simulate, simulate_reference)
from loclab.model.reuse import mmm_source
from loclab.model.trace import Trace, trace_nest
from loclab.nest import load_function, load_source
from tests.test_model_trace import example_module, expected, ranks, record

PROPERTY = settings(deadline=None, derandomize=True, database=None)


def make_trace(addresses: list[int], writes: list[bool]) -> Trace:
    return Trace(np.array(addresses, dtype=np.int64), np.array(writes, dtype=bool))


@st.composite
def hierarchies(draw: Any) -> list[CacheLevel]:
    """1-3 tiny levels (1-5 sets, not only powers of two; 1-4 ways; 16-64 B lines)."""
    levels = []
    for depth in range(draw(st.integers(1, 3))):
        line = draw(st.sampled_from((16, 32, 64)))
        ways = draw(st.integers(1, 4))
        levels.append(CacheLevel(f"L{depth + 1}", line * ways * draw(st.integers(1, 5)),
                                 line, ways))
    return levels


@settings(PROPERTY, max_examples=200)
@given(levels=hierarchies(), accesses=st.lists(
    st.tuples(st.integers(0, 60), st.integers(0, 7), st.booleans()), max_size=300))
def test_simulator_equals_the_reference(levels: list[CacheLevel],
                                        accesses: list[tuple[int, int, bool]]) -> None:
    """Exact agreement of every count at every level on random traces with many conflicts
    (a few dozen lines over caches of 1-20 lines) and dirty evictions."""
    trace = make_trace([16 * line + 2 * offset for line, offset, _ in accesses],
                       [write for _, _, write in accesses])
    assert simulate(trace, levels) == simulate_reference(trace, levels)


@pytest.mark.parametrize("k", [1, 4, 8])
def test_lru_misses_every_time_on_a_cycle_one_line_too_long(k: int) -> None:
    level = CacheLevel("L1", 64 * k, 64, k)  # fully associative: one set of k ways
    trace = make_trace([64 * (n % (k + 1)) for n in range(10 * (k + 1))], [False] * 10 * (k + 1))
    for stats in (simulate(trace, [level])[0], simulate_reference(trace, [level])[0]):
        assert (stats.hits, stats.misses) == (0, 10 * (k + 1))
    fits = make_trace([64 * (n % k) for n in range(10 * k)], [False] * 10 * k)
    assert simulate(fits, [level])[0].misses == k


def test_direct_mapped_conflict_and_writebacks() -> None:
    level = CacheLevel("L1", 1024, 64, 1)  # 16 sets: 0 and 1024 share set 0
    ping = make_trace([0, 1024] * 5, [True, False] * 5)
    stats = simulate(ping, [level])[0]
    assert (stats.misses, stats.writebacks, stats.bytes_to_below) == (10, 5, 320)
    apart = make_trace([0, 64] * 5, [True, False] * 5)
    assert simulate(apart, [level])[0].misses == 2
    below = simulate(ping, [level, CacheLevel("L2", 4096, 64, 4)])
    assert (below[1].accesses, below[1].misses) == (15, 2)  # 10 fetches + 5 write-backs


def test_levels_are_validated() -> None:
    with pytest.raises(UsageError, match="line size 48 B is not a power of two"):
        CacheLevel("L1", 4800, 48, 1)
    with pytest.raises(UsageError, match="size 1000 B is not a multiple of line x ways"):
        CacheLevel("L1", 1000, 64, 8)
    with pytest.raises(UsageError, match="ways must be a positive integer, not 0"):
        CacheLevel("L1", 1024, 64, 0)


def test_parse_cache_list() -> None:
    levels = parse_cache_list("32KiB, 1MiB:16,48M:12,64M")
    assert [(lv.name, lv.size_bytes, lv.ways) for lv in levels] == [
        ("L1", 32768, 8), ("L2", 2**20, 16), ("L3", 48 * 2**20, 12), ("L4", 64 * 2**20, 16)]
    with pytest.raises(UsageError, match=r"bad cache size '32Q'"):
        parse_cache_list("32KiB,32Q")
    with pytest.raises(UsageError, match=r"bad cache '1000:8': size 1000 B is not a multiple"):
        parse_cache_list("1000:8")


def test_detect_hierarchy_reads_ways_or_assumes(tmp_path: Path) -> None:
    (tmp_path / "index0").mkdir()
    for name, value in {"level": "1", "type": "Data", "ways_of_associativity": "12",
                        "coherency_line_size": "64"}.items():
        (tmp_path / "index0" / name).write_text(value + "\n")
    levels, notes = detect_hierarchy(tmp_path)
    assert levels[0].ways == 12 and levels[1].ways == 16
    assert "L2 ways not in sysfs: 16 assumed" in notes
    assert all(lv.size_bytes % (lv.line_bytes * lv.ways) == 0 for lv in levels)


TRANSPOSE_BLOCKED = """\
def transpose_blocked(A, B, rows, cols):
    for ii in range(0, rows, 8):
        for jj in range(0, cols, 8):
            for i in range(ii, min(ii + 8, rows)):
                for j in range(jj, min(jj + 8, cols)):
                    B[j, i] = A[i, j]
"""


def _function(source: str) -> Any:
    namespace: dict[str, Any] = {}
    exec(compile(source, "<model>", "exec"), namespace)  # noqa: S102 - our own code
    return next(v for k, v in namespace.items() if callable(v) and not k.startswith("__"))


CASES = [
    ("transpose naive", lambda: example_module("recipes").transpose, None,
     {"rows": 48, "cols": 40}),
    ("transpose blocked", lambda: _function(TRANSPOSE_BLOCKED), TRANSPOSE_BLOCKED,
     {"rows": 48, "cols": 40}),
    ("mmm naive", lambda: _function(mmm_source("naive")), mmm_source("naive"),
     {"N": 20, "L": 20}),
    ("mmm blocked", lambda: _function(mmm_source("blocked", 8)), mmm_source("blocked", 8),
     {"N": 20, "L": 20}),
]


@pytest.mark.parametrize("name, function, source, params", CASES, ids=[c[0] for c in CASES])
def test_model_predicts_misses_of_real_execution(name: str, function: Any, source: str | None,
                                                 params: dict[str, int]) -> None:
    """Transposition and MMM, naive and blocked, on a small 2-level hierarchy (1 KiB 2-way,
    4 KiB 4-way): misses within 2% of the reference run on the recorded execution."""
    func = function()
    nest = load_source(source)[0] if source else load_function(func)
    trace = trace_nest(nest, params, 4)
    addresses, writes = expected(trace, record(func, params, ranks(nest)))
    levels = [CacheLevel("L1", 1024, 32, 2), CacheLevel("L2", 4096, 64, 4)]
    truth = simulate_reference(make_trace(addresses.tolist(), writes.tolist()), levels)
    model = simulate(trace, levels)
    for ours, theirs in zip(model, truth):
        assert abs(ours.misses - theirs.misses) <= 0.02 * theirs.misses
        assert ours == theirs  # in fact exactly


def test_cache_report() -> None:
    nest = load_function(example_module("recipes").transpose)
    report = cache_report(nest, {"rows": 64, "cols": 64}, parse_cache_list("1KiB:2,8KiB:4"), 8)
    data = report.to_json()
    assert set(data) >= {"levels", "arrays", "params", "accesses", "note"}
    assert set(data["levels"][0]) >= {"name", "size_bytes", "line_bytes", "ways", "accesses",
                                      "hits", "misses", "writebacks", "bytes_from_below",
                                      "bytes_to_below"}
    assert sum(a["misses"] for a in data["arrays"].values()) == data["levels"][-1]["misses"]
    assert data["arrays"]["B"]["misses"] > data["arrays"]["A"]["misses"]  # B by columns
    assert all(len(line) <= 80 for line in report.lines())
