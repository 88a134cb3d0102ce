"""The masked batch product beyond the generic per-variant tests: the golden against the
lectures' loop nest, the tiled CPU nest at any tile, gpu-optimized's tiles for any K,
gpu-subset-sums' bits of the mask and its tables across row tiles, the sweep over K that the
report plots."""

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loclab.cases.bmmm import CASE, cpu, gpu, make_inputs
from loclab.gpu.warp_tile import warp_tile
from loclab.hw import Machine
from loclab.measure.validate import compare
from tests.gpus import H200

# Dynamic shared memory a block may opt in to on every GPU from sm_80 (sm_86, sm_89: 99 KB).
SMALLEST_OPT_IN = 99 * 1024


def lectures_loop(a, b, x):
    """The lectures' golden nest, literally (float64 sums)."""
    k, n = a.shape
    y = np.zeros((x.shape[0], k, k))
    for i in range(x.shape[0]):
        for j1 in range(k):
            for j2 in range(k):
                y[i, j1, j2] = sum(float(a[j1, q]) * float(b[q, j2]) * (x[i, q] != 0)
                                   for q in range(n))
    return y.astype(np.float32)


def test_golden_is_the_lectures_nest():
    inputs = make_inputs({"m": 9, "k": 3, "n": 11}, np.random.default_rng(1))
    np.testing.assert_allclose(CASE.golden(inputs), lectures_loop(**inputs), rtol=1e-6)


def test_inputs_have_about_a_tenth_zeros_and_any_nonzero_byte():
    x = make_inputs({"m": 1000, "k": 2, "n": 100}, np.random.default_rng(2))["x"]
    assert 0.08 < np.mean(x == 0) < 0.12 and x.max() == 255 and x.dtype == np.uint8


def test_the_tolerance_catches_one_dropped_product():
    inputs = make_inputs({"m": 50, "k": 4, "n": 512}, np.random.default_rng(3))
    golden = CASE.golden(inputs)
    dropped = golden.copy()
    dropped[7, 1, 2] -= inputs["a"][1, 0] * inputs["b"][0, 2]
    assert not compare(dropped, golden, CASE.tolerance_for(inputs)).valid


@settings(max_examples=25, deadline=None)
@given(m=st.integers(1, 70), k=st.integers(1, 5), n=st.integers(1, 40), tile=st.integers(1, 40),
       seed=st.integers(0, 2**16))
def test_cpu_tiled_at_any_tile(m, k, n, tile, seed):
    inputs = make_inputs({"m": m, "k": k, "n": n}, np.random.default_rng(seed))
    out = np.full((m, k, k), np.nan, np.float32)
    result = cpu.tiled(inputs, out, None, tile=tile).run()
    assert compare(result, CASE.golden(inputs), CASE.tolerance_for(inputs)).valid


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5, 7, 8, 9, 11, 12, 16, 17, 32, 33, 40])
def test_optimized_tiles_cover_every_column_in_whole_warps_and_fit(k):
    layout = gpu.optimized_layout(k)
    assert layout.padded >= k * k > layout.padded - layout.bn  # no tile of padding alone
    assert layout.padded % layout.bn == 0 and layout.tm % 4 == 0 and layout.tn % 4 == 0
    wm, wn = warp_tile(layout.lanes_m, layout.tm, layout.tn)
    assert 32 % layout.lanes_m == 0 and layout.bm % wm == 0 and layout.bn % wn == 0
    assert 32 <= layout.threads <= 1024 and layout.stages >= 2
    assert layout.shared_bytes <= SMALLEST_OPT_IN and layout.bq % 16 == 0


def test_optimized_pads_c_to_whole_slices():
    layout = gpu.optimized_layout(16)
    assert [layout.rows(n) for n in (1, 32, 33, 512)] == [32, 32, 64, 512]


