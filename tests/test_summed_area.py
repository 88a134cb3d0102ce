"""The summed-area table case beyond the generic per-variant tests: the golden's definition
and wrap-around, every variant wrapping around, the CPU kernels at random shapes and splits,
sizes that follow the caches, what the declared accesses predict, NumPy emulations of the GPU
kernels' block-level algorithms (no GPU), then on a GPU every variant at sizes beyond the test
sizes and the tiled kernels' two load paths forced (marked gpu)."""

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loclab.cases.summed_area import CASE
from loclab.cases.summed_area.cpu import (LINE_ELEMENTS, band_rows, sat_bands,
                                          sat_rows_then_strips, sat_sequential, strip_width)
from loclab.cases.summed_area.gpu import (KERNELS, LANE_COLS, ROW_SCAN_ITEMS, THREADS,
                                          TILE_COLS, TILE_ROWS, vectorizable)
from loclab.measure.validate import compare, poison
from loclab.model.access import evaluate_sides
from tests.case_runs import run_on_gpu

CPU_VARIANTS = [v.name for v in CASE.variants_on("cpu")]
GPU_VARIANTS = [v.name for v in CASE.variants_on("gpu")]


def variant(name):
    return next(v for v in CASE.variants if v.name == name)


def image(rows, cols, seed=0):
    return CASE.make_inputs({"rows": rows, "cols": cols}, np.random.default_rng(seed))["a"]


def table(a):
    return CASE.golden({"a": a})


# ---- the golden and the case's declarations --------------------------------------------------

@pytest.mark.parametrize("rows, cols", [(1, 1), (3, 5), (6, 2), (4, 7)])
def test_golden_is_the_definition(rows, cols):
    a = image(rows, cols)
    expected = [[int(a[:i + 1, :j + 1].sum()) for j in range(cols)] for i in range(rows)]
    out = table(a)
    assert out.dtype == np.uint32 and out.shape == (rows, cols)
    np.testing.assert_array_equal(out, expected)


# 4200 x 4100 elements of 255 sum to more than 2**32: the table wraps around.
WRAPPING = np.full((4200, 4100), 255, np.uint8)


def test_golden_wraps_modulo_2_to_the_32():
    exact = np.cumsum(np.cumsum(WRAPPING, axis=0, dtype=np.uint64), axis=1, dtype=np.uint64)
    assert exact[-1, -1] > 2**32
    np.testing.assert_array_equal(table(WRAPPING), (exact % 2**32).astype(np.uint32))


def test_inputs_are_bytes_never_zero():
    a = image(300, 301)
    assert a.dtype == np.uint8 and a.shape == (300, 301)
    assert a.min() >= 1 and a.max() == 255


def test_work_is_one_image_read_and_one_table_written():
    work = CASE.work({"rows": 3, "cols": 5})
    assert work.bytes == 15 * (1 + 4) and work.flops == 0


def test_sizes_follow_the_caches(machine):
    cpu = CASE.dims("default", "cpu", machine)[0]
    assert 5 * cpu["rows"] * cpu["cols"] >= 4 * machine.cpu.llc_share_bytes
    assert CASE.dims("default", "gpu", machine) == [{"rows": 8192, "cols": 8192}]
    assert CASE.dims("small", "gpu", machine) == [{"rows": 1024, "cols": 1024}]


@pytest.mark.parametrize("cache", [2**20, 50 * 2**20, 1536 * 2**20])
def test_large_tables_are_at_least_four_caches(cache):
    machine = SimpleNamespace(cpu=SimpleNamespace(llc_bytes=cache),
                              gpu=SimpleNamespace(l2_bytes=cache))
    for device in ("cpu", "gpu"):
        (dims,) = CASE.dims("large", device, machine)
        assert 4 * dims["rows"] * dims["cols"] >= 4 * cache
        assert dims["rows"] >= 16384 and dims["rows"] % 1024 == 0


def test_test_sizes_cover_the_edges():
    dims = {(d["rows"], d["cols"]) for d in CASE.test_dims}
    assert {(1, 1), (1, 33), (33, 1), (31, 32), (32, 33), (65, 257), (127, 129)} <= dims
    # a last tile (128 x 128) of one row and one column; a row one past a row-scan chunk
    assert (TILE_ROWS + 1, TILE_COLS + 1) in dims
    assert any(c == THREADS * ROW_SCAN_ITEMS + 1 for _, c in dims)
    # the vector path with a last strip of one word per lane
    assert any(c % 4 == 0 and c % TILE_COLS == LANE_COLS for _, c in dims)


def test_declared_accesses_show_the_lesson():
    """The naive row pass is uncoalesced, the tiles' row segments coalesced, the padded row-scan
    tile free of bank conflicts."""
    dims = {"rows": 8192, "cols": 8192}

    def predictions(kernel):
        declared = KERNELS.accesses_of(kernel)
        params = declared.parameters(kernel, dims)
        block = evaluate_sides(declared.block, params)
        return [(a, a.predict(block, params)) for a in declared.accesses]

    naive = predictions("sat_rows_naive<256>")
    assert all(p.sectors_per_request == 32 for _, p in naive)
    tiled = predictions("sat_tile_scan<128,4,8>")
    by_array = {a.text.partition("[")[0]: p for a, p in tiled}
    assert by_array["a"].sectors_per_request == 4  # 128 bytes
    assert by_array["out"].sectors_per_request == 16  # 512 bytes
    for access, prediction in predictions("sat_row_scan<4,256,8>"):
        if access.space == "shared":
            assert prediction.conflict_degree == 1, access.text


