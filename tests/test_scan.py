"""The scan case beyond the generic per-variant tests: the golden's semantics (inclusive,
exclusive, int32 wrap-around), exact float checks, the cache-blocked CPU scan at any slice
size, bad sizes, and on a GPU the single-pass scan with far more tiles than fit at once
(blocks scheduled in any order must still finish) at every tuned shape."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loclab.bench.auto import get_case
from loclab.errors import UsageError
from loclab.measure.validate import compare, poison
from tests.case_runs import run_on_gpu

CASE = get_case("scan")


def inputs_for(a, exclusive=0):
    return {"a": np.asarray(a), "exclusive": np.array([exclusive], np.int64)}


def test_golden_inclusive_exclusive_and_wrap_around():
    a = np.array([3, -1, 2**31 - 1, 5], np.int32)
    np.testing.assert_array_equal(CASE.golden(inputs_for(a)),
                                  np.array([3, 2, -2**31 + 1, -2**31 + 6], np.int32))
    np.testing.assert_array_equal(CASE.golden(inputs_for(a, 1)),
                                  np.array([0, 3, 2, -2**31 + 1], np.int32))


def test_float_inputs_make_every_summation_order_exact():
    inputs = CASE.make_inputs({"n": 1 << 20, "exclusive": 0, "integer": 0},
                              np.random.default_rng(1))
    a = inputs["a"]
    assert a.dtype == np.float32 and np.all(a != 0) and np.all(a * 64 == np.round(a * 64))
    assert CASE.tolerance_for(inputs) == 0.0
    blocked = np.cumsum(a.reshape(-1, 1024).sum(axis=1, dtype=np.float32), dtype=np.float32)
    assert blocked[-1] == CASE.golden(inputs)[-1]  # another order, the same sum


def test_a_dropped_element_fails_the_check():
    inputs = CASE.make_inputs({"n": 5000, "exclusive": 0, "integer": 0},
                              np.random.default_rng(2))
    golden = CASE.golden(inputs)
    wrong = golden.copy()
    wrong[1234:] -= inputs["a"][1234]  # every prefix from 1234 on misses a[1234]
    assert not compare(wrong, golden, CASE.tolerance_for(inputs)).valid


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 3000), exclusive=st.integers(0, 1), integer=st.integers(0, 1),
       slice_elements=st.integers(1, 700), threads=st.integers(1, 5))
def test_cache_blocked_two_pass_at_any_slice_and_thread_count(n, exclusive, integer,
                                                              slice_elements, threads):
    from loclab.cases.scan.cpu import scan_two_pass

    inputs = CASE.make_inputs({"n": n, "exclusive": exclusive, "integer": integer},
                              np.random.default_rng(n))
    out = np.empty(n, inputs["a"].dtype)
    poison(out)
    scan_two_pass(inputs["a"], out, bool(exclusive), slice_elements, threads)
    np.testing.assert_array_equal(out, CASE.golden(inputs))


@pytest.mark.parametrize("dims, fragment", [
    ({"n": 10, "exclusive": 2, "integer": 0}, "exclusive=2: must be a whole number from 0 to 1"),
    ({"n": 0, "exclusive": 0, "integer": 0}, "n=0: must be a whole number from 1"),
    ({"n": 10, "exclusive": 0}, "missing dimension integer"),
])
def test_bad_sizes_are_one_line_errors(dims, fragment):
    with pytest.raises(UsageError, match=fragment):
        CASE.checked_dims(dims)


def run_three_times(variant_name, dims, machine, **config):
    """The variant's Bound, after three checked runs at ``dims``: the states must be cleared
    between runs."""
    variant = next(v for v in CASE.variants if v.name == variant_name)
    check, bound = run_on_gpu(CASE, variant, dims, machine, seed=7, runs=3, **config)
    assert check.valid, f"{variant_name} {dims} {config}: {check.problem}"
    return bound


@pytest.mark.gpu
@pytest.mark.parametrize("exclusive, integer", [(0, 0), (1, 1)])
def test_lookback_with_far_more_tiles_than_fit_at_once(exclusive, integer, machine):
    dims = {"n": 2**24 + 3, "exclusive": exclusive, "integer": integer}
    bound = run_three_times("gpu-decoupled-lookback", dims, machine, block=64, chunks=1,
                            delay_ns=0)
    fit = machine.gpu.sms * machine.gpu.max_threads_per_sm // 64
    assert bound.params["tiles"] > 10 * fit  # tiles start long after others finished


@pytest.mark.gpu
def test_lookback_at_every_tuning_configuration(machine):
    from loclab.cases.scan.gpu import lookback_restriction, lookback_space

    space = lookback_space(machine)
    dims = {"n": 1_000_003, "exclusive": 1, "integer": 0}
    for block in space.values["block"]:
        for chunks in space.values["chunks"]:
            config = {"block": block, "chunks": chunks, "delay_ns": 350}
            if lookback_restriction(config, dims, machine) is None:
                run_three_times("gpu-decoupled-lookback", dims, machine, **config)


@pytest.mark.gpu
@pytest.mark.parametrize("variant", ["gpu-hillis-steele", "gpu-blelloch"])
def test_three_levels_of_block_sums(variant, machine):
    run_three_times(variant, {"n": 512 * 512 + 1 if "hillis" in variant else 1024 * 1024 + 1,
                              "exclusive": 1, "integer": 1}, machine)
