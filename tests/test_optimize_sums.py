"""Reductions across a GPU grid: a scalar the whole grid sums (``total += ...``, ``err =
max(err, ...)``) is reduced by each thread in a register, by each block in shared memory
and into one device copy atomically, which the host reads back after the kernel
(``NestMapping.sums``); an array element updated with ``max`` or ``min`` from many threads
gets an atomic of its own; a loop of steps whose body runs statements between its nests
(``mean = total / n``) stays on the host around their kernels, and so does a loop of a few
steps inside one (red-black's colours). Written (compiled by nvcc
where installed) and, on a GPU, against the original, drawn nests among them."""

from __future__ import annotations

import shutil

import pytest
from hypothesis import HealthCheck, given, settings

from loclab.optimize.cuda import argument_types
from tests.nestgen import grid_sum_nests
from tests.test_optimize_gpu import (KERNELS, gpu_agrees, gpu_planned, make_inputs,
                                     nvcc_compiled)

DOT = """
def f(x, y, out, N):
    s = 0.0
    for i in range(N):
        s += x[i] * y[i]
    out[0] = s
"""
SQUARES = """
def f(A, out, N, M):
    total = 0.0
    count = 0
    for i in range(N):
        for j in range(M):
            if A[i, j] > 0.5:
                total += A[i, j] * A[i, j]
                count += 1
    out[0] = total / max(count, 1)
"""
LARGEST_ERROR = """
def f(A, B, err, N, M):
    for i in range(N):
        for j in range(M):
            err[0] = max(err[0], abs(A[i, j] - B[i, j]))
"""
# an iteration whose statistics (two sums) feed the next nest through host statements
STEPS = """
def f(J, c, N, M, T):
    for t in range(T):
        total = 0.0
        total2 = 0.0
        for i in range(N):
            for j in range(M):
                total += J[i, j]
                total2 += J[i, j] * J[i, j]
        mean = total / (N * M)
        spread = total2 / (N * M) - mean * mean
        for i in range(N):
            for j in range(M):
                c[i, j] = (J[i, j] - mean) / (1.0 + spread)
                J[i, j] = J[i, j] * 0.5 + 0.25
"""
# the host would need a value each thread keeps for itself: no host loop, as before
PRIVATE_READ = """
def f(J, c, N, M, T):
    for t in range(T):
        for i in range(N):
            v = J[i, 0]
            c[i, 0] = v
        w = v * 2.0
        for i in range(N):
            J[i, 1] = w
"""


def compiles(cuda, directory) -> None:
    """nvcc compiles the module's kernels, where it is installed."""
    if shutil.which("nvcc"):
        run = nvcc_compiled(cuda, directory)
        assert run.returncode == 0, run.stderr


# red-black Gauss-Seidel: the sweep over one colour is parallel, the colours and the steps
# are not: two host loops around one kernel over (i, j)
RED_BLACK = """
def f(U, F, N, T):
    for t in range(T):
        for color in range(2):
            for i in range(1, N - 1):
                for j in range(1, N - 1):
                    if (i + j) % 2 == color:
                        U[i, j] = 0.25 * (U[i - 1, j] + U[i + 1, j] + U[i, j - 1]
                                          + U[i, j + 1] - F[i, j])
"""


def emitted(source: str, **sizes: int):
    found, mapped = gpu_planned(source, **sizes)
    inputs = make_inputs(found.as_written.program, found.sizes)
    return mapped, mapped.emit(*argument_types(inputs, list(sizes)))


def test_a_scalar_the_grid_sums_goes_through_one_device_copy(tmp_path):
    mapped, cuda = emitted(DOT, N=100000)
    (mapping,) = mapped.mappings
    assert [g.var for g in mapping.grid] == ["i"] and mapping.sums == (("s", "+"),)
    (kernel,) = cuda.kernels
    assert "double* __restrict__ s_sum" in kernel.text
    assert "loclab_atomic_add(s_sum, block);" in kernel.text
    assert "s_sum = cp.full(1, s, dtype=np.float64)" in cuda.module
    assert "s = s_sum[0].item()" in cuda.module
    # about a thousand blocks, each thread summing many iterations
    assert "min(max(1, -(-count_i // 256)), 1024)" in cuda.module
    compiles(cuda, tmp_path)


