"""CPU variants of the summed-area table: numba ``prange`` is this project's OpenMP.

Numba adds a uint8 to a uint32 in 64 bits; every store into the uint32 table keeps the low
32 bits, so each element is its sum modulo 2**32, as the golden's.
"""

from __future__ import annotations

from functools import partial

import numba
import numpy as np
from numba import njit, prange

from loclab.cases.base import Bound
from loclab.hw import Machine

LINE_ELEMENTS = 16  # uint32 per 64-byte cache line


@njit(cache=True)
def sat_sequential(a, out):
    """The golden's two loops on one thread: running sums down the columns (row by row, so
    both rows stream), then along each row."""
    rows, cols = a.shape
    for j in range(cols):
        out[0, j] = a[0, j]
    for i in range(1, rows):
        for j in range(cols):
            out[i, j] = out[i - 1, j] + a[i, j]
    for i in range(rows):
        for j in range(1, cols):
            out[i, j] += out[i, j - 1]
    return out


@njit(parallel=True, cache=True)
def sat_rows_then_strips(a, out, strip):
    """Rows scanned in parallel (each a running sum along contiguous memory), then columns
    scanned in parallel by strips of ``strip`` columns: a thread walks down its strip, adding
    the row above (just written, still in its cache) to each row, so every access is a
    contiguous run of the strip rather than one element per cache line."""
    rows, cols = a.shape
    for i in prange(rows):
        s = np.uint32(0)
        for j in range(cols):
            s += a[i, j]
            out[i, j] = s
    for t in prange((cols + strip - 1) // strip):
        j0 = t * strip
        j1 = min(j0 + strip, cols)
        for i in range(1, rows):
            for j in range(j0, j1):
                out[i, j] += out[i - 1, j]
    return out


@njit(parallel=True, cache=True)
def sat_bands(a, out, carries, band):
    """Reduce, scan, then scan again, over bands of ``band`` rows (one per thread):
    1. each band's column totals into ``carries[b + 1]`` (reads the image: 1 byte an element);
    2. running sums down ``carries`` (bands x cols, small), then along each of its rows, so
       that ``carries[b]`` is the table's row just above band b;
    3. each band, in parallel, walks its rows once: the running sum along a row, added to the
       row above (the carried row), is the table's row, written once and carried on.
    The table is written once and never read back: 2 bytes read and 4 written per element,
    against 1 + 4 + 4 + 4 for rows-then-columns."""
    rows, cols = a.shape
    bands = carries.shape[0] - 1
    carries[0, :] = 0
    for b in prange(bands):
        totals = carries[b + 1]
        totals[:] = 0
        for i in range(b * band, min((b + 1) * band, rows)):
            for j in range(cols):
                totals[j] += a[i, j]
    for b in range(1, bands):
        for j in range(cols):
            carries[b, j] += carries[b - 1, j]
    for b in prange(1, bands):
        for j in range(1, cols):
            carries[b, j] += carries[b, j - 1]
    for b in prange(bands):
        carry = carries[b]
        for i in range(b * band, min((b + 1) * band, rows)):
            s = np.uint32(0)
            for j in range(cols):
                s += a[i, j]
                carry[j] += s
                out[i, j] = carry[j]
    return out


def strip_width(cols: int, threads: int) -> int:
    """Columns per strip: one strip per thread, a whole number of cache lines wide (at least
    one), so that two threads share at most the line at each boundary of their strips."""
    per_thread = -(-cols // threads)
    return max(LINE_ELEMENTS, -(-per_thread // LINE_ELEMENTS) * LINE_ELEMENTS)


def band_rows(rows: int, threads: int) -> int:
    """Rows per band: one band per thread."""
    return max(1, -(-rows // threads))


def sequential(inputs: dict, out: np.ndarray, machine: Machine) -> Bound:
    return Bound(partial(sat_sequential, inputs["a"], out))


def rows_then_strips(inputs: dict, out: np.ndarray, machine: Machine) -> Bound:
    strip = strip_width(out.shape[1], numba.get_num_threads())
    return Bound(partial(sat_rows_then_strips, inputs["a"], out, strip), {"strip": strip})


def bands(inputs: dict, out: np.ndarray, machine: Machine) -> Bound:
    rows, cols = out.shape
    band = band_rows(rows, numba.get_num_threads())
    carries = np.empty((-(-rows // band) + 1, cols), np.uint32)  # allocated here, not timed
    return Bound(partial(sat_bands, inputs["a"], out, carries, band), {"band_rows": band})


def library(inputs: dict, out: np.ndarray, machine: Machine) -> Bound:
    a = inputs["a"]

    def run() -> np.ndarray:
        # The golden's two cumsums, in place on the table: on 2 cores twice as fast as into
        # new arrays (numpy's running sum down axis 0 of a fresh array is slow).
        np.copyto(out, a)
        np.cumsum(out, axis=0, out=out)
        return np.cumsum(out, axis=1, out=out)

    return Bound(run)
