"""Tile sizes from the cache model: the largest tile whose data fits the cache it aims at.

The lectures' rule for blocked matrix multiplication (three T x T tiles in a cache of S bytes:
3 T^2 x elem <= S) generalized to any band: one tile of the band (T iterations of each of its
loops, every loop below the band over its whole range, every loop above it fixed) touches, per
array access, the elements its subscripts reach; their sum times the element size must fit
half the cache (the other half for the lines the tile's neighbours and the prefetchers bring,
and for set conflicts). The L1 is aimed at first; where even a tile of 16 would not fit it (a
reduction loop below the band streams its whole range), the L2. Measurement then tunes the
size (``loclab.optimize.search``): the model gives the start, not the answer.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from loclab.nest.expr import Poly
from loclab.nest.ir import Loop
from loclab.optimize.locality import ArrayAccess, coefficient
from loclab.model.cache import format_bytes

TILE_SIZES = (8, 16, 32, 64, 128, 256, 512)
SMALLEST_L1_TILE = 16  # below this the L1 is too small for the band: aim at the L2
BALANCED_ROUNDS = 4  # deals of a parallel loop to the threads that ``balanced_tiles`` sizes


@dataclass(frozen=True)
class TileChoice:
    """The tile the model chose for a band, and why."""

    tile: int
    cache: str  # "L1" or "L2"
    cache_bytes: int
    footprint_bytes: int
    threads: int = 0  # where the tile was made smaller so that each thread gets one
    # the longest tile that leaves each thread a tile of the outermost loop: the search
    # tries none of the list longer (a tile of 512 rows of 1,200 keeps 13 of 16 threads
    # idle), but for the balanced tiles below
    most: int = TILE_SIZES[-1]
    # tiles besides TILE_SIZES that deal the outermost loop evenly to the threads (see
    # ``balanced_tiles``): the search tries them too
    balanced: tuple[int, ...] = ()

    def reason(self) -> str:
        shared = (f", small enough for {self.threads} threads to get a tile each"
                  if self.threads else "")
        if self.footprint_bytes > self.cache_bytes // 2:
            return (f"the smallest tile's data ({format_bytes(self.footprint_bytes)}) is past "
                    f"half the {format_bytes(self.cache_bytes)} {self.cache}")
        return (f"a tile's data ({format_bytes(self.footprint_bytes)}) fits half the "
                f"{format_bytes(self.cache_bytes)} {self.cache}{shared}")


def _span(subscript: Poly | None, extents: Mapping[str, int]) -> int | None:
    """How many values a subscript takes when each loop variable runs over its extent
    (None where it is not affine in them, or not known at all)."""
    if subscript is None:
        return None
    span = 1
    for var, extent in extents.items():
        factor = coefficient(subscript, var)
        if factor is None:
            return None
        span += abs(factor) * (extent - 1)
    return span


def footprint(accesses: list[ArrayAccess], band: tuple[Loop, ...],
              tile: int | Mapping[Loop, int], extents: Mapping[str, int]) -> int:
    """Elements one tile of ``band`` touches: each distinct access's box of subscripts, with
    the band's loops over ``tile`` iterations (each its own, where a mapping) and the loops
    below over ``extents``; loops above the band hold still. An access the model cannot
    bound counts one element a band iteration."""
    sizes = tile if isinstance(tile, Mapping) else {loop: tile for loop in band}
    total = 0
    seen: set[tuple[str, str]] = set()
    for a in accesses:
        key = (a.access.variable.key, a.text)
        if key in seen:
            continue
        seen.add(key)
        loops = a.statement.loops
        # the loops below the band: below the band's deepest loop as the statement nests
        # them (a permuted band's last loop may be its outermost as written)
        inside = [depth for depth, loop in enumerate(loops) if loop in band]
        below = loops[max(inside) + 1:] if inside else ()
        ranges = {loop.var: sizes[loop] for loop in band}
        ranges.update({loop.var: max(extents.get(loop.var, 1), 1) for loop in below})
        spans = [_span(sub, ranges) for sub in a.subscripts or ()] if a.subscripts else [None]
        if any(span is None for span in spans):
            total += math.prod(sizes[loop] for loop in band)
            continue
        elements = 1
        for span in spans:
            elements *= span
        total += elements
    return total


def balanced_tiles(extent: int, threads: int, rounds: int = BALANCED_ROUNDS) -> tuple[int, ...]:
    """Tiles, multiples of the smallest of ``TILE_SIZES`` and not among them, that deal a
    parallel loop of ``extent`` iterations to ``threads`` in 1 to ``rounds`` whole rounds:
    the powers of two seldom do (800 rows in tiles of 32 are 25 tiles, two rounds of 16
    threads with 7 idle in the second; tiles of 56 are 15, one round of 56 rows each). Each
    gives the busiest thread fewer rows than the next longer tile of the list."""
    if threads < 2:
        return ()

    def busiest(tile: int) -> int:  # the rows of the thread dealt the most tiles
        return -(-(-(-extent // tile)) // threads) * tile

    step = TILE_SIZES[0]
    found = {-(-extent // (threads * r * step)) * step for r in range(1, rounds + 1)}
    # kept where it beats the next longer of the list (rounded up to a multiple of 8, a
    # tile may deal no better: 800 rows in 3 rounds of 16 threads are 24-row tiles, 72 rows
    # for the busiest thread against 64 in tiles of 32)
    return tuple(sorted(t for t in found if TILE_SIZES[0] < t <= TILE_SIZES[-1]
                        and t not in TILE_SIZES
                        and busiest(t) < busiest(min(s for s in TILE_SIZES if s > t))))


def choose_tile(accesses: list[ArrayAccess], band: tuple[Loop, ...],
                extents: Mapping[str, int], element_bytes: int, l1_bytes: int,
                l2_bytes: int, threads: int = 1, l2_only: bool = False) -> TileChoice:
    """The largest tile of ``TILE_SIZES`` whose data fits half the L1, else half the L2
    (only the L2 where ``l2_only``: a packed panel, whose copy a larger tile pays for over
    more iterations); no larger than leaves each of ``threads`` a tile of the band's
    outermost loop (the parallel one: 1024 rows in tiles of 128 would keep 8 of 16 cores
    busy). The search also tries the tiles that deal that loop evenly (``balanced_tiles``)."""
    outermost = max(extents.get(band[0].var, 1), 1)
    shared = [t for t in TILE_SIZES if -(-outermost // t) >= threads] or [TILE_SIZES[0]]
    balanced = balanced_tiles(outermost, threads)
    caches = (("L1", l1_bytes), ("L2", l2_bytes))
    for cache, capacity in caches[1:] if l2_only else caches:
        fitting = [t for t in TILE_SIZES
                   if footprint(accesses, band, t, extents) * element_bytes <= capacity // 2]
        if fitting and (fitting[-1] >= SMALLEST_L1_TILE or cache == "L2"):
            tile = min(fitting[-1], shared[-1])
            return TileChoice(tile, cache, capacity,
                              footprint(accesses, band, tile, extents) * element_bytes,
                              threads if tile < fitting[-1] else 0, shared[-1], balanced)
    tile = TILE_SIZES[0]
    return TileChoice(tile, "L2", l2_bytes,
                      footprint(accesses, band, tile, extents) * element_bytes,
                      most=shared[-1], balanced=balanced)


@dataclass(frozen=True)
class Panel:
    """The tiles the model fixes in a register-tiled band (the blocking of BLIS: the
    micro-kernel's rows along the vector loop held in the L1, the panel they sweep held in
    the L2), and why; the other loops keep the band's tuned tile."""

    tiles: tuple[int, ...]  # by the band's loops, in its order; 0: the band's tuned tile
    reason: str


