"""A loop split across threads, fitted to the shape of what it reduces: short rows (a tall
matvec's 64 columns) by groups of 4, 8 or 16 lanes, several rows a warp, each group's
shuffles masked to its own lanes (``loclab_group_*``); few long rows (a wide matvec's 64)
by several blocks each, the last block to finish combining the parts in block order
(``cuda.chunks``). Written (compiled by nvcc where installed) and, on a GPU, against the
original: rows past the end of a warp's groups, several reductions, an element kept in a
register, repeated calls (the blocks' counts are left at zero for the next launch). And the
square of a two-loop grid without reuse where one access runs across threadIdx.x (a
transposition): a warp of 8 x 4 iterations, whole sectors of both accesses."""

from __future__ import annotations

import shutil
from dataclasses import replace

import numpy as np
import pytest

from loclab.optimize.cuda import argument_types
from loclab.optimize.cuda.mapping import BLOCK_LANES, neighbours
from tests.test_optimize_gpu import CASES, gpu_agrees, gpu_planned, make_inputs, nvcc_compiled

MATVEC = (CASES / "matvec" / "nest.py").read_text()
ROW_STATS = """
def f(A, hi, total, N, M):
    for i in range(N):
        s = 0.0
        m = -1e30
        for j in range(M):
            s += A[i, j]
            m = max(m, A[i, j])
        total[i] = s
        hi[i] = m
"""
ROW_UPDATE = """
def f(A, x, y, N, M):
    for i in range(N):
        for j in range(M):
            y[i] -= A[i, j] * x[j]
"""
SHORT_ROWS = """
def f(A, out, N, M):
    for i in range(N):
        s = 0.0
        for j in range(M):
            s += A[i, j] * 2.0
        out[i] = s * s
"""
# every block would run the store before the loop: the loop stays one block's
STORE_FIRST = """
def f(A, out, seen, N, M):
    for i in range(N):
        seen[i] = 1.0
        s = 0.0
        for j in range(M):
            s += A[i, j]
        out[i] = s
"""


def emitted(source: str, function: str = "f", chunks: int | None = None, **sizes: int):
    """The nest planned and emitted at ``sizes``, its argument types from inputs at tiny
    sizes (types do not depend on sizes; a wide matvec's matrix would take gigabytes)."""
    _, mapped = gpu_planned(source, function, **sizes)
    tiny, _ = gpu_planned(source, function, **{name: 3 for name in sizes})
    inputs = make_inputs(tiny.as_written.program, tiny.sizes)
    configs = mapped.default_configs()
    if chunks is not None:
        configs = [replace(c, chunks=chunks) for c in configs]
    return mapped, configs, mapped.emit(*argument_types(inputs, list(sizes)), configs)


def compiles(cuda, tmp_path) -> None:
    if shutil.which("nvcc"):
        run = nvcc_compiled(cuda, tmp_path)
        assert run.returncode == 0, run.stderr


def test_short_rows_are_split_by_groups_of_lanes_several_rows_a_warp(tmp_path):
    mapped, (config,), cuda = emitted(MATVEC, "matvec", rows=4096, cols=64)
    assert config.lanes == 16 and config.threads == 256
    assert config.text() == "16 lanes per iteration, 16 iterations a block"
    assert "s = loclab_group_add<16>(s);" in cuda.source and "(16, 16, 1)" in cuda.module
    lanes = {n.lanes for n in neighbours(mapped.mappings[0], config)}
    assert {8, 32, BLOCK_LANES} <= lanes
    compiles(cuda, tmp_path)
    _, (few,), _ = emitted(SHORT_ROWS, N=3001, M=20)
    assert few.lanes == 4 and few.threads == 256
    _, (long_rows,), _ = emitted(MATVEC, "matvec", rows=4096, cols=4096)
    assert long_rows.lanes == 32


def test_few_long_rows_are_shared_by_several_blocks(tmp_path):
    mapped, (config,), cuda = emitted(MATVEC, "matvec", rows=64, cols=1 << 22)
    assert config.lanes == BLOCK_LANES and config.chunks == 8
    assert config.text() == "a block of 1024 threads per iteration, 8 blocks sharing its loop"
    (kernel,) = cuda.kernels
    assert kernel.chunks == 8 and kernel.parts == ("float64",)
    assert "j += 1024 * (I)gridDim.x" in kernel.text
    assert "atomicAdd(&loclab_arrived[loclab_iteration], 1)" in kernel.text
    assert "loclab_parts0 = cp.empty(8 * count_i, dtype=np.float64)" in cuda.module
    assert "(8, min(max(1, -(-count_i // 1)), 65535), 1)" in cuda.module
    assert {n.chunks for n in neighbours(mapped.mappings[0], config)} >= {4, 16}
    compiles(cuda, tmp_path)
    # short rows leave each thread too few iterations to share: one block a row
    _, (short,), _ = emitted(MATVEC, "matvec", rows=64, cols=4096)
    assert short.chunks == 1


