"""Sparse matrix-vector product in CSR, the lectures' segmented-scan application (``y = A x``).

A CSR matrix stores its nonzeros row after row: ``data`` (float32 values), ``indices`` (int32
column of each) and ``indptr`` (int32, rows + 1: row r holds nonzeros ``indptr[r]`` to
``indptr[r + 1]``). Every nonzero is used once, so the product is memory-bound like the dense
one (matvec), with two differences. x is gathered through the column indices: data-dependent
loads that hit a random sector of x each time, served by the cache only while x fits in it. And
the rows have different lengths, so any mapping of rows to threads is a bet on their lengths.
On an H100 at the default size (x of 16 MB fits the L2), the variants that balance their work
and cuSPARSE all run at about 30% of the copy roof: each 4-byte gather of x moves a 32-byte
sector from L2, and L2 bounds them (every merge-path tile shape tried ran within 5%).

- ``gpu-row-per-thread``, the scalar CSR kernel: a thread walks a row alone. A warp's loads
  are a row apart (uncoalesced), and a warp lasts as long as its longest row: on a power-law
  matrix one thread may walk a hundred thousand nonzeros while the rest of the GPU idles.
- ``gpu-warp-per-row``, vector CSR: a group of lanes per row (a power of two from the mean row
  length, at most a warp) strides along it, coalesced, then a shuffle sum. Long rows still
  fall on one group.
- ``gpu-segmented-scan``, the lecture's formulation: form every product, then a segmented scan
  by row (heads where rows start) leaves each row's sum at its last product. Each block scans
  a tile of consecutive nonzeros: products in shared memory, head flags scattered from
  ``indptr`` carrying the row index, a serial segmented sum per thread and a segmented scan
  across the block's threads. Work is balanced by nonzeros whatever the row lengths; a row's
  total is stored at its end, but a row that crosses a tile boundary is added into y (zeroed
  first) with atomicAdd by each tile it spans, and rows of length 0 are the zero left there.
  The lecture scans backwards and gathers the totals at row heads; forwards with totals at row
  ends is the same scan.
- ``gpu-merge-path``, Merrill and Garland's merge-based CSR (SC 2016): the rows' ends and the
  nonzeros are two sorted lists; merging them is the SpMV's sequential loop (add the next
  nonzero while it belongs to the current row, else end the row). Every thread takes an equal
  share of the rows + nnz merge items, found by a binary search along its diagonal of the
  merge path, so rows of length 0 cost an item each and a row of a million nonzeros is split
  over many threads. A block loads its tile's row ends and products into shared memory
  (coalesced), each thread consumes its items and writes the rows it completes, a block-wide
  scan by row adds the partial sums of rows that cross threads, and a fix-up kernel adds each
  tile's carry-out (the partial sum of the row that crosses its end) into y.
- ``cusparse`` (cupyx.scipy.sparse.csr_matrix @ x) and, on the CPU, ``scipy``; and the CPU's
  two mappings: rows split over the threads (``cpu-row-parallel``) or equal shares of the merge
  path (``cpu-merge-path``).

Matrices (dimension ``kind``): 0 uniform (every row nnz/rows long, give or take one); 1 power-law
(row lengths proportional to Lomax(1.1) draws: a fifth of the rows empty, two fifths of length 0
or 1, and a few of nnz^(2/3) nonzeros, the longest allowed); 2 one row (every nonzero in the
middle row, the rest empty: rows of length 0 at both ends, and one long row). ``nnz`` is the
total number of nonzeros. Each row's columns are distinct and sorted: one drawn uniformly from
each of its length's equal strips of the columns. Values and x are in (0, 1], so a float32 sum
of a row's n products in any order is within ``summation_tolerance(n)`` of golden: each row is
checked against its own bound (``tolerance``), not the longest row's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from loclab.cases.base import (Case, Dims, Variant, Work, dims_text, lazy, summation_tolerance,
                               uniform_nonzero)
from loclab.errors import UsageError
from loclab.hw import Machine

CPU = "loclab.cases.spmv.cpu"
GPU = "loclab.cases.spmv.gpu"
UNIFORM, POWER_LAW, ONE_ROW = 0, 1, 2
KINDS = ("uniform", "power-law", "one row")
# Tail index of the Lomax law of the power-law matrix's row weights: P(w > s) = (1 + s)^-1.1
# (a web graph's degrees have about this tail).
POWER_LAW_TAIL = 1.1
# The power-law matrix's longest rows: nnz^(2/3) nonzeros (165,140 of 2^26). Uncapped, the
# longest of 2^22 rows would hold millions, and the tolerance (which grows with the longest
# row) would no longer tell a wrong short row from rounding.
LONGEST_ROW_EXPONENT = 2 / 3
MAX_NNZ = 2**31 - 1  # int32 indptr and indices (cuSPARSE through cupyx takes int32)
ROW_CHUNK = 1 << 22  # nonzeros generated or summed at a time (bounds the temporaries)
MEAN_ROW = 16  # nonzeros per row of the preset sizes
INDEX_BYTES = VALUE_BYTES = 4


def check_dims(dims: Dims) -> None:
    """Refuse, in one line naming the size, a matrix that cannot be built: more nonzeros than
    int32 offsets count, than positions in the matrix, or (one row) than columns."""
    rows, cols, nnz, kind = dims["rows"], dims["cols"], dims["nnz"], dims["kind"]
    size = f"spmv at {dims_text(dims)}"
    if nnz > MAX_NNZ:
        raise UsageError(f"{size}: at most {MAX_NNZ:,} nonzeros (int32 indptr and indices)")
    if nnz > rows * cols:
        raise UsageError(f"{size}: {nnz:,} nonzeros do not fit {rows:,} x {cols:,} positions")
    if kind == ONE_ROW and nnz > cols:
        raise UsageError(f"{size}: one row holds at most cols = {cols:,} nonzeros")


def longest_row(dims: Dims) -> int:
    """The most nonzeros a row of the power-law matrix gets: nnz^(2/3), at least the mean (few
    rows), at most the columns."""
    rows, cols, nnz = dims["rows"], dims["cols"], dims["nnz"]
    return min(cols, max(round(nnz ** LONGEST_ROW_EXPONENT), -(-nnz // rows)))


def apportion(weights: np.ndarray, total: int, cap: int) -> np.ndarray:
    """Integer lengths proportional to ``weights`` (all positive) that sum to ``total``, none
    above ``cap`` (rows * cap >= total): rows the proportion puts above the cap get the cap and
    the rest is shared again (water-filling), then the largest fractional parts get the
    remainder (they are below the cap: a row at the cap has none)."""
    capped = np.zeros(weights.size, bool)
    target = np.full(weights.size, float(cap))
    while not capped.all():
        share = (total - cap * np.count_nonzero(capped)) / weights[~capped].sum()
        target = np.where(capped, float(cap), weights * share)
        over = ~capped & (target > cap)
        if not over.any():
            break
        capped |= over
    lengths = np.floor(target).astype(np.int64)
    short = total - int(lengths.sum())
    if short > 0:
        fractions = target - lengths
        lengths[np.argpartition(-fractions, short - 1)[:short]] += 1
    return lengths


def row_lengths(dims: Dims, rng: np.random.Generator) -> np.ndarray:
    """The nonzeros of each row (int64), summing to nnz, each at most cols."""
    rows, nnz, kind = dims["rows"], dims["nnz"], dims["kind"]
    if kind == UNIFORM:
        lengths = np.full(rows, nnz // rows, np.int64)
        lengths[rng.choice(rows, nnz % rows, replace=False)] += 1
        return lengths
    if kind == POWER_LAW:
        # Lomax draws reach 0: the tiny floor keeps every weight positive for apportion.
        weights = rng.pareto(POWER_LAW_TAIL, rows) + 1e-12
        return apportion(weights, nnz, longest_row(dims))
    lengths = np.zeros(rows, np.int64)
    lengths[rows // 2] = nnz
    return lengths


def row_chunks(indptr: np.ndarray, chunk: int = ROW_CHUNK) -> Iterator[tuple[int, int]]:
    """Consecutive row ranges [r0, r1) of about ``chunk`` nonzeros (one row at least), so that
    per-nonzero temporaries stay bounded at tens of millions of nonzeros."""
    rows, nnz = indptr.size - 1, int(indptr[-1])
    cuts = np.searchsorted(indptr, np.arange(chunk, nnz, chunk), side="right") - 1
    bounds = np.unique(np.concatenate(([0], cuts, [rows])))
    yield from zip(bounds[:-1].tolist(), bounds[1:].tolist())


def row_columns(lengths: np.ndarray, cols: int, rng: np.random.Generator) -> np.ndarray:
    """Sorted distinct columns for rows of ``lengths`` nonzeros, row after row (int64): the
    k-th of a row of n is drawn from strip [k cols / n, (k + 1) cols / n) (integer bounds, so
    strips do not overlap and each holds a column when n <= cols)."""
    ends = np.cumsum(lengths)
    position = np.arange(ends[-1], dtype=np.int64) - np.repeat(ends - lengths, lengths)
    low = position * cols // np.repeat(lengths, lengths)
    high = np.empty_like(low)  # the next strip's low, or cols at a row's last nonzero
    high[:-1] = low[1:]
    high[ends[lengths > 0] - 1] = cols
    width = high - low
    offset = (rng.random(low.size) * width).astype(np.int64)
    return low + np.minimum(offset, width - 1)  # u * width may round up to width


def make_inputs(dims: dict[str, int], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """The CSR arrays (``data``, ``indices``, ``indptr``) and ``x``; values in (0, 1]."""
    check_dims(dims)
    lengths = row_lengths(dims, rng)
    indptr = np.zeros(dims["rows"] + 1, np.int32)
    indptr[1:] = np.cumsum(lengths)
    indices = np.empty(dims["nnz"], np.int32)
    for r0, r1 in row_chunks(indptr):
        indices[indptr[r0]:indptr[r1]] = row_columns(lengths[r0:r1], dims["cols"], rng)
    return {"data": uniform_nonzero(rng, dims["nnz"]), "indices": indices, "indptr": indptr,
            "x": uniform_nonzero(rng, dims["cols"])}


def row_sums(inputs: dict[str, np.ndarray], magnitudes: bool = False) -> np.ndarray:
    """Each row's products summed in float64 (in order): y, or with ``magnitudes`` the sum of
    |a_ij x_j| that bounds the rounding of any order of the row's additions."""
    data, indices, indptr = inputs["data"], inputs["indices"], inputs["indptr"]
    x = inputs["x"].astype(np.float64)
    sums = np.empty(indptr.size - 1, np.float64)
    for r0, r1 in row_chunks(indptr):
        s, e = int(indptr[r0]), int(indptr[r1])
        products = data[s:e].astype(np.float64) * x[indices[s:e]]
        if magnitudes:
            np.abs(products, out=products)
        rows = np.repeat(np.arange(r1 - r0), np.diff(indptr[r0:r1 + 1]))
        sums[r0:r1] = np.bincount(rows, weights=products, minlength=r1 - r0)
    return sums