def panel(accesses: list[ArrayAccess], band: tuple[Loop, ...], extents: Mapping[str, int],
          element_bytes: int, l1_bytes: int, l2_bytes: int, tile: int,
          jammed: Mapping[Loop, int], held: tuple[Loop, ...] = ()) -> Panel | None:
    """The tiles of a register-tiled band whose innermost loop runs in vector lanes
    (``jammed``: the loops unroll-and-jammed, by their factors) past ``tile``, the
    model's tile of the band. The cube of ``choose_tile`` sizes every loop alike, which
    leaves the vector loop a few vectors long (16 doubles at a 32 KiB L1): each pass of
    the micro-kernel then loads its register tile's operands for two vector iterations
    (gemm at 1,000 x 1,100 x 1,200, 16 threads: 16.6 ms in cubes of 16, 15.7 in cubes of
    32, 12.7-13.4 with the inner loops 128-256 long; NumPy 8.2 ms; 2026-11-30). So, as
    BLIS sizes its blocks: the innermost loop as long as keeps the rows the register tile
    sweeps along it within half the L1; each loop between, from the inside out, as long as
    keeps the panel of the loops inside within half the L2 (reused by every iteration of
    the loops outside it). The outermost loop and ``held`` (those whose tile loops run in
    parallel: a longer tile leaves threads idle) keep the tuned tile, and the search tunes
    only those. No tile is past its loop's extent (rounded up to a size of the list) nor
    below ``tile``; None where no loop's tile is longer."""
    if len(band) < 2 or not jammed:
        return None
    # one pass of the micro-kernel: the jammed loops at their factors, the others at one
    # iteration; each loop, once sized from the inside out, at its tile
    sizes = {loop: jammed.get(loop, 1) for loop in band}

    def longest(loop: Loop, capacity: int) -> int:
        extent = max(extents.get(loop.var, 1), 1)
        covering = next((t for t in TILE_SIZES if t >= extent), TILE_SIZES[-1])
        fits = [t for t in TILE_SIZES if t <= covering and footprint(
            accesses, band, {**sizes, loop: t}, extents) * element_bytes <= capacity // 2]
        return max(fits[-1] if fits else tile, tile)

    inner = band[-1]
    longer: dict[Loop, int] = {}
    for loop in reversed(band[1:]):
        if loop in held:
            sizes[loop] = tile
        else:
            sizes[loop] = longer[loop] = longest(loop, l1_bytes if loop is inner
                                                 else l2_bytes)
    longer = {loop: size for loop, size in longer.items() if size > tile}
    if not longer:
        return None
    parts = []
    if inner in longer:
        parts.append(f"{inner.var} {longer[inner]}: the rows the register tile sweeps "
                     f"along it fit half the {format_bytes(l1_bytes)} L1")
    middle = [loop for loop in band[1:-1] if loop in longer]
    if middle:
        parts.append(f"{', '.join(f'{loop.var} {longer[loop]}' for loop in middle)}: the "
                     f"panel inside fits half the {format_bytes(l2_bytes)} L2")
    return Panel(tuple(longer.get(loop, 0) for loop in band), "; ".join(parts))
