"""CPU variants of the sparse matrix-vector product: numba ``prange`` over rows or over equal
shares of the merge path, and SciPy."""

from __future__ import annotations

from functools import partial

import numba
import numpy as np
from numba import njit, prange

from loclab.cases.base import Bound
from loclab.hw import Machine


@njit(parallel=True, cache=True)
def spmv_rows(data, indices, indptr, x, y):
    """prange over rows: numba hands each thread an equal run of rows, whatever their lengths
    (a thread that gets the long rows of a power-law matrix works while the others wait)."""
    for row in prange(y.size):
        acc = np.float32(0.0)
        for j in range(indptr[row], indptr[row + 1]):
            acc += data[j] * x[indices[j]]
        y[row] = acc
    return y


@njit(cache=True)
def merge_path_row(indptr, diagonal):
    """The rows completed where ``diagonal`` (0 to rows + nnz) crosses the merge path of the
    row ends ``indptr[1:]`` and the nonzero indices 0, 1, ...: the merge takes a row end when it
    is at most the next nonzero's index (an empty row ends before the next row's first
    nonzero), so the answer is the least r with indptr[r + 1] > diagonal - r - 1. The rest of
    the diagonal, diagonal - r, are nonzeros."""
    rows = indptr.size - 1
    low = max(diagonal - indptr[rows], 0)
    high = min(diagonal, rows)
    while low < high:
        mid = (low + high) // 2
        if indptr[mid + 1] <= diagonal - mid - 1:
            low = mid + 1
        else:
            high = mid
    return low


@njit(parallel=True, cache=True)
def spmv_merge(data, indices, indptr, x, y, carry_row, carry_value):
    """Share p of ``carry_row.size`` takes merge items [p T / P, (p + 1) T / P) of the
    T = rows + nnz: the rows it completes (the first one only from where the share starts) and
    the nonzeros of the row it leaves unfinished, whose partial sum it hands on as its carry.
    After the parallel loop the carries are added in (a row that spans several shares gets one
    from each but the last)."""
    rows = y.size
    total = rows + np.int64(indptr[rows])
    parts = carry_row.size
    for p in prange(parts):
        first = p * total // parts
        last = (p + 1) * total // parts
        row = merge_path_row(indptr, first)
        nz = first - row
        end_row = merge_path_row(indptr, last)
        acc = np.float32(0.0)
        while row < end_row:
            row_end = indptr[row + 1]
            while nz < row_end:
                acc += data[nz] * x[indices[nz]]
                nz += 1
            y[row] = acc
            acc = np.float32(0.0)
            row += 1
        for j in range(nz, last - end_row):
            acc += data[j] * x[indices[j]]
        carry_row[p] = end_row
        carry_value[p] = acc
    for p in range(parts):
        if carry_row[p] < rows:
            y[carry_row[p]] += carry_value[p]
    return y


def row_parallel(inputs: dict, out: np.ndarray, machine: Machine) -> Bound:
    return Bound(partial(spmv_rows, inputs["data"], inputs["indices"], inputs["indptr"],
                         inputs["x"], out))


def merge_path(inputs: dict, out: np.ndarray, machine: Machine) -> Bound:
    """One share of the merge path per thread: the search makes them equal in rows + nonzeros,
    so none need be smaller to even out the load."""
    parts = numba.get_num_threads()
    carry_row = np.empty(parts, np.int64)
    carry_value = np.empty(parts, np.float32)
    return Bound(partial(spmv_merge, inputs["data"], inputs["indices"], inputs["indptr"],
                         inputs["x"], out, carry_row, carry_value),
                 {"shares": parts})


def library(inputs: dict, out: np.ndarray, machine: Machine) -> Bound:
    """SciPy's CSR product (C++, one thread), into a new array."""
    import scipy.sparse

    matrix = scipy.sparse.csr_matrix((inputs["data"], inputs["indices"], inputs["indptr"]),
                                     shape=(out.size, inputs["x"].size))
    return Bound(partial(matrix.dot, inputs["x"]))
