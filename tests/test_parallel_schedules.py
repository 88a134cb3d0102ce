"""Parallel loops whose iterations hold different work: handed out one at a time
(``parallel(i, dynamic=True)``: Numba's ``set_parallel_chunksize(1)`` around the loop and
restored after it, OpenMP's ``schedule(dynamic)``), or dealt in turn into slots
(``cyclic=N``: OpenMP's ``schedule(static, 1)``), which the optimizer asks for on a
triangle's tile loop, and which Numba can cache (the optimizer's compiles ahead need it)."""

from __future__ import annotations

import shutil

import pytest

import numpy as np

from loclab.errors import UsageError
from loclab.optimize import plan
from loclab.optimize.ahead import CompiledAhead
from loclab.optimize.build import plan_steps
from loclab.optimize.planner import uneven_work
from loclab.transform import transform
from loclab.transform.steps import IllegalStep

TRIANGLE = """
def gram(A, C, N, M):
    for i in range(N):
        for j in range(i, N):
            for k in range(M):
                C[i, j] += A[k, i] * A[k, j]
"""

TRIANGLE_C = """
void gram(int N, int M, double A[M][N], double C[N][N]) {
    for (int i = 0; i < N; i++)
        for (int j = i; j < N; j++)
            for (int k = 0; k < M; k++)
                C[i][j] += A[k][i] * A[k][j];
}
"""


def test_numba_hands_out_a_triangles_tiles_one_at_a_time_and_restores_the_chunk_size():
    result = transform(TRIANGLE, "tile(i=8); parallel(ii, dynamic=True)", "gram",
                       emit="numba")
    body = result.source[result.source.index("    ii_chunksize"):]
    lines = [line.strip() for line in body.splitlines()]
    assert lines[:2] == ["ii_chunksize = set_parallel_chunksize(1)",
                         "for ii_index in prange((N + 7) // 8):"]
    assert "set_parallel_chunksize(ii_chunksize)" in lines
    assert "from numba import set_parallel_chunksize" in result.source
    for sizes in ({"N": 21, "M": 5}, {"N": 1, "M": 1}):
        assert result.verify(**sizes).ok, sizes


def test_without_the_option_the_loop_runs_in_equal_runs_as_before():
    result = transform(TRIANGLE, "tile(i=8); parallel(ii)", "gram", emit="numba")
    assert "chunksize" not in result.source


@pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None,
                    reason="no C compiler to verify with")
@pytest.mark.parametrize("option, schedule", [("dynamic=True", "dynamic"),
                                              ("cyclic=16", "static, 1")])
def test_c_schedules_the_loop_as_asked(option, schedule):
    result = transform(TRIANGLE_C, f"parallel(i, {option})", "gram", language="c")
    assert f"#pragma omp parallel for schedule({schedule})" in result.source
    assert result.verify(N=13, M=4).ok


@pytest.mark.parametrize("recipe, message", [
    ("parallel(i, dynamic=True, copies=True)", "each split the iterations their own way"),
    ("parallel(i, cyclic=4, dynamic=True)", "each split the iterations their own way"),
    ("parallel(i, dynamic=1)", "unknown option dynamic=1 (parallel takes copies=True/False "
                               "or dynamic=True/False)"),
    ("parallel(i, cyclic=0)", "cyclic=0: give the number of slots, 1 to 4,096"),
    ("parallel(i, cyclic=True)", "cyclic=True: give the number of slots"),
])
def test_bad_options_are_named(recipe, message):
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        transform(TRIANGLE, recipe, "gram", emit="numba")


def test_cyclic_deals_a_triangles_tiles_into_slots_and_numba_caches_it():
    result = transform(TRIANGLE, "tile(i=8); parallel(ii, cyclic=4)", "gram", emit="numba")
    body = result.source[result.source.index("    for ii_slot"):]
    assert [line.strip() for line in body.splitlines()[:3]] == [
        "for ii_slot in prange(4):", "for ii_index in range(ii_slot, (N + 7) // 8, 4):",
        "ii = 8 * ii_index"]
    for sizes in ({"N": 21, "M": 5}, {"N": 40, "M": 3}, {"N": 1, "M": 1}):
        assert result.verify(**sizes).ok, sizes
    arguments = [np.zeros((3, 21)), np.zeros((21, 21)), 21, 3]
    with CompiledAhead(arguments) as ahead:  # where dynamic=True's cannot: a dynamic global
        assert ahead.compile_here(result, checked=False) is not None


def test_cyclic_rows_keep_a_scalar_sum_a_reduction():
    source = ("def total(A, N):\n    s = 0.0\n    for i in range(N):\n"
              "        for j in range(i, N):\n            s += A[i, j]\n    return s\n")
    result = transform(source, "parallel(i, cyclic=3)", "total", emit="numba")
    assert "for i_slot in prange(3):" in result.source
    for sizes in ({"N": 30}, {"N": 2}):
        assert result.verify(**sizes).ok, sizes


def parallel_steps(source: str, threads: int = 4) -> list[tuple[bool, list[str]]]:
    """Each plan's parallel steps, and whether the plan is tiled (plans whose tile step
    the transformer refuses left out)."""
    found = plan(source, "gram", params={"N": 300, "M": 400}, threads=threads)
    out = []
    for candidate in found.plans[0]:
        try:
            steps = plan_steps(found.code, [], candidate, {})
        except (UsageError, IllegalStep):
            continue
        out.append((candidate.band is not None,
                    [str(s) for s in steps if s.name == "parallel"]))
    return out


def test_the_planner_deals_a_triangles_rows_to_the_threads_and_says_why():
    """``C[i, j]``: each row is its own iteration's, tiled or not."""
    (plans,) = plan(TRIANGLE, "gram", params={"N": 300, "M": 400}, threads=4).plans
    assert uneven_work(plans[0].top) == "j's range moves with i"
    found = [steps for _, steps in parallel_steps(TRIANGLE) if steps]
    assert found and all(step.endswith("cyclic=4)") for steps in found for step in steps)
    assert not any("cyclic" in step for _, steps in parallel_steps(TRIANGLE, threads=1)
                   for step in steps)


def test_results_that_share_cache_lines_are_dealt_only_by_tiles():
    """``y[i]``: neighbouring rows' results share a line; a tile's rows stay together."""
    source = TRIANGLE.replace("C[i, j] += A[k, i] * A[k, j]", "C[i] += A[k, i] * A[k, j]")
    found = [(tiled, steps) for tiled, steps in parallel_steps(source) if steps]
    assert any(not tiled for tiled, _ in found)
    for tiled, steps in found:
        assert all(step.endswith("cyclic=4)") == tiled for step in steps), steps


def test_rows_of_equal_work_keep_equal_runs():
    source = TRIANGLE.replace("range(i, N)", "range(N)")
    (plans,) = plan(source, "gram", params={"N": 300, "M": 400}, threads=4).plans
    assert uneven_work(plans[0].top) is None
    assert not any(p.cyclic for p in plans)


def test_a_sparse_rows_unreadable_bounds_count_as_uneven():
    source = ("def spmv(ptr, col, val, x, y, N):\n    for i in range(N):\n"
              "        for k in range(ptr[i], ptr[i + 1]):\n"
              "            y[i] += val[k] * x[col[k]]\n")
    found = plan(source, "spmv", params={"N": 3000}, threads=2)
    assert uneven_work(found.plans[0][0].top) == "k's bounds are not affine"
