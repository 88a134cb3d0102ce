"""The matrix-vector product case: golden, sizes, the CPU split kernel at any tiling, and the
shape-based choice of gpu-optimized (pure, no GPU), then every GPU strategy forced on awkward
shapes and misaligned arrays (marked gpu)."""

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loclab.bench.auto import get_case
from loclab.cases import matvec
from loclab.cases.matvec.cpu import matvec_row_tiles, matvec_split, split_blocks
from loclab.cases.matvec.gpu import (GROUPS, KERNELS, OPTIMIZED_UNROLL, SPLIT_ROWS, WARP,
                                     Strategy, choose_strategy, grouped_kernel, lanes_per_row,
                                     split_chunk, split_kernel)
from loclab.measure.validate import compare, poison

H100_SMS = 132


def random_inputs(rows, cols, seed=0):
    return matvec.make_inputs({"rows": rows, "cols": cols}, np.random.default_rng(seed))


@pytest.mark.parametrize("rows, cols", [(1, 1), (3, 5), (7, 2), (4, 9)])
def test_golden_is_the_lectures_loop(rows, cols):
    inputs = random_inputs(rows, cols)
    a, x = inputs["a"], inputs["x"]
    expected = [sum(float(a[i][k]) * float(x[k]) for k in range(cols)) for i in range(rows)]
    y = matvec.golden(inputs)
    assert y.dtype == np.float32 and y.shape == (rows,)
    np.testing.assert_array_equal(y, np.array(expected).astype(np.float32))


def test_golden_converts_a_chunk_of_rows_at_a_time(monkeypatch):
    inputs = random_inputs(37, 11)
    expected = (inputs["a"].astype(np.float64) @ inputs["x"].astype(np.float64)).astype(np.float32)
    monkeypatch.setattr(matvec, "GOLDEN_CHUNK", 30)  # two rows per chunk, one odd chunk left
    np.testing.assert_array_equal(matvec.golden(inputs), expected)


def test_inputs_are_never_zero_and_at_most_one():
    inputs = random_inputs(300, 301)
    for array in inputs.values():
        assert array.dtype == np.float32 and array.min() > 0 and array.max() <= 1
    assert inputs["a"].shape == (300, 301) and inputs["x"].shape == (301,)


def test_work_counts_a_and_x_read_and_y_written():
    work = matvec.work({"rows": 3, "cols": 5})
    assert work.bytes == 4 * (15 + 5 + 3) and work.flops == 30


def test_tolerance_grows_with_the_row_length():
    short, long = random_inputs(2, 10), random_inputs(2, 1000)
    assert 0 < matvec.tolerance(short) < matvec.tolerance(long) < 1e-4


def test_default_shapes_have_the_same_footprint(machine):
    case = get_case("matvec")
    cpu_side = case.dims("default", "cpu", machine)[1]["rows"]
    assert 4 * cpu_side**2 >= 4 * machine.cpu.llc_share_bytes  # a beyond the LLC share, 4x
    for device, elements in (("cpu", cpu_side**2), ("gpu", 16384**2)):
        sizes = case.dims("default", device, machine)
        assert [d["rows"] * d["cols"] for d in sizes] == [elements] * 3
        assert sizes[0]["rows"] > sizes[0]["cols"] and sizes[2]["rows"] < sizes[2]["cols"]


@pytest.mark.parametrize("cache", [2**20, 32 * 2**20, 1536 * 2**20])
def test_large_matrices_are_at_least_four_caches(cache):
    machine = SimpleNamespace(cpu=SimpleNamespace(llc_bytes=cache),
                              gpu=SimpleNamespace(l2_bytes=cache))
    for device in ("cpu", "gpu"):
        sizes = get_case("matvec").dims("large", device, machine)
        assert len(sizes) == 3
        for dims in sizes:
            assert 4 * dims["rows"] * dims["cols"] >= 4 * cache


def test_test_sizes_cover_the_awkward_shapes():
    dims = {(d["rows"], d["cols"]) for d in get_case("matvec").test_dims}
    assert {(1, 1), (1, 1000), (1000, 1), (33, 65), (129, 257), (64, 4099), (4099, 7),
            (5, 100003), (300, 300)} <= dims


def check_output(out, inputs):
    check = compare(out, matvec.golden(inputs), matvec.tolerance(inputs))
    assert check.valid, check.problem


@settings(max_examples=60, deadline=None)
@given(rows=st.integers(1, 120), cols=st.integers(1, 300),
       row_block=st.integers(1, 70), col_block=st.integers(1, 330))