def test_a_sum_and_a_count_under_a_condition_over_a_2d_grid(tmp_path):
    mapped, cuda = emitted(SQUARES, N=300, M=200)
    (mapping,) = mapped.mappings
    assert len(mapping.grid) == 2 and mapping.sums == (("count", "+"), ("total", "+"))
    assert "long long* __restrict__ count_sum" in cuda.kernels[0].text
    compiles(cuda, tmp_path)


def test_an_elements_maximum_from_many_threads_is_an_atomic_max(tmp_path):
    mapped, cuda = emitted(LARGEST_ERROR, N=300, M=200)
    (mapping,) = mapped.mappings
    assert len(mapping.grid) == 2 and mapping.atomics == {"err"}
    assert "loclab_atomic_max(&err[0], (double)(" in cuda.kernels[0].text
    compiles(cuda, tmp_path)


def test_statements_between_nests_run_on_the_host_around_their_kernels():
    mapped, cuda = emitted(STEPS, N=300, M=200, T=4)
    assert all(m.host and len(m.grid) == 2 for m in mapped.mappings)
    loop = cuda.module[cuda.module.rindex("for t in range(T):"):]  # (the original is first)
    place = 0
    for text in ["total = 0.0", "_kernel('nest_", "total = total_sum[0].item()",
                 "mean = total / (N * M)", "spread = total2 / (N * M) - mean * mean",
                 "_kernel('nest_"]:
        place = loop.index(text, place) + 1  # each after the one before
    assert "const double mean" in cuda.kernels[1].text  # the host's value, by value


def test_a_loop_of_a_few_steps_inside_a_host_loop_is_a_host_loop_too():
    mapped, cuda = emitted(RED_BLACK, N=300, T=4)
    (mapping,) = mapped.mappings
    assert [h.var for h in mapping.host] == ["t", "color"]
    assert [g.var for g in mapping.grid] == ["i", "j"]
    assert "for t in range(T):\n        for color in range(2):\n" in cuda.module
    # a loop of many steps inside (doitgen's q): a launch per (r, q) would be tiny
    _, steps = gpu_planned((KERNELS / "doitgen.py").read_text(), "doitgen", NR=20, NQ=30,
                           NP=40)
    assert not any(h.var == "q" for m in steps.mappings for h in m.host)


def test_a_host_statement_reading_a_threads_own_scalar_keeps_the_loop_off_the_host():
    mapped, _ = emitted(PRIVATE_READ, N=300, T=3)
    assert not any(m.host for m in mapped.mappings)


@pytest.mark.gpu
@pytest.mark.parametrize("source,sizes", [
    (DOT, {"N": 1}), (DOT, {"N": 1000003}), (SQUARES, {"N": 300, "M": 201}),
    (LARGEST_ERROR, {"N": 300, "M": 200}), (STEPS, {"N": 130, "M": 70, "T": 4}),
    (RED_BLACK, {"N": 130, "T": 3})])
def test_reductions_across_the_grid_agree_with_the_original(source, sizes):
    gpu_agrees(source, sizes)


@pytest.mark.gpu
@pytest.mark.parametrize("config", [{"block": (64,), "tile": (4,)}, {"block": (48,),
                                                                     "tile": (1,)}])
def test_a_sum_in_blocks_of_part_warps_or_many_iterations_agrees(config):
    gpu_agrees(DOT, {"N": 100001}, config)


@pytest.mark.gpu
@settings(max_examples=30, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(grid_sum_nests())
def test_drawn_reductions_agree_with_the_original_on_the_gpu(source: str) -> None:
    gpu_agrees(source, {"N": 300, "M": 70})
