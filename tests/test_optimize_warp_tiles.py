"""Products of 4-byte floats as warp tiles (``loclab.optimize.cuda.warp_layout``): the
layout as a bijection of a block's iterations to its threads, the pads that keep rows
16-byte aligned and a warp's copies spread over the banks, the kernels written (a tile of the
row loop held transposed, 16-byte vector reads, 16-byte copies with their fallback, a ring
past 48 KiB in dynamic shared memory; the smallest compiled by nvcc where installed, the
16 x 8 ones, slow to compile, on the GPU only) and, on a GPU, every result against NumPy at
sizes and alignments that take each fallback."""

from __future__ import annotations

import itertools
import re
from dataclasses import replace

import numpy as np
import pytest

from loclab.optimize.cuda.mapping import Config, neighbours
from loclab.optimize.cuda.warp_layout import VECTOR, WarpLayout, vector_pad, warp_layout_for
from tests.test_optimize_gpu import gpu_planned
from tests.test_optimize_mma import evaluate
from tests.test_optimize_shapes import compiles

PRODUCT = """
import numpy as np


def f(A, B, C, N, M, K):
    for i in range(N):
        for j in range(M):
            s = np.float32(0.0)
            for k in range(K):
                s += A[i, k] * B[k, j]
            C[i, j] = s
"""
# an update of C in place, with a factor on each side and the row loop's read of A
# transposed in memory (A[k, i]): the tile of A is then stored as the array is
UPDATE = """
def f(A, B, C, N, M, K):
    for i in range(N):
        for j in range(M):
            for k in range(K):
                C[i, j] += 0.5 * A[k, i] * B[k, j]
"""
FLOAT32 = np.dtype(np.float32)


def product_mapping():
    _, mapped = gpu_planned(PRODUCT, N=256, M=256, K=256)
    return mapped, mapped.mappings[0]


def emitted(source: str, config: Config, **sizes: int):
    _, mapped = gpu_planned(source, **sizes)
    arrays = {name: (FLOAT32, 2) for name in "ABC"}
    return mapped.emit(arrays, {}, [config])


# --- the layout ------------------------------------------------------------------------------

@pytest.mark.parametrize("block,tile,lanes_x", [
    ((8, 32), (8, 8), 4), ((8, 32), (16, 8), 4), ((16, 16), (8, 8), 4), ((16, 16), (4, 4), 4),
    ((32, 8), (8, 4), 4), ((4, 8), (8, 8), 8), ((4, 64), (4, 8), 8)])
