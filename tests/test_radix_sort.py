"""The radix-sort case beyond the registry's generic tests: every CPU variant on read-only
inputs, the CPU sorts on random arrays full of duplicates, the pass structure (skipped digits,
alternating buffers), a NumPy emulation of the GPU kernels' block-level steps checked against a
stable sort (the algorithm proven without a GPU), and on a GPU the kernels at grids and digit
widths the defaults do not reach."""

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loclab.cases.radix_sort import (CASE, DRAWN_BELOW, EQUAL, LSD_BITS, LSD_ITEMS, LSD_THREADS,
                                     LSD_TILE, RANDOM, REVERSED, SORTED, SPLIT_TILE, destinations,
                                     digit_shifts, needed_shifts, stable_order)
from loclab.measure.validate import compare
from tests.case_runs import run_on_gpu
from tests.gpus import H200


def variant(name):
    return next(v for v in CASE.variants if v.name == name)


# --- the case --------------------------------------------------------------------------------

def test_test_sizes_reach_every_order_tile_edge_and_stability_check():
    dims = CASE.test_dims
    assert {d["order"] for d in dims} == {RANDOM, EQUAL, SORTED, REVERSED}
    assert {d["values"] for d in dims} == {0, 1}
    sizes = {d["n"] for d in dims}
    assert {1, 2, 31, 32, 33, SPLIT_TILE + 1, LSD_TILE + 1, 3 * LSD_TILE + 1, 2**16 - 1} <= sizes
    assert any(d["order"] == EQUAL and d["values"] and d["n"] > LSD_TILE for d in dims)
    for d in dims:
        assert CASE.checked_dims(d) == d


@pytest.mark.parametrize("order", [RANDOM, EQUAL, SORTED, REVERSED])
def test_inputs_follow_the_order_and_never_hold_the_poison(order):
    inputs = CASE.make_inputs({"n": 5000, "values": 1, "order": order}, np.random.default_rng(4))
    keys, values = inputs["keys"], inputs["values"]
    assert keys.dtype == values.dtype == np.uint32 and keys.flags.c_contiguous
    assert keys.max() < DRAWN_BELOW and values.max() < DRAWN_BELOW
    steps = np.diff(keys.astype(np.int64))
    expected = {RANDOM: None, EQUAL: (steps == 0).all(), SORTED: (steps >= 0).all(),
                REVERSED: (steps <= 0).all()}[order]
    assert expected is None or expected
    assert len(np.unique(values)) > 4900  # stability shows


def test_golden_pairs_are_the_stable_order():
    keys = np.random.default_rng(1).integers(0, 50, 10_000, dtype=np.uint32)
    values = np.arange(10_000, dtype=np.uint32)
    np.testing.assert_array_equal(stable_order(keys), np.argsort(keys, kind="stable"))
    sorted_pairs = CASE.golden({"keys": keys, "values": values})
    assert sorted_pairs.shape == (2, 10_000)
    for key in range(50):  # equal keys keep their input order
        assert np.all(np.diff(sorted_pairs[1][sorted_pairs[0] == key].astype(np.int64)) > 0)


def test_a_lost_or_swapped_value_fails_the_check():
    inputs = CASE.make_inputs({"n": 1000, "values": 1, "order": EQUAL}, np.random.default_rng(2))
    golden = CASE.golden(inputs)
    swapped = golden.copy()
    swapped[1, [3, 4]] = swapped[1, [4, 3]]
    assert not compare(swapped, golden, CASE.tolerance_for(inputs)).valid


def test_work_counts_the_keys_and_values_moved_once():
    assert CASE.work({"n": 10, "values": 0, "order": 0}).bytes == 80
    assert CASE.work({"n": 10, "values": 1, "order": 3}).bytes == 160
    assert CASE.work({"n": 10, "values": 1, "order": 3}).items == 10
    assert CASE.unit == "keys" and CASE.limit == "unit"


