"""CPU variants of the nearest neighbour: numba ``prange`` is this project's OpenMP.

Every kernel computes ``abs(q - p)`` on float32 values (one rounded subtraction, exact
absolute value) and keeps the first point at the smallest distance, so each returns exactly
the golden indices. No kernel is compiled with fastmath: only the min-first kernels' minima
carry no-NaN flags, and a minimum is exact in any order.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from loclab.cases.base import Bound, Dims
from loclab.cases.nearest_neighbour import broadcast_argmin, queries_and_points
from loclab.cpu.tiles import floor_power_of_two, threads
from loclab.hw import Machine
from loclab.measure.space import Config, Space

ITEMSIZE = 4  # float32 points and queries, int32 indices
QUERY_STATE = 3 * ITEMSIZE  # a query, its best distance and its index
POINT_TILES = (256, 512, 1024, 2048, 4096, 8192, 16384)
QUERY_TILES = (64, 128, 256, 512, 1024, 2048, 4096)
BLOCKS = (32, 64, 128, 256, 512, 1024)
# The vectorized loop over a block starts again for every point: blocks of 512 queries (6 KiB
# of state in L1) amortize that; on a 2-core EPYC VM at 2^15 x 2^15 they ran at 29.5 G pairs/s,
# blocks of 64 at 16.9 (1024: 30.2).
TILED_BLOCK = 512
# Two blocks share each tile of points from L1 (256 or 4096 queries: 10-30% slower).
TILED_QUERY_TILE = 1024
# cpu-min-first rescans one tile of points per query to find the index: small tiles keep the
# rescan cheap, large ones amortize the horizontal minimum after each tile. On a 2-core EPYC
# VM at 2^15 x 2^15, 1024 points ran at 95 G pairs/s, 256 at 82, 4096 at 85.
MIN_FIRST_POINT_TILE = 1024
MIN_FIRST_QUERY_TILE = 256


@njit(parallel=True, cache=True)
def nearest_naive(queries, points, out):
    """The lectures' loop nest with the query loop parallel: each query scans every point
    with a strict ``<`` (ties keep the smaller index). Scalar: the compare feeds a branch."""
    for i in prange(queries.size):
        q = queries[i]
        best = np.float32(np.inf)
        nearest = -1
        for j in range(points.size):
            d = abs(q - points[j])
            if d < best:
                best = d
                nearest = j
        out[i] = nearest
    return out


@njit(parallel=True, cache=True)
def nearest_tiled(queries, points, out, query_tile, point_tile, block):
    """Tiles of ``query_tile`` queries are the parallel work. A tile of points (in L1)
    serves every block of ``block`` queries of the tile; inside a block the loop runs over
    the points and, innermost, over the block's queries: the point stays in a register, and
    the compare and the two selects are vectorized across queries (branch-free). Points are
    visited in order for every query, so ties keep the smaller index."""
    m, n = queries.size, points.size
    for t in prange((m + query_tile - 1) // query_tile):
        i0 = t * query_tile
        i1 = min(i0 + query_tile, m)
        best = np.full(i1 - i0, np.inf, np.float32)
        nearest = out[i0:i1]
        nearest[:] = -1
        for j0 in range(0, n, point_tile):
            j1 = min(j0 + point_tile, n)
            for b0 in range(0, i1 - i0, block):
                b1 = min(b0 + block, i1 - i0)
                # Slices indexed from 0: no negative-index wraparound in the vector loop.
                qb, bb, nb = queries[i0 + b0:i0 + b1], best[b0:b1], nearest[b0:b1]
                for j in range(j0, j1):
                    p = points[j]
                    for k in range(b1 - b0):
                        d = abs(qb[k] - p)
                        closer = d < bb[k]
                        bb[k] = d if closer else bb[k]
                        nb[k] = j if closer else nb[k]
    return out


@intrinsic
def min_float32(typingctx: Any, a: Any, b: Any) -> Any:
    """``min(a, b)`` as LLVM's ``minnum`` with no-NaN, no-signed-zero flags. LLVM vectorizes
    a loop folding it as a min reduction; numba's ``min()`` is a compare and a select, which
    it vectorizes only in functions marked no-NaN (fastmath flags on the instructions do not
    do that). Sound here: distances are never NaN and never -0."""
    if not (a == types.float32 and b == types.float32):
        return None

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        float32 = context.get_value_type(types.float32)
        minnum = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(float32, [float32, float32]), "llvm.minnum.f32")
        return builder.call(minnum, args, fastmath=("nnan", "nsz"))

    return types.float32(a, b), codegen


@njit(parallel=True, cache=True)
def nearest_min_first(queries, points, out, query_tile, point_tile):
    """Tiles of ``query_tile`` queries are the parallel work; each tile of points (in L1)
    serves all of them. Per query and tile of points, the inner loop is only a minimum of
    distances (subtract, abs, min: vectorized across the points with several accumulators);
    a query notes the tile where its minimum went strictly down. The last tile noted is the
    first that holds a point at the final distance, so a second, vectorized scan of that tile
    (the smallest j at that distance) gives the loop's answer."""
    m, n = queries.size, points.size
    for t in prange((m + query_tile - 1) // query_tile):
        i0 = t * query_tile
        i1 = min(i0 + query_tile, m)
        best = np.full(i1 - i0, np.inf, np.float32)
        where = np.zeros(i1 - i0, np.int64)
        for j0 in range(0, n, point_tile):
            tile = points[j0:min(j0 + point_tile, n)]
            for k in range(i1 - i0):
                q = queries[i0 + k]
                tile_best = best[k]
                for j in range(tile.size):
                    tile_best = min_float32(tile_best, abs(q - tile[j]))
                if tile_best < best[k]:
                    best[k] = tile_best
                    where[k] = j0
        for k in range(i1 - i0):
            q, target, j0 = queries[i0 + k], best[k], where[k]
            tile = points[j0:min(j0 + point_tile, n)]
            first = tile.size
            for j in range(tile.size):
                first = min(first, j if abs(q - tile[j]) == target else tile.size)
            out[i0 + k] = j0 + first
    return out


def naive(inputs: dict, out: np.ndarray, machine: Machine) -> Bound:
    """The lectures' loop, untiled: the reference the tiled variants' speedups are from."""
    queries, points = queries_and_points(inputs)
    return Bound(partial(nearest_naive, queries, points, out),
                 {"reuse": "1 query per point loaded (every query reads all points, from "
                           "L2 or L3)", **threads()})


def l1_point_tile(machine: Machine) -> int:
    """The largest power-of-two tile of points that fills at most half of L1d."""
    return floor_power_of_two(machine.cpu.l1d_bytes // (2 * ITEMSIZE))


def tiled_space(machine: Machine) -> Space:
    """Tiles of queries and of points and blocks of queries; untuned, points fill half of L1d
    and the measured best tile and block of queries."""
    return Space(values={"query_tile": QUERY_TILES, "point_tile": POINT_TILES,
                         "block": BLOCKS},
                 default={"query_tile": TILED_QUERY_TILE, "point_tile": l1_point_tile(machine),
                          "block": TILED_BLOCK},
                 restriction=tiled_restriction)


def tiled_restriction(config: Config, dims: Dims, machine: Machine) -> str | None:
    """A tile of points and a block's queries (with their distances and indices) share L1d;
    a block is part of a tile of queries."""
    if config["block"] > config["query_tile"]:
        return f"a block of {config['block']} exceeds the tile of {config['query_tile']}"
    footprint = config["point_tile"] * ITEMSIZE + config["block"] * QUERY_STATE
    if footprint > machine.cpu.l1d_bytes:
        return f"a tile of points and a block of queries ({footprint} bytes) exceed L1d"
    return None


def tiled(inputs: dict, out: np.ndarray, machine: Machine, **config: int) -> Bound:
    """``nearest_tiled`` with the space's default configuration, updated by ``config``."""
    config = tiled_space(machine).configure(config)
    queries, points = queries_and_points(inputs)
    m = queries.size
    reuse = (f"{min(config['query_tile'], m)} queries per point in L1, "
             f"{min(config['block'], m)} per point in a register")
    return Bound(partial(nearest_tiled, queries, points, out,
                         config["query_tile"], config["point_tile"], config["block"]),
                 {**config, "reuse": reuse, **threads()})


def min_first_space(machine: Machine) -> Space:
    """Tiles of queries and of points; untuned, the measured best (see the constants)."""
    return Space(values={"query_tile": QUERY_TILES, "point_tile": POINT_TILES},
                 default={"query_tile": MIN_FIRST_QUERY_TILE,
                          "point_tile": MIN_FIRST_POINT_TILE},
                 restriction=min_first_restriction)


def min_first_restriction(config: Config, dims: Dims, machine: Machine) -> str | None:
    """A tile of points is rescanned from L1d: it must fit there."""
    if config["point_tile"] * ITEMSIZE > machine.cpu.l1d_bytes:
        return f"a tile of {config['point_tile']} points exceeds L1d"
    return None


def min_first(inputs: dict, out: np.ndarray, machine: Machine, **config: int) -> Bound:
    """``nearest_min_first`` with the space's default configuration, updated by ``config``."""
    config = min_first_space(machine).configure(config)
    queries, points = queries_and_points(inputs)
    m = queries.size
    reuse = (f"{min(config['query_tile'], m)} queries per point in L1; subtract, abs and "
             f"min per pair, and a rescan of {config['point_tile']} points per query")
    return Bound(partial(nearest_min_first, queries, points, out,
                         config["query_tile"], config["point_tile"]),
                 {**config, "reuse": reuse, **threads()})


def library(inputs: dict, out: np.ndarray, machine: Machine) -> Bound:
    """NumPy is single-threaded: chunks of queries whose distances fill half of L2."""
    queries, points = queries_and_points(inputs)
    rows = max(1, machine.cpu.l2_bytes // (2 * ITEMSIZE * points.size))
    buffer = np.empty((min(rows, queries.size), points.size), np.float32)
    return Bound(partial(broadcast_argmin, np, queries, points, out, buffer),
                 {"chunk_rows": buffer.shape[0]})
