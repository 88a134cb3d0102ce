"""The histogram case beyond the generic per-variant tests: the golden loop's semantics
(indices >= bins skipped), multi-pass chunking at any chunk size, the tolerance, the CPU
atomic add, sizes that follow the caches, and GPU passes forced to many small chunks."""

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loclab.bench.auto import get_case
from loclab.cases.base import summation_tolerance
from loclab.measure.validate import compare
from tests.gpus import H200

CASE = get_case("histogram")


def golden_loop(inds, vals, bins):
    """The lectures' goldenSeq, literally (float64 sums)."""
    hist = [0.0] * bins
    for ind, val in zip(inds.tolist(), vals.tolist()):
        if ind < bins:
            hist[ind] += val
    return np.array(hist, np.float32)


def inputs_for(inds, vals, bins):
    return {"inds": np.asarray(inds, np.uint32), "vals": np.asarray(vals, np.float32),
            "bins": np.array([bins], np.int64)}


def test_golden_is_the_lectures_loop_and_skips_indices_at_or_above_bins():
    rng = np.random.default_rng(3)
    inds = rng.integers(0, 40, 5000, dtype=np.uint32)
    inds[:10] = [30, 31, 2**32 - 1, 29, 0, 30, 1000, 29, 31, 30]
    inputs = inputs_for(inds, rng.random(5000, dtype=np.float32) + 0.5, 30)
    np.testing.assert_allclose(CASE.golden(inputs), golden_loop(inds, inputs["vals"], 30),
                               rtol=1e-6)


def test_generated_inputs_include_indices_to_skip():
    inputs = CASE.make_inputs({"bins": 1000, "n": 100_000}, np.random.default_rng(0))
    beyond = np.count_nonzero(inputs["inds"] >= 1000)
    assert 0 < beyond < 5000 and inputs["vals"].min() > 0


@pytest.mark.parametrize("variant", [v.name for v in CASE.variants_on("cpu")])
def test_every_cpu_variant_skips_indices_at_or_above_bins(variant, machine):
    inds = np.array([5, 6, 7, 8, 9, 2**32 - 1, 4, 7, 100], np.uint32)
    inputs = inputs_for(inds, np.arange(1, 10, dtype=np.float32), 7)
    out = np.full(7, np.nan, np.float32)
    setup = next(v for v in CASE.variants if v.name == variant).setup
    result = setup(inputs, out, machine).run()
    np.testing.assert_array_equal(result, [0, 0, 0, 0, 7, 1, 2])


@settings(max_examples=30, deadline=None)
@given(bins=st.integers(1, 300), n=st.integers(0, 3000), chunk=st.integers(1, 400),
       seed=st.integers(0, 2**16))
def test_multipass_at_any_chunk_size(bins, n, chunk, seed):
    from loclab.cases.histogram.cpu import histogram_multipass

    rng = np.random.default_rng(seed)
    inputs = inputs_for(rng.integers(0, bins + 3, n), rng.random(n, dtype=np.float32), bins)
    out = np.full(bins, np.nan, np.float32)
    histogram_multipass(inputs["inds"], inputs["vals"], out, chunk)
    check = compare(out, CASE.golden(inputs), CASE.tolerance_for(inputs))
    assert check.valid, check.problem


def test_each_bin_is_held_to_its_own_terms_and_a_dropped_term_fails():
    dims = {"bins": 1000, "n": 65_537}
    inputs = CASE.make_inputs(dims, np.random.default_rng(1))
    kept = inputs["inds"][inputs["inds"] < 1000]
    counts = np.bincount(kept, minlength=1000)
    golden = CASE.golden(inputs)
    bounds = CASE.tolerance_for(inputs)
    np.testing.assert_allclose(bounds, summation_tolerance(counts) * golden, rtol=1e-6)
    wrong = golden.copy()
    first = int(np.flatnonzero(inputs["inds"] < 1000)[0])
    wrong[inputs["inds"][first]] -= inputs["vals"][first]
    assert not compare(wrong, golden, bounds).valid
    # a bin of few values off by more than its own bound, less than the fullest bin's
    # normwise tolerance allows
    sparse = int(np.argmin(np.where(counts > 0, counts, counts.max() + 1)))
    normwise = summation_tolerance(int(counts.max()))
    wrong = golden.copy()
    wrong[sparse] += (bounds[sparse] + normwise * golden.max()) / 2
    assert compare(wrong, golden, normwise).valid
    assert not compare(wrong, golden, bounds).valid