def test_sizes_follow_the_caches(machine):
    gpu_machine = replace(machine, gpu=H200)
    assert all(4 * d["n"] >= 4 * machine.cpu.llc_bytes for d in CASE.dims("large", "cpu", machine))
    assert all(4 * d["n"] >= 4 * H200.l2_bytes for d in CASE.dims("large", "gpu", gpu_machine))
    default = CASE.dims("default", "gpu", gpu_machine)
    assert default == [{"n": 2**28, "values": v, "order": RANDOM} for v in (0, 1)]
    assert CASE.dims("large", "gpu", replace(machine, gpu=None)) == []


# --- the pass structure ------------------------------------------------------------------------

def test_only_digits_some_keys_differ_in_get_a_pass():
    assert needed_shifts(0, 8) == []
    assert needed_shifts(0xFFFF_FFFF, 8) == [0, 8, 16, 24]
    assert needed_shifts(0x0001_0000, 8) == [16]
    assert needed_shifts(0x8000_0001, 6) == [0, 30]
    assert list(digit_shifts(5)) == [0, 5, 10, 15, 20, 25, 30]


@pytest.mark.parametrize("passes", range(1, 9))
def test_the_last_pass_writes_the_output_and_each_reads_the_one_before(passes):
    targets = destinations(passes)
    assert targets[-1] == "out"
    assert all(a != b for a, b in zip(targets, targets[1:]))


def sort_with(sort, keys, values, bits=LSD_BITS, chunks=2, params=None):
    """Run a cpu.py sort driver on keys (and values) into fresh, poisoned buffers; cpu-lsd's
    run parameters land in ``params``."""
    from loclab.cases.radix_sort import cpu

    pairs = values is not None
    vals = values if pairs else np.empty(0, np.uint32)
    out = np.full((2, keys.size), DRAWN_BELOW, np.uint32)
    scratch = np.full((2, keys.size), DRAWN_BELOW, np.uint32)
    if sort is cpu.split_sort:
        sort(keys, vals, out[0], out[1], scratch[0], scratch[1], np.empty(keys.size, np.int64),
             pairs)
    else:
        sort(keys, vals, out[0], out[1], scratch[0], scratch[1],
             np.empty((chunks, 1 << bits), np.int64), pairs, bits,
             {} if params is None else params)
    return out if pairs else out[0]


def expected(keys, values):
    order = np.argsort(keys, kind="stable")
    return keys[order] if values is None else np.stack([keys[order], values[order]])


@settings(max_examples=60, deadline=None)
@given(data=st.data(), n=st.integers(1, 600), alphabet=st.sampled_from([1, 2, 7, 300, 2**32 - 1]),
       pairs=st.booleans(), sort=st.sampled_from(["split", "lsd"]),
       bits=st.sampled_from([4, 5, 8]), chunks=st.integers(1, 9))
def test_cpu_sorts_any_keys_with_duplicates_stably(data, n, alphabet, pairs, sort, bits,
                                                   chunks):
    from loclab.cases.radix_sort import cpu

    keys = np.array(data.draw(st.lists(st.integers(0, alphabet - 1), min_size=n, max_size=n)),
                    np.uint32)
    keys *= np.uint32(data.draw(st.sampled_from([1, 2**8, 2**24 - 1, 2**31])))  # high digits
    values = np.arange(n, dtype=np.uint32)[::-1].copy() if pairs else None
    driver = cpu.split_sort if sort == "split" else cpu.lsd_sort
    got = sort_with(driver, keys, values, bits=bits, chunks=chunks)
    np.testing.assert_array_equal(got, expected(keys, values))


def narrow_keys(top, n):
    """Keys below ``top`` (0 and top - 1 among them) with bit 31 set: only the digits of
    top - 1 differ."""
    keys = np.random.default_rng(top).integers(0, top, n, dtype=np.uint32)
    keys[:2] = [0, top - 1]
    return keys | np.uint32(0x8000_0000)


@pytest.mark.parametrize("top, passes", [(2**8, 1), (2**16, 2), (2**24, 3), (2**31, 4)])
def test_cpu_lsd_runs_a_pass_per_digit_the_keys_differ_in(top, passes):
    from loclab.cases.radix_sort import cpu

    keys = narrow_keys(top, 20_000)
    values = np.random.default_rng(0).integers(0, DRAWN_BELOW, keys.size, dtype=np.uint32)
    params = {}
    got = sort_with(cpu.lsd_sort, keys, values, params=params)
    np.testing.assert_array_equal(got, expected(keys, values))
    assert params["passes"] == passes


