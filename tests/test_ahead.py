"""Candidates compiled ahead in forked workers (``loclab.optimize.ahead``): what is loaded is
what a compile here makes (same outputs, from Numba's cache), a compile that fails there
fails here with its own error, and the local search hands over each batch it will measure
(never one it measured, one the restriction rejects, or more than its budget allows)."""

from __future__ import annotations

import os
import sys
from dataclasses import replace

import numpy as np
import pytest

from loclab.measure.attempt import Attempt
from loclab.measure.search import LOCAL_STARTS, search
from loclab.measure.space import Space, key
from loclab.measure.stats import summarize
from loclab.measure.validate import Check
from loclab.errors import UsageError
from loclab.optimize.ahead import CompiledAhead, compile_workers
from loclab.optimize.build import Source
from loclab.transform import transform
from loclab.transform.recipe import parse_recipe

SCALE_ROWS = '''
def scale_rows(A, s, N, M):
    for i in range(N):
        for j in range(M):
            A[i, j] = A[i, j] * s[i] + 1.0
'''

several_cpus = pytest.mark.skipif(compile_workers(2) < 2,
                                  reason="compiles ahead only where two CPUs can")


def scaled(recipe: str):
    return transform(SCALE_ROWS, recipe, "scale_rows", emit="numba")


def arguments():
    rng = np.random.default_rng(5)
    return [rng.random((37, 23)), rng.random(37), 37, 23]


@several_cpus
def test_functions_compiled_ahead_load_from_the_cache_and_compute_the_same():
    results = [scaled("parallel(i)"), scaled("tile(i=8, j=8); parallel(ii)")]
    args = arguments()
    with CompiledAhead(args) as ahead:
        ahead.prepare(results)
        for result in results:
            loaded = ahead.function(result)
            mine = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
            theirs = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
            loaded(*mine)
            result.compile()(*theirs)
            assert sum(loaded.stats.cache_hits.values()) == 1  # loaded, not compiled here
            assert np.array_equal(mine[0], theirs[0])
    assert not any(name.startswith("loclab_ahead_") for name in sys.modules)


@several_cpus
def test_a_compile_that_fails_ahead_fails_again_where_it_is_measured():
    good = scaled("parallel(i)")
    broken = replace(good, source=good.source.replace("s[i]", "s[i, i, i]"))
    with CompiledAhead(arguments()) as ahead:
        ahead.prepare([good, broken])
        with pytest.raises(Exception, match="(?i)getitem|index"):
            ahead.function(broken)(*arguments())
        ahead.function(good)(*arguments())


def test_one_candidate_or_one_cpu_forks_nothing(monkeypatch):
    assert compile_workers(1) == 1
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    assert compile_workers(12) == 1
    result = scaled("parallel(i)")
    with CompiledAhead(arguments()) as ahead:
        ahead.prepare([result, scaled("tile(i=8, j=8); parallel(ii)")])
        function = ahead.function(result)  # compiled here, as result.compile() does
        function(*arguments())
        assert not function.stats.cache_hits


def fake_measure(costs):
    def measure(config):
        return Attempt(dict(config), Check(True, 0.0, None), None,
                       summarize([costs(config)] * 3), 1)
    return measure


def test_the_local_search_prepares_each_batch_before_measuring_it():
    space = Space(values={"a": (1, 2, 4, 8, 16, 32), "b": (1, 2, 4, 8)},
                  default={"a": 4, "b": 2})
    measured: list = []
    batches: list[list] = []

    def measure(config):
        measured.append(key(config))
        return fake_measure(lambda c: abs(c["a"] - 16) + abs(c["b"] - 8) + 1.0)(config)

    def restriction(config):
        return "too wide" if config["a"] == 32 else None

    def prepare(configs):
        assert all(key(c) not in measured for c in configs)  # none measured yet
        assert all(c["a"] != 32 for c in configs)  # nor rejected
        batches.append([key(c) for c in configs])

    found = search(space, measure, restriction, "local", limit=9, prepare=prepare)
    assert batches[0][0] == key(space.default) and len(batches[0]) == 1 + LOCAL_STARTS
    prepared = [k for batch in batches for k in batch]
    assert set(measured) <= set(prepared)  # every measured configuration was prepared
    assert len(prepared) == len(set(prepared))  # and none twice
    assert len(prepared) <= 9 and found.evaluated == len(measured)


@several_cpus
def test_a_function_numba_would_not_cache_is_compiled_where_it_is_measured(monkeypatch):
    monkeypatch.setattr(CompiledAhead, "compile_here", lambda self, result, checked: None)
    result = scaled("parallel(i)")
    with CompiledAhead(arguments()) as ahead:
        ahead.prepare([result, scaled("tile(i=8, j=8); parallel(ii)")])
        function = ahead.function(result)
        function(*arguments())
        assert not function.stats.cache_hits