def test_cpu_atomic_add_loses_no_update_under_contention():
    from numba import njit, prange

    from loclab.cpu.atomics import atomic_add

    @njit(parallel=True)
    def hammer(target, index, times):
        for _ in prange(times):
            atomic_add(target, index, 1)

    floats, ints = np.zeros(3, np.float32), np.zeros(3, np.int64)
    hammer(floats, 1, 1_000_000)
    hammer(ints, 2, 1_000_000)
    assert floats.tolist() == [0, 1_000_000, 0] and ints.tolist() == [0, 0, 1_000_000]


def test_atomic_add_rejects_what_it_cannot_do():
    from numba import njit
    from numba.core.errors import TypingError

    from loclab.cpu.atomics import atomic_add

    @njit
    def on_2d(target):
        atomic_add(target, 0, 1.0)

    with pytest.raises(TypingError):
        on_2d(np.zeros((2, 2), np.float32))


def test_default_sizes_sweep_the_caches(machine):
    sizes = CASE.dims("default", "cpu", machine)
    bins = [dims["bins"] * 4 for dims in sizes]
    # on the CPU the default stops at 2x the LLC share of these cores (a run of minutes)
    assert bins == [machine.cpu.l2_bytes // 4] + [int(m * machine.cpu.llc_share_bytes)
                                                  for m in (0.25, 2)]
    assert len({dims["n"] for dims in sizes}) == 1
    assert all(8 * dims["n"] >= 4 * 4 * dims["bins"] for dims in sizes)


def test_the_llc_share_is_at_most_16_mib_a_core(machine):
    from dataclasses import replace

    assert machine.cpu.llc_share_bytes == min(machine.cpu.llc_bytes,
                                              16 * 2**20 * machine.cpu.cores)
    server = replace(machine.cpu, llc_bytes=480 * 2**20, physical_cores=2, logical_cpus=2)
    assert server.llc_share_bytes == 32 * 2**20
    assert CASE.dims("large", "cpu", replace(machine, cpu=server))[-1]["bins"] * 4 == \
        8 * 480 * 2**20  # large goes beyond the whole LLC


def test_privatized_applies_only_where_the_sub_histograms_fit_the_llc(machine):
    import numba

    from loclab.cases.histogram.cpu import privatized_fits

    llc = machine.cpu.llc_bytes
    fitting = llc // (4 * numba.get_num_threads())
    assert privatized_fits({"bins": fitting}, machine) is None
    assert "exceed the LLC" in privatized_fits({"bins": fitting + 1}, machine)


def test_multipass_chunk_is_a_fraction_of_the_llc(machine):
    from loclab.cases.histogram.cpu import multipass

    bins = machine.cpu.llc_bytes  # 4x the LLC in bytes
    out = np.empty(bins, np.float32)
    inputs = inputs_for([0], [1.0], bins)
    params = multipass(inputs, out, machine, fraction=0.5).params
    assert params["chunk_bins"] == machine.cpu.llc_bytes // 8 and params["passes"] == 8


# --- on a GPU -------------------------------------------------------------------------------

def run_gpu(setup, dims, machine, **options):
    import cupy

    inputs = CASE.make_inputs(dims, np.random.default_rng(7))
    staged = {name: cupy.asarray(array) for name, array in inputs.items()}
    out = cupy.full(dims["bins"], cupy.nan, cupy.float32)
    bound = setup(staged, out, machine, **options)
    result = cupy.asnumpy(bound.run())
    return compare(result, CASE.golden(inputs), CASE.tolerance_for(inputs)), bound.params