def test_cpu_lsd_copies_keys_that_are_all_equal():
    from loclab.cases.radix_sort import cpu

    keys = np.full(1001, 12345, np.uint32)
    values = np.arange(1001, dtype=np.uint32)
    params = {}
    np.testing.assert_array_equal(sort_with(cpu.lsd_sort, keys, values, params=params),
                                  [keys, values])
    assert params["passes"] == 0


def test_cpu_digit_major_offsets_put_chunks_in_order_within_a_digit():
    from loclab.cases.radix_sort.cpu import digit_major_offsets

    counts = np.array([[2, 0, 1], [1, 3, 0]])  # chunk x digit
    np.testing.assert_array_equal(digit_major_offsets(counts), [[0, 3, 6], [2, 3, 7]])


# --- a NumPy emulation of the GPU kernels --------------------------------------------------------

def emulate_split_pass(keys, values, bit, tile):
    """kernels.cu's split_count, split_scan and split_scatter (one key per thread, blocks of
    ``tile``): the lecture's e, f, totalFalses, t and d."""
    n = keys.size
    b = (keys >> np.uint32(bit)) & np.uint32(1)
    e = (1 - b).astype(np.int64)
    padded = np.zeros(-(-n // tile) * tile, np.int64)
    padded[:n] = e
    falses = padded.reshape(-1, tile).sum(axis=1)  # split_count
    before = np.concatenate([[0], np.cumsum(falses)])  # split_scan, total last
    total = before[-1]
    within = np.concatenate([np.cumsum(row) - row for row in padded.reshape(-1, tile)])[:n]
    f = before[np.arange(n) // tile] + within
    d = np.where(b == 1, np.arange(n) - f + total, f)
    assert sorted(d) == list(range(n))  # a permutation
    out_keys, out_values = np.empty_like(keys), np.empty_like(values)
    out_keys[d], out_values[d] = keys, values
    return out_keys, out_values


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 3000), tile=st.sampled_from([32, 64, 256]), seed=st.integers(0, 99),
       alphabet=st.sampled_from([3, 2**32 - 1]))
def test_emulated_gpu_split_sorts_stably(n, tile, seed, alphabet):
    rng = np.random.default_rng(seed)
    keys = rng.integers(0, alphabet, n, dtype=np.uint32)
    values = np.arange(n, dtype=np.uint32)
    got_keys, got_values = keys, values
    for bit in range(32):
        got_keys, got_values = emulate_split_pass(got_keys, got_values, bit, tile)
    np.testing.assert_array_equal(np.stack([got_keys, got_values]), expected(keys, values))


def warp_ranks(digits):
    """For one item of a warp (32 lanes' digits): each lane's peers in lower lanes and the
    size of its group, as __match_any_sync and popc give them."""
    same = digits[:, None] == digits[None, :]
    below = np.tril(same, -1).sum(axis=1)
    return below, same.sum(axis=1)


def emulate_upsweep(keys, shift, radix, grid):
    """radix_upsweep: counts[digit * blocks + b] of block b's range (digit-major)."""
    counts = np.zeros((radix, grid.blocks), np.int64)
    for b in range(grid.blocks):
        block_keys = keys[b * grid.per_block:(b + 1) * grid.per_block]
        counts[:, b] = np.bincount((block_keys >> np.uint32(shift)) & np.uint32(radix - 1),
                                   minlength=radix)
    return counts.reshape(-1)


def emulate_downsweep_tile(tile_keys, shift, radix, threads, items, next_position):
    """radix_downsweep's steps 1-3 on one tile: the output position of each of its keys
    (in tile order); advances ``next_position`` (per digit) past the tile's keys."""
    warps, valid = threads // 32, tile_keys.size
    counters = np.zeros((warps, radix), np.int64)
    rank = np.zeros(valid, np.int64)
    digits = ((tile_keys >> np.uint32(shift)) & np.uint32(radix - 1)).astype(np.int64)
    for w in range(warps):  # 1. ranks within each warp, item after item
        for k in range(items):
            index = w * 32 * items + k * 32 + np.arange(32)
            lanes = index < valid
            if not lanes.any():
                continue
            item = digits[index[lanes]]
            below, group = warp_ranks(item)
            rank[index[lanes]] = counters[w, item] + below
            np.add.at(counters[w], item[below == group - 1], group[below == group - 1])
    count = counters.sum(axis=0)  # 2. warps' offsets per digit, digits' first places
    warp_offset = np.cumsum(counters, axis=0) - counters
    first_place = np.cumsum(count) - count
    place = first_place[digits] + warp_offset[np.arange(valid) // (32 * items), digits] + rank
    assert sorted(place) == list(range(valid))  # 3. the tile reordered by digit
    in_order = np.empty(valid, np.int64)
    in_order[place] = np.arange(valid)
    assert np.all(np.diff(digits[in_order]) >= 0)  # runs of digits, as written out
    position = next_position[digits] - first_place[digits] + place
    next_position += count
    return position


def emulate_lsd(keys, values, bits, threads, items, resident):
    """gpu-lsd's run: the passes of the digits the keys differ in, each upsweep, digit-major
    scan and downsweep on the persistent grid."""
    from loclab.cases.radix_sort.gpu import persistent_grid

    radix, n = 1 << bits, keys.size
    grid = persistent_grid(n, threads * items, resident)
    differing = int(np.bitwise_or.reduce(keys) ^ np.bitwise_and.reduce(keys))
    for shift in needed_shifts(differing, bits):
        counts = emulate_upsweep(keys, shift, radix, grid)
        offsets = (np.cumsum(counts) - counts).reshape(radix, grid.blocks)  # radix_scan
        out_keys, out_values = np.empty_like(keys), np.empty_like(values)
        written = np.zeros(n, bool)
        for b in range(grid.blocks):
            next_position = offsets[:, b].copy()
            for tile in range(b * grid.tiles_per_block,
                              min((b + 1) * grid.tiles_per_block, grid.tiles)):
                span = slice(tile * grid.tile, min((tile + 1) * grid.tile, n))
                to = emulate_downsweep_tile(keys[span], shift, radix, threads, items,
                                            next_position)
                assert not written[to].any()
                written[to] = True
                out_keys[to], out_values[to] = keys[span], values[span]
        assert written.all()
        keys, values = out_keys, out_values
    return keys, values


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 5000), bits=st.sampled_from([4, 5, 8]),
       threads=st.sampled_from([256, 512]), items=st.sampled_from([1, 3, 4]),
       resident=st.integers(1, 5), seed=st.integers(0, 99),
       alphabet=st.sampled_from([1, 5, 2**12, 2**32 - 1]))
