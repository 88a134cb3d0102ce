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
from loclab.optimize.cuda.mapping import neighbours
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
           {"block": (32,), "tile": (4,), "strip": 32, "stage": True},
           # whole rows in place, copied by cp.async; the same through registers
           {"block": (128,), "tile": (1,), "strip": 64, "stage": True},
           {"block": (128,), "tile": (1,), "strip": 64, "stage": True, "pipelined": False}]
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
    # each cell of A's tile is read by the one iteration that then stores out's element
    # there: out's tile takes over A's cells (one tile in shared memory, not two)
    assert kernel.staged[1].endswith("(in place of A's tile)")
    assert "s_A[(i) - (first_i + bx * 256) - 0][(j) - j0 - 0] = acc;" in kernel.text
    assert "__shared__ double s_out" not in kernel.text
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


# stored tiles that may not take over a read tile's cells: the read array is read after
# the store (the cell would hold the stored value), read at two columns (a cell read by a
# later iteration), or its cells already taken by another stored tile
NOT_IN_PLACE = {
    "read after the store": ("""
def f(A, out, M, N):
    for i in range(M):
        acc = 0.0
        for j in range(N):
            acc = acc * 0.5 + A[i, j]
            out[i, j] = acc
            acc = acc - A[i, j]
""", ["A along j (64x17 tile in shared memory)",
      "out stored along j (64x17 tile in shared memory)"]),
    "two columns read": ("""
def f(A, out, M, N):
    for i in range(M):
        acc = 0.0
        for j in range(N - 1):
            acc = acc * 0.5 + A[i, j] * A[i, j + 1]
            out[i, j] = acc
""", ["A along j (64x18 tile in shared memory)",
      "out stored along j (64x17 tile in shared memory)"]),
    "two stores": ("""
def f(A, out, P, M, N):
    for i in range(M):
        acc = 0.0
        for j in range(N):
            acc = acc * 0.5 + A[i, j]
            out[i, j] = acc
            P[i, j] = 2.0 * acc
""", ["A along j (64x17 tile in shared memory)",
      "out stored along j (in place of A's tile)",
      "P stored along j (64x17 tile in shared memory)"]),
}


@pytest.mark.parametrize("name", sorted(NOT_IN_PLACE))
def test_a_stored_tile_takes_over_a_read_tile_only_where_no_value_is_lost(name, tmp_path):
    source, staged = NOT_IN_PLACE[name]
    sizes = {"M": 1000, "N": 64}
    _, cuda = emitted(source, {"block": (64,), "tile": (1,), "strip": 16, "stage": True},
                      **sizes)
    (kernel,) = cuda.kernels
    assert list(kernel.staged) == staged
    compiles(cuda, tmp_path)


def test_tiles_loaded_where_needed_are_copied_by_cp_async_all_in_flight(tmp_path):
    """A tile too large to prefetch into registers (64 elements a thread) is copied by
    cp.async, every copy in flight before one wait, where the config pipelines; through
    registers where it does not."""
    config = {"block": (64,), "tile": (1,), "strip": 64, "stage": True}
    _, cuda = emitted(ROWS, config, M=1000, N=64)
    (kernel,) = cuda.kernels
    assert kernel.pipelined and "loclab_copy_or_zero<8>(&s_A[(e) % 64][column]" in kernel.text
    lines = [line.strip() for line in kernel.text.splitlines()]
    wait = lines.index("loclab_copies_pending<0>();")  # once, then the barrier, then compute
    assert lines[wait - 1:wait + 3] == ["loclab_copies_sent();", "loclab_copies_pending<0>();",
                                        "__syncthreads();", "if (j0 + 64 <= (N)) {"]
    compiles(cuda, tmp_path)
    _, cuda = emitted(ROWS, {**config, "pipelined": False}, M=1000, N=64)
    (kernel,) = cuda.kernels
    assert not kernel.pipelined and "s_A[(e) % 64][column] = (" in kernel.text


def test_the_search_may_give_one_grid_loop_fewer_or_more_threads_a_block():
    """Fewer rows a block let a tile of whole rows fit (rows ending inside a sector are then
    stored by one strip, not two): the search walks the block's threads too."""
    _, mapped = gpu_planned(ROWS, M=1000, N=61)
    (config,) = mapped.default_configs()
    blocks = {n.block for n in neighbours(mapped.mappings[0], config)}
    assert {(config.block[0] // 2,), (config.block[0] * 2,)} <= blocks
    small = replace(config, block=(32,))
    assert all(n.block[0] >= 32 for n in neighbours(mapped.mappings[0], small))


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
@pytest.mark.parametrize("name", sorted(NOT_IN_PLACE))
@pytest.mark.parametrize("strip", [16, 64])
def test_tiles_not_taken_over_agree_with_the_original(name, strip):
    gpu_agrees(NOT_IN_PLACE[name][0], {"M": 300, "N": 37},
               {"block": (128,), "tile": (1,), "strip": strip, "stage": True})


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