@pytest.mark.gpu
@pytest.mark.parametrize("bins, n", [(1, 10), (4099, 70_001), (100_003, 1_000_003)])
@pytest.mark.parametrize("name", ["multipass", "partitioned"])
def test_gpu_passes_at_chunks_that_do_not_divide_the_histogram(name, bins, n, machine):
    from loclab.cases.histogram import gpu

    tiny_l2 = replace(machine, gpu=replace(machine.gpu, l2_bytes=4 * 1000))
    check, params = run_gpu(getattr(gpu, name), {"bins": bins, "n": n}, tiny_l2,
                            fraction=0.3)
    assert check.valid, check.problem
    expected_parts = -(-bins // 300)
    if name == "partitioned":
        expected_parts = min(expected_parts, gpu.MAX_PARTS)
    assert params["passes"] == expected_parts


@pytest.mark.gpu
def test_gpu_shared_at_its_limit(machine):
    from loclab.cases.histogram import gpu

    bins = machine.gpu.shared_mem_per_block // 4
    assert gpu.shared_fits({"bins": bins}, machine) is None
    assert gpu.shared_fits({"bins": bins + 1}, machine)
    check, _ = run_gpu(gpu.shared, {"bins": bins, "n": 1_000_003}, machine)
    assert check.valid, check.problem


@pytest.mark.gpu
@pytest.mark.parametrize("variant", [v.name for v in CASE.variants_on("gpu")])
def test_every_gpu_variant_skips_indices_at_or_above_bins(variant, machine):
    import cupy

    inds = np.array([5, 6, 7, 8, 9, 2**32 - 1, 4, 7, 100], np.uint32)
    inputs = inputs_for(inds, np.arange(1, 10, dtype=np.float32), 7)
    staged = {name: cupy.asarray(array) for name, array in inputs.items()}
    out = cupy.full(7, cupy.nan, cupy.float32)
    setup = next(v for v in CASE.variants if v.name == variant).setup
    result = cupy.asnumpy(setup(staged, out, machine).run())
    np.testing.assert_array_equal(result, [0, 0, 0, 0, 7, 1, 2])


@pytest.mark.parametrize("bins", [1, 7, 131, 132, 133, 10_000, 31_457_280, 125_829_120])
def test_buckets_cover_the_histogram_and_fit_shared_memory(bins, machine):
    from loclab.cases.histogram import gpu

    buckets, width = gpu.bucket_layout(bins, replace(machine, gpu=H200))
    assert (buckets - 1) * width < bins <= buckets * width  # every bin, no empty bucket
    assert width * 4 <= H200.shared_mem_per_block_optin
    assert buckets <= H200.sms * -(-bins // (H200.shared_mem_per_block_optin // 4 * H200.sms))
    assert buckets >= min(bins, H200.sms) // 2  # one per SM at least, up to rounding


def test_bucketed_applies_while_the_scatter_tile_has_room_for_the_buckets(machine):
    from loclab.cases.histogram import gpu

    h200 = replace(machine, gpu=H200)
    assert gpu.bucket_layout(2 * H200.l2_bytes // 4, h200) == (660, 47_663)
    assert gpu.bucketed_fits({"bins": 8 * H200.l2_bytes // 4}, h200) is None
    assert "buckets" in gpu.bucketed_fits({"bins": 2**31}, h200)
    assert "no GPU" in gpu.bucketed_fits({"bins": 10}, replace(machine, gpu=None))


def test_a_bucket_has_at_most_65536_bins_whatever_the_shared_memory(machine):
    from loclab.cases.histogram import gpu

    roomy = replace(H200, shared_mem_per_block_optin=2**20, shared_mem_per_sm=2**20 + 1024)
    buckets, width = gpu.bucket_layout(10**8, replace(machine, gpu=roomy))
    assert width <= 2**16 < width * H200.sms and buckets * width >= 10**8


@pytest.mark.parametrize("n", [0, 1, 1023, 1024, 1025, 65_535, 65_536, 65_537, 1_000_003,
                               64 * 1024 * 7 + 1, 64 * 1024 * 7 + 1024])
def test_sampled_elements_counts_what_the_sample_reads(n):
    from loclab.cases.histogram import gpu

    chunk, every = gpu.SAMPLE_CHUNK, gpu.SAMPLE_EVERY
    read = sum(min(chunk, n - start) for start in range(0, n, chunk * every))
    assert gpu.sampled_elements(n) == read


@settings(max_examples=50, deadline=None)
@given(n=st.integers(1, 10**9), buckets=st.integers(1, 5000), spread=st.floats(-2, 8),
       seed=st.integers(0, 2**16))
def test_records_bound_holds_every_room_the_plan_can_give(n, buckets, spread, seed):
    """bucket_room's rule, written out in NumPy, over sampled counts from even to all in one
    bucket: the rooms never add up to more than the records allocated."""
    from loclab.cases.histogram import gpu

    sampled = gpu.sampled_elements(n)
    scale = n / sampled
    rng = np.random.default_rng(seed)
    for counts in (rng.multinomial(sampled, np.full(buckets, 1 / buckets)),
                   np.eye(1, buckets, rng.integers(buckets), dtype=np.int64)[0] * sampled):
        expected = counts * scale
        wanted = np.ceil(expected + spread * np.sqrt(scale * expected) + scale)
        rooms = np.where(wanted > 0, -(-wanted // 16) * 16, 0)
        assert rooms.sum() <= gpu.records_bound(n, buckets, spread)


def test_bucketed_traffic_says_how_close_one_scatter_can_come_to_copy():
    from loclab.cases.histogram import gpu

    n, bins = 2**29, 26_214_400
    traffic = gpu.bucketed_traffic(n, bins)
    # read 8 bytes, write a 6-byte record, read it back: 20 bytes where one pass moves 8
    assert 20 < traffic["bytes_per_element"] < 20.3
    assert traffic["max_pct_of_copy"] == pytest.approx(100 * (8 * n + 4 * bins) /
                                                       traffic["moved_bytes"], abs=0.05)
    assert 39 < traffic["max_pct_of_copy"] < 41


@pytest.mark.gpu
@pytest.mark.parametrize("bins, n", [(1, 10), (4099, 70_001), (100_003, 1_000_003)])
def test_gpu_bucketed_at_buckets_that_do_not_divide_the_histogram(bins, n, machine):
    from loclab.cases.histogram import gpu

    check, params = run_gpu(gpu.bucketed, {"bins": bins, "n": n}, machine, bucket_bytes=400)
    assert check.valid, check.problem
    assert params["bucket_bins"] <= 100
    assert (params["buckets"] - 1) * params["bucket_bins"] < bins


@pytest.mark.gpu
def test_gpu_bucketed_when_every_element_falls_in_one_bucket(machine):
    import cupy

    from loclab.cases.histogram import gpu

    n, bins = 3_000_017, 1_000_003
    inds = np.full(n, 12_345, np.uint32)
    inds[::7] = 2**32 - 1
    inputs = inputs_for(inds, np.ones(n, np.float32), bins)
    staged = {name: cupy.asarray(array) for name, array in inputs.items()}
    out = cupy.full(bins, cupy.nan, cupy.float32)
    result = cupy.asnumpy(gpu.bucketed(staged, out, machine).run())
    check = compare(result, CASE.golden(inputs), CASE.tolerance_for(inputs))
    assert check.valid, check.problem


@pytest.mark.gpu
@pytest.mark.parametrize("spread", [-1e9, 0.0])
@pytest.mark.parametrize("bins, n", [(7, 100_003), (100_003, 1_000_003)])
def test_gpu_bucketed_adds_the_records_that_spill_from_their_rooms(spread, bins, n, machine):
    """Rooms of nothing (every record spills to the global-atomic list) or of just the
    sampled estimate (about half the buckets spill some): the sums are the same."""
    from loclab.cases.histogram import gpu

    check, _ = run_gpu(gpu.bucketed, {"bins": bins, "n": n}, machine, spread=spread)
    assert check.valid, check.problem


@pytest.mark.gpu
def test_gpu_bucketed_on_sorted_indices_the_sample_misjudges(machine):
    """Indices in increasing order: the 1-in-64 sample of chunks sees each bucket in lumps, so
    rooms are badly sized; the spill list keeps the result right."""
    import cupy

    from loclab.cases.histogram import gpu

    n, bins = 2_000_003, 300_007
    inds = np.sort(np.random.default_rng(5).integers(0, bins + 100, n, dtype=np.uint32))
    inputs = inputs_for(inds, np.random.default_rng(6).random(n, dtype=np.float32) + 0.5, bins)
    staged = {name: cupy.asarray(array) for name, array in inputs.items()}
    out = cupy.full(bins, cupy.nan, cupy.float32)
    result = cupy.asnumpy(gpu.bucketed(staged, out, machine).run())
    check = compare(result, CASE.golden(inputs), CASE.tolerance_for(inputs))
    assert check.valid, check.problem