def test_split_kernel_any_shape_any_blocks(rows, cols, row_block, col_block):
    inputs = random_inputs(rows, cols, seed=rows * 1000 + cols)
    out = np.full(rows, np.nan, np.float32)
    partials = np.full((-(-cols // col_block), rows), np.nan, np.float32)
    matvec_split(inputs["a"], inputs["x"], partials, out, row_block, col_block)
    check_output(out, inputs)


@settings(max_examples=30, deadline=None)
@given(rows=st.integers(1, 300), cols=st.integers(1, 100), row_block=st.integers(1, 70))
def test_row_tiles_any_shape_any_block(rows, cols, row_block):
    inputs = random_inputs(rows, cols, seed=rows * 1000 + cols)
    out = np.full(rows, np.nan, np.float32)
    matvec_row_tiles(inputs["a"], inputs["x"], out, row_block)
    check_output(out, inputs)


@pytest.mark.parametrize("rows, cols", [(1_048_576, 64), (8192, 8192), (64, 1_048_576),
                                        (1, 1), (3, 100003)])
def test_split_blocks_hold_x_in_a_quarter_of_l2(rows, cols):
    l2 = 2**20
    row_block, col_block = split_blocks(rows, cols, l2)
    assert 1 <= row_block <= rows and 1 <= col_block <= cols
    assert col_block * 4 <= l2 // 4
    assert col_block == cols or col_block & (col_block - 1) == 0


def test_split_blocks_give_few_long_rows_many_tiles():
    row_block, col_block = split_blocks(64, 1_048_576, 2**20)
    tiles = -(-64 // row_block) * -(-1_048_576 // col_block)
    assert tiles >= 64 * 4  # more than rows: every core has tiles even with 64 rows


@pytest.mark.parametrize("rows, cols, vector, expected", [
    (4_194_304, 64, 4, Strategy("rows", 4, 16, 1)),  # tall-skinny: two rows per warp load
    (16384, 16384, 4, Strategy("rows", 4, WARP, OPTIMIZED_UNROLL)),  # square: a warp per row
    (64, 4_194_304, 4, Strategy("split", 4)),  # short-wide: split each row
    (1_000_003, 61, 1, Strategy("rows", 1, WARP, OPTIMIZED_UNROLL)),
    (61, 1_000_003, 1, Strategy("split", 1)),
    (4099, 7, 1, Strategy("rows", 1, 8, 1)),
    (1000, 1, 1, Strategy("rows", 1, 1, 1)),
    (5, 100, 4, Strategy("rows", 4, WARP, OPTIMIZED_UNROLL)),  # few rows, but one chunk long
])
def test_optimized_strategy_by_shape(rows, cols, vector, expected):
    assert choose_strategy(rows, cols, H100_SMS, vector) == expected


@given(cols=st.integers(1, 10**7), vector=st.sampled_from([1, 4]))
def test_lanes_per_row_is_the_smallest_power_of_two_covering_the_row(cols, vector):
    group = lanes_per_row(cols, vector)
    assert group in GROUPS
    assert group == WARP or group * vector >= cols
    assert group == 1 or (group // 2) * vector < cols


@given(rows=st.integers(1, 2**30), cols=st.integers(1, 2**30), sms=st.integers(1, 200),
       vector=st.sampled_from([1, 4]))
def test_every_chosen_kernel_is_compiled(rows, cols, sms, vector):
    strategy = choose_strategy(rows, cols, sms, vector)
    name = (split_kernel(vector) if strategy.kind == "split"
            else grouped_kernel(strategy.group, strategy.vector, strategy.unroll))
    assert name in KERNELS.name_expressions
    assert strategy.kind == "rows" or cols > split_chunk(vector)


# ---- on a GPU -------------------------------------------------------------------------------

AWKWARD = [(1, 1), (1, 1000), (1000, 1), (5, 100003), (7, 8196), (33, 65), (1027, 64),
           (4099, 7), (64, 4099), (3, 4 * split_chunk(4) + 4), (SPLIT_ROWS + 1, 8)]


def strategies(cols):
    vectors = (1, 4) if cols % 4 == 0 else (1,)
    for vector in vectors:
        yield Strategy("split", vector)
        yield Strategy("rows", vector, WARP, OPTIMIZED_UNROLL)
        for group in GROUPS:
            yield Strategy("rows", vector, group, 1)


def staged(rows, cols, offset=0, seed=0):
    """Inputs on the GPU; ``offset`` floats into a larger buffer makes them misaligned."""
    import cupy

    inputs = random_inputs(rows, cols, seed)
    a = cupy.empty(rows * cols + offset, cupy.float32)[offset:].reshape(rows, cols)
    x = cupy.empty(cols + offset, cupy.float32)[offset:]
    a[...] = cupy.asarray(inputs["a"])
    x[...] = cupy.asarray(inputs["x"])
    return inputs, {"a": a, "x": x}


def run_bound(setup, rows, cols, offset=0):
    import cupy

    inputs, on_gpu = staged(rows, cols, offset)
    out = cupy.empty(rows, cupy.float32)
    poison(out)
    bound = setup(on_gpu, out)
    result = bound.run()
    cupy.cuda.Device().synchronize()
    assert result is out
    return compare(cupy.asnumpy(out), matvec.golden(inputs), matvec.tolerance(inputs)), bound


@pytest.mark.gpu
@pytest.mark.parametrize("rows, cols", AWKWARD)
def test_every_optimized_strategy_on_awkward_shapes(rows, cols):
    from loclab.cases.matvec.gpu import bind

    for strategy in strategies(cols):
        check, bound = run_bound(lambda s, o: bind(s, o, strategy), rows, cols)
        assert check.valid, f"{strategy} at {rows}x{cols}: {check.problem}"
        assert bound.params["strategy"] == strategy.kind


@pytest.mark.gpu
@pytest.mark.parametrize("rows, cols", [(33, 64), (7, 8196), (1027, 64), (300, 300)])
def test_misaligned_arrays_take_the_scalar_path(rows, cols, machine):
    from loclab.cases.matvec.gpu import optimized, warp_per_row

    for setup in (optimized, warp_per_row):
        check, bound = run_bound(lambda s, o: setup(s, o, machine), rows, cols, offset=1)
        assert check.valid, f"{setup.__name__} at {rows}x{cols}: {check.problem}"
        assert bound.params["vector"] == 1


@pytest.mark.gpu
def test_optimized_records_its_strategy(machine):
    from loclab.cases.matvec.gpu import optimized

    sms = machine.gpu.sms
    for rows, cols in ((20000, 64), (20000, 1024), (8, 4 * split_chunk(4))):
        check, bound = run_bound(lambda s, o: optimized(s, o, machine), rows, cols)
        assert check.valid, check.problem
        expected = choose_strategy(rows, cols, sms, 4)
        assert bound.params["strategy"] == expected.kind and bound.params["vector"] == 4
