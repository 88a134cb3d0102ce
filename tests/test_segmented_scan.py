"""The segmented-scan case beyond the generic per-variant tests: the inputs' two
representations, the exact tolerance, the CPU variants on random flags, NumPy emulations of the
two GPU algorithms (the lecture's up-sweep / down-sweep with its levels and fix-ups; the
single-pass tile scan with look-back, tiles progressing in random order) against golden, and on
a GPU (marked ``gpu``) more tiles than fit at once, repeated runs and unaligned arrays."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loclab.cases.base import dyadic_nonzero
from loclab.cases.segmented_scan import (BLELLOCH_TILE, CASE, SINGLE_PASS_BLOCK,
                                         SINGLE_PASS_TILE, SINGLE_PASS_VECTORS, head_positions,
                                         segment_offsets)
from loclab.errors import UsageError
from loclab.measure.validate import compare
from tests.case_runs import run_on_gpu

CPU_VARIANTS = [v.name for v in CASE.variants_on("cpu")]
GPU_VARIANTS = [v.name for v in CASE.variants_on("gpu")]


def variant(name: str):
    return next(v for v in CASE.variants if v.name == name)


def inputs_for(flags: np.ndarray, seed: int, empty: int = 0) -> dict[str, np.ndarray]:
    """The case's inputs for given head flags (flags[0] = 1), dyadic values from ``seed``."""
    rng = np.random.default_rng(seed)
    flags = np.asarray(flags, np.uint8)
    return {"values": dyadic_nonzero(rng, flags.size), "flags": flags,
            "offsets": segment_offsets(flags, rng, empty)}


def random_flags(n: int, share: float, seed: int) -> np.ndarray:
    flags = (np.random.default_rng(seed).random(n) < share).astype(np.uint8)
    flags[0] = 1
    return flags


def golden_loop(values: np.ndarray, flags: np.ndarray) -> np.ndarray:
    """The sequential loop, literally (float64 running sums)."""
    out, running = [], 0.0
    for value, head in zip(values.tolist(), flags.tolist()):
        running = value if head else running + value
        out.append(running)
    return np.array(out, np.float32)


# -- the inputs, golden and the tolerance -----------------------------------------------------
def test_golden_is_the_sequential_loop():
    inputs = inputs_for(random_flags(5000, 0.05, 1), 2)
    np.testing.assert_array_equal(CASE.golden(inputs),
                                  golden_loop(inputs["values"], inputs["flags"]))


@pytest.mark.parametrize("dims", CASE.test_dims)
def test_offsets_and_flags_describe_the_same_segments(dims):
    inputs = CASE.make_inputs(dims, np.random.default_rng(5))
    flags, offsets, n = inputs["flags"], inputs["offsets"], dims["n"]
    assert flags[0] == 1 and offsets.dtype == np.int32 and flags.dtype == np.uint8
    assert offsets[0] == 0 and offsets[-1] == n and np.all(np.diff(offsets) >= 0)
    starts = offsets[:-1][np.diff(offsets) > 0]  # non-empty segments
    np.testing.assert_array_equal(starts, np.flatnonzero(flags))
    empties = np.count_nonzero(np.diff(offsets) == 0)
    if dims["empty"]:  # a leading and a trailing empty segment, at least
        assert offsets[1] == 0 and offsets[-2] == n and empties >= 2
    else:
        assert empties == 0


def test_segment_lengths_follow_the_dimension():
    rng = np.random.default_rng(0)
    n = 200_000
    assert CASE.make_inputs({"n": n, "segment": 1, "empty": 0}, rng)["flags"].all()
    one = CASE.make_inputs({"n": n, "segment": n, "empty": 0}, rng)
    assert one["offsets"].tolist() == [0, n]
    heads = np.count_nonzero(CASE.make_inputs({"n": n, "segment": 100, "empty": 0},
                                              rng)["flags"])
    assert 1800 < heads < 2200
    offsets = CASE.make_inputs({"n": n, "segment": 100, "empty": 1}, rng)["offsets"]
    share = np.count_nonzero(np.diff(offsets) == 0) / (offsets.size - 1)
    assert 0.22 < share < 0.28  # about one segment in four is empty