def test_skip_rules_name_k(machine):
    variants = {variant.name: variant for variant in CASE.variants}
    assert "1024 threads" in variants["gpu-naive"].skip_reason({"m": 1, "k": 33, "n": 1},
                                                               machine)
    assert variants["gpu-optimized"].skip_reason({"m": 1, "k": 40, "n": 1}, machine) is None
    default_k16 = {"m": 131_000, "k": 16, "n": 512}
    assert "minutes" in variants["cpu-naive"].skip_reason(default_k16, machine)


def test_the_gpu_presets_sweep_k(machine):
    for preset in ("default", "large"):
        assert [dims[CASE.sweep] for dims in CASE.dims(preset, "gpu", machine)] == [8, 4, 16]


def test_gpu_tiled_refuses_a_mask_beyond_int_indices(machine):
    tiled = next(variant for variant in CASE.variants if variant.name == "gpu-tiled")
    assert tiled.skip_reason({"m": 2 ** 22 - 1, "k": 8, "n": 512}, machine) is None
    assert "2^31" in tiled.skip_reason({"m": 2 ** 22, "k": 8, "n": 512}, machine)
    assert "1024 threads" in tiled.skip_reason({"m": 1, "k": 33, "n": 1}, machine)
    for preset in ("default", "large"):
        for dims in CASE.dims(preset, "gpu", machine):
            assert tiled.skip_reason(dims, machine) is None


@pytest.mark.gpu
@pytest.mark.parametrize("k", [1, 3, 5, 7, 12, 17, 32, 33])
@pytest.mark.parametrize("n", [130, 129, 48])
def test_gpu_variants_at_odd_k(k, n, machine):
    """Bytes and (n = 48: three slices, an odd count of buffers) 16-byte vectors of the mask,
    padded columns (K = 12: 144 of 256), several column tiles (K >= 12)."""
    import cupy

    dims = {"m": 301, "k": k, "n": n}
    inputs = make_inputs(dims, np.random.default_rng(k))
    staged = {name: cupy.asarray(array) for name, array in inputs.items()}
    for variant in CASE.variants_on("gpu"):
        if variant.skip_reason(dims, machine):
            continue
        out = cupy.full((301, k, k), cupy.nan, cupy.float32)
        result = cupy.asnumpy(variant.setup(staged, out, machine).run())
        check = compare(result, CASE.golden(inputs), CASE.tolerance_for(inputs))
        assert check.valid, (variant.name, check.problem)


@pytest.mark.gpu
@pytest.mark.parametrize("k", [4, 5, 8, 16])
@pytest.mark.parametrize("n", [130, 48])
def test_gpu_optimized_blocks_walk_several_tiles(k, n, machine):
    """More tiles than the persistent grid has blocks, not a multiple of it: each block's
    stream of slices crosses tiles (the pipeline and the mask's buffers carry on), and the
    last round of tiles is partial; bytes (n = 130) and vectors (n = 48) of the mask."""
    import cupy

    m = 9 * gpu.optimized_layout(k).bm * machine.gpu.sms + 37
    dims = {"m": m, "k": k, "n": n}
    inputs = make_inputs(dims, np.random.default_rng(k + n))
    staged = {name: cupy.asarray(array) for name, array in inputs.items()}
    out = cupy.full((m, k, k), cupy.nan, cupy.float32)
    bound = gpu.optimized(staged, out, machine)
    tiles, blocks = bound.params["tiles"], bound.params["blocks"]
    assert tiles > blocks and tiles % blocks
    check = compare(cupy.asnumpy(bound.run()), CASE.golden(inputs), CASE.tolerance_for(inputs))
    assert check.valid, check.problem