def test_emulated_gpu_lsd_sorts_stably(n, bits, threads, items, resident, seed, alphabet):
    rng = np.random.default_rng(seed)
    keys = rng.integers(0, alphabet, n, dtype=np.uint32)
    values = np.arange(n, dtype=np.uint32)
    got_keys, got_values = emulate_lsd(keys, values, bits, threads, items, resident)
    np.testing.assert_array_equal(np.stack([got_keys, got_values]), expected(keys, values))


@pytest.mark.parametrize("order", [SORTED, REVERSED, EQUAL])
def test_emulated_gpu_lsd_on_the_adversarial_orders(order):
    inputs = CASE.make_inputs({"n": 9000, "values": 1, "order": order}, np.random.default_rng(0))
    got = emulate_lsd(inputs["keys"], inputs["values"], LSD_BITS, LSD_THREADS, LSD_ITEMS, 2)
    np.testing.assert_array_equal(np.stack(got), CASE.golden(inputs))


@pytest.mark.parametrize("n, tile, resident", [
    (1, 4096, 264), (4096, 4096, 264), (4097, 4096, 264), (10**6, 4096, 264),
    (2**28, 4096, 528), (2**31 - 1, 8192, 132), (5, 1, 2)])
def test_persistent_grid_covers_every_tile_with_no_empty_block(n, tile, resident):
    from loclab.cases.radix_sort.gpu import persistent_grid

    grid = persistent_grid(n, tile, resident)
    assert grid.tiles == -(-n // tile) and grid.blocks <= resident
    per = grid.tiles_per_block
    assert (grid.blocks - 1) * per < grid.tiles <= grid.blocks * per
    assert grid.per_block * grid.blocks < 2**32  # the kernels' u32 positions


# --- GPU setup rules, without a GPU -------------------------------------------------------------

def test_downsweep_shared_memory_holds_the_tile_or_the_counters():
    from loclab.cases.radix_sort.gpu import downsweep_shared_bytes

    assert downsweep_shared_bytes(8, 256, 16, False) == 4 * (4096 + 256 + 8)
    assert downsweep_shared_bytes(8, 256, 16, True) == 4 * (8192 + 256 + 8)
    assert downsweep_shared_bytes(8, 1024, 4, False) == 4 * (8192 + 256 + 32)  # counters


def test_lsd_space_accepts_its_default_and_refuses_what_cannot_fit(machine):
    from loclab.cases.radix_sort.gpu import LSD_DEFAULT, lsd_space

    h200 = replace(machine, gpu=H200)
    space = lsd_space(h200)
    for values in (0, 1):
        assert space.restriction(space.default, {"values": values}, h200) is None
    assert "registers" in space.restriction({"bits": 8, "threads": 1024, "items": 24},
                                            {"values": 1}, h200)
    assert space.default == LSD_DEFAULT == {"bits": LSD_BITS, "threads": LSD_THREADS,
                                            "items": LSD_ITEMS}


# --- on a GPU ---------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("top, passes", [(1, 0), (2**8, 1), (2**16, 2), (2**24, 3),
                                         (2**31, 4)])