def golden(inputs: dict[str, np.ndarray]) -> np.ndarray:
    """Each row's products summed in float64 (in order), rounded once to float32."""
    return row_sums(inputs).astype(np.float32)


def tolerance(inputs: dict[str, np.ndarray]) -> np.ndarray:
    """Each row's own bound on its absolute error: a float32 sum of the row's n products in
    whatever order a variant adds them (atomics included) is within ``summation_tolerance(n)``
    of the sum of their magnitudes. An empty row must be exactly 0; a short row beside a
    long one is held to its own few terms."""
    return row_sums(inputs, magnitudes=True) * summation_tolerance(np.diff(inputs["indptr"]))


def output(dims: dict[str, int]) -> tuple[tuple[int, ...], type]:
    return (dims["rows"],), np.float32


def work(dims: dict[str, int]) -> Work:
    """The golden loop reads each nonzero's value and column once, indptr once, x once (at
    best: it is gathered, once per nonzero) and writes y once; a multiply and an add per
    nonzero. Rates in nonzeros per second too."""
    rows, cols, nnz = dims["rows"], dims["cols"], dims["nnz"]
    return Work(bytes=(VALUE_BYTES + INDEX_BYTES) * nnz + INDEX_BYTES * (rows + 1)
                + VALUE_BYTES * (cols + rows),
                flops=2 * nnz, items=nnz)