def test_head_positions_across_chunks():
    from loclab.cases import segmented_scan

    flags = random_flags(3 * segmented_scan.CHUNK + 17, 0.001, 3)
    np.testing.assert_array_equal(head_positions(flags), np.flatnonzero(flags))


def test_the_tolerance_is_exact_and_catches_a_dropped_element():
    inputs = CASE.make_inputs({"n": 100_003, "segment": 1000, "empty": 0},
                              np.random.default_rng(4))
    assert CASE.tolerance_for(inputs) == 0.0
    wrong = CASE.golden(inputs)
    wrong[-1] -= inputs["values"][-1]
    assert not compare(wrong, CASE.golden(inputs), 0.0).valid


def test_golden_chunks_carry_the_running_segment():
    from loclab.cases import segmented_scan

    n = 2 * segmented_scan.CHUNK + 5
    flags = np.zeros(n, np.uint8)
    flags[[0, 7, segmented_scan.CHUNK + 3]] = 1  # a segment across the first chunk boundary
    inputs = inputs_for(flags, 6)
    values = inputs["values"].astype(np.float64)
    want = np.concatenate([np.cumsum(values[:7]), np.cumsum(values[7:segmented_scan.CHUNK + 3]),
                           np.cumsum(values[segmented_scan.CHUNK + 3:])]).astype(np.float32)
    np.testing.assert_array_equal(CASE.golden(inputs), want)


def test_dimensions_and_sizes(machine):
    assert CASE.checked_dims({"n": 5, "segment": 2, "empty": 1}) == {"n": 5, "segment": 2,
                                                                      "empty": 1}
    with pytest.raises(UsageError, match="empty=2"):
        CASE.checked_dims({"n": 5, "segment": 2, "empty": 2})
    (default,) = CASE.dims("default", "cpu", machine)
    assert 9 * default["n"] >= 4 * machine.cpu.llc_share_bytes
    for dims in CASE.dims("large", "cpu", machine):
        assert 9 * dims["n"] >= 4 * machine.cpu.llc_bytes
    assert [d["segment"] for d in CASE.dims("default", "gpu", machine)] == [1, 32, 1000]
    assert {d["n"] for d in CASE.dims("default", "gpu", machine)} == {2**28}


# -- CPU variants on random flags -------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 3000), share=st.sampled_from([0.0, 0.01, 0.2, 0.9, 1.0]),
       empty=st.integers(0, 1), seed=st.integers(0, 2**16))
def test_cpu_variants_on_random_flags(n, share, empty, seed, machine):
    inputs = inputs_for(random_flags(n, share, seed), seed, empty)
    want = CASE.golden(inputs)
    for name in CPU_VARIANTS:
        out = np.full(n, np.nan, np.float32)
        np.testing.assert_array_equal(variant(name).setup(inputs, out, machine).run(), want,
                                      err_msg=name)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 2000), chunk=st.integers(1, 300),
       share=st.sampled_from([0.0, 0.005, 0.1, 1.0]), seed=st.integers(0, 2**16))
def test_two_pass_at_any_chunk_size(n, chunk, share, seed):
    from loclab.cases.segmented_scan.cpu import scan_two_pass

    inputs = inputs_for(random_flags(n, share, seed), seed)
    out = np.full(n, np.nan, np.float32)
    scan_two_pass(inputs["values"], inputs["flags"], out, chunk)
    np.testing.assert_array_equal(out, CASE.golden(inputs))