def test_the_warp_tiles_give_every_iteration_of_a_block_to_one_thread(block, tile, lanes_x):
    _, mapping = product_mapping()
    layout = warp_layout_for(mapping, Config(block, tile))
    assert layout == WarpLayout(tile[0], tile[1], lanes_x, block[1] // lanes_x)
    owners: dict[tuple[int, int], tuple[int, int, int]] = {}
    for tid in range(block[0] * block[1]):
        lane = dict(wt_warp=tid >> 5, wt_lane=tid & 31)
        rows = [evaluate(layout.row(r), **lane) for r in range(tile[0])]
        columns = [evaluate(layout.column(c), **lane) for c in range(tile[1])]
        # groups of 4 consecutive rows and columns, each a constant step from the first
        assert all(rows[r] == rows[0] + layout.row_step(r) for r in range(tile[0]))
        assert all(columns[c] == columns[0] + layout.column_step(c) for c in range(tile[1]))
        assert all(rows[g] % VECTOR == 0 and rows[g + 1:g + 4] == [rows[g] + e for e in (1, 2, 3)]
                   for g in range(0, tile[0], VECTOR))
        for r, c in itertools.product(range(tile[0]), range(tile[1])):
            at = (rows[r], columns[c])
            assert at not in owners, (at, owners[at], (tid, r, c))
            owners[at] = (tid, r, c)
    assert set(owners) == set(itertools.product(range(block[0] * tile[0]),
                                                range(block[1] * tile[1])))


@pytest.mark.parametrize("config", [
    Config((8, 32), (8, 6)), Config((8, 32), (2, 8)), Config((2, 16), (8, 8)),
    Config((8, 32), (8, 8), stage=False), Config((8, 32), (8, 8), warp_tiles=False)])
def test_no_warp_tiles_where_groups_of_4_or_whole_warps_do_not_tile_the_block(config):
    _, mapping = product_mapping()
    assert warp_layout_for(mapping, config) is None


def test_padded_rows_stay_aligned_and_a_warps_copies_into_a_transposed_tile_spread():
    for extent in range(4, 520, 4):
        stride = extent + vector_pad(extent)
        assert stride % VECTOR == 0 and stride % 32 == VECTOR
        # a strip of 8: lane l copies element (row l / 8, step l % 8), stored at [step][row]
        banks = {((lane % 8) * stride + lane // 8) % 32 for lane in range(32)}
        assert len(banks) == 32, extent


def test_the_search_may_switch_the_warp_tiles_and_take_16_rows_a_thread():
    _, mapping = product_mapping()
    config = Config((8, 32), (8, 8), True, 8)
    found = neighbours(mapping, config)
    assert replace(config, warp_tiles=not config.warp_tiles) in found
    assert replace(config, tile=(16, 8)) in found
    assert not any(max(c.tile) > 16 or c.tile[0] * c.tile[1] > 128 for c in found)
    assert replace(config, warp_tiles=False).text().endswith(", no warp tiles")
    assert config.to_json()["warp_tiles"] is True


# --- the kernels ----------------------------------------------------------------------------

def test_a_float_products_factors_come_as_vectors_from_a_transposed_tile(tmp_path):
    cuda = emitted(PRODUCT, Config((8, 32), (8, 8), True, 8), N=512, M=512, K=512)
    source = cuda.source
    assert "const int wt_warp = tid >> 5, wt_lane = tid & 31;" in source
    # A's tile holds the strip's steps first (8 of them, rows of 64 + 4); B's as B is
    assert re.search(r"__shared__ __align__\(16\) float s_A\[3\]\[8\]\[68\];", source)
    assert re.search(r"__shared__ __align__\(16\) float s_B\[3\]\[8\]\[260\];", source)
    reads = re.findall(r"const float4 h\d+ = \*reinterpret_cast<const float4\*>\(&s_(\w)",
                       source)
    assert sorted(reads) == ["A", "A", "B", "B"]  # 8 x 8 a thread: 2 + 2 vectors a step
    assert "s_0_0 += (h0.x * h1.x);" in source
    # B's strips in 16-byte copies, each with its fallback one element at a time
    assert "const bool B_aligned = loclab_aligned16(B) && B_n1 % 4 == 0;" in source
    # 2 groups a thread, sent 3 times (2 strips ahead of the loop, then 1 a strip), in the
    # branch of whole blocks and in the guarded one
    assert source.count("loclab_copy_group(&s_B") == 2 * 3 * 2
    assert "loclab_copy_group(&s_A" not in source  # A's tile is transposed: one at a time
    compiles(cuda, tmp_path)


def test_a_tile_read_transposed_in_memory_keeps_its_order_and_reads_vectors():
    cuda = emitted(UPDATE, Config((8, 32), (16, 8), True, 8), N=300, M=200, K=100)
    source = cuda.source
    assert re.search(r"float s_A\[3\]\[8\]\[132\];", source)  # A[k, i]: steps first already
    # rows of A's tile are A's rows: both tiles copied 16 bytes at a time
    assert "loclab_copy_group(&s_A" in source and "loclab_copy_group(&s_B" in source
    assert len(re.findall(r"const float4 h\d+ = ", source)) == 4 + 2


def test_doubles_keep_their_layout_and_floats_without_warp_tiles_the_plain_one():
    _, mapped = gpu_planned(PRODUCT, N=512, M=512, K=512)
    doubles = mapped.emit({name: (np.dtype(np.float64), 2) for name in "ABC"}, {},
                          [Config((8, 32), (8, 8), True, 8)]).source
    assert "wt_warp" not in doubles and "float4" not in doubles
    plain = emitted(PRODUCT, Config((8, 32), (8, 8), True, 8, warp_tiles=False),
                    N=512, M=512, K=512).source
    assert "wt_warp" not in plain and "float4" not in plain and "__align__" not in plain


def test_a_ring_past_48_kib_goes_to_dynamic_shared_memory():
    cuda = emitted(PRODUCT, Config((8, 32), (16, 8), True, 16), N=512, M=512, K=512)
    source, module = cuda.source, cuda.module
    # 3 strips of 16 x (128 + 4) and 16 x (256 + 4) floats: 75,264 bytes
    assert "extern __shared__ __align__(16) unsigned char loclab_dynamic[];" in source
    assert "float (*s_A)[16][132] = reinterpret_cast<float (*)[16][132]>(loclab_dynamic + 0);" \
        in source
    assert "(loclab_dynamic + 25344);" in source
    assert "shared_mem=75264)" in module and "max_dynamic_shared_size_bytes" in module
    small = emitted(PRODUCT, Config((8, 32), (8, 8), True, 8), N=512, M=512, K=512)
    assert "loclab_dynamic" not in small.source and "shared_mem" not in small.module


# --- on a GPU: every result against NumPy ----------------------------------------------------

def run_on_gpu(source: str, config: Config, sizes: dict[str, int], misaligned: bool) -> None:
    """The emitted function against NumPy in float64, the arrays each starting 4 bytes past
    a 16-byte boundary where ``misaligned`` (every 16-byte copy then takes its fallback)."""
    import cupy as cp

    n, m, k = sizes["N"], sizes["M"], sizes["K"]
    rng = np.random.default_rng(n * m + k)
    shapes = {"A": (n, k), "B": (k, m), "C": (n, m)}
    if "A[k, i]" in source:
        shapes["A"] = (k, n)
    host = {name: rng.random(shape).astype(np.float32) for name, shape in shapes.items()}

    def device(array: np.ndarray):
        flat = cp.empty(array.size + 1, np.float32)[1:] if misaligned else \
            cp.empty(array.size, np.float32)
        out = flat.reshape(array.shape)
        out.set(array)
        return out

    on_gpu = {name: device(array) for name, array in host.items()}
    function = emitted(source, config, **sizes).compile()
    function(on_gpu["A"], on_gpu["B"], on_gpu["C"], n, m, k)
    a, b, c = (host[name].astype(np.float64) for name in "ABC")
    want = a @ b if "A[k, i]" not in source else c + 0.5 * a.T @ b
    got = on_gpu["C"].get()
    assert np.allclose(got, want, rtol=1e-4, atol=1e-4 * k), np.abs(got - want).max()


@pytest.mark.gpu
@pytest.mark.parametrize("sizes,misaligned", [
    ({"N": 67, "M": 45, "K": 37}, False),  # partial blocks and strips, rows of odd lengths
    ({"N": 130, "M": 260, "K": 5}, True),  # a loop shorter than one strip
    ({"N": 128, "M": 256, "K": 64}, True),  # whole blocks and strips, every group misaligned
    ({"N": 200, "M": 512, "K": 129}, False)])  # aligned rows, a partial strip
@pytest.mark.parametrize("config", [
    Config((8, 32), (8, 8), True, 8), Config((8, 32), (16, 8), True, 16),
    Config((16, 16), (8, 8), True, 16, pipelined=False)])
@pytest.mark.parametrize("source", [PRODUCT, UPDATE])
def test_warp_tiled_products_agree_with_numpy(source, config, sizes, misaligned):
    run_on_gpu(source, config, sizes, misaligned)
