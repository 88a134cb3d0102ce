"""GPU kernels whose threads store along a row they walk in sequence (the coalescing lesson's
``out[i, j] = acc`` with threads over ``i``): the stores of a whole strip go to a tile in
shared memory, which the block copies out along rows (``facts.write_stages``). Only where
the strip fills the tile: every iteration of the block exists, the store is unconditional,
the array is stored once and never read. Written for several launch configs (compiled by
nvcc where installed) and, on a GPU, each config and drawn look-alikes against the
original."""

from __future__ import annotations

import ast
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings

from loclab.optimize.cuda import argument_types
from loclab.optimize.cuda.facts import write_stages
from tests.nestgen import row_store_nests
from tests.test_optimize_gpu import gpu_agrees, gpu_planned, make_inputs
from tests.test_optimize_sums import compiles

ROWS = """
def f(A, out, M, N):
    for i in range(M):
        acc = 0.0
        for j in range(N):
            acc = acc * 0.5 + A[i, j] * A[i, j]
            out[i, j] = acc
"""
# a batch of rows: the grid is (b, i), the tile three-dimensional
BATCHED = """
def f(A, out, B, M, N):
    for b in range(B):
        for i in range(M):
            acc = 0.0
            for j in range(N):
                acc = acc + A[b, i, j]
                out[b, i, j + 1] = acc
"""
# look-alikes whose stores must stay stores to memory
LOOK_ALIKES = {
    "under an if": """
def f(A, out, M, N):
    for i in range(M):
        acc = 0.0
        for j in range(N):
            acc = acc + A[i, j]
            if acc > 0.0:
                out[i, j] = acc
""",
    "read back": """
def f(A, out, M, N):
    for i in range(M):
        for j in range(1, N):
            out[i, j] = out[i, j - 1] + A[i, j]
""",
    "stored twice": """
def f(A, out, M, N):
    for i in range(M):
        acc = 0.0
        out[i, 0] = 0.0
        for j in range(N):
            acc = acc + A[i, j]
            out[i, j] = acc
""",
    "updated": """
def f(A, out, M, N):
    for i in range(M):
        for j in range(N):
            out[i, j] += A[i, j]
""",
}
CONFIGS = [{}, {"block": (64,), "tile": (2,), "strip": 8, "stage": True},
           {"block": (32,), "tile": (4,), "strip": 32, "stage": True}]
# the batch's grid (b, i), i on threadIdx.x
BATCHED_CONFIGS = [{"block": (1, 64), "tile": (1, 2), "strip": 8, "stage": True},
                   {"block": (2, 32), "tile": (2, 1), "strip": 16, "stage": True}]


def emitted(source: str, config: dict, **sizes: int):
    found, mapped = gpu_planned(source, **sizes)
    configs = [replace(c, **config) if config and len(c.block) == len(config["block"]) else c
               for c in mapped.default_configs()]
    inputs = make_inputs(found.as_written.program, found.sizes)
    return found, mapped.emit(*argument_types(inputs, list(sizes)), configs)


def test_a_rows_stores_go_through_a_tile_copied_out_along_rows(tmp_path):
    _, cuda = emitted(ROWS, {}, M=1000, N=64)
    (kernel,) = cuda.kernels
    assert [t.split(" (")[0] for t in kernel.staged] == ["A along j", "out stored along j"]
    assert "s_out[(i) - (first_i + bx * " in kernel.text
    # copied out after the strip: only the strip's columns before the loop's bound
    assert "if (j0 + column < (N) && " in kernel.text
    # blocks with missing rows (the grid's edge) store to memory as written
    edge = kernel.text[kernel.text.index("__syncthreads_or"):]
    assert "if (ok_0) out[(i) * out_n1 + j] = acc;" in edge and "s_out[(i)" not in edge
    compiles(cuda, tmp_path)


@pytest.mark.parametrize("config", BATCHED_CONFIGS)
def test_a_batch_of_rows_stores_through_a_tile_of_the_blocks_rows(config, tmp_path):
    _, cuda = emitted(BATCHED, config, B=3, M=300, N=50)
    (kernel,) = cuda.kernels
    assert "out stored along j" in " ".join(kernel.staged)
    compiles(cuda, tmp_path)


@pytest.mark.parametrize("name", sorted(LOOK_ALIKES))
def test_stores_the_strip_may_not_fill_or_that_are_read_stay_in_memory(name):
    function = ast.parse(LOOK_ALIKES[name]).body[0]
    rows = function.body[0]
    for loop in (n for n in ast.walk(rows) if isinstance(n, ast.For)):
        assert "out" not in write_stages(loop, rows.body), name
    _, cuda = emitted(LOOK_ALIKES[name], {}, M=300, N=40)
    assert all("out stored" not in " ".join(k.staged) for k in cuda.kernels)


@pytest.mark.gpu
@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("sizes", [{"M": 1000, "N": 64}, {"M": 300, "N": 37},
                                   {"M": 5, "N": 300}, {"M": 700, "N": 1}])
def test_rows_stored_through_tiles_agree_with_the_original(config, sizes):
    gpu_agrees(ROWS, sizes, config)


@pytest.mark.gpu
@pytest.mark.parametrize("config", BATCHED_CONFIGS)
def test_a_batch_of_rows_agrees_with_the_original(config):
    gpu_agrees(BATCHED, {"B": 3, "M": 300, "N": 50}, config)


@pytest.mark.gpu
@settings(max_examples=30, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(row_store_nests())
def test_drawn_row_stores_agree_with_the_original_on_the_gpu(source: str) -> None:
    gpu_agrees(source, {"M": 300, "N": 37})