# -- gpu-flags-blelloch, emulated -------------------------------------------------------------
def lecture_tile_scan(values: np.ndarray, heads: np.ndarray) -> tuple[np.ndarray, int, float]:
    """The lecture's segmented up-sweep and down-sweep on one tile (a power of two long), step
    by step as segscan_blelloch runs them: the exclusive segmented scan, and the root's pair
    (the tile's head flag and sum since its last head), saved before the root is zeroed."""
    x, f, size = values.astype(np.float32), heads.astype(bool), values.size
    d = 1
    while d < size:
        right = np.arange(2 * d - 1, size, 2 * d)
        left = right - d
        x[right] = np.where(f[right], x[right], x[left] + x[right])
        f[right] |= f[left]
        d *= 2
    root = (int(f[-1]), float(x[-1]))
    x[-1] = 0
    d = size // 2
    while d >= 1:
        right = np.arange(2 * d - 1, size, 2 * d)
        left = right - d
        t = x[left].copy()
        x[left] = x[right]
        x[right] = np.where(heads[left + 1] != 0, 0, np.where(f[left], t, t + x[right]))
        f[left] = False
        d //= 2
    return x, *root


def emulate_flags_blelloch(values: np.ndarray, flags: np.ndarray, tile: int) -> np.ndarray:
    """gpu-flags-blelloch's levels: tiles scanned by the lecture's algorithm (out = exclusive
    + value), the tiles' pairs scanned one level up (recursively) into each tile's carry, and
    the fix-up of each tile's elements before its first head."""
    n = values.size
    tiles = -(-n // tile)
    padded_values = np.zeros(tiles * tile, np.float32)
    padded_flags = np.zeros(tiles * tile, np.uint8)
    padded_values[:n], padded_flags[:n] = values, flags
    out = np.empty(tiles * tile, np.float32)
    sums = np.empty(tiles, np.float32)
    heads = np.empty(tiles, np.uint8)
    first = np.empty(tiles, np.int64)
    for t in range(tiles):
        part = slice(t * tile, (t + 1) * tile)
        exclusive, heads[t], sums[t] = lecture_tile_scan(padded_values[part], padded_flags[part])
        out[part] = exclusive + padded_values[part]
        nonzero = np.flatnonzero(padded_flags[part])
        first[t] = nonzero[0] if nonzero.size else tile
    if tiles > 1:
        carries = emulate_flags_blelloch(sums, heads, tile)
        for t in range(1, tiles):
            out[t * tile:t * tile + first[t]] += carries[t - 1]
    return out[:n]


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 3000), tile_log=st.integers(1, 5),
       share=st.sampled_from([0.0, 0.01, 0.1, 0.5, 1.0]), seed=st.integers(0, 2**16))
def test_lecture_segmented_blelloch_with_levels_matches_golden(n, tile_log, share, seed):
    inputs = inputs_for(random_flags(n, share, seed), seed)
    got = emulate_flags_blelloch(inputs["values"], inputs["flags"], 1 << tile_log)
    np.testing.assert_array_equal(got, CASE.golden(inputs))


def test_lecture_segmented_blelloch_at_the_kernel_tile():
    inputs = inputs_for(random_flags(3 * BLELLOCH_TILE + 5, 0.002, 8), 8)
    got = emulate_flags_blelloch(inputs["values"], inputs["flags"], BLELLOCH_TILE)
    np.testing.assert_array_equal(got, CASE.golden(inputs))


def test_blelloch_levels():
    from loclab.cases.segmented_scan.gpu import blelloch_levels

    assert blelloch_levels(1) == [1]
    assert blelloch_levels(BLELLOCH_TILE) == [BLELLOCH_TILE]
    assert blelloch_levels(BLELLOCH_TILE + 1) == [BLELLOCH_TILE + 1, 2]
    assert blelloch_levels(2**20 + 1) == [2**20 + 1, 1025, 2]
    assert blelloch_levels(2**28) == [2**28, 2**18, 2**8]


# -- gpu-single-pass, emulated ----------------------------------------------------------------
INVALID, AGGREGATE, PREFIX = 0, 1, 2
Pair = tuple[int, float]
IDENTITY: Pair = (0, 0.0)


def combine(a: Pair, b: Pair) -> Pair:
    return (a[0] | b[0], b[1] if b[0] else a[1] + b[1])


