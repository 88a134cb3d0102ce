"""GPU variants of the segmented scan: CUDA C in kernels.cu, launched through CuPy.

gpu-flags-blelloch's launches follow from the size alone (:func:`blelloch_levels`, tested
without a GPU): a level per tile count until one tile is left, block scans going up, fix-ups
coming down.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from loclab.cases.base import Bound
from loclab.cases.segmented_scan import (BLELLOCH_BLOCK, BLELLOCH_TILE, EMPTY_SHARE,
                                         SINGLE_PASS_BLOCK, SINGLE_PASS_TILE,
                                         SINGLE_PASS_VECTORS, cumsum_formulation)
from loclab.gpu import cub
from loclab.gpu.kernels import KernelAccesses, KernelSource, Launch, blocks, in_order, zeroed
from loclab.hw import Machine
from loclab.model.access import DeclaredAccess

BLELLOCH = f"segscan_blelloch<{BLELLOCH_BLOCK}>"
FIXUP = f"segscan_fixup<{BLELLOCH_BLOCK}>"
SINGLE_PASS = f"segscan_single_pass<{SINGLE_PASS_BLOCK},{SINGLE_PASS_VECTORS}>"
OFFSETS_BLOCK, OFFSETS_ITEMS = 256, 4  # 8 segments per block, 4 loads in flight per lane
OFFSETS = f"segscan_offsets<{OFFSETS_BLOCK},{OFFSETS_ITEMS}>"

# The kernels' main accesses at their loops' first step (h, k = 0). Data-dependent parts are
# approximated (notes say how): a segment's or tile's first head, a segment's start (mostly not
# sector aligned: modelled at 1, as histogram's partitions), the number of segments (the
# expected number for make_inputs' flags: n/segment, one for segment >= n, a third more with
# empty ones). Tiny per-tile arrays (pairs, first heads, carries, states) are left out; so are
# gpu-single-pass's look-back reads, 32 states of 8 bytes per window and rarely more than one
# window per tile: under 1% of a tile's 36 KiB.
_SEGMENTS = f"(n + segment - 1)/segment*({EMPTY_SHARE} + empty)/{EMPTY_SHARE}"
# Elements before a tile's first head, from a geometric gap of mean ``segment`` capped at the
# tile: about TILE*segment/(TILE + segment) per tile; 1 more so that it never reads as zero.
_BEFORE_HEAD = "(n + 2*BLOCK - 1)/(2*BLOCK)*(2*BLOCK*segment/(2*BLOCK + segment)) + 1"
_BLELLOCH_AT = "blockIdx.x*2*BLOCK + threadIdx.x + h*BLOCK"
# float4 (VEC4) number of chunk k of a thread: tile blockIdx.x (tiles are numbered in the order
# blocks start, which blockIdx.x approximates), warp threadIdx.x/32's run of 32*V float4,
# float4 k*32 + lane in it.
_CHUNK = "blockIdx.x*BLOCK*V + threadIdx.x/32*32*V + k*32 + threadIdx.x%32"
_SEGMENT_AT = "first + k*32 + threadIdx.x%32"
ACCESSES = (
    KernelAccesses("segscan_blelloch", ("BLOCK",), (
        DeclaredAccess(f"values[{_BLELLOCH_AT}]", "global", 4, note="read a tile, two "
                       "elements a thread (the levels above, n/TILE elements, left out)",
                       count="n", count_per_run=True),
        DeclaredAccess(f"flags[{_BLELLOCH_AT}]", "global", 1, note="read the head flags",
                       count="n", count_per_run=True),
        DeclaredAccess("x[(threadIdx.x + 1)*2 - 1]", "shared", 4, ("2*BLOCK",),
                       note="the up-sweep's first step (d = 1): pairs 2 apart; deeper steps "
                       "conflict more with fewer threads active"),
        DeclaredAccess(f"out[{_BLELLOCH_AT}]", "global", 4, note="write the tile's scan",
                       write=True, count="n", count_per_run=True)),
        at=(("h", 0),), block=("BLOCK",)),
    KernelAccesses("segscan_fixup", ("BLOCK",), (
        DeclaredAccess("out[(blockIdx.x + 1)*2*BLOCK + threadIdx.x]", "global", 4,
                       note="read a tile's elements before its first head (expected count "
                       "for geometric segment lengths; every level)",
                       count=_BEFORE_HEAD, count_per_run=True),
        DeclaredAccess("out[(blockIdx.x + 1)*2*BLOCK + threadIdx.x]", "global", 4,
                       note="add the carry and write them back", write=True,
                       count=_BEFORE_HEAD, count_per_run=True)),
        block=("BLOCK",)),
    KernelAccesses("segscan_single_pass", ("BLOCK", "V"), (
        DeclaredAccess(f"values4[{_CHUNK}]", "global", 16, note="read 4 values (float4): a "
                       "warp's k-th load covers 512 contiguous bytes", count="(n + 3)/4"),
        DeclaredAccess(f"flags4[{_CHUNK}]", "global", 4, note="read 4 head flags (a u32)",
                       count="(n + 3)/4"),
        DeclaredAccess(f"out4[{_CHUNK}]", "global", 16, note="write 4 results (float4)",
                       write=True, count="(n + 3)/4")),
        at=(("k", 0),), block=("BLOCK",)),
    KernelAccesses("segscan_offsets", ("BLOCK", "ITEMS"), (
        DeclaredAccess("offsets[(blockIdx.x*BLOCK + threadIdx.x)/32]", "global", 4,
                       note="each lane reads its warp's segment bounds (a broadcast; "
                       "expected segment count)", count=f"32*{_SEGMENTS}"),
        DeclaredAccess(f"values[{_SEGMENT_AT}]", "global", 4, note="read the segment from "
                       "offsets[s] (first = 1: unaligned; a short segment's warp is mostly "
                       "idle lanes, which the count of elements does not show)", count="n"),
        DeclaredAccess(f"out[{_SEGMENT_AT}]", "global", 4, note="write its scan",
                       write=True, count="n")),
        at=(("k", 0), ("first", 1)), block=("BLOCK",)),
)

KERNELS = KernelSource(Path(__file__).with_name("kernels.cu"),
                       (BLELLOCH, FIXUP, SINGLE_PASS, OFFSETS), ACCESSES)


def blelloch_levels(n: int, tile: int = BLELLOCH_TILE) -> list[int]:
    """The element count of each level of gpu-flags-blelloch: n, then its tile count, and so
    on until a level fits one tile (that level has no carries to fix up)."""
    levels = [n]
    while levels[-1] > tile:
        levels.append(blocks(levels[-1], tile))
    return levels


def flags_blelloch(inputs: dict, out: Any, machine: Machine) -> Bound:
    """Per level: a block scan of its (values, flags) into its output, writing each tile's
    pair and first head; the tiles' pairs are the next level's input, whose output is the
    carry of each tile. Then, from the top down, each level's fix-up (a level's carries are
    final once the level above is fixed up). Temporaries are allocated here, not in the run."""
    import cupy

    values, flags, output = inputs["values"], inputs["flags"], out
    ups, downs = [], []
    for size in blelloch_levels(values.size):
        tiles = blocks(size, BLELLOCH_TILE)
        sums = cupy.empty(tiles, cupy.float32)
        heads = cupy.empty(tiles, cupy.uint8)
        first_heads = cupy.empty(tiles, cupy.int32)
        ups.append(Launch(KERNELS, BLELLOCH, grid=(tiles,), block=(BLELLOCH_BLOCK,),
                          args=(values, flags, output, np.int64(size), sums, heads,
                                first_heads), result=output))
        if tiles == 1:
            break
        carries = cupy.empty(tiles, cupy.float32)
        downs.append(Launch(KERNELS, FIXUP, grid=(tiles - 1,), block=(BLELLOCH_BLOCK,),
                            args=(output, np.int64(size), carries, first_heads),
                            result=output))
        values, flags, output = sums, heads, carries
    return Bound(in_order(*ups, *downs[::-1]),
                 {"block": [BLELLOCH_BLOCK], "tile": BLELLOCH_TILE, "levels": len(ups)})


def vectorizable(*arrays: Any) -> bool:
    """The float4 loads and stores need 16-byte aligned values and output, the u32 loads of
    four flags a 4-byte aligned start (tiles and chunks start at multiples of 4 elements)."""
    values, flags, out = arrays
    return values.data.ptr % 16 == 0 and out.data.ptr % 16 == 0 and flags.data.ptr % 4 == 0


def single_pass(inputs: dict, out: Any, machine: Machine) -> Bound:
    """One launch of a block per tile, after zeroing the tile counter and the tiles' states
    (every state INVALID) with two memsets."""
    import cupy

    values, flags, n = inputs["values"], inputs["flags"], inputs["values"].size
    tiles = blocks(n, SINGLE_PASS_TILE)
    counter = cupy.empty(1, cupy.uint32)
    states = cupy.empty(tiles, cupy.uint64)
    aligned = vectorizable(values, flags, out)
    launch = Launch(KERNELS, SINGLE_PASS, grid=(tiles,), block=(SINGLE_PASS_BLOCK,),
                    args=(values, flags, out, np.int64(n), np.int32(aligned), counter, states),
                    result=out)

    return Bound(in_order(launch, before=partial(zeroed, counter, states)),
                 {"block": [SINGLE_PASS_BLOCK], "tile": SINGLE_PASS_TILE, "tiles": tiles,
                  "vector": 4 if aligned else 1})


def offsets(inputs: dict, out: Any, machine: Machine) -> Bound:
    bounds = inputs["offsets"]
    segments = bounds.size - 1
    launch = Launch(KERNELS, OFFSETS, grid=(blocks(segments * 32, OFFSETS_BLOCK),),
                    block=(OFFSETS_BLOCK,),
                    args=(inputs["values"], bounds, out, np.int64(segments)), result=out)
    return Bound(launch, {"block": [OFFSETS_BLOCK], "items": OFFSETS_ITEMS,
                          "segments": segments})


def library(inputs: dict, out: Any, machine: Machine) -> Bound:
    import cupy

    return Bound(partial(cumsum_formulation, inputs["values"], inputs["flags"], cupy))


def cub_by_key(inputs: dict, out: Any, machine: Machine) -> Bound:
    """CUB's segmented scan takes a key per element and restarts where the key changes: the
    segment ids (an inclusive scan of the head flags) are made here, once, untimed."""
    import cupy

    values = inputs["values"]
    keys = cupy.cumsum(inputs["flags"], dtype=cupy.int32)
    return Bound(cub.prepared("inclusive_sum_by_key_float", keys, values, out, values.size,
                              result=out), {"keys": "segment ids (cumsum of the flags), untimed"})
