"""The compaction case beyond the generic per-variant tests: exact kept counts, order kept,
the parallel CPU version at any thread count, bad sizes, and on a GPU the single pass with far
more tiles than fit at once, run repeatedly (the look-back states are cleared each run)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loclab.bench.auto import get_case
from loclab.cases.compaction import exact_flags
from loclab.errors import UsageError
from loclab.measure.validate import poison
from tests.case_runs import run_on_gpu

CASE = get_case("compaction")


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 5000), percent=st.integers(0, 100), seed=st.integers(0, 2**32 - 1))
def test_exactly_the_asked_share_is_kept(n, percent, seed):
    flags = exact_flags(n, n * percent // 100, np.random.default_rng(seed))
    assert flags.dtype == np.uint8 and set(np.unique(flags)) <= {0, 1}
    assert int(flags.sum()) == n * percent // 100


def test_ties_at_the_threshold_still_give_the_exact_count():
    class Ties:  # every draw the same: the threshold is tied everywhere
        def random(self, n, dtype):
            return np.full(n, 0.5, dtype)

    assert int(exact_flags(1000, 321, Ties()).sum()) == 321


def test_golden_keeps_input_order():
    inputs = {"values": np.array([5, 6, 7, 8], np.float32),
              "flags": np.array([1, 0, 1, 1], np.uint8)}
    np.testing.assert_array_equal(CASE.golden(inputs), [5, 7, 8])


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 3000), percent=st.integers(0, 100), threads=st.integers(1, 7))
def test_two_pass_at_any_thread_count(n, percent, threads):
    from loclab.cases.compaction.cpu import compact_two_pass

    inputs = CASE.make_inputs({"n": n, "percent": percent}, np.random.default_rng(n))
    out = np.empty(n, np.float32)
    poison(out)
    kept = compact_two_pass(inputs["values"], inputs["flags"], out, threads)
    np.testing.assert_array_equal(out[:kept], CASE.golden(inputs))


@pytest.mark.parametrize("dims, fragment", [
    ({"n": 10, "percent": 101}, "percent=101: must be a whole number from 0 to 100"),
    ({"n": 10}, "missing dimension percent"),
])
def test_bad_sizes_are_one_line_errors(dims, fragment):
    with pytest.raises(UsageError, match=fragment):
        CASE.checked_dims(dims)


@pytest.mark.gpu
@pytest.mark.parametrize("variant_name", ["gpu-single-pass", "gpu-three-pass", "cub"])
@pytest.mark.parametrize("percent", [0, 37, 100])
def test_many_tiles_and_repeated_runs(variant_name, percent, machine):
    dims = {"n": 2**24 + 5, "percent": percent}
    variant = next(v for v in CASE.variants if v.name == variant_name)
    check, _ = run_on_gpu(CASE, variant, dims, machine, seed=percent, runs=3)
    assert check.valid, f"{variant_name} {dims}: {check.problem}"
