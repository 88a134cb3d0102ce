"""CPU variants of transposition: numba ``prange`` is this project's OpenMP."""

from __future__ import annotations

from functools import partial

import numpy as np
from numba import njit, prange

from loclab.cases.base import Bound, Dims
from loclab.cpu.tiles import CACHE_LINE, floor_power_of_two
from loclab.hw import Machine
from loclab.hw.cpu import square_tile
from loclab.measure.space import Config, Space


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


# Candidate tile sides for ``loclab tune``, powers of two as the defaults are.
OUTER_TILES = (32, 64, 128, 256, 512, 1024, 2048)
INNER_TILES = (8, 16, 32, 64, 128, 256)


def blocked_space(machine: Machine) -> Space:
    """(outer, inner) tiles. By default the inner tile is as tall as a strip of it can stay in
    L1d: the innermost loop reads down a column of ``a``, one line per row, and each of those
    lines serves the next 15 columns (16 floats a line), while the rows of ``out`` written
    meanwhile take as many lines again, so 2 x inner lines fill at most half of L1d (128 for
    32 and 48 KiB). Sizing the whole inner tile for L1d instead (two inner x inner tiles in
    half of it: 32) ran 10-15% slower at 4096^2 and 5120^2 on a 2-core Xeon VM and the same at
    5003^2, 1 and 2 threads. The outer tile, the parallel work, keeps its input and output
    tiles in half of L2, and is at least the inner one."""
    cpu = machine.cpu
    inner = floor_power_of_two(cpu.l1d_bytes // (4 * CACHE_LINE))
    inner = min(max(inner, INNER_TILES[0]), INNER_TILES[-1])
    outer = min(max(square_tile(cpu.l2_bytes, itemsize=4), inner), OUTER_TILES[-1])
    return Space(values={"outer_tile": OUTER_TILES, "inner_tile": INNER_TILES},
                 default={"outer_tile": outer, "inner_tile": inner},
                 restriction=blocked_restriction)


def blocked_restriction(config: Config, dims: Dims, machine: Machine) -> str | None:
    """An inner tile larger than its outer tile would be cut by it."""
    outer, inner = config["outer_tile"], config["inner_tile"]
    if inner > outer:
        return f"an inner tile of {inner} exceeds its outer tile of {outer}"
    return None


def blocked_tiles(machine: Machine) -> tuple[int, int]:
    """(outer, inner) by default on this machine (``blocked_space``), for the other cases
    that transpose a matrix on the way."""
    default = blocked_space(machine).default
    return default["outer_tile"], default["inner_tile"]


def naive(inputs: dict, out: np.ndarray, machine: Machine) -> Bound:
    return Bound(partial(transpose_by_rows, inputs["a"], out))


def blocked(inputs: dict, out: np.ndarray, machine: Machine, **config: int) -> Bound:
    """The space's default tiles, or those given (``loclab tune``, the tuning cache)."""
    config = blocked_space(machine).configure(config)
    return Bound(partial(transpose_blocked, inputs["a"], out, config["outer_tile"],
                         config["inner_tile"]), config)


def library(inputs: dict, out: np.ndarray, machine: Machine) -> Bound:
    # ascontiguousarray(a.T), except that it always copies: for one row or one column a.T is
    # already contiguous and ascontiguousarray would return the input itself, doing no work.
    return Bound(partial(np.array, inputs["a"].T, order="C"))
