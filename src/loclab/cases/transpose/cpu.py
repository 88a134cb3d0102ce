"""CPU variants of transposition: numba ``prange`` is this project's OpenMP."""

from __future__ import annotations

from functools import partial

import numpy as np
from numba import njit, prange

from loclab.cases.base import Bound
from loclab.hw import Machine
from loclab.hw.cpu import square_tile


@njit(parallel=True, cache=True)
def transpose_by_rows(a, out):
    """The golden loop nest with the outer loop parallel: each write lands on its own line."""
    rows, cols = a.shape
    for i in prange(rows):
        for j in range(cols):
            out[j, i] = a[i, j]
    return out


@njit(parallel=True, cache=True)
def transpose_blocked(a, out, outer, inner):
    """Outer tiles sized for L2 are the parallel work (the lecture's ``collapse(2)``); inside,
    inner tiles sized for L1 keep both the lines read and the lines written resident, and the
    innermost loop writes a contiguous run of ``out``."""
    rows, cols = a.shape
    tiles_across = (cols + outer - 1) // outer
    tiles_down = (rows + outer - 1) // outer
    for t in prange(tiles_down * tiles_across):
        i0 = (t // tiles_across) * outer
        j0 = (t % tiles_across) * outer
        for ii in range(i0, min(i0 + outer, rows), inner):
            for jj in range(j0, min(j0 + outer, cols), inner):
                for j in range(jj, min(jj + inner, cols)):
                    for i in range(ii, min(ii + inner, rows)):
                        out[j, i] = a[i, j]
    return out


def blocked_tiles(machine: Machine) -> tuple[int, int]:
    """(outer, inner): the largest power-of-two square tiles whose input and output tiles
    together fill half of L2 and half of L1d."""
    cpu = machine.cpu
    inner = square_tile(cpu.l1d_bytes, itemsize=4)
    return max(square_tile(cpu.l2_bytes, itemsize=4), inner), inner


def naive(inputs: dict, out: np.ndarray, machine: Machine) -> Bound:
    return Bound(partial(transpose_by_rows, inputs["a"], out))


def blocked(inputs: dict, out: np.ndarray, machine: Machine) -> Bound:
    outer, inner = blocked_tiles(machine)
    return Bound(partial(transpose_blocked, inputs["a"], out, outer, inner),
                 {"outer_tile": outer, "inner_tile": inner})


def library(inputs: dict, out: np.ndarray, machine: Machine) -> Bound:
    # ascontiguousarray(a.T), except that it always copies: for one row or one column a.T is
    # already contiguous and ascontiguousarray would return the input itself, doing no work.
    return Bound(partial(np.array, inputs["a"].T, order="C"))
