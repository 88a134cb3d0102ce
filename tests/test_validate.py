import numpy as np
import pytest

from loclab.measure import validate
from loclab.measure.validate import compare, poison


@pytest.fixture
def golden():
    return np.random.default_rng(1).random((37, 53), dtype=np.float32)


def test_identical_output_is_valid(golden):
    check = compare(golden.copy(), golden, tolerance=0.0)
    assert check.valid and check.max_rel_err == 0.0 and check.problem is None


def test_one_wrong_element_is_caught(golden):
    out = golden.copy()
    out[36, 52] += 1.0
    check = compare(out, golden, tolerance=1e-6)
    assert not check.valid
    assert check.max_rel_err == pytest.approx(1.0 / np.abs(golden).max(), rel=1e-6)
    assert "max relative error" in check.problem


def test_error_within_tolerance_passes(golden):
    out = golden * np.float32(1 + 1e-6)
    assert compare(out, golden, tolerance=1e-5).valid
    assert not compare(out, golden, tolerance=1e-8).valid


def test_unwritten_poisoned_element_is_caught(golden):
    out = golden.copy()
    poison(out[5:6, 7:8])
    check = compare(out, golden, tolerance=1.0)
    assert not check.valid and "1 of" in check.problem and "NaN" in check.problem


def test_poison_fills_floats_with_nan_and_integers_with_their_maximum():
    floats = np.zeros(4, np.float32)
    ints = np.zeros(4, np.uint32)
    poison(floats)
    poison(ints)
    assert np.isnan(floats).all()
    assert (ints == np.iinfo(np.uint32).max).all()


def test_shape_and_dtype_mismatches_are_reported(golden):
    assert "shape" in compare(golden.T, golden, 0.0).problem
    assert "dtype" in compare(golden.astype(np.float64), golden, 0.0).problem


def test_chunked_comparison_sees_every_chunk(golden, monkeypatch):
    monkeypatch.setattr(validate, "CHUNK_ELEMENTS", 100)
    out = golden.copy()
    out.reshape(-1)[-1] = -5.0
    assert not compare(out, golden, 1e-3).valid
    assert compare(golden.copy(), golden, 0.0).valid


def test_non_contiguous_result_is_compared_by_value(golden):
    assert compare(np.asfortranarray(golden), golden, 0.0).valid


def test_nan_must_match_where_golden_has_it(golden):
    with_nan = golden.copy()
    with_nan[2, 3] = np.nan
    assert not compare(golden.copy(), with_nan, tolerance=1.0).valid
    assert compare(with_nan.copy(), with_nan, tolerance=0.0).valid
    infinite = golden.copy()
    infinite[0, 0] = np.inf
    assert not compare(-infinite, -golden, tolerance=1.0).valid
    assert compare(infinite.copy(), infinite, tolerance=0.0).valid


def test_elementwise_bounds_catch_a_small_element_a_normwise_bound_would_pass():
    golden = np.array([1e6, 1.0, 0.0], np.float32)
    result = np.array([1e6, 1.5, 0.0], np.float32)  # 0.5 off in the small one
    assert compare(result, golden, 1e-6).valid  # 0.5 / 1e6 is within a normwise 1e-6
    check = compare(result, golden, np.array([1.0, 1e-3, 0.0]))
    assert not check.valid
    assert check.problem == ("1 of 3 outputs beyond their own error bound (first: element 1, "
                             "error 0.5 > 0.001)")
    assert compare(result, golden, np.array([0.0, 0.5, 0.0])).valid
    assert not compare(np.array([1e6, 1.0, 1e-30], np.float32), golden,
                       np.zeros(3)).valid  # a zero bound asks for the exact value


def test_elementwise_bounds_across_chunks(monkeypatch):
    import loclab.measure.validate as validate

    monkeypatch.setattr(validate, "CHUNK_ELEMENTS", 4)
    golden = np.arange(10, dtype=np.float32)
    result = golden.copy()
    result[9] += 1
    check = compare(result, golden, np.full(10, 0.5))
    assert not check.valid and "element 9" in check.problem
