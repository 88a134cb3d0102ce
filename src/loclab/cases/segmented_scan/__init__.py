"""Segmented scan: an inclusive prefix sum that restarts at the start of every segment.

``out[i] = values[h] + ... + values[i]``, h the start of i's segment. A segmentation has two
representations, and the input carries both: ``flags``, a head flag per element (1 where a
segment starts, ``flags[0] = 1``), and ``offsets``, the m + 1 start offsets of m segments
ending at n, where an empty segment is a repeated offset. Head flags cannot show an empty
segment (there is no element to flag): the lecture's point that the two representations are
not the same, and why a sparse matrix's row pointers (offsets) turn into flags only after the
empty rows are dealt with. The golden loop reads the flags.

The lecture's flag-based formulation turns any scan into a segmented one: scan (head, sum)
pairs with the operator (h1, s1) + (h2, s2) = (h1 | h2, h2 ? s2 : s1 + s2), which is
associative. Its up-sweep / down-sweep in shared memory is ``gpu-flags-blelloch``: a tile per
block, the tiles' pairs scanned one level up by the same kernel, then a fix-up that adds each
tile's carry to its elements before its first head (the only ones whose segment began
earlier). That reads and writes the data more than once; ``gpu-single-pass`` reads the input
once and writes the output once (Merrill and Garland's decoupled look-back, 2016): each tile
publishes its pair as soon as it has scanned itself and looks back over its predecessors'
published states for its carry. Segments help it: a tile holding a head knows its inclusive
prefix without looking back and publishes it at once, so a look-back stops at the first
predecessor with a head, and a tile that starts with a head needs no carry at all. Tile
numbers come from an atomic counter in the order blocks start, so a look-back only ever waits
for a tile whose block is already running (forward progress without co-scheduling).
``gpu-offsets`` reads the other representation: a warp per segment, plain sums, coalesced and
cheap for long segments, 31 idle lanes for segments of one element. The library rows
(``numpy``, ``cupy``) are a formulation, not a segmented-scan call: a plain cumsum minus the
cumsum just before each element's segment, exact here (below). On the CPU, ``cpu-two-pass``
scans chunks in parallel as if each started a segment, scans the chunks' pairs sequentially,
and fixes up each chunk's elements before its first head; each task steps through four chunks
side by side, since one running sum is a chain of dependent adds that waits for each add's
latency, not for memory (twice as fast on a 2-core VM). With one long segment the fix-up
rewrites almost everything: a second pass that scan-then-propagate pays and short segments
do not.

Values are ``dyadic_nonzero`` (multiples of 1/64 in [-1, 1]): every sum of a contiguous range
is exact in float32 while the running total stays in range, so every variant must match the
golden output exactly, whatever order it adds in (``tolerance``). Dimensions: ``n``;
``segment``, the mean segment length (head flags drawn with probability 1/segment, so lengths
are geometric; 1: all segments of length 1; >= n: one segment); ``empty`` (0 or 1): with 1,
about one segment in four of ``offsets`` is empty, a leading and a trailing one always.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from loclab.cases.base import (Case, Variant, Work, dyadic_nonzero, exact_sums_tolerance, lazy,
                               summation_tolerance)
from loclab.gpu import cub
from loclab.hw import Machine

CPU = "loclab.cases.segmented_scan.cpu"
GPU = "loclab.cases.segmented_scan.gpu"
CHUNK = 1 << 22  # elements generated, or summed in float64 by the golden code, at a time
# Bytes per element the golden loop moves: a float32 value and a uint8 flag read, a float32
# written.
ELEMENT_BYTES = 4 + 1 + 4
EMPTY_SHARE = 3  # with empty = 1, each offset is repeated with probability 1/3: 1 in 4 empty
SEGMENTS = (1, 32, 1000)  # mean segment lengths of the sweeps: all of length 1, a warp, long

# The GPU kernels' tiles (gpu.py launches them so; the test sizes straddle them).
BLELLOCH_BLOCK = 512  # gpu-flags-blelloch: tiles of 2 * 512 elements
# gpu-single-pass: 4 float4 per thread. On an H100 at n = 2**28 (copy: 2953 GB/s, counting
# 9 bytes an element) blocks x float4 of 256 x 4 ran at 2891, 2472, 2448 and 1967 GB/s for
# segments of 1, 32, 1000 and one segment; 128 x 4, 128 x 8, 256 x 8 and 512 x 4 within 5% of
# it, 256 x 2, 512 x 2 and 1024 x 1 or 2 up to 40% slower. The look-back is what segments of
# 1 (every tile starts with a head) do without.
SINGLE_PASS_BLOCK, SINGLE_PASS_VECTORS = 256, 4
BLELLOCH_TILE = 2 * BLELLOCH_BLOCK
SINGLE_PASS_TILE = SINGLE_PASS_BLOCK * SINGLE_PASS_VECTORS * 4


def head_flags(n: int, segment: int, rng: np.random.Generator) -> np.ndarray:
    """uint8 head flags: 1 with probability 1/segment (one segment when segment >= n), and
    always at element 0. Drawn a chunk at a time: no n float64 temporary."""
    flags = np.empty(n, np.uint8)
    share = 1.0 / segment if segment < n else 0.0
    for lo in range(0, n, CHUNK):
        flags[lo:lo + CHUNK] = rng.random(min(CHUNK, n - lo)) < share
    flags[0] = 1
    return flags


def head_positions(flags: np.ndarray) -> np.ndarray:
    """The int32 positions of the heads, found a chunk at a time (no n int64 temporary)."""
    parts = [np.flatnonzero(flags[lo:lo + CHUNK]).astype(np.int32) + np.int32(lo)
             for lo in range(0, flags.size, CHUNK)]
    return np.concatenate(parts) if parts else np.zeros(0, np.int32)


def segment_offsets(flags: np.ndarray, rng: np.random.Generator, empty: int) -> np.ndarray:
    """int32 offsets of the segments the flags start, ending at n. With ``empty``, each offset
    is repeated (an empty segment) with probability 1/EMPTY_SHARE, and the first and the last
    always: a leading and a trailing empty segment at every size."""
    bounds = np.append(head_positions(flags), np.int32(flags.size))
    if not empty:
        return bounds
    repeats = 1 + (rng.integers(0, EMPTY_SHARE, bounds.size, dtype=np.uint8) == 0)
    repeats[0] = repeats[-1] = 2
    return np.repeat(bounds, repeats)


def make_inputs(dims: dict[str, int], rng: np.random.Generator) -> dict[str, np.ndarray]:
    flags = head_flags(dims["n"], dims["segment"], rng)
    return {"values": dyadic_nonzero(rng, dims["n"]), "flags": flags,
            "offsets": segment_offsets(flags, rng, dims["empty"])}


def golden(inputs: dict[str, np.ndarray]) -> np.ndarray:
    """The sequential loop's result: each element's running total minus the running total
    just before its segment's head, in float64 (exact for these values: every partial sum is
    a multiple of 1/64 below 2**37), rounded once to float32. A chunk at a time, carrying the
    running total and the total before the current segment from chunk to chunk."""
    values, flags = inputs["values"], inputs["flags"]
    n = values.size
    out = np.empty(n, np.float32)
    total, before_segment = 0.0, 0.0
    for lo in range(0, n, CHUNK):
        v = values[lo:lo + CHUNK].astype(np.float64)
        running = np.cumsum(v)
        running += total
        last_head = np.where(flags[lo:lo + CHUNK] != 0, np.arange(v.size), -1)
        np.maximum.accumulate(last_head, out=last_head)
        before = np.where(last_head >= 0, running[last_head] - v[last_head], before_segment)
        out[lo:lo + CHUNK] = running - before
        total, before_segment = float(running[-1]), float(before[-1])
    return out


def cumsum_formulation(values: Any, flags: Any, xp: Any) -> Any:
    """The library rows' formulation (``xp``: NumPy or CuPy): the running total minus the
    running total just before each element's segment, in float32, exact for these values.
    Segment k of the non-empty ones starts at heads[k]; an element's k is the number of heads
    up to it, less 1 (flags[0] = 1: every element has a segment)."""
    total = xp.cumsum(values)
    segment = xp.cumsum(flags, dtype=xp.int32)
    segment -= 1
    heads = xp.flatnonzero(flags)
    return total - (total[heads] - values[heads])[segment]


def largest_running_total(values: np.ndarray) -> float:
    """max |values[0] + ... + values[i]| over i, in float64 a chunk at a time."""
    largest, total = 0.0, 0.0
    for lo in range(0, values.size, CHUNK):
        running = np.cumsum(values[lo:lo + CHUNK], dtype=np.float64)
        running += total
        largest = max(largest, float(np.abs(running).max()))
        total = float(running[-1])
    return largest


def tolerance(inputs: dict[str, np.ndarray]) -> float:
    """0 while every sum any variant forms is exact, else the bound for any summation order.

    The segmented variants add contiguous ranges within one segment; the cumsum formulation
    (numpy, cupy) forms running totals over the whole input and subtracts two of them. Both
    are differences of the input's running totals, so ``exact_sums_tolerance`` is asked about
    those (not each segment's, which would miss the formulation's), with all n terms. Beyond
    its exact range (n near 2**31 and an unlucky walk), the bound for two running totals of
    n terms of magnitude <= 1, relative to golden's largest value as ``compare`` measures."""
    values = inputs["values"]
    terms = values.size
    if exact_sums_tolerance(np.array([largest_running_total(values)]), terms) == 0.0:
        return 0.0
    largest = max(float(np.abs(golden(inputs)).max()), 1.0 / 64)
    return 2 * summation_tolerance(terms) * terms / largest


