"""The sparse matrix-vector product case beyond the generic per-variant tests: the matrices
each kind makes, golden, sizes, the CPU variants on random CSR matrices (row by row, not only
normwise), NumPy emulations of the merge-path partition and of both tiled GPU kernels'
algorithms (no GPU needed), then every GPU variant row by row (marked gpu)."""

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loclab.cases import spmv
from loclab.cases.base import summation_tolerance, uniform_nonzero
from loclab.cases.spmv import CASE, ONE_ROW, POWER_LAW, UNIFORM
from loclab.cases.spmv import gpu as spmv_gpu
from loclab.errors import UsageError
from loclab.measure.validate import compare
from tests.case_runs import read_only, run_on_gpu

CPU_VARIANTS = [v.name for v in CASE.variants_on("cpu")]
GPU_VARIANTS = [v.name for v in CASE.variants_on("gpu")]


def variant(name):
    return next(v for v in CASE.variants if v.name == name)


def row_problem(result, inputs):
    """Why ``result`` is not golden row by row (each row within its own bound, empty rows
    exactly 0: the case's tolerance), or None."""
    return compare(np.asarray(result), CASE.golden(inputs), CASE.tolerance_for(inputs)).problem


def csr_inputs(lengths, cols, seed=0):
    """Inputs for a matrix with these row lengths: sorted distinct random columns per row."""
    rng = np.random.default_rng(seed)
    lengths = np.asarray(lengths, np.int64)
    indptr = np.zeros(lengths.size + 1, np.int32)
    indptr[1:] = np.cumsum(lengths)
    indices = np.concatenate([np.sort(rng.choice(cols, n, replace=False)) for n in lengths]
                             + [np.zeros(0, np.int64)]).astype(np.int32)
    return {"data": uniform_nonzero(rng, int(indptr[-1])), "indices": indices,
            "indptr": indptr, "x": uniform_nonzero(rng, cols)}


@st.composite
def csr_matrices(draw, max_rows=40, max_cols=40, max_row=15):
    """Random CSR inputs of at least one nonzero, many with empty rows (at the ends too)."""
    rows, cols = draw(st.integers(1, max_rows)), draw(st.integers(1, max_cols))
    lengths = draw(st.lists(st.integers(0, min(cols, max_row)), min_size=rows, max_size=rows)
                   .filter(lambda ls: sum(ls) > 0))
    return csr_inputs(lengths, cols, draw(st.integers(0, 2**16)))


# ---- inputs, golden, sizes -----------------------------------------------------------------

def check_csr(inputs, dims):
    """A valid CSR matrix of ``dims``: offsets from 0 to nnz, sorted distinct columns in range."""
    data, indices, indptr, x = (inputs[k] for k in ("data", "indices", "indptr", "x"))
    assert indptr.dtype == indices.dtype == np.int32 and data.dtype == x.dtype == np.float32
    assert indptr.shape == (dims["rows"] + 1,) and x.shape == (dims["cols"],)
    assert data.shape == indices.shape == (dims["nnz"],)
    assert indptr[0] == 0 and indptr[-1] == dims["nnz"] and (np.diff(indptr) >= 0).all()
    assert data.min() > 0 and data.max() <= 1 and x.min() > 0 and x.max() <= 1
    assert indices.min() >= 0 and indices.max() < dims["cols"]
    rows = np.repeat(np.arange(dims["rows"]), np.diff(indptr))
    keys = rows.astype(np.int64) * dims["cols"] + indices
    assert (np.diff(keys) > 0).all()  # sorted within rows, distinct


@pytest.mark.parametrize("dims", CASE.test_dims, ids=lambda d: "x".join(map(str, d.values())))
def test_every_test_size_makes_a_valid_matrix(dims):
    check_csr(CASE.make_inputs(dims, np.random.default_rng(0)), dims)


def test_uniform_rows_differ_by_at_most_one():
    dims = {"rows": 1000, "cols": 5000, "nnz": 16_500, "kind": UNIFORM}
    lengths = np.diff(CASE.make_inputs(dims, np.random.default_rng(0))["indptr"])
    assert set(lengths.tolist()) == {16, 17} and lengths.sum() == 16_500