def test_several_reductions_and_a_kept_element_are_shared_by_blocks(tmp_path):
    _, _, cuda = emitted(ROW_STATS, chunks=3, N=5, M=5000)
    (kernel,) = cuda.kernels
    assert kernel.parts == ("float64", "float64")
    assert "loclab_all1 = loclab_max(loclab_all1" in kernel.text
    assert "if (loclab_last) {" in kernel.text  # the stores after the loop: the last block's
    compiles(cuda, tmp_path)
    _, _, cuda = emitted(ROW_UPDATE, chunks=3, N=7, M=5000)
    assert "threadIdx.x == 0 && loclab_last) y[i] = r_y_0;" in cuda.kernels[0].text
    compiles(cuda, tmp_path)


def test_a_loop_after_a_store_every_block_would_repeat_is_not_shared():
    _, (config,), cuda = emitted(STORE_FIRST, chunks=4, N=5, M=5000)
    assert config.chunks == 4 and cuda.kernels[0].chunks == 1
    assert "loclab_arrived" not in cuda.source


@pytest.mark.gpu
@pytest.mark.parametrize("source,sizes,config", [
    (SHORT_ROWS, {"N": 3001, "M": 20}, {"block": (64,), "lanes": 4}),
    (SHORT_ROWS, {"N": 1001, "M": 37}, {"block": (32,), "lanes": 8}),
    (SHORT_ROWS, {"N": 999, "M": 64}, {"block": (16,), "lanes": 16}),
    (ROW_STATS, {"N": 333, "M": 13}, {"block": (32,), "lanes": 8}),
    (ROW_UPDATE, {"N": 77, "M": 50}, {"block": (16,), "lanes": 16}),
    (ROW_STATS, {"N": 5, "M": 5000}, {"block": (1,), "lanes": 1024, "chunks": 3}),
    (ROW_STATS, {"N": 3, "M": 100003}, {"block": (1,), "lanes": 256, "chunks": 8}),
    (ROW_UPDATE, {"N": 7, "M": 5001}, {"block": (1,), "lanes": 512, "chunks": 4}),
    (SHORT_ROWS, {"N": 2, "M": 700}, {"block": (1,), "lanes": 1024, "chunks": 16}),
    (STORE_FIRST, {"N": 5, "M": 5000}, {"block": (1,), "lanes": 1024, "chunks": 4}),
])
def test_rows_split_by_groups_or_blocks_agree_with_the_original(source, sizes, config):
    gpu_agrees(source, sizes, config)


@pytest.mark.gpu
def test_blocks_sharing_rows_agree_again_on_the_next_call():
    import cupy as cp

    found, mapped = gpu_planned(MATVEC, "matvec", rows=64, cols=1 << 16)
    inputs = make_inputs(found.as_written.program, found.sizes)
    (config,) = mapped.default_configs()
    config = replace(config, chunks=8)
    function = mapped.emit(*argument_types(inputs, list(found.sizes)), [config]).compile()
    rng = np.random.default_rng(1)
    for _ in range(3):
        a = rng.random((64, 1 << 16))
        x = rng.random(1 << 16)
        y = cp.full(64, np.nan)
        function(cp.asarray(a), cp.asarray(x), y, 64, 1 << 16)
        assert np.allclose(cp.asnumpy(y), a @ x, rtol=1e-9)


TRANSPOSE = """
def f(a, out, N, M):
    for i in range(N):
        for j in range(M):
            out[j, i] = a[i, j]
"""
# u[i] is unit-stride along i but the same for every thread along j: no access crosses x
RANK_ONE = """
def f(A, u, v, N, M):
    for i in range(N):
        for j in range(M):
            A[i, j] = A[i, j] + u[i] * v[j]
"""


def test_a_transposition_gets_warps_of_8_by_4_iterations(tmp_path):
    mapped, (config,), cuda = emitted(TRANSPOSE, N=2048, M=2048)
    (mapping,) = mapped.mappings
    assert mapping.crossing and mapping.x.var == "i"  # the write coalesces along i
    assert (config.block, config.tile, config.stage) == ((8, 32), (4, 1), False)
    compiles(cuda, tmp_path)
    mapped, (config,), _ = emitted(RANK_ONE, N=2048, M=2048)
    assert not mapped.mappings[0].crossing
    assert (config.block, config.tile) == ((16, 16), (2, 2))


@pytest.mark.gpu
@pytest.mark.parametrize("sizes", [{"N": 2048, "M": 2048}, {"N": 1001, "M": 77},
                                   {"N": 3, "M": 1000}])
def test_a_transposition_in_warps_of_8_by_4_agrees_with_the_original(sizes):
    gpu_agrees(TRANSPOSE, sizes)


# an arg-min: the index kept in the launch's index type, the points in long strips
NEAREST = """
def f(q, p, nns, M, N):
    for i in range(M):
        best = 1e30
        best_j = -1
        for j in range(N):
            d = abs(q[i] - p[j])
            if d < best:
                best = d
                best_j = j
        nns[i] = best_j
"""


