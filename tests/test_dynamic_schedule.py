"""Parallel loops whose iterations hold different work handed out one at a time
(``parallel(i, dynamic=True)``): Numba's ``set_parallel_chunksize(1)`` around the loop and
restored after it, OpenMP's ``schedule(dynamic)``."""

from __future__ import annotations

import shutil

import pytest

from loclab.errors import UsageError
from loclab.transform import transform

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
def test_c_schedules_the_loop_dynamically():
    result = transform(TRIANGLE_C, "parallel(i, dynamic=True)", "gram", language="c")
    assert "#pragma omp parallel for schedule(dynamic)" in result.source
    assert result.verify(N=13, M=4).ok


@pytest.mark.parametrize("recipe, message", [
    ("parallel(i, dynamic=True, copies=True)", "dynamic=True would have nothing to hand out"),
    ("parallel(i, dynamic=1)", "unknown option dynamic=1 (parallel takes copies=True/False "
                               "or dynamic=True/False)"),
])
def test_bad_options_are_named(recipe, message):
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        transform(TRIANGLE, recipe, "gram", emit="numba")