def test_power_law_rows_are_mostly_short_with_a_few_at_the_longest():
    dims = {"rows": 2**16, "cols": 2**16, "nnz": 2**20, "kind": POWER_LAW}
    lengths = np.diff(CASE.make_inputs(dims, np.random.default_rng(0))["indptr"])
    longest = spmv.longest_row(dims)
    assert longest == round(2**(20 * 2 / 3))
    assert lengths.max() == longest and 0 < np.count_nonzero(lengths == longest) < 100
    assert np.mean(lengths == 0) > 0.1 and np.mean(lengths <= 1) > 0.3
    assert np.count_nonzero(lengths > spmv_gpu.SCAN_TILE) > 10


def test_one_row_holds_every_nonzero_in_the_middle():
    dims = {"rows": 1025, "cols": 7000, "nnz": 6999, "kind": ONE_ROW}
    lengths = np.diff(CASE.make_inputs(dims, np.random.default_rng(0))["indptr"])
    assert lengths[512] == 6999 and np.count_nonzero(lengths) == 1


@given(weights=st.lists(st.floats(1e-6, 1e6), min_size=1, max_size=60),
       data=st.data())
def test_apportion_sums_to_the_total_and_respects_the_cap(weights, data):
    weights = np.array(weights)
    cap = data.draw(st.integers(1, 50))
    total = data.draw(st.integers(0, cap * weights.size))
    lengths = spmv.apportion(weights, total, cap)
    assert lengths.sum() == total and lengths.min() >= 0 and lengths.max() <= cap


def test_test_sizes_reach_the_adversarial_inputs():
    """Rows of length 0 at both ends, every row empty but one, a full column, a full matrix,
    rows longer than a GPU tile of either tiled kernel, and tile boundaries hit exactly."""
    found = {name: False for name in ("empty ends", "one nonempty", "cols=1", "full",
                                      "longer than a tile", "merge tiles exact",
                                      "scan tiles plus one")}
    for dims in CASE.test_dims:
        lengths = np.diff(CASE.make_inputs(dims, np.random.default_rng(0))["indptr"])
        found["empty ends"] |= lengths[0] == 0 and lengths[-1] == 0
        found["one nonempty"] |= dims["rows"] > 1 and np.count_nonzero(lengths) == 1
        found["cols=1"] |= dims["cols"] == 1
        found["full"] |= dims["nnz"] == dims["rows"] * dims["cols"] > 1
        found["longer than a tile"] |= lengths.max() > max(spmv_gpu.SCAN_TILE,
                                                           spmv_gpu.MERGE_TILE)
        found["merge tiles exact"] |= (dims["rows"] + dims["nnz"]) % spmv_gpu.MERGE_TILE == 0
        found["scan tiles plus one"] |= dims["nnz"] % spmv_gpu.SCAN_TILE == 1
    assert all(found.values()), found


@pytest.mark.parametrize("seed", range(3))
def test_golden_is_the_row_loop(seed):
    inputs = CASE.make_inputs({"rows": 9, "cols": 11, "nnz": 40, "kind": POWER_LAW},
                              np.random.default_rng(seed))
    data, indices, indptr, x = (inputs[k] for k in ("data", "indices", "indptr", "x"))
    expected = [sum(float(data[j]) * float(x[indices[j]]) for j in range(indptr[r], indptr[r + 1]))
                for r in range(9)]
    np.testing.assert_array_equal(CASE.golden(inputs), np.array(expected).astype(np.float32))


def test_golden_and_inputs_work_a_chunk_of_rows_at_a_time(monkeypatch):
    dims = {"rows": 300, "cols": 400, "nnz": 5000, "kind": POWER_LAW}
    whole = CASE.make_inputs(dims, np.random.default_rng(4))
    monkeypatch.setattr(spmv, "ROW_CHUNK", 64)
    chunked = CASE.make_inputs(dims, np.random.default_rng(4))
    check_csr(chunked, dims)
    np.testing.assert_array_equal(chunked["indptr"], whole["indptr"])
    np.testing.assert_array_equal(CASE.golden(whole), spmv.golden(whole))
    assert len(list(spmv.row_chunks(whole["indptr"], 64))) > 10


def test_work_counts_the_csr_arrays_x_and_y_once():
    work = CASE.work({"rows": 3, "cols": 5, "nnz": 7, "kind": 0})
    assert work.bytes == 8 * 7 + 4 * 4 + 4 * 5 + 4 * 3 and work.flops == 14 and work.items == 7
    assert CASE.unit == "nonzeros"


