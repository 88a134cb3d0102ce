"""CPU variants of the masked batch product (numba ``prange``)."""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from loclab.cases.base import Bound
from loclab.hw import Machine

# Rows of X per tile: its 0/1 slice (64 x N floats, 128 KiB at N = 512) stays in L2. Measured
# on a 2-core EPYC VM at the default K = 8: tiles of 16, 32, 64, 128 rows ran 435, 233, 146, 185 ms.
TILE = 64


@njit(parallel=True, cache=True)
def bmmm_naive(a, b, x, y):
    """The lectures' golden nest, rows in parallel."""
    k, n = a.shape
    for i in prange(x.shape[0]):
        for j1 in range(k):
            for j2 in range(k):
                acc = np.float32(0.0)
                for q in range(n):
                    v = np.float32(1.0) if x[i, q] != 0 else np.float32(0.0)
                    acc += a[j1, q] * b[q, j2] * v
                y[i, j1, j2] = acc


@njit(parallel=True, cache=True)
def bmmm_tiled(a, b, x, y, tile):
    """i strip-mined by ``tile`` and the tile loop moved innermost (legal: the i iterations
    are independent): ab = a·b is computed once per (j1, j2, q) and serves the whole tile from
    a register. The tile's slice of X is copied once, transposed, as 0/1 floats (the CPU
    counterpart of the GPU's transposed, staged mask): the innermost loop then runs along
    contiguous memory, so LLVM vectorizes it, and the slice stays in L1/L2 for every (j1, j2)."""
    k, n = a.shape
    m = x.shape[0]
    for t in prange((m + tile - 1) // tile):
        first, last = t * tile, min(t * tile + tile, m)
        rows = last - first
        mask = np.empty((n, rows), np.float32)
        for i in range(rows):
            for q in range(n):
                mask[q, i] = np.float32(1.0) if x[first + i, q] != 0 else np.float32(0.0)
        acc = np.empty(rows, np.float32)
        for j1 in range(k):
            for j2 in range(k):
                acc[:] = 0.0
                for q in range(n):
                    ab = a[j1, q] * b[q, j2]
                    for i in range(rows):
                        acc[i] += ab * mask[q, i]
                for i in range(rows):
                    y[first + i, j1, j2] = acc[i]


def _arrays(inputs: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return inputs["a"], inputs["b"], inputs["x"]


def naive(inputs: dict, out: np.ndarray, machine: Machine) -> Bound:
    a, b, x = _arrays(inputs)

    def run() -> np.ndarray:
        bmmm_naive(a, b, x, out)
        return out

    return Bound(run, {"reuse": "none: a·b recomputed for every row"})


def tiled(inputs: dict, out: np.ndarray, machine: Machine, tile: int = TILE) -> Bound:
    a, b, x = _arrays(inputs)

    def run() -> np.ndarray:
        bmmm_tiled(a, b, x, out, tile)
        return out

    return Bound(run, {"tile": tile,
                       "reuse": f"a·b from a register serves {tile} rows; the tile's mask "
                                f"from L1/L2 serves K^2 = {a.shape[0] ** 2} (j1, j2)"})
