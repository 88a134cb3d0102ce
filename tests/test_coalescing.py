"""The coalescing case beyond the generic tests: golden, the error bound, kernels at any shape."""

import itertools
import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loclab.cases.base import FLOAT32_UNIT_ROUNDOFF, Work
from loclab.cases.coalescing import (CASE, COLS, LARGE_MIN_ROWS, TOLERANCE, golden, make_inputs,
                                     work)
from loclab.cases.coalescing.cpu import column_chunk, columns_program, rows_program
from loclab.measure.validate import compare

U = FLOAT32_UNIT_ROUNDOFF


def matrix(rows, cols, seed=0):
    return make_inputs({"rows": rows, "cols": cols}, np.random.default_rng(seed))["a"]


def program_float32(a, column_order=None, skip=None):
    """The program in float32, vectorized across rows; a wrong variant reads the columns in
    ``column_order`` or leaves ``acc`` unchanged at column ``skip``."""
    order = range(a.shape[1]) if column_order is None else column_order
    out = np.empty_like(a)
    acc = np.zeros(a.shape[0], np.float32)
    for j, source in enumerate(order):
        if j != skip:
            x = a[:, source]
            acc = np.sqrt(acc) + x * x
        out[:, j] = acc
    return out


def program_fused(a):
    """As the GPU computes it, x * x + sqrt(acc) fused into one FMA: emulated with x * x exact
    in float64 and the float64 sum rounded to float32 (a true FMA differs only where the
    double rounding meets a tie)."""
    out = np.empty_like(a)
    acc = np.zeros(a.shape[0], np.float32)
    for j in range(a.shape[1]):
        x = a[:, j].astype(np.float64)
        acc = (x * x + np.sqrt(acc).astype(np.float64)).astype(np.float32)
        out[:, j] = acc
    return out


def transposed_program(a, chunk):
    a_t = np.ascontiguousarray(a.T)
    b_t = np.full_like(a_t, np.nan)
    return np.ascontiguousarray(columns_program(a_t, b_t, chunk).T)


def elementwise_error(result, reference):
    return float(np.max(np.abs(result.astype(np.float64) - reference) / reference))


def test_golden_is_the_program_in_double_precision():
    a = matrix(5, 9)
    want = np.empty(a.shape, np.float32)
    for i in range(a.shape[0]):
        acc = 0.0
        for j in range(a.shape[1]):
            x = float(a[i, j])
            acc = math.sqrt(acc) + x * x
            want[i, j] = acc
    np.testing.assert_array_equal(golden({"a": a}), want)


def test_golden_blocks_of_rows_are_seamless():
    from loclab.cases.coalescing import GOLDEN_ROW_BLOCK

    a = matrix(GOLDEN_ROW_BLOCK + 5, 3)
    start = GOLDEN_ROW_BLOCK - 3  # a block of 8 rows across the boundary
    np.testing.assert_array_equal(golden({"a": a})[start:], golden({"a": a[start:]}))


@pytest.mark.parametrize("rows, cols", [(1, 1), (4099, 64), (1000, 61), (257, 1000),
                                        (64, 5000)])
def test_float32_variants_stay_within_the_derived_bound(rows, cols, machine):
    """Every element within 5u of golden, relative to itself (the bound derived in the case:
    4u for the float32 program, u for golden's rounding), at any number of columns; the
    normwise tolerance 6u holds with room."""
    a = matrix(rows, cols, seed=rows + cols)
    reference = golden({"a": a}).astype(np.float64)
    out = np.full_like(a, np.nan)
    for result in (rows_program(a, out.copy()), transposed_program(a, column_chunk(machine)),
                   program_float32(a), program_fused(a)):
        assert elementwise_error(result, reference) <= 5 * U * (1 + 1e-6)
        assert compare(result, reference.astype(np.float32), TOLERANCE).valid