def test_each_row_is_held_to_its_own_bound():
    inputs = CASE.make_inputs({"rows": 257, "cols": 300, "nnz": 4000, "kind": POWER_LAW},
                              np.random.default_rng(0))
    lengths = np.diff(inputs["indptr"])
    golden = CASE.golden(inputs)
    bounds = CASE.tolerance_for(inputs)
    assert bounds.shape == golden.shape
    np.testing.assert_allclose(bounds, summation_tolerance(lengths) * golden, rtol=1e-6)
    assert np.all(bounds[lengths == 0] == 0)  # an empty row must be exactly 0
    # a dropped nonzero in the longest row fails
    wrong = golden.copy()
    longest = int(np.argmax(lengths))
    j = int(inputs["indptr"][longest])
    wrong[longest] -= inputs["data"][j] * inputs["x"][inputs["indices"][j]]
    assert not compare(wrong, golden, bounds).valid
    # and so does a short row off by far less than the longest row's normwise tolerance
    short = int(np.flatnonzero(lengths == 1)[0])
    wrong = golden.copy()
    wrong[short] *= 1 + 1e-4
    assert compare(wrong, golden, summation_tolerance(int(lengths.max()))).valid
    assert not compare(wrong, golden, bounds).valid


@pytest.mark.parametrize("dims, message", [
    ({"rows": 2, "cols": 3, "nnz": 7, "kind": 0}, "do not fit 2 x 3"),
    ({"rows": 5, "cols": 3, "nnz": 4, "kind": 2}, "one row holds at most cols = 3"),
    ({"rows": 2**20, "cols": 2**20, "nnz": 2**31, "kind": 0}, "int32"),
])
def test_bad_sizes_are_refused_in_one_line(dims, message):
    with pytest.raises(UsageError, match=message) as error:
        spmv.check_dims(dims)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("dims", [{"rows": 4, "cols": 4, "nnz": 4, "kind": 3},
                                  {"rows": 4, "cols": 4, "nnz": 2**31, "kind": 0}])
def test_checked_dims_refuse_kinds_and_counts_out_of_range(dims):
    with pytest.raises(UsageError):
        CASE.checked_dims(dims)


def test_default_sizes_are_both_kinds_of_the_same_matrix(machine):
    for device, rows in (("cpu", 2**18), ("gpu", 2**22)):
        sizes = CASE.dims("default", device, machine)
        assert [d["kind"] for d in sizes] == [UNIFORM, POWER_LAW]
        assert all(d == {"rows": rows, "cols": rows, "nnz": 16 * rows, "kind": d["kind"]}
                   for d in sizes)
    assert CASE.work(CASE.dims("default", "gpu", machine)[0]).bytes > 4 * 126 * 2**20


@pytest.mark.parametrize("cache", [2**20, 50 * 2**20, 1536 * 2**20])
def test_large_matrices_are_at_least_four_caches(cache):
    machine = SimpleNamespace(cpu=SimpleNamespace(llc_bytes=cache),
                              gpu=SimpleNamespace(l2_bytes=cache))
    for device in ("cpu", "gpu"):
        sizes = CASE.dims("large", device, machine)
        assert [d["kind"] for d in sizes] == [UNIFORM, POWER_LAW]
        for dims in sizes:
            CASE.checked_dims(dims)
            assert CASE.work(dims).bytes >= 4 * cache


# ---- CPU variants ----------------------------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(inputs=csr_matrices())
def test_cpu_variants_row_by_row_on_random_matrices(inputs, machine):
    for name in CPU_VARIANTS:
        out = np.full(inputs["indptr"].size - 1, np.nan, np.float32)
        result = variant(name).setup(read_only(inputs), out, machine).run()
        assert row_problem(result, inputs) is None, name


@settings(max_examples=60, deadline=None)
@given(inputs=csr_matrices(), shares=st.integers(1, 50))
def test_cpu_merge_path_at_any_number_of_shares(inputs, shares):
    from loclab.cases.spmv.cpu import spmv_merge

    rows = inputs["indptr"].size - 1
    out = np.full(rows, np.nan, np.float32)
    spmv_merge(inputs["data"], inputs["indices"], inputs["indptr"], inputs["x"], out,
               np.empty(shares, np.int64), np.empty(shares, np.float32))
    assert row_problem(out, inputs) is None