@pytest.mark.parametrize("values", [0, 1])
def test_gpu_lsd_runs_a_pass_per_digit_the_keys_differ_in(top, passes, values, machine):
    n = 3 * LSD_TILE + 5
    inputs = {"keys": narrow_keys(top, n)}
    if values:
        inputs["values"] = np.arange(n, dtype=np.uint32)
    check, bound = run_on_gpu(CASE, variant("gpu-lsd"), {"n": n, "values": values, "order": 0},
                              machine, inputs=inputs)
    assert check.valid, check.problem
    assert bound.params["passes"] == passes


@pytest.mark.gpu
@pytest.mark.parametrize("config", [{"bits": 4, "threads": 256, "items": 4},
                                    {"bits": 5, "threads": 512, "items": 8},
                                    {"bits": 6, "threads": 1024, "items": 12},
                                    {"bits": 7, "threads": 256, "items": 24},
                                    {"bits": 8, "threads": 256, "items": 16}])
@pytest.mark.parametrize("n, values, order", [(100_003, 1, RANDOM), (30_011, 0, REVERSED),
                                              (50_000, 1, EQUAL)])
def test_gpu_lsd_at_other_digits_and_tiles(config, n, values, order, machine):
    check, bound = run_on_gpu(CASE, variant("gpu-lsd"), {"n": n, "values": values,
                                                         "order": order}, machine, **config)
    assert check.valid, (config, check.problem)
    assert bound.params["tile"] == config["threads"] * config["items"]


@pytest.mark.gpu
@pytest.mark.parametrize("values", [0, 1])
def test_gpu_lsd_with_many_tiles_per_block(values, machine):
    one_sm = replace(machine, gpu=replace(machine.gpu, sms=1))
    dims = {"n": 1_000_003, "values": values, "order": RANDOM}
    check, bound = run_on_gpu(CASE, variant("gpu-lsd"), dims, one_sm)
    assert check.valid, check.problem
    assert bound.params["tiles_per_block"] > 10


@pytest.mark.gpu
def test_gpu_lsd_grid_fills_the_gpu_once(machine):
    from loclab.cases.radix_sort.gpu import persistent_grid
    from loclab.gpu.kernels import recording_launches

    dims = {"n": 2**24, "values": 1, "order": RANDOM}
    with recording_launches() as launches:
        check, bound = run_on_gpu(CASE, variant("gpu-lsd"), dims, machine)
    assert check.valid, check.problem
    downsweep = next(launch for launch in launches if "downsweep" in launch.name)
    resident = machine.gpu.sms * downsweep.cuda_blocks_per_sm()
    grid = persistent_grid(dims["n"], bound.params["tile"], resident)
    assert bound.params["blocks"] == grid.blocks > resident - grid.tiles_per_block