def scan_pairs(pairs: list[Pair]) -> list[Pair]:
    """Inclusive scan with the segmented operator (a warp's shuffle scan, in order)."""
    out, running = [], IDENTITY
    for pair in pairs:
        running = combine(running, pair)
        out.append(running)
    return out


def single_pass_tile(tile: int, values: np.ndarray, flags: np.ndarray, out: np.ndarray,
                     states: list[tuple[int, float]], warps: int, vectors: int,
                     lanes: int) -> Iterator[None]:
    """One block of segscan_single_pass as a generator that yields where the block may be
    overtaken (after publishing, and at each look at its predecessors' states while one it
    needs is INVALID). Geometry: ``warps`` x ``vectors`` x ``lanes`` chunks of 4, the lanes
    also the look-back window (32 on the GPU)."""
    size = warps * vectors * lanes * 4
    lo, n = tile * size, values.size
    x = np.zeros(size)
    h = np.zeros(size, np.int64)
    x[:max(0, min(size, n - lo))] = values[lo:lo + size]
    h[:max(0, min(size, n - lo))] = flags[lo:lo + size]
    x, h = x.reshape(warps, vectors, lanes, 4), h.reshape(warps, vectors, lanes, 4)
    local = np.empty_like(x)
    chunk = {}
    for w, k, lane in np.ndindex(warps, vectors, lanes):
        pairs = scan_pairs([(int(h[w, k, lane, j]), float(x[w, k, lane, j])) for j in range(4)])
        local[w, k, lane] = [s for _, s in pairs]
        chunk[w, k, lane] = pairs[-1]
    before, warp_total = {}, []
    for w in range(warps):
        running = IDENTITY
        for k in range(vectors):
            inclusive = scan_pairs([chunk[w, k, lane] for lane in range(lanes)])
            for lane in range(lanes):
                before[w, k, lane] = combine(running, inclusive[lane - 1] if lane else IDENTITY)
            running = combine(running, inclusive[-1])
        warp_total.append(running)
    warp_before = [IDENTITY] + scan_pairs(warp_total)[:-1]
    tile_pair = scan_pairs(warp_total)[-1]
    known = tile == 0 or bool(tile_pair[0])
    states[tile] = (PREFIX if known else AGGREGATE, tile_pair[1])
    yield
    carry = 0.0
    if tile > 0 and not h[0, 0, 0, 0]:
        window = tile - 1
        while True:
            words = [states[p] if p >= 0 else (PREFIX, 0.0)
                     for p in range(window, window - lanes, -1)]
            stop = next((i for i, (status, _) in enumerate(words) if status == PREFIX), lanes)
            if any(status == INVALID for status, _ in words[:stop + 1]):
                yield
                continue
            carry += sum(s for _, s in words[:stop + 1])
            if stop < lanes:
                break
            window -= lanes
        if not known:
            states[tile] = (PREFIX, carry + tile_pair[1])
    for w, k, lane in np.ndindex(warps, vectors, lanes):
        into = combine(combine((0, carry), warp_before[w]), before[w, k, lane])[1]
        seen = np.cumsum(h[w, k, lane]) > 0
        result = np.where(seen, local[w, k, lane], local[w, k, lane] + into)
        first = lo + ((w * vectors + k) * lanes + lane) * 4
        for j in range(4):
            if first + j < n:
                out[first + j] = result[j]


def emulate_single_pass(values: np.ndarray, flags: np.ndarray, rng: np.random.Generator,
                        warps: int = 2, vectors: int = 2, lanes: int = 4) -> np.ndarray:
    """Blocks start in tile order (the atomic counter) at random moments; at each step a
    random running block advances to its next wait. A look-back that waited on a tile not yet
    started would never end: the step limit says so."""
    tiles = -(-values.size // (warps * vectors * lanes * 4))
    states = [(INVALID, 0.0)] * tiles
    out = np.full(values.size, np.nan, np.float32)
    running: list[Iterator[None]] = []
    started, steps = 0, 0
    while started < tiles or running:
        steps += 1
        assert steps < 1000 + 100 * tiles * tiles, "no progress: a look-back waits forever"
        if started < tiles and (not running or rng.random() < 0.3):
            running.append(single_pass_tile(started, values, flags, out, states, warps,
                                            vectors, lanes))
            started += 1
            continue
        block = running[rng.integers(len(running))]
        if next(block, StopIteration) is StopIteration:
            running.remove(block)
    assert all(status == PREFIX for status, _ in states)
    return out


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 2500), share=st.sampled_from([0.0, 0.002, 0.02, 0.3, 1.0]),
       seed=st.integers(0, 2**16))
