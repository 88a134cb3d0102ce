"""CPU variants of the matrix-vector product: numba ``prange`` is this project's OpenMP."""

from __future__ import annotations

from functools import partial

import numpy as np
from numba import njit, prange

from loclab.cases.base import Bound
from loclab.hw import Machine

ITEMSIZE = 4  # float32
# The block of x a tile reads takes this fraction of L2, leaving the rest to the streaming rows
# of a and to the hardware prefetchers.
X_BLOCK_FRACTION = 0.25


@njit(parallel=True, cache=True)
def matvec_rows(a, x, out):
    """The golden loop nest with the row loop parallel: each row is a dot product summed in
    order (strict floating point: one scalar chain, not vectorized). With fewer rows than
    cores, cores idle."""
    rows, cols = a.shape
    for i in prange(rows):
        acc = np.float32(0.0)
        for k in range(cols):
            acc += a[i, k] * x[k]
        out[i] = acc
    return out


# reassoc lets LLVM vectorize the dot products with several accumulators; contract, use FMAs.
FAST = {"reassoc", "contract"}


@njit(parallel=True, cache=True, fastmath=FAST)
def matvec_row_tiles(a, x, out, row_block):
    """Tiles of ``row_block`` whole rows are the parallel work; each row a vectorized dot
    product. The inner loop runs to ``a.shape[1]``: with a bound computed per tile instead
    (as matvec_split needs), 64-column rows ran at half the speed on a 2-core host."""
    rows, cols = a.shape
    for t in prange((rows + row_block - 1) // row_block):
        for i in range(t * row_block, min((t + 1) * row_block, rows)):
            ai = a[i]
            acc = np.float32(0.0)
            for k in range(cols):
                acc += ai[k] * x[k]
            out[i] = acc
    return out


@njit(parallel=True, cache=True, fastmath=FAST)
def matvec_split(a, x, partials, out, row_block, col_block):
    """Tiles of ``row_block`` rows x ``col_block`` columns are the parallel work, so a few long
    rows still give every core tiles. A tile writes one partial sum per row to
    ``partials[column block, row]``; a second parallel loop adds each row's partials.
    Tiles are numbered row block fastest: a thread's consecutive tiles share their block of x,
    which stays in its L2."""
    rows, cols = a.shape
    col_tiles = partials.shape[0]
    row_tiles = (rows + row_block - 1) // row_block
    for t in prange(row_tiles * col_tiles):
        c = t // row_tiles
        r0 = (t % row_tiles) * row_block
        k0 = c * col_block
        k1 = min(k0 + col_block, cols)
        xs = x[k0:k1]
        for i in range(r0, min(r0 + row_block, rows)):
            # Slices indexed from 0: no negative-index wraparound in the loop, which vectorizes.
            ai = a[i, k0:k1]
            acc = np.float32(0.0)
            for k in range(k1 - k0):
                acc += ai[k] * xs[k]
            partials[c, i] = acc
    for i in prange(rows):
        acc = np.float32(0.0)
        for c in range(col_tiles):
            acc += partials[c, i]
        out[i] = acc
    return out


def split_blocks(rows: int, cols: int, l2_bytes: int) -> tuple[int, int]:
    """(row_block, col_block): column blocks whose piece of x fills X_BLOCK_FRACTION of L2
    (a power of two, or all the columns), and enough rows that a tile covers about as many
    elements of ``a`` as a full column block (a tile is worth a thread's time)."""
    x_block = max(1, int(l2_bytes * X_BLOCK_FRACTION) // ITEMSIZE)
    x_block = 1 << (x_block.bit_length() - 1)
    col_block = min(cols, x_block)
    row_block = min(rows, max(1, x_block // col_block))
    return row_block, col_block


def naive(inputs: dict, out: np.ndarray, machine: Machine) -> Bound:
    return Bound(partial(matvec_rows, inputs["a"], inputs["x"], out))


def split(inputs: dict, out: np.ndarray, machine: Machine) -> Bound:
    a, x = inputs["a"], inputs["x"]
    rows, cols = a.shape
    row_block, col_block = split_blocks(rows, cols, machine.cpu.l2_bytes)
    col_blocks = -(-cols // col_block)
    params = {"row_block": row_block, "col_block": col_block, "col_blocks": col_blocks}
    if col_blocks == 1:
        return Bound(partial(matvec_row_tiles, a, x, out, row_block), params)
    # The partial sums are allocated here, not in the timed run.
    partials = np.empty((col_blocks, rows), np.float32)
    return Bound(partial(matvec_split, a, x, partials, out, row_block, col_block), params)


def library(inputs: dict, out: np.ndarray, machine: Machine) -> Bound:
    # BLAS sgemv (NumPy's matmul of a matrix and a vector) into a fresh array.
    return Bound(partial(np.matmul, inputs["a"], inputs["x"]))