@several_cpus
def test_builds_run_in_the_workers_and_their_transforms_are_kept_here(monkeypatch):
    """A tile search's configurations transformed and compiled there: the same builds made
    here afterwards prove nothing (their transforms, and a refusal, were sent back) and
    load their functions from the cache."""
    import loclab.transform

    source = Source(SCALE_ROWS, "scale_rows", "<scale_rows>")
    tiled, illegal = parse_recipe("tile(i=4, j=16); parallel(ii)"), parse_recipe("skew(i, q, 1)")
    args = arguments()
    with CompiledAhead(args) as ahead:
        ahead.build([lambda: source.transform(tiled), lambda: source.transform(illegal)])
        monkeypatch.setattr(loclab.transform, "transform", lambda *a, **k: pytest.fail("proved"))
        built = source.transform(tiled)
        with pytest.raises(UsageError, match="q"):
            source.transform(illegal)
        function = ahead.function(built)
        mine = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        function(*mine)
        assert sum(function.stats.cache_hits.values()) == 1
        assert np.array_equal(mine[0], args[0] * args[1][:, None] + 1.0)


@several_cpus
def test_the_recipe_kept_is_compiled_as_timed_and_bounds_checked_at_once():
    """``prove``: two workers compile the same function, one as it is timed, the other with
    bounds checks (what the verification runs); both load from the cache."""
    source = Source(SCALE_ROWS, "scale_rows", "<scale_rows>")
    steps = parse_recipe("parallel(i)")
    with CompiledAhead(arguments()) as ahead:
        result = source.transform(steps)
        ahead.prove(result)
        timed, checked = ahead.function(result), ahead.checked_function(result)
        assert checked is not None and checked.targetoptions["boundscheck"]
        short = arguments()
        short[1] = short[1][:30]  # s[i] past its end for i >= 30
        with pytest.raises(IndexError):
            checked(*short)
        timed(*arguments())
        for function in (timed, checked):
            assert sum(function.stats.cache_hits.values()) == 1


@several_cpus
def test_a_likely_proved_build_is_compiled_bounds_checked_where_a_cpu_would_idle(
        monkeypatch):
    """``build``'s ``likely_proved``: with a CPU to spare, its bounds-checked copy is
    compiled beside the builds, and ``prove`` then compiles nothing; with none to spare,
    nothing more is compiled than the builds."""
    import loclab.optimize.ahead as ahead_module

    source = Source(SCALE_ROWS, "scale_rows", "<scale_rows>")
    make = lambda: source.transform(parse_recipe("parallel(i)"))  # noqa: E731
    with CompiledAhead(arguments()) as ahead:
        ahead.build([make], likely_proved=[make])
        result = make()
        assert ahead.checked_function(result) is not None
        monkeypatch.setattr(ahead, "_in_pool", lambda work: work and pytest.fail(str(work)))
        ahead.prove(result)
    # one CPU fewer than the work: the builds take them all
    monkeypatch.setattr(ahead_module, "compile_workers", lambda work: max(1, work - 1))
    with CompiledAhead(arguments()) as ahead:
        ahead.build([make, make], likely_proved=[make])
        assert ahead.checked_function(make()) is None


@several_cpus
def test_a_worker_that_dies_ends_the_pool_and_the_rest_compiles_here(monkeypatch):
    """A worker killed (LLVM crashing, the kernel out of memory) breaks the pool: nothing
    waits for it, and every candidate still compiles where it is measured."""
    here = os.getpid()
    compile_here = CompiledAhead.compile_here

    def dying_in_a_worker(self, result, checked):
        if os.getpid() != here:
            os._exit(3)
        compiled_here.append(result)
        return compile_here(self, result, checked)

    compiled_here: list = []
    monkeypatch.setattr(CompiledAhead, "compile_here", dying_in_a_worker)
    results = [scaled("parallel(i)"), scaled("tile(i=8, j=8); parallel(ii)")]
    args = arguments()
    with CompiledAhead(args) as ahead:
        ahead.prepare(results)
        for result in results:
            mine = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
            ahead.function(result)(*mine)
            assert np.array_equal(mine[0], args[0] * args[1][:, None] + 1.0)
    assert compiled_here == results


def test_past_its_seconds_the_search_starts_no_batch_but_measures_the_one_built(
        monkeypatch):
    """The time budget stops builds from starting: a batch prepared (compiled at once) is
    measured to its end, no later batch is prepared, and the search says why it stopped."""
    import loclab.measure.search as search_module

    now = [0.0]
    monkeypatch.setattr(search_module.time, "perf_counter", lambda: now[0])
    space = Space(values={"a": (1, 2, 4, 8, 16, 32), "b": (1, 2, 4, 8)},
                  default={"a": 4, "b": 2})
    measured, batches = [], []

    def measure(config):
        now[0] += 10.0  # each configuration takes 10 s to measure
        measured.append(key(config))
        return fake_measure(lambda c: abs(c["a"] - 16) + abs(c["b"] - 8) + 1.0)(config)

    found = search(space, measure, lambda config: None, "local", limit=12, seconds=15.0,
                   prepare=lambda configs: batches.append([key(c) for c in configs]))
    assert len(batches) == 1 and measured == batches[0]  # the first batch, whole
    assert len(measured) == 1 + LOCAL_STARTS and found.stopped == "after 15 s"