def output(dims: dict[str, int]) -> tuple[tuple[int, ...], type]:
    return (dims["n"],), np.float32


def work(dims: dict[str, int]) -> Work:
    """The golden loop reads each value and flag once, writes each output once, adds once."""
    return Work(bytes=ELEMENT_BYTES * dims["n"], flops=dims["n"])


def _sweep(n: int, segments: Sequence[int] = SEGMENTS) -> list[dict[str, int]]:
    return [{"n": n, "segment": segment, "empty": 0} for segment in segments]


def _beyond(cache_bytes: Callable[[Machine], int | None], least: int,
            segments: Sequence[int] = SEGMENTS) -> Callable[[Machine], list[dict[str, int]]]:
    """The sweep at the smallest power of two n (at least ``least``) whose golden bytes are
    four times the cache; none without the device."""
    def rule(machine: Machine) -> list[dict[str, int]]:
        cache = cache_bytes(machine)
        if cache is None:
            return []
        elements = -(-4 * cache // ELEMENT_BYTES)
        return _sweep(max(least, 1 << (elements - 1).bit_length()), segments)
    return rule


def _gpu_l2(machine: Machine) -> int | None:
    return machine.gpu.l2_bytes if machine.gpu else None


SIZES = {
    "small": {"cpu": _sweep(2**20), "gpu": _sweep(2**20)},
    # On the CPU one row (segments of about 1000) at 4x the LLC share: every variant's
    # validation and timing within seconds on 2 cores.
    "default": {"cpu": _beyond(lambda m: m.cpu.llc_share_bytes, 2**22, (1000,)),
                "gpu": _sweep(2**28)},
    "large": {"cpu": _beyond(lambda m: m.cpu.llc_bytes, 2**26),
              "gpu": _beyond(_gpu_l2, 2**29)},
}

# Awkward sizes: one element, a warp and one around it, a tile of either GPU kernel plus one,
# 2**16 - 1, a last single-pass tile of one element, three levels of gpu-flags-blelloch;
# segments all of length 1, of a warp, longer than a tile, one segment (segment >= n, over 51
# single-pass tiles: a look-back beyond a window of 32), and empty segments in the offsets.
TEST_DIMS = tuple({"n": n, "segment": segment, "empty": empty} for n, segment, empty in (
    (1, 1, 0), (1, 1, 1), (31, 1, 0), (32, 7, 1), (33, 40, 0), (BLELLOCH_TILE + 1, 3, 0),
    (SINGLE_PASS_TILE + 1, 10**6, 0), (2**16 - 1, 1000, 1), (3 * SINGLE_PASS_TILE + 1, 10_000, 1),
    (2**20 + 1, 32, 0), (50 * SINGLE_PASS_TILE + 3, 2**31 - 1, 0), (100_003, 1, 1)))


CASE = Case(
    name="segmented-scan",
    lesson="segmented scan: head flags or offsets; the segmented operator on (head, sum) "
           "pairs; single-pass decoupled look-back that stops at a segment's head",
    description="inclusive sum of float32 values restarting at each segment (uint8 head "
                "flags; int32 offsets, empty segments only there)",
    sizes=SIZES,
    make_inputs=make_inputs,
    golden=golden,
    output=output,
    work=work,
    tolerance=tolerance,
    test_dims=TEST_DIMS,
    sweep="segment",
    variants=(
        Variant("cpu-sequential", "cpu", "naive",
                "the golden loop: one pass, the running sum restarts at each head flag",
                lazy(CPU, "sequential")),
        Variant("cpu-two-pass", "cpu", "optimized",
                "prange over chunks, each scanned as if it began a segment (4 chunks side by "
                "side per task: independent chains of adds); a sequential scan of the chunks' "
                "(head, sum) pairs into carries; a prange fix-up of each chunk's elements "
                "before its first head",
                lazy(CPU, "two_pass")),
        Variant("numpy", "cpu", "library",
                "a formulation, not a segmented-scan call: numpy.cumsum(values) minus the "
                "cumsum just before each element's segment (exact for these values)",
                lazy(CPU, "library")),
        Variant("gpu-flags-blelloch", "gpu", "naive",
                "the lecture's flag-based up-sweep / down-sweep per tile of 1024 in shared "
                "memory; the tiles' (head, sum) pairs scanned by the same kernel a level up; "
                "a fix-up per level up to each tile's first head",
                lazy(GPU, "flags_blelloch")),
        Variant("gpu-single-pass", "gpu", "optimized",
                "decoupled look-back: one read, one write; tiles of 4096 in registers (float4 "
                "loads), tile ids from an atomic counter, each tile's state one 64-bit word; "
                "a tile with a head publishes its prefix at once, ending look-backs there",
                lazy(GPU, "single_pass")),
        Variant("gpu-offsets", "gpu", "optimized",
                "a warp per segment from the offsets: coalesced shuffle scans with a running "
                "carry, no flags (long segments; 31 lanes idle on segments of 1)",
                lazy(GPU, "offsets")),
        Variant("cupy", "gpu", "library",
                "a formulation, not a segmented-scan call: cupy.cumsum(values) minus the "
                "cumsum just before each element's segment (exact for these values)",
                lazy(GPU, "library")),
        Variant("cub", "gpu", "library",
                "CUB's DeviceScan::InclusiveSumByKey over segment ids (the cumsum of the "
                "flags, made once beforehand: it reads 4-byte keys where others read 1-byte "
                "flags)", lazy(GPU, "cub_by_key"), skip=cub.skip_rule),
    ),
    dimensions=("n", "segment", "empty"),
    ranges={"empty": (0, 1)},
)