@pytest.mark.parametrize("kind", [UNIFORM, POWER_LAW])
def test_cpu_variants_row_by_row_where_long_rows_hide_short_ones(kind, machine):
    dims = {"rows": 20_000, "cols": 20_000, "nnz": 320_000, "kind": kind}
    inputs = CASE.make_inputs(dims, np.random.default_rng(7))
    for name in CPU_VARIANTS:
        out = np.full(dims["rows"], np.nan, np.float32)
        result = variant(name).setup(read_only(inputs), out, machine).run()
        assert row_problem(result, inputs) is None, name


# ---- the merge path, emulated in NumPy -------------------------------------------------------

def merge_path_rows(diagonals, rows, nnz, first, row_end):
    """The kernels' merge_path_rows for many diagonals at once: the least r with
    row_end[r] > first + diagonal - r - 1 (row_end indexed by r < rows)."""
    diagonals = np.asarray(diagonals, np.int64)
    low = np.maximum(diagonals - nnz, 0)
    high = np.minimum(diagonals, rows)
    while (low < high).any():
        active = low < high
        mid = (low + high) // 2
        ends = row_end[np.minimum(mid, rows - 1)]  # (runs only while some low < high <= rows)
        right = active & (ends <= first + diagonals - mid - 1)
        low = np.where(right, mid + 1, low)
        high = np.where(active & ~right, mid, high)
    return low