def test_single_pass_look_back_in_any_order_matches_golden(n, share, seed):
    inputs = inputs_for(random_flags(n, share, seed), seed)
    got = emulate_single_pass(inputs["values"], inputs["flags"], np.random.default_rng(seed))
    np.testing.assert_array_equal(got, CASE.golden(inputs))


def test_single_pass_at_the_kernel_geometry():
    inputs = inputs_for(random_flags(2 * SINGLE_PASS_TILE + 9, 0.0005, 9), 9)
    got = emulate_single_pass(inputs["values"], inputs["flags"], np.random.default_rng(9),
                              SINGLE_PASS_BLOCK // 32, SINGLE_PASS_VECTORS, 32)
    np.testing.assert_array_equal(got, CASE.golden(inputs))


# -- the GPU kernels' declarations ------------------------------------------------------------
def test_single_pass_loads_are_coalesced():
    from loclab.cases.segmented_scan.gpu import KERNELS, SINGLE_PASS

    declared = KERNELS.accesses_of(SINGLE_PASS)
    params = declared.parameters(SINGLE_PASS, {"n": 2**28, "segment": 1000, "empty": 0})
    for access in declared.accesses:
        predicted = access.predict((SINGLE_PASS_BLOCK,), params).to_json()
        assert predicted["efficiency"] == 1.0, access.text


# -- on the GPU -------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("segment", [2**31 - 1, 1000])
def test_single_pass_with_more_tiles_than_fit_on_the_gpu(segment, machine):
    """Forward progress: far more tiles than blocks resident at once (at most 2048 threads
    per SM), tile numbers from the counter; one segment makes every tile look back."""
    resident = machine.gpu.sms * 2048 // SINGLE_PASS_BLOCK
    dims = {"n": (4 * resident + 1) * SINGLE_PASS_TILE + 5, "segment": segment, "empty": 0}
    check, bound = run_on_gpu(CASE, variant("gpu-single-pass"), dims, machine)
    assert check.valid, check.problem
    assert bound.params["tiles"] > 4 * resident


@pytest.mark.gpu
@pytest.mark.parametrize("name", GPU_VARIANTS)
def test_gpu_variants_give_the_same_result_run_after_run(name, machine):
    """State reset between runs (single-pass's counter and states); no run reads a stale
    carry."""
    dims = {"n": 50 * SINGLE_PASS_TILE + 7, "segment": 5000, "empty": 1}
    check, _ = run_on_gpu(CASE, variant(name), dims, machine, seed=2, runs=3)
    assert check.valid, check.problem  # exactly: the tolerance is 0 for these inputs


@pytest.mark.gpu
def test_single_pass_on_unaligned_arrays_takes_the_scalar_path(machine):
    import cupy

    inputs = CASE.make_inputs({"n": 3 * SINGLE_PASS_TILE + 3, "segment": 300, "empty": 0},
                              np.random.default_rng(3))
    sliced = {"values": inputs["values"][1:], "flags": inputs["flags"][1:].copy()}
    sliced["flags"][0] = 1
    staged = {key: cupy.asarray(inputs[key])[1:] for key in ("values", "flags")}
    staged["flags"][0] = 1
    out = cupy.full(sliced["values"].size + 1, np.nan, cupy.float32)[1:]
    bound = variant("gpu-single-pass").setup(staged, out, machine)
    assert bound.params["vector"] == 1
    np.testing.assert_array_equal(cupy.asnumpy(bound.run()), CASE.golden(sliced))