def both_kinds(rows: int, nnz: int) -> list[dict[str, int]]:
    """A square matrix of ``rows`` rows and ``nnz`` nonzeros, uniform then power-law."""
    return [{"rows": rows, "cols": rows, "nnz": nnz, "kind": kind}
            for kind in (UNIFORM, POWER_LAW)]


def footprint(cache_bytes: Callable[[Machine], int],
              minimum_rows: int) -> Callable[[Machine], list[dict[str, int]]]:
    """Square matrices of MEAN_ROW nonzeros a row whose CSR arrays fill at least four times the
    cache (rows a power of two, at least ``minimum_rows``), both kinds."""
    def rule(machine: Machine) -> list[dict[str, int]]:
        per_row = MEAN_ROW * (VALUE_BYTES + INDEX_BYTES)
        rows = max(minimum_rows, 1 << math.ceil(math.log2(4 * cache_bytes(machine) / per_row)))
        return both_kinds(rows, MEAN_ROW * rows)
    return rule


def _gpu_l2(machine: Machine) -> int:
    return machine.gpu.l2_bytes if machine.gpu else 0


SIZES: dict[str, Any] = {
    "small": {"cpu": both_kinds(2**14, 2**18), "gpu": both_kinds(2**18, 2**22)},
    # GPU: 4M x 4M with 64M nonzeros (about 560 MB: 11x an H100's L2; x, 16 MB, fits it).
    # CPU: 256K x 256K with 4M nonzeros (34 MB), so that every variant of both kinds runs in
    # seconds on two cores.
    "default": {"cpu": both_kinds(2**18, 2**22), "gpu": both_kinds(2**22, 2**26)},
    "large": {"cpu": footprint(lambda m: m.cpu.llc_bytes, 2**20),
              "gpu": footprint(_gpu_l2, 2**24)},
}