def merge_tiles(indptr, tile):
    """The tiles of ``tile`` merge items (rows ended and nonzeros) as spmv_merge_tiles places
    them, by a search over the whole matrix: for each, its number of items, its first and end
    row, its first and end nonzero, and its row ends as loaded into shared memory (the
    sentinel, its end nonzero, last)."""
    rows, nnz = indptr.size - 1, int(indptr[-1])
    total = rows + nnz
    tiles = -(-total // tile)
    tile_row = merge_path_rows(np.minimum(np.arange(tiles + 1) * tile, total), rows, nnz, 0,
                               indptr[1:])
    for b in range(tiles):
        item0, item1 = b * tile, min((b + 1) * tile, total)
        row0, row1 = int(tile_row[b]), int(tile_row[b + 1])
        nz0, nz1 = item0 - row0, item1 - row1
        yield item1 - item0, row0, row1, nz0, nz1, np.append(indptr[row0 + 1:row1 + 1], nz1)


def merge_coordinates(indptr, threads, items):
    """(rows, nonzeros) before every thread's first item, found as the GPU finds them: each
    tile's start by a search over the whole matrix (spmv_merge_tiles), each thread's by a
    search in its tile's row ends as loaded into shared memory, sentinel included
    (spmv_merge_path); and the same by a search over the whole matrix, to compare."""
    rows, nnz = indptr.size - 1, int(indptr[-1])
    found = []
    for count, row0, row1, nz0, nz1, row_ends in merge_tiles(indptr, threads * items):
        diagonals = np.minimum(np.arange(threads) * items, count)
        local = merge_path_rows(diagonals, row1 - row0, nz1 - nz0, nz0, row_ends)
        found += [(row0 + int(r), nz0 + int(d - r)) for r, d in zip(local, diagonals)]
    found.append((rows, nnz))
    starts = np.minimum(np.arange(len(found) - 1) * items, rows + nnz)  # per thread, global
    whole = merge_path_rows(starts, rows, nnz, 0, indptr[1:])
    direct = [(int(r), int(d - r)) for r, d in zip(whole, starts)] + [(rows, nnz)]
    return found, direct


@settings(max_examples=200, deadline=None)
@given(inputs=csr_matrices(max_rows=60, max_row=30), threads=st.sampled_from([1, 2, 4, 32]),
       items=st.integers(1, 9))
def test_merge_path_partition_covers_every_row_and_nonzero_once(inputs, threads, items):
    indptr = inputs["indptr"]
    rows, nnz = indptr.size - 1, int(indptr[-1])
    found, direct = merge_coordinates(indptr, threads, items)
    assert found == direct  # two-level search (tiles, then threads in shared memory) = one
    row_of = np.repeat(np.arange(rows), np.diff(indptr))
    ends_seen, nonzeros_seen = np.zeros(rows, int), np.zeros(nnz, int)
    for (r, z), (r_next, z_next) in zip(found, found[1:]):
        # a point of the merge path: rows before r have ended by nonzero z, row r has not
        assert indptr[r] <= z and (r == rows or z <= indptr[r + 1])
        assert r <= r_next and z <= z_next and (r_next - r) + (z_next - z) <= items
        ends_seen[r:r_next] += 1
        nonzeros_seen[z:z_next] += 1
        # the thread's nonzeros belong to the rows it ends, or to the one it carries on
        assert ((row_of[z:z_next] >= r) & (row_of[z:z_next] <= r_next)).all()
    assert (ends_seen == 1).all() and (nonzeros_seen == 1).all()


# ---- the tiled kernels' algorithms, emulated (float64 sums: only the logic is tested) -----

def products_of(inputs):
    return (inputs["data"].astype(np.float64)
            * inputs["x"].astype(np.float64)[inputs["indices"]])


def exclusive_scan(pairs, op):
    """The block's exclusive scan of (row, sum) pairs, left identity (-1, 0)."""
    out, run = [], (-1, 0.0)
    for pair in pairs:
        out.append(run)
        run = op(run, pair)
    return out, run


def heads_op(a, b):
    return b if b[0] != -1 else (a[0], a[1] + b[1])


def rows_op(a, b):
    return (b[0], a[1] + b[1] if a[0] == b[0] else b[1])


def emulate_merge_path(inputs, threads, items):
    """spmv_merge_tiles, spmv_merge_path (two walks around the scan) and spmv_merge_fixup."""
    indptr = inputs["indptr"]
    rows = indptr.size - 1
    products = products_of(inputs)
    y = np.full(rows, np.nan)
    written = np.zeros(rows, int)
    carries = []
    for count, row0, row1, nz0, nz1, row_ends in merge_tiles(indptr, threads * items):

        def walk(row, nz, total_sum, steps, write):
            for _ in range(steps):
                if nz < row_ends[row]:
                    total_sum += products[nz]
                    nz += 1
                else:
                    if write:
                        y[row0 + row] = total_sum
                        written[row0 + row] += 1
                    total_sum = 0.0
                    row += 1
            return row, total_sum

        starts = []
        for t in range(threads):
            diagonal = min(t * items, count)
            first = int(merge_path_rows([diagonal], row1 - row0, nz1 - nz0, nz0, row_ends)[0])
            starts.append((first, nz0 + diagonal - first, min(items, count - diagonal)))
        pairs = [walk(first, nz, 0.0, steps, False) for first, nz, steps in starts]
        before, _ = exclusive_scan(pairs, rows_op)
        for (first, nz, steps), prefix in zip(starts, before):
            end = walk(first, nz, prefix[1] if prefix[0] == first else 0.0, steps, True)
        assert end[0] == row1 - row0  # the last thread ends where the tile does
        carries.append((row1, end[1]))
    assert (written == 1).all()  # every row, empty or not, written once before the fix-up
    for row, carry in carries:
        if row < rows:
            y[row] += carry
    return y


def emulate_segmented_scan(inputs, threads, items):
    """spmv_tile_rows and spmv_segmented_scan, step by step (y zeroed first)."""
    indptr = inputs["indptr"]
    rows, nnz = indptr.size - 1, int(indptr[-1])
    products = products_of(inputs)
    y = np.zeros(rows)
    stored, added = np.zeros(rows, int), np.zeros(rows, int)
    tile = threads * items

    def row_of(t):  # the last row r with indptr[r] <= t
        return int(np.searchsorted(indptr, t, side="right")) - 1

    for start in range(0, nnz, tile):
        count = min(tile, nnz - start)
        first, last = row_of(start), row_of(start + count - 1)
        heads = [-1] * count
        for row in range(first, last + 1):
            if start <= indptr[row] < indptr[row + 1]:
                heads[indptr[row] - start] = row
        elements = [(heads[i], products[start + i]) for i in range(count)]
        own = []
        for t in range(threads):
            run = (-1, 0.0)
            for pair in elements[t * items:(t + 1) * items]:
                run = heads_op(run, pair)
            own.append(run)
        before, _ = exclusive_scan(own, heads_op)
        for t in range(threads):
            run = before[t] if before[t][0] != -1 else (first, before[t][1])
            for i in range(t * items, min((t + 1) * items, count)):
                run = heads_op(run, elements[i])
                if i == count - 1 or heads[i + 1] != -1:
                    if run[0] == first or i == count - 1:
                        y[run[0]] += run[1]
                        added[run[0]] += 1
                    else:
                        y[run[0]] = run[1]
                        stored[run[0]] += 1
    assert (stored <= 1).all() and not ((stored > 0) & (added > 0)).any()  # a stored row is whole
    assert (stored + added > 0).sum() == np.count_nonzero(np.diff(indptr))
    return y


@settings(max_examples=150, deadline=None)
@given(inputs=csr_matrices(max_rows=60, max_row=30), threads=st.sampled_from([1, 2, 4, 32]),
       items=st.integers(1, 9))
def test_tiled_kernel_algorithms_sum_every_row(inputs, threads, items):
    want = (np.bincount(np.repeat(np.arange(inputs["indptr"].size - 1),
                                  np.diff(inputs["indptr"])), weights=products_of(inputs),
                        minlength=inputs["indptr"].size - 1))
    for emulate in (emulate_merge_path, emulate_segmented_scan):
        np.testing.assert_allclose(emulate(inputs, threads, items), want, rtol=1e-12,
                                   err_msg=emulate.__name__)


@pytest.mark.parametrize("dims", [{"rows": 1025, "cols": 7000, "nnz": 6999, "kind": ONE_ROW},
                                  {"rows": 4099, "cols": 4099, "nnz": 70001, "kind": POWER_LAW}])
def test_tiled_kernel_algorithms_at_the_gpu_tile_sizes(dims):
    inputs = CASE.make_inputs(dims, np.random.default_rng(0))
    want = CASE.golden(inputs)
    for emulate, threads, items in ((emulate_merge_path, spmv_gpu.MERGE_THREADS,
                                     spmv_gpu.MERGE_ITEMS),
                                    (emulate_segmented_scan, spmv_gpu.SCAN_THREADS,
                                     spmv_gpu.SCAN_ITEMS)):
        check = compare(emulate(inputs, threads, items).astype(np.float32), want, 1e-6)
        assert check.valid, (emulate.__name__, check.problem)


@pytest.mark.parametrize("rows, nnz, lanes", [(10, 10, 1), (10, 11, 2), (4, 64, 16),
                                              (4, 65, 32), (1, 10**6, 32), (10**6, 1, 1)])
def test_lanes_per_row_cover_the_mean_row(rows, nnz, lanes):
    assert spmv_gpu.lanes_per_row(rows, nnz) == lanes
    assert spmv_gpu.grouped_kernel(lanes) in spmv_gpu.KERNELS.name_expressions


# ---- on a GPU ----------------------------------------------------------------------------------

def gpu_row_problem(name, dims, machine, seed=0):
    """Run GPU variant ``name`` at ``dims`` (checked normwise, as every variant is), then again:
    why the second run's output is not golden row by row, or None. The second run starts from
    what the first left (y, the searches' scratch arrays)."""
    import cupy

    inputs = CASE.make_inputs(dims, np.random.default_rng(seed))
    check, bound = run_on_gpu(CASE, variant(name), dims, machine, inputs=inputs)
    assert check.valid, f"{name} at {dims}: {check.problem}"
    return row_problem(cupy.asnumpy(bound.run()), inputs)


@pytest.mark.gpu
@pytest.mark.parametrize("name", GPU_VARIANTS)
def test_gpu_variant_matches_golden_row_by_row_at_every_test_size(name, machine):
    for dims in CASE.test_dims:
        assert gpu_row_problem(name, dims, machine) is None, f"{name} at {dims}"


@pytest.mark.gpu
@pytest.mark.parametrize("kind", [UNIFORM, POWER_LAW, ONE_ROW])
@pytest.mark.parametrize("name", GPU_VARIANTS)
def test_gpu_variant_row_by_row_on_a_large_matrix(name, kind, machine):
    dims = {"rows": 2**18, "cols": 2**18, "nnz": 2**18 if kind == ONE_ROW else 2**22,
            "kind": kind}
    assert gpu_row_problem(name, dims, machine, seed=3) is None


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["gpu-segmented-scan", "gpu-merge-path"])
def test_gpu_tiled_variants_twice_in_a_row(name, machine):
    """A second run starts from the first's y and the searches' scratch arrays."""
    dims = {"rows": 4099, "cols": 4099, "nnz": 70001, "kind": POWER_LAW}
    assert gpu_row_problem(name, dims, machine) is None