def test_an_arg_min_keeps_its_index_in_the_index_type_and_its_points_in_long_strips(tmp_path):
    from loclab.optimize.cuda.mapping import LONG_STRIP

    _, (config,), cuda = emitted(NEAREST, M=4096, N=100000)
    (kernel,) = cuda.kernels
    assert "    I best_j;" in kernel.text and "double best;" in kernel.text
    assert config.strip == LONG_STRIP and f"s_p[3][{LONG_STRIP}];" in kernel.text  # a ring of 3
    compiles(cuda, tmp_path)
    _, (short,), _ = emitted(NEAREST, M=4096, N=100)
    assert short.strip == 64  # no longer than the loop it strips


def test_a_local_that_is_ever_more_than_an_index_keeps_pythons_64_bits():
    from loclab.optimize.cuda.facts import index_locals

    import ast

    body = ast.parse("a = -1\nb = j\nc = a\nd = j + 1\ne = 2**40\nf = 0\nf += j\n"
                     "g = a\ng = 0.5\n").body
    found = index_locals(body, {"j"}, {"a", "b", "c", "d", "e", "f", "g"})
    assert found == {"a", "b", "c"}


@pytest.mark.gpu
@pytest.mark.parametrize("sizes", [{"M": 1000, "N": 3001}, {"M": 300, "N": 77}])
def test_an_arg_min_in_long_strips_agrees_with_the_original(sizes):
    gpu_agrees(NEAREST, sizes)


def test_a_register_tile_fitted_to_short_loops_keeps_4_x_4_before_its_threads():
    bmmm = (CASES / "bmmm" / "nest.py").read_text()
    for k, block, tile in ((8, (64, 2, 2), (1, 4, 4)), (4, (64, 1, 1), (1, 4, 4)),
                           (16, (16, 4, 4), (1, 4, 4))):
        _, (config,), _ = emitted(bmmm, "bmmm", m=131000, k=k, n=512)
        assert (config.block, config.tile) == (block, tile), k
    # a grid loop of 100 iterations gets 128 threads, not the 256 a block starts from
    _, (config,), _ = emitted(NEAREST, M=100, N=100000)
    assert config.block == (128,)



# few long rows, each reduced twice and scaled: no one loop to split
SOFTMAX = """
import math
def f(X, Y, N, M):
    for i in range(N):
        m = -1e300
        for j in range(M):
            m = max(m, X[i, j])
        s = 0.0
        for j in range(M):
            Y[i, j] = math.exp(X[i, j] - m)
            s += Y[i, j]
        for j in range(M):
            Y[i, j] = Y[i, j] / s
"""
LAYER_NORM = """
def f(X, Y, mean, N, M):
    for i in range(N):
        total = 0.0
        for j in range(M):
            total += X[i, j]
        mean[i] = total / M
        spread = 0.0
        for j in range(M):
            spread += (X[i, j] - total / M) * (X[i, j] - total / M)
        for j in range(M):
            Y[i, j] = (X[i, j] - total / M) / (spread / M + 1.0)
"""


def test_few_long_rows_reduced_in_several_loops_get_a_block_each(tmp_path):
    mapped, (config,), cuda = emitted(SOFTMAX, N=16, M=1 << 20)
    (mapping,) = mapped.mappings
    assert [g.var for g in mapping.grid] == ["i"] and mapping.x is None
    assert [(loop.var, ops) for loop, ops in mapping.block_splits] == [
        ("j", (("m", "max"),)), ("j", (("s", "+"),)), ("j", ())]
    assert config.lanes == BLOCK_LANES and config.text().startswith("a block of 1024")
    (kernel,) = cuda.kernels
    assert "m = loclab_block_max(m);" in kernel.text and "s = loclab_block_add(s);" in kernel.text
    assert "(1024, 1, 1)" in cuda.module
    compiles(cuda, tmp_path)
    _, _, cuda = emitted(LAYER_NORM, N=16, M=1 << 20)
    assert "if (threadIdx.x == 0) {" in cuda.kernels[0].text  # mean[i]: thread 0's
    compiles(cuda, tmp_path)
    many, _, _ = emitted(SOFTMAX, N=100000, M=32)  # many short rows: a thread each
    assert not many.mappings[0].block_splits


@pytest.mark.parametrize("source", [SOFTMAX, LAYER_NORM])
def test_no_two_blocks_of_rows_conflict(source):
    from tests.test_optimize_gpu import check_grids

    check_grids(source, {"N": 2, "M": 1024})


@pytest.mark.gpu
@pytest.mark.parametrize("source,sizes", [(SOFTMAX, {"N": 7, "M": 5000}),
                                          (SOFTMAX, {"N": 3, "M": 1030}),
                                          (LAYER_NORM, {"N": 5, "M": 3001})])
def test_few_long_rows_by_blocks_agree_with_the_original(source, sizes):
    gpu_agrees(source, sizes)