@pytest.mark.parametrize("k", [1, 2, 3, 5, 6, 8, 16, 17, 33])
def test_subset_sums_layout_covers_every_column_and_fits_an_sm90_block(k):
    layout = gpu.subset_sums_layout(k)
    assert layout.padded % layout.COLUMNS == 0
    assert layout.padded >= k * k > layout.padded - layout.COLUMNS  # no tile of padding alone
    assert layout.threads % 128 == 0 and layout.rows == layout.threads // 8 * layout.rows_per_lane
    assert layout.shared_bytes <= H200.shared_mem_per_block_optin
    assert [layout.groups(n) for n in (1, 32, 33, 512)] == [1, 1, 2, 16]


def test_subset_sums_skips_gpus_with_less_shared_memory_a_block(machine):
    variant = next(v for v in CASE.variants if v.name == "gpu-subset-sums")
    dims = {"m": 131_000, "k": 16, "n": 512}
    assert variant.skip_reason(dims, Machine(machine.cpu, H200, None)) is None
    small = dataclasses.replace(H200, shared_mem_per_block_optin=99 * 1024)
    reason = variant.skip_reason(dims, Machine(machine.cpu, small, None))
    assert "shared memory" in reason and str(99 * 1024) in reason


@pytest.mark.gpu
@pytest.mark.parametrize("n", [1, 31, 48, 130, 512])
@pytest.mark.parametrize("aligned", [True, False])
def test_mask_bits_are_the_nonzero_bytes_little_endian(n, aligned, machine):
    """Step 1 of gpu-subset-sums against NumPy's packbits: 16-byte loads (n % 16 == 0 and an
    aligned mask) and byte loads, a partial last group, zero words in the padding rows."""
    import cupy

    m, rows = 301, 384
    x = make_inputs({"m": m, "k": 1, "n": n}, np.random.default_rng(n))["x"]
    staged = cupy.zeros(m * n + 1, cupy.uint8)[0 if aligned else 1:][:m * n].reshape(m, n)
    staged[...] = cupy.asarray(x)
    groups = -(-n // 32)
    launch = gpu.mask_bits(staged, groups, rows)
    assert (launch.name == gpu.mask_bits_kernel(True)) == (aligned and n % 16 == 0)
    packed = np.zeros((rows, groups * 4), np.uint8)
    packed[:m, :-(-n // 8)] = np.packbits(x != 0, axis=1, bitorder="little")
    expected = packed.view("<u4").T
    np.testing.assert_array_equal(cupy.asnumpy(launch()), expected)


@pytest.mark.gpu
@pytest.mark.parametrize("k", [3, 6, 16])
@pytest.mark.parametrize("n", [130, 48, 512])
@pytest.mark.parametrize("lanes", [None, (8, 256, 1), (36, 128, 1)])
def test_gpu_subset_sums_across_row_tiles_and_extreme_masks(k, n, lanes, machine):
    """Several row tiles and a partial last one, K^2 not a multiple of 4 (K = 3) or of the
    column tile (K = 6: a second tile of 4 columns), a partial last chunk (n = 130) and group
    (n = 130, 48); rows whose bytes pick the table's first entry (all zero), its last (all
    set) and one q alone; the default layout, one of two teams of builders and one of a
    single team whose rows' words take several copies a thread (36 rows a lane)."""
    import cupy

    layout = gpu.subset_sums_layout(k)
    if lanes:
        layout = gpu.SubsetSums(k, layout.padded, *lanes)
    m = 2 * layout.rows + 37
    inputs = make_inputs({"m": m, "k": k, "n": n}, np.random.default_rng(k * n))
    x = inputs["x"]
    x[0], x[1], x[-1] = 0, 255, 0
    x[2] = 0
    x[2, n - 1] = 7
    x[3] = 0
    x[3, 0] = 1
    staged = {name: cupy.asarray(array) for name, array in inputs.items()}
    out = cupy.full((m, k, k), cupy.nan, cupy.float32)
    result = cupy.asnumpy(gpu.subset_sums(staged, out, machine, layout=layout).run())
    check = compare(result, CASE.golden(inputs), CASE.tolerance_for(inputs))
    assert check.valid, check.problem