@pytest.mark.parametrize("rows, cols", [(1, 2), (1, 64), (1000, 61), (4099, 100), (3, 1000)])
def test_a_skipped_or_swapped_column_is_caught(rows, cols):
    a = matrix(rows, cols, seed=cols)
    reference = golden({"a": a})
    for column in sorted({0, (cols - 2) // 2, cols - 2}):
        swapped = list(range(cols))
        swapped[column], swapped[column + 1] = swapped[column + 1], swapped[column]
        for wrong in (program_float32(a, column_order=swapped),
                      program_float32(a, skip=column), program_float32(a, skip=cols - 1)):
            check = compare(wrong, reference, CASE.tolerance)
            assert not check.valid and check.max_rel_err > 100 * TOLERANCE


@settings(max_examples=40, deadline=None)
@given(rows=st.integers(1, 300), cols=st.integers(1, 200), chunk=st.integers(1, 600))
def test_cpu_kernels_any_shape_any_chunk(rows, cols, chunk):
    a = matrix(rows, cols, seed=rows * cols)
    reference = golden({"a": a})
    out = rows_program(a, np.full_like(a, np.nan))
    assert compare(out, reference, TOLERANCE).valid
    assert compare(transposed_program(a, chunk), reference, TOLERANCE).valid


def test_column_chunk_keeps_a_step_in_half_of_l1(machine):
    chunk = column_chunk(machine)
    assert chunk % 16 == 0 and chunk > 0
    assert 3 * chunk * 4 <= max(machine.cpu.l1d_bytes // 2, 3 * 16 * 4)


def test_inputs_lie_strictly_between_zero_and_one():
    a = matrix(1000, 1000, seed=3)
    assert a.dtype == np.float32 and a.min() > 0 and a.max() < 1


def test_work_counts_one_read_one_write_and_three_flops_per_element():
    assert work({"rows": 3, "cols": 5}) == Work(bytes=2 * 15 * 4, flops=3 * 15)


def test_large_sizes_are_four_times_the_cache(machine):
    huge = replace(machine, cpu=replace(machine.cpu, llc_bytes=1 << 30), gpu=None)
    dims = CASE.dims("large", "cpu", huge)[0]
    assert dims["cols"] == COLS and dims["rows"] % 1024 == 0
    assert work(dims).bytes >= 4 * (1 << 30)
    assert CASE.dims("large", "gpu", huge) == [{"rows": LARGE_MIN_ROWS, "cols": COLS}]


@pytest.mark.parametrize("cols, chunk", [(64, 64), (61, 64), (1, 64), (8, 64), (63, 64),
                                         (65, 32), (100, 32), (4096, 32)])
def test_staged_rows_are_whole_up_to_64_columns(cols, chunk):
    from loclab.cases.coalescing.gpu import staged_shape

    assert staged_shape(cols) == (chunk, 128)


@pytest.mark.parametrize("cols, vector", [(64, 4), (4, 4), (100, 4), (4096, 4), (61, 1), (1, 1),
                                          (2, 1), (66, 1)])
def test_staged_moves_16_bytes_only_where_rows_start_16_byte_aligned(cols, vector):
    from loclab.cases.coalescing.gpu import staged_vector

    assert staged_vector(cols) == vector


def test_every_staged_choice_is_a_compiled_instantiation():
    """Whatever the columns, gpu-staged launches one of the instantiations the nvcc check
    compiles, and the declared accesses name both kernels."""
    from loclab.cases.coalescing.gpu import (KERNELS, staged_name, staged_shape,
                                             staged_vector)

    chosen = {staged_name(*staged_shape(cols), staged_vector(cols)) for cols in range(1, 300)}
    assert chosen <= set(KERNELS.name_expressions)
    assert {"rows_staged_vec<64,128>", "rows_staged<64,128>", "rows_staged_vec<32,128>",
            "rows_staged<32,128>"} <= chosen
    assert all(KERNELS.accesses_of(name) for name in chosen)


@pytest.mark.gpu
@pytest.mark.parametrize("rows, cols", [(1000, 64), (513, 4), (4099, 100), (1000, 61),
                                        (37, 1), (129, 200), (300, 36), (37, 8)])
def test_every_staged_instantiation_matches_golden(rows, cols):
    """Every (CHUNK, BLOCK) at every shape, whichever gpu-staged would pick there, 16-byte
    where the rows allow it and 4-byte always: full and partial tiles, chunks wider than the
    rows, a last chunk of 4 columns."""
    import cupy

    from loclab.cases.coalescing.gpu import STAGED_SHAPES, VECTOR, staged_launch, staged_name

    a = matrix(rows, cols)
    staged = cupy.asarray(a)
    vectors = (1, VECTOR) if cols % VECTOR == 0 else (1,)
    for (chunk, block), vector in itertools.product(STAGED_SHAPES, vectors):
        out = cupy.full(a.shape, cupy.nan, cupy.float32)
        check = compare(cupy.asnumpy(staged_launch(staged, out, chunk, block, vector)()),
                        golden({"a": a}), TOLERANCE)
        assert check.valid, f"{staged_name(chunk, block, vector)} at {rows}x{cols}: {check.problem}"