# One nonzero; tiny and odd shapes of each kind; a full matrix (31 x 33, every position) and a
# full column (cols = 1); every row empty but one (a long row in the middle of 3 or of 1025
# rows, longer than a block's tile, and 999 empty rows around 1 nonzero); rows and nonzeros
# spanning many GPU tiles; power-law rows longer than a tile; the GPU's tiles hit exactly
# (rows + nnz = 2 merge-path tiles of 1280 items) and one past (nnz = 2 scan tiles of 1792 + 1).
TEST_DIMS = tuple({"rows": r, "cols": c, "nnz": n, "kind": k} for r, c, n, k in (
    (1, 1, 1, UNIFORM), (1, 1, 1, POWER_LAW), (1, 1, 1, ONE_ROW), (3, 5, 7, UNIFORM),
    (3, 5, 7, POWER_LAW), (31, 33, 1023, UNIFORM), (31, 33, 1023, POWER_LAW),
    (100, 1, 60, UNIFORM), (100, 1, 100, POWER_LAW), (1000, 1000, 1, UNIFORM),
    (3, 6000, 5000, ONE_ROW), (1025, 7000, 6999, ONE_ROW), (31, 40, 200, UNIFORM),
    (31, 40, 200, POWER_LAW), (33, 1000, 500, UNIFORM), (33, 1000, 500, POWER_LAW),
    (257, 300, 4000, UNIFORM), (257, 300, 4000, POWER_LAW), (4099, 4099, 70001, UNIFORM),
    (4099, 4099, 70001, POWER_LAW), (2000, 100_000, 300_007, POWER_LAW),
    (256, 3000, 2304, UNIFORM), (224, 4000, 3585, POWER_LAW)))


CASE = Case(
    name="spmv",
    lesson="load balance over rows of different lengths (merge path, segmented scan); "
           "coalescing; the data-dependent gather of x",
    description="y = A x for a float32 CSR matrix (int32 indices) of nnz nonzeros: uniform "
                "rows, power-law rows, or one row (kind 0, 1, 2)",
    sizes=SIZES,
    make_inputs=make_inputs,
    golden=golden,
    output=output,
    work=work,
    tolerance=tolerance,
    test_dims=TEST_DIMS,
    unit="nonzeros",
    variants=(
        Variant("cpu-row-parallel", "cpu", "naive",
                "numba prange over rows (equal row counts per thread), an in-order float32 "
                "sum per row", lazy(CPU, "row_parallel")),
        Variant("cpu-merge-path", "cpu", "optimized",
                "prange over equal shares of the rows + nonzeros merge path (a binary search "
                "each), partial sums of rows crossing shares added after",
                lazy(CPU, "merge_path")),
        Variant("scipy", "cpu", "library",
                "scipy.sparse.csr_matrix @ x (one thread, a new array)", lazy(CPU, "library")),
        Variant("gpu-row-per-thread", "gpu", "naive",
                "scalar CSR: a thread walks a row alone (uncoalesced; a warp waits for its "
                "longest row)", lazy(GPU, "row_per_thread")),
        Variant("gpu-warp-per-row", "gpu", "optimized",
                "vector CSR: a group of lanes per row (a power of two from the mean row "
                "length, at most 32), coalesced strides, shuffle sum",
                lazy(GPU, "warp_per_row")),
        Variant("gpu-segmented-scan", "gpu", "optimized",
                "the lecture's formulation: products of a tile of nonzeros, head flags from "
                "indptr, a block-wide segmented scan, row totals at row ends (atomicAdd into "
                "zeroed y for rows crossing tiles)", lazy(GPU, "segmented_scan")),
        Variant("gpu-merge-path", "gpu", "optimized",
                "merge-based CSR: equal shares of rows + nonzeros per thread by a merge-path "
                "search, tile in shared memory, block scan by row, carry fix-up kernel",
                lazy(GPU, "merge_path"), space=lazy(GPU, "merge_space")),
        Variant("cusparse", "gpu", "library",
                "cupyx.scipy.sparse.csr_matrix @ x: cuSPARSE SpMV into a new array",
                lazy(GPU, "library")),
    ),
    dimensions=("rows", "cols", "nnz", "kind"),
    check=check_dims,
    ranges={"kind": (UNIFORM, ONE_ROW)},
)