# ---- CPU variants ----------------------------------------------------------------------------

@pytest.mark.parametrize("name", CPU_VARIANTS)
def test_cpu_variant_wraps_around(name, machine):
    out = np.full(WRAPPING.shape, 7, np.uint32)
    result = variant(name).setup({"a": WRAPPING}, out, machine).run()
    np.testing.assert_array_equal(result, table(WRAPPING))


@settings(max_examples=60, deadline=None)
@given(rows=st.integers(1, 150), cols=st.integers(1, 150), band=st.integers(1, 160),
       strip=st.integers(1, 160), seed=st.integers(0, 2**16))
def test_cpu_kernels_at_any_shape_and_split(rows, cols, band, strip, seed):
    a = image(rows, cols, seed)
    expected = table(a)
    out = np.full((rows, cols), 2**32 - 1, np.uint32)
    np.testing.assert_array_equal(sat_sequential(a, out), expected)
    out.fill(2**32 - 1)
    np.testing.assert_array_equal(sat_rows_then_strips(a, out, strip), expected)
    out.fill(2**32 - 1)
    carries = np.full((-(-rows // band) + 1, cols), 2**32 - 1, np.uint32)
    np.testing.assert_array_equal(sat_bands(a, out, carries, band), expected)


@given(cols=st.integers(1, 10**6), threads=st.integers(1, 256))
def test_strips_are_whole_lines_one_per_thread(cols, threads):
    strip = strip_width(cols, threads)
    assert strip % LINE_ELEMENTS == 0
    assert -(-cols // strip) <= threads
    assert strip == LINE_ELEMENTS or -(-cols // (strip - LINE_ELEMENTS)) > threads


@given(rows=st.integers(1, 10**6), threads=st.integers(1, 256))
def test_bands_are_one_per_thread(rows, threads):
    band = band_rows(rows, threads)
    assert -(-rows // band) <= threads and (band == 1 or -(-rows // (band - 1)) > threads)


# ---- the GPU kernels' algorithms, emulated with NumPy (no GPU) -------------------------------

def emulate_row_scan(row, threads, items):
    """kernels.cu's scan_rows on one row: chunks of threads x items, each thread scanning its
    items consecutive elements, a block-wide exclusive scan of the threads' sums, a carry."""
    chunk = threads * items
    out = np.empty(row.size, np.uint32)
    carry = np.uint32(0)
    for k0 in range(0, row.size, chunk):
        tile = np.zeros(chunk, np.uint32)
        piece = row[k0:k0 + chunk].astype(np.uint32)
        tile[:piece.size] = piece
        owned = tile.reshape(threads, items).cumsum(axis=1, dtype=np.uint32)
        sums = owned[:, -1]
        offsets = np.cumsum(sums, dtype=np.uint32) - sums + carry
        scanned = (owned + offsets[:, None]).reshape(-1)
        out[k0:k0 + piece.size] = scanned[:piece.size]
        carry = np.uint32(carry + sums.sum(dtype=np.uint32))
    return out


def emulate_tiles(a, tile_rows):
    """gpu-coalesced-columns: tile totals, the carries' scans, then each tile's rows from its
    carries with a lane-level prefix and a warp-level scan, as kernels.cu does."""
    rows, cols = a.shape
    bands, strips = -(-rows // tile_rows), -(-cols // TILE_COLS)
    col_totals = np.zeros((bands, cols), np.uint32)
    row_totals = np.zeros((strips, rows), np.uint32)
    tiles = [(b, s) for b in range(bands) for s in range(strips)]
    for band, strip in tiles:
        block = a[band * tile_rows:(band + 1) * tile_rows,
                  strip * TILE_COLS:(strip + 1) * TILE_COLS].astype(np.uint32)
        col_totals[band, strip * TILE_COLS:strip * TILE_COLS + block.shape[1]] = block.sum(0)
        row_totals[strip, band * tile_rows:band * tile_rows + block.shape[0]] = block.sum(1)
    sums_above = np.cumsum(col_totals, axis=0, dtype=np.uint32) - col_totals  # exclusive
    row_offsets = np.cumsum(row_totals, axis=0, dtype=np.uint32) - row_totals
    top = np.cumsum(sums_above, axis=1, dtype=np.uint32)
    out = np.full((rows, cols), 2**32 - 1, np.uint32)
    for band, strip in tiles:
        c0, c1 = strip * TILE_COLS, min((strip + 1) * TILE_COLS, cols)
        col = np.zeros(TILE_COLS, np.uint32)
        col[:c1 - c0] = top[band, c0:c1]
        for r in range(band * tile_rows, min((band + 1) * tile_rows, rows)):
            word = np.zeros(TILE_COLS, np.uint32)
            word[:c1 - c0] = a[r, c0:c1]
            prefix = word.reshape(32, LANE_COLS).cumsum(axis=1, dtype=np.uint32)
            lane_sums = prefix[:, -1]
            before = np.cumsum(lane_sums, dtype=np.uint32) - lane_sums + row_offsets[strip, r]
            col += (prefix + before[:, None]).reshape(-1)
            out[r, c0:c1] = col[:c1 - c0]
    return out


@settings(max_examples=40, deadline=None)
@given(cols=st.integers(1, 300), threads=st.sampled_from([32, 64, 256]),
       items=st.integers(1, 9), seed=st.integers(0, 2**16))
def test_row_scan_algorithm(cols, threads, items, seed):
    row = image(1, cols, seed)[0]
    np.testing.assert_array_equal(emulate_row_scan(row, threads, items),
                                  np.cumsum(row, dtype=np.uint32))


@settings(max_examples=25, deadline=None)
@given(rows=st.integers(1, 200), cols=st.integers(1, 300),
       tile_rows=st.sampled_from([32, 64, TILE_ROWS]), seed=st.integers(0, 2**16))
def test_tile_algorithm(rows, cols, tile_rows, seed):
    a = image(rows, cols, seed)
    np.testing.assert_array_equal(emulate_tiles(a, tile_rows), table(a))


def fake_array(cols, ptr):
    return SimpleNamespace(shape=(3, cols), data=SimpleNamespace(ptr=ptr))


@pytest.mark.parametrize("cols, a_ptr, out_ptr, expected", [
    (8192, 256, 512, True), (8191, 256, 512, False), (8192, 257, 512, False),
    (8192, 260, 512, True), (8192, 256, 520, False)])
def test_vector_path_needs_aligned_rows(cols, a_ptr, out_ptr, expected):
    assert vectorizable(fake_array(cols, a_ptr), fake_array(cols, out_ptr)) is expected


# ---- on a GPU --------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("name", GPU_VARIANTS)
def test_gpu_variant_at_sizes_beyond_the_test_sizes(name, machine):
    """The small preset's size (whole 128 x 128 tiles), and one of partial last tiles."""
    for dims in ({"rows": 1000, "cols": 1000}, {"rows": 1024, "cols": 1024}):
        check, _ = run_on_gpu(CASE, variant(name), dims, machine)
        assert check.valid, f"{name} at {dims}: {check.problem}"


@pytest.mark.gpu
@pytest.mark.parametrize("name", GPU_VARIANTS)
def test_gpu_variant_wraps_around(name, machine):
    import cupy

    out = cupy.full(WRAPPING.shape, 7, cupy.uint32)
    result = variant(name).setup({"a": cupy.asarray(WRAPPING)}, out, machine).run()
    np.testing.assert_array_equal(cupy.asnumpy(result), table(WRAPPING))


def on_gpu_at(a, offset):
    """The image ``a`` on the GPU, ``offset`` bytes into a larger buffer (misaligned, unless
    0), and a poisoned table for it."""
    import cupy

    on_gpu = cupy.empty(a.size + offset, cupy.uint8)[offset:].reshape(a.shape)
    on_gpu[...] = cupy.asarray(a)
    out = cupy.empty(a.shape, cupy.uint32)
    poison(out)
    return on_gpu, out


def run_tiled(a, vector, offset=0):
    """gpu-coalesced-columns forced to ``vector``, on the image ``offset`` bytes into a buffer."""
    import cupy

    from loclab.cases.summed_area.gpu import tiled

    on_gpu, out = on_gpu_at(a, offset)
    bound = tiled({"a": on_gpu}, out, vector)
    result = bound.run()
    cupy.cuda.Device().synchronize()
    assert result is out and bound.params["vector"] == vector
    return compare(cupy.asnumpy(out), table(a), 0.0)


@pytest.mark.gpu
@pytest.mark.parametrize("dims", CASE.test_dims, ids=lambda d: f"{d['rows']}x{d['cols']}")
def test_tiled_kernels_on_both_load_paths(dims):
    a = image(dims["rows"], dims["cols"])
    for vector in (1, 4) if dims["cols"] % 4 == 0 else (1,):
        check = run_tiled(a, vector)
        assert check.valid, f"vector {vector} at {dims}: {check.problem}"


@pytest.mark.gpu
@pytest.mark.parametrize("rows, cols", [(300, 132), (1000, 1024)])
def test_misaligned_image_takes_the_scalar_path(rows, cols, machine):
    import cupy

    from loclab.cases.summed_area.gpu import coalesced_columns

    a = image(rows, cols)
    on_gpu, out = on_gpu_at(a, 1)
    bound = coalesced_columns({"a": on_gpu}, out, machine)
    bound.run()
    assert bound.params["vector"] == 1
    np.testing.assert_array_equal(cupy.asnumpy(out), table(a))
    assert run_tiled(a, 1, offset=3).valid
