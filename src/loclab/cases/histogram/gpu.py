"""GPU variants of the histogram: CUDA C in kernels.cu, launched through CuPy."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from loclab.cases.base import Bound
from loclab.cases.histogram import OUT_OF_RANGE_SHARE, work
from loclab.gpu.kernels import KernelAccesses, KernelSource, Launch, blocks, in_order, zeroed
from loclab.hw import Machine
from loclab.model.access import DeclaredAccess

THREADS = 256
ITEMS = 4  # elements per thread per step of the atomic kernels: loads in flight


# gpu-partitioned: tiles of PARTITION_THREADS x PARTITION_ITEMS elements, at most MAX_PARTS
# chunks (the chunk grows beyond the fraction of L2 when the histogram would need more).
PARTITION_THREADS, PARTITION_ITEMS, MAX_PARTS = 256, 16, 256
PARTITION_TILE = PARTITION_THREADS * PARTITION_ITEMS
PARTITION_TEMPLATE = f"<{PARTITION_THREADS},{PARTITION_ITEMS},{MAX_PARTS}>"
# Half of L2 per chunk: the other half holds the streamed input and the other partition of
# L2 that Hopper's far-side accesses fill.
L2_FRACTION = 0.5
# Enough blocks to fill every SM several times over; grid-stride loops do the rest.
BLOCKS_PER_SM = 16

# gpu-bucketed: a sample of 1 chunk of 1,024 indices in 64; a one-block room plan; tiles of
# 20,480 elements sorted by bucket in shared memory (long runs per bucket for the writes), one
# block per SM, 20 elements a thread in registers (64 registers, no spills; the H100 at 2x L2:
# 3.72 ms for the scatter against 4.06 with 16,384-element tiles); per-bucket sums with 1,024
# threads, four 4-record groups in flight each (eight: no faster).
SAMPLE_THREADS, SAMPLE_EVERY = 256, 64
SAMPLE_CHUNK = 4 * SAMPLE_THREADS  # a 16-byte load per thread
ROOM_THREADS = 1024
# A bucket's room: its sampled count scaled up, plus this many standard deviations of that
# estimate: at 2^29 uniform elements and 1,848 buckets, a spill is a 4-sigma event per bucket.
ROOM_SPREAD = 4.0
SCATTER_THREADS, SCATTER_ITEMS = 1024, 20
SCATTER_TILE = SCATTER_THREADS * SCATTER_ITEMS
SCATTER_BUCKET_BYTES = 16  # shared memory per bucket beside the tile (a position, two counts)
SUM_THREADS, SUM_GROUPS = 1024, 4
RECORD_BYTES = 6  # a record: the bin's offset in its bucket (16 bits) and the value
RECORD_GROUP = 8  # records per 16-byte load of offsets; rooms hold whole groups
MAX_BUCKET_BINS = 2**16  # offsets are 16 bits
BUCKET_SAMPLE = f"bucket_sample<{SAMPLE_THREADS}>"
BUCKET_ROOM = f"bucket_room<{ROOM_THREADS}>"
BUCKET_SCATTER = f"bucket_scatter<{SCATTER_THREADS},{SCATTER_ITEMS}>"
BUCKET_SUM = f"bucket_sum<{SUM_THREADS},{SUM_GROUPS}>"
SPILL_SUM = f"histogram_segment<{ITEMS}>"  # the spill list, added by global atomics
# Shared memory the CUDA runtime keeps for itself in each block.
RESERVED_SHARED = 1024

# The kernels' main accesses at a grid-stride loop's first step (k = 0: the first of a thread's
# ITEMS elements; tile = blockIdx.x). An element whose index is out of range is skipped: KEPT
# (the expected count of the rest given make_inputs' range of indices, rounded up) update the
# histogram and are moved by the sorts. Coalesced reads whose skipped lanes share sectors
# with kept ones count n.
_RANGE = f"(bins + bins/{OUT_OF_RANGE_SHARE} + 1)"  # index values drawn
KEPT = f"(n*bins + {_RANGE} - 1)/{_RANGE}"
# An atomic on a random bin (or a sorted run's data-dependent start) has no affine subscript.
# A random bin costs a sector per lane: stride 8 floats gives that. Shared atomics on random
# bins or buckets have no such stand-in (their bank conflicts are a balls-into-bins maximum),
# so they are left out; so are counters whose number depends on the GPU (grid, L2 chunks).
# KEPT updates in a whole run: gpu-multipass's passes share them out by chunk.
_RANDOM_BIN = DeclaredAccess("hist[threadIdx.x*8]", "global", 4, note="atomicAdd on random "
                             "bins: a sector each (modelled as stride 8)", write=True,
                             count=KEPT, count_per_run=True)
# Data-dependent starts (a segment's offsets[begin], a bucket's run): mostly not sector
# aligned (7 in 8), so they are modelled at 1.
_START = 1
_STRIDED = "blockIdx.x*blockDim.x*ITEMS + threadIdx.x + k*blockDim.x"
_TILED = "blockIdx.x*{0}*ITEMS + k*{0} + threadIdx.x"  # element k of a thread in tile blockIdx.x
ACCESSES = (
    KernelAccesses("histogram_atomic", ("ITEMS",), (
        DeclaredAccess(f"inds[{_STRIDED}]", "global", 4, note="read the indices", count="n"),
        DeclaredAccess(f"vals[{_STRIDED}]", "global", 4, note="read the values (a pass of "
                       "gpu-multipass loads only sectors with a bin in its chunk)", count="n"),
        _RANDOM_BIN), at=(("k", 0),), block=(THREADS,)),
    KernelAccesses("histogram_segment", ("ITEMS",), (
        DeclaredAccess(f"part_inds[first + {_STRIDED}]", "global", 4, note="read the chunk's "
                       "indices from offsets[begin] (first = 1: unaligned); all passes",
                       count=KEPT, count_per_run=True),
        DeclaredAccess(f"part_vals[first + {_STRIDED}]", "global", 4, note="read the chunk's "
                       "values; all passes together", count=KEPT, count_per_run=True),
        _RANDOM_BIN), at=(("k", 0), ("first", _START)), block=(THREADS,)),
    KernelAccesses("histogram_shared", (), (
        DeclaredAccess("inds[blockIdx.x*blockDim.x + threadIdx.x]", "global", 4,
                       note="read the indices", count="n"),
        DeclaredAccess("vals[blockIdx.x*blockDim.x + threadIdx.x]", "global", 4,
                       note="read the values (sub[ind] shared atomics, random banks, and the "
                       "merge, grid x bins atomics, not declared)", count="n")),
        block=(THREADS,)),
    KernelAccesses("partition_count", ("BLOCK", "ITEMS", "MAX_PARTS"), (
        DeclaredAccess(f"inds[{_TILED.format('BLOCK')}]", "global", 4, note="read the "
                       "indices (tallies: data-dependent shared atomics; parts x tiles "
                       "counters, parts from the L2 size: not declared)", count="n"),),
        at=(("k", 0),), block=("BLOCK",)),
    KernelAccesses("partition_scatter", ("BLOCK", "ITEMS", "MAX_PARTS"), (
        DeclaredAccess(f"inds[{_TILED.format('BLOCK')}]", "global", 4,
                       note="read the indices", count="n"),
        DeclaredAccess(f"vals[{_TILED.format('BLOCK')}]", "global", 4,
                       note="read the values", count="n"),
        DeclaredAccess("part_inds[cursor + threadIdx.x]", "global", 4, note="lanes of a chunk "
                       "write a run from cursor[part]: one unaligned run (exact with one chunk; "
                       "with p chunks a warp writes up to min(p, 32) runs)", write=True,
                       count=KEPT),
        DeclaredAccess("part_vals[cursor + threadIdx.x]", "global", 4, note="the values, as "
                       "the indices", write=True, count=KEPT)),
        at=(("k", 0), ("cursor", _START)), block=("BLOCK",)),
    KernelAccesses("bucket_sample", ("THREADS",), (
        DeclaredAccess(f"inds4[blockIdx.x*{SAMPLE_EVERY}*THREADS + threadIdx.x]", "global", 16,
                       note=f"read one chunk of indices in {SAMPLE_EVERY} (tally[bucket]: "
                       "data-dependent shared atomics, not declared)",
                       count=f"(n + {SAMPLE_CHUNK * SAMPLE_EVERY - 1})/"
                             f"{SAMPLE_CHUNK * SAMPLE_EVERY}*THREADS"),),
        block=("THREADS",)),
    # One block over per-bucket tables, whose size depends on the GPU (SMs, shared memory).
    KernelAccesses("bucket_room", ("THREADS",), (), block=("THREADS",)),
    KernelAccesses("bucket_scatter", ("THREADS", "ITEMS"), (
        DeclaredAccess("inds4[blockIdx.x*THREADS*ITEMS/4 + threadIdx.x]", "global", 16,
                       note="read the indices", count="(n + 3)/4"),
        DeclaredAccess("vals4[blockIdx.x*THREADS*ITEMS/4 + threadIdx.x]", "global", 16,
                       note="read the values", count="(n + 3)/4"),
        DeclaredAccess("tile_keys[threadIdx.x]", "shared", 4, ("THREADS*ITEMS",),
                       note="read the sorted tile (its writes go to data-dependent slots: "
                       "not declared)"),
        DeclaredAccess("tile_vals[threadIdx.x]", "shared", 4, ("THREADS*ITEMS",),
                       note="read the sorted tile's values"),
        DeclaredAccess("rec_offsets[to + threadIdx.x]", "global", 2, note="write the bucket's "
                       "run of records (to = 1: unaligned; a warp crossing into the next "
                       "bucket's run touches a sector or two more)", write=True, count=KEPT),
        DeclaredAccess("rec_vals[to + threadIdx.x]", "global", 4, note="the values, as the "
                       "offsets", write=True, count=KEPT)),
        at=(("to", _START),), block=("THREADS",)),
    KernelAccesses("bucket_sum", ("THREADS", "GROUPS"), (
        DeclaredAccess("offsets2[first + threadIdx.x]", "global", 8, note="read the bucket's "
                       "offsets, 4 a load, from its room's sector-aligned start (sub[offset]: "
                       "shared atomics, random banks, not declared)", count=f"({KEPT} + 3)/4"),
        DeclaredAccess("values4[first + threadIdx.x]", "global", 16,
                       note="read the bucket's values, 4 a load", count=f"({KEPT} + 3)/4"),
        DeclaredAccess("hist[threadIdx.x]", "global", 4, note="write each bin once (block 0: "
                       "lo = 0)", write=True, count="bins")),
        at=(("first", 0),), block=("THREADS",)),
)

KERNELS = KernelSource(Path(__file__).with_name("kernels.cu"), (
    f"histogram_atomic<{ITEMS}>",
    f"histogram_segment<{ITEMS}>",
    "histogram_shared",
    f"partition_count{PARTITION_TEMPLATE}",
    f"partition_scatter{PARTITION_TEMPLATE}",
    BUCKET_SAMPLE,
    BUCKET_ROOM,
    BUCKET_SCATTER,
    BUCKET_SUM,
), ACCESSES)


def _grid(machine: Machine, n: int, per_block: int = THREADS * ITEMS) -> int:
    """``per_block`` elements per block up to a few waves of blocks per SM (the grid-stride
    loops cover the rest)."""
    return min(blocks(n, per_block), machine.gpu.sms * BLOCKS_PER_SM)


def chunk_bins(bins: int, machine: Machine, fraction: float, max_parts: int | None = None) -> int:
    """Bins per pass: ``fraction`` of the L2, or more where that would exceed ``max_parts``."""
    chunk = max(1, int(fraction * machine.gpu.l2_bytes) // 4)
    if max_parts is not None:
        chunk = max(chunk, -(-bins // max_parts))
    return chunk


def _atomic_pass(inputs: dict, out: Any, machine: Machine, lo: int, hi: int) -> Launch:
    inds, vals = inputs["inds"], inputs["vals"]
    return Launch(KERNELS, f"histogram_atomic<{ITEMS}>", grid=(_grid(machine, inds.size),),
                  block=(THREADS,), args=(inds, vals, out, np.int64(inds.size), np.uint32(lo),
                                          np.uint32(hi)), result=out)


def atomic(inputs: dict, out: Any, machine: Machine) -> Bound:
    launch = _atomic_pass(inputs, out, machine, 0, out.size)
    return Bound(in_order(launch, before=partial(zeroed, out)),
                 {"block": [THREADS], "items": ITEMS, "grid": list(launch.grid)})


def multipass(inputs: dict, out: Any, machine: Machine, fraction: float = L2_FRACTION) -> Bound:
    bins = out.size
    chunk = chunk_bins(bins, machine, fraction)
    launches = [_atomic_pass(inputs, out, machine, lo, min(lo + chunk, bins))
                for lo in range(0, bins, chunk)]
    return Bound(in_order(*launches, before=partial(zeroed, out)),
                 {"chunk_bins": chunk, "l2_fraction": fraction, "passes": len(launches)})


@dataclass(frozen=True)
class Partition:
    """The input grouped by chunk of the histogram: ``run()`` fills ``part_inds`` and
    ``part_vals`` so that chunk k's elements lie in [offsets[k * tiles], offsets[(k+1) tiles])."""

    run: Callable[[], None]
    offsets: Any
    part_inds: Any
    part_vals: Any
    tiles: int


def partition(inputs: dict, machine: Machine, bins: int, chunk: int) -> Partition:
    """Count per (chunk, tile), scan, scatter: the input grouped by chunk in one read and one
    write (after a read of the indices to count)."""
    import cupy

    inds, vals, n = inputs["inds"], inputs["vals"], inputs["inds"].size
    parts, tiles = -(-bins // chunk), blocks(n, PARTITION_TILE)
    counts = cupy.zeros(parts * tiles + 1, cupy.int64)  # counts[0] stays 0
    offsets = cupy.empty_like(counts)
    part_inds = cupy.empty(n, cupy.uint32)
    part_vals = cupy.empty(n, cupy.float32)
    grid = (min(tiles, machine.gpu.sms * BLOCKS_PER_SM),)
    sizes = (np.int64(n), np.uint32(bins), np.uint32(chunk), np.int32(parts), np.int32(tiles))
    count = Launch(KERNELS, f"partition_count{PARTITION_TEMPLATE}", grid=grid,
                   block=(PARTITION_THREADS,), args=(inds, *sizes, counts), result=counts)
    scatter = Launch(KERNELS, f"partition_scatter{PARTITION_TEMPLATE}", grid=grid,
                     block=(PARTITION_THREADS,),
                     args=(inds, vals, *sizes, offsets, part_inds, part_vals), result=part_inds)

    def run() -> None:
        count()
        cupy.cumsum(counts, out=offsets)
        scatter()

    return Partition(run, offsets, part_inds, part_vals, tiles)


def partitioned(inputs: dict, out: Any, machine: Machine,
                fraction: float = L2_FRACTION) -> Bound:
    """The input partitioned by L2-sized chunk once; then one pass per chunk over its own
    elements only."""
    bins, n = out.size, inputs["inds"].size
    chunk = chunk_bins(bins, machine, fraction, MAX_PARTS)
    grouped = partition(inputs, machine, bins, chunk)
    parts = -(-bins // chunk)
    segment_grid = (_grid(machine, -(-n // parts)),)  # each part holds about n / parts
    passes = [Launch(KERNELS, f"histogram_segment<{ITEMS}>", grid=segment_grid,
                     block=(THREADS,), args=(grouped.part_inds, grouped.part_vals, out,
                                             grouped.offsets, np.int64(k * grouped.tiles),
                                             np.int64((k + 1) * grouped.tiles)),
                     result=out)
              for k in range(parts)]

    def run() -> Any:
        zeroed(out)
        grouped.run()
        for launch in passes:
            launch()
        return out

    return Bound(run, {"chunk_bins": chunk, "l2_fraction": fraction, "passes": parts,
                       "tile": PARTITION_TILE})


def shared_fits(dims: dict[str, int], machine: Machine) -> str | None:
    """A sub-histogram per block must fit the block's (default) shared memory (else: why
    not)."""
    bins = dims["bins"]
    limit = machine.gpu.shared_mem_per_block // 4 if machine.gpu else 0
    if bins > limit:
        return f"{bins} bins exceed a block's shared memory ({limit} float bins)"
    return None


def shared(inputs: dict, out: Any, machine: Machine) -> Bound:
    inds, vals, bins = inputs["inds"], inputs["vals"], out.size
    launch = Launch(KERNELS, "histogram_shared", grid=(_grid(machine, inds.size, THREADS),),
                    block=(THREADS,), args=(inds, vals, out, np.int64(inds.size),
                                            np.uint32(bins)),
                    result=out, shared_mem=bins * 4)
    return Bound(in_order(launch, before=partial(zeroed, out)),
                 {"block": [THREADS], "grid": list(launch.grid), "shared_bytes": bins * 4})


def bucket_layout(bins: int, machine: Machine, bucket_bytes: int | None = None) -> tuple[int, int]:
    """(buckets, bins per bucket). A bucket's histogram fills at most ``bucket_bytes`` of shared
    memory (default: all that one block may have on an SM) and has at most 65,536 bins (a
    record's offset has 16 bits); there are at least as many buckets as SMs, in whole multiples
    of the SM count, so that every SM gets the same work."""
    gpu = machine.gpu
    if bucket_bytes is None:
        bucket_bytes = min(gpu.shared_mem_per_block_optin, gpu.shared_mem_per_sm - RESERVED_SHARED)
    most = max(1, min(bucket_bytes // 4, MAX_BUCKET_BINS))
    width = -(-bins // (gpu.sms * -(-bins // (most * gpu.sms))))
    return -(-bins // width), width


def max_buckets(machine: Machine) -> int:
    """Buckets a scatter tile can count and place: SCATTER_BUCKET_BYTES of shared memory per
    bucket beside the tile (8 bytes an element) and the scan's warp totals."""
    beside = SCATTER_TILE * 8 + RESERVED_SHARED + 4 * SCATTER_THREADS // 32
    return max(0, (machine.gpu.shared_mem_per_block_optin - beside) // SCATTER_BUCKET_BYTES)


def bucketed_fits(dims: dict[str, int], machine: Machine) -> str | None:
    """The scatter's tile and per-bucket tables must fit one block's shared memory."""
    if machine.gpu is None:
        return "no GPU"
    buckets, _ = bucket_layout(dims["bins"], machine)
    if buckets > max_buckets(machine):
        return (f"{dims['bins']} bins need {buckets} buckets; a scatter tile has room for "
                f"{max_buckets(machine)}")
    return None


def sampled_elements(n: int) -> int:
    """Elements the sample reads: chunks 0, SAMPLE_EVERY, 2 SAMPLE_EVERY... of SAMPLE_CHUNK
    consecutive elements (the input's last chunk may be short)."""
    chunks = -(-n // SAMPLE_CHUNK)
    picked = -(-chunks // SAMPLE_EVERY)
    last_is_short = picked > 0 and (picked - 1) * SAMPLE_EVERY == chunks - 1
    return picked * SAMPLE_CHUNK - (chunks * SAMPLE_CHUNK - n if last_is_short else 0)


def sample_scale(n: int) -> float:
    """Elements of the input per sampled element: what a bucket's sampled count is scaled by
    (bucket_room), and what the bound on the rooms' total allows for."""
    return n / max(1, sampled_elements(n))


def records_bound(n: int, buckets: int, spread: float = ROOM_SPREAD) -> int:
    """The most records the rooms can add up to, whatever the sample saw. bucket_room gives
    bucket b ceil(e_b + spread sqrt(s e_b) + s), rounded up to a multiple of 16, where s = n /
    sampled and the estimates e_b add up to at most n: by Cauchy-Schwarz the rooms hold at most
    n + spread sqrt(s n buckets) + buckets (s + 16) (and a record a bucket for rounding)."""
    scale = sample_scale(n)
    spread_room = max(0.0, spread) * math.sqrt(scale * n * buckets)
    return int(n + spread_room + buckets * (scale + 17)) + 1


def bucketed_traffic(n: int, bins: int) -> dict[str, Any]:
    """What gpu-bucketed moves when nothing spills, against the golden bytes: the sampled
    indices, the input read (8 bytes an element), a record written and read back per kept
    element (at most n), the histogram written. The copy roof counts bytes read and written, so
    golden / moved bounds the variant's fraction of copy; one pass that read the input once
    could reach 100%."""
    moved = 4 * sampled_elements(n) + (8 + 2 * RECORD_BYTES) * n + 4 * bins
    golden = work({"n": n, "bins": bins}).bytes
    return {"moved_bytes": moved, "bytes_per_element": round(moved / max(1, n), 2),
            "max_pct_of_copy": round(100 * golden / moved, 1)}


def bucketed(inputs: dict, out: Any, machine: Machine, bucket_bytes: int | None = None,
             spread: float = ROOM_SPREAD) -> Bound:
    """One scatter of the input into buckets of bins small enough for one block's shared
    memory, as 6-byte records in rooms sized from a 1/64 sample of the indices (no counting
    pass), then one block per bucket: every update is a shared-memory atomic and each bin of
    the histogram is written once, by the block that owns it. Records that overflow a room
    (uneven inputs) are added by global atomics at the end. ``spread``: standard deviations of
    the sampled estimate a room allows beyond it (negative: rooms too small, to test spills)."""
    import cupy

    inds, vals, bins, n = inputs["inds"], inputs["vals"], out.size, inputs["inds"].size
    gpu = machine.gpu
    buckets, width = bucket_layout(bins, machine, bucket_bytes)
    sampled = cupy.empty(buckets, cupy.uint64)
    room, fill = cupy.empty(buckets, cupy.int64), cupy.empty(buckets, cupy.uint64)
    region = cupy.empty(buckets + 1, cupy.int64)
    spill_range = cupy.empty(2, cupy.int64)  # [0, records spilled]
    records = records_bound(n, buckets, spread)
    rec_offsets, rec_vals = cupy.empty(records, cupy.uint16), cupy.empty(records, cupy.float32)
    spill_inds, spill_vals = cupy.empty(max(1, n), cupy.uint32), cupy.empty(max(1, n), cupy.float32)
    sizes = (np.uint32(bins), np.uint32(width), np.int32(buckets))
    sample = Launch(KERNELS, BUCKET_SAMPLE,
                    grid=(min(blocks(n, SAMPLE_CHUNK * SAMPLE_EVERY), gpu.sms * BLOCKS_PER_SM),),
                    block=(SAMPLE_THREADS,),
                    args=(inds, np.int64(n), *sizes, np.int32(SAMPLE_EVERY), sampled),
                    result=sampled, shared_mem=buckets * 4)
    plan = Launch(KERNELS, BUCKET_ROOM, grid=(1,), block=(ROOM_THREADS,),
                  args=(sampled, np.int32(buckets), np.float64(sample_scale(n)),
                        np.float64(spread), room, region, fill, spill_range), result=region)
    # One scatter block per SM: its tile takes over half the SM's shared memory, its 1,024
    # threads of 64 registers all of the register file.
    scatter = Launch(KERNELS, BUCKET_SCATTER, grid=(min(blocks(n, SCATTER_TILE), gpu.sms),),
                     block=(SCATTER_THREADS,),
                     args=(inds, vals, np.int64(n), *sizes, room, region, fill, rec_offsets,
                           rec_vals, spill_range, spill_inds, spill_vals),
                     result=rec_offsets,
                     shared_mem=SCATTER_TILE * 8 + buckets * SCATTER_BUCKET_BYTES)
    total = Launch(KERNELS, BUCKET_SUM, grid=(buckets,), block=(SUM_THREADS,),
                   args=(rec_offsets, rec_vals, room, region, fill, np.int32(buckets),
                         np.uint32(bins), np.uint32(width), out),
                   result=out, shared_mem=width * 4)
    spills = Launch(KERNELS, SPILL_SUM, grid=(gpu.sms * 2,), block=(THREADS,),
                    args=(spill_inds, spill_vals, out, spill_range, np.int64(0), np.int64(1)),
                    result=out)
    return Bound(in_order(sample, plan, scatter, total, spills, before=partial(zeroed, sampled)),
                 {"buckets": buckets, "bucket_bins": width, "tile": SCATTER_TILE,
                  "sampled": f"1/{SAMPLE_EVERY}", "record_bytes": RECORD_BYTES,
                  **bucketed_traffic(n, bins)})


def bincount(inputs: dict, out: Any, machine: Machine) -> Bound:
    import cupy

    inds, vals, bins = inputs["inds"], inputs["vals"], out.size

    def run() -> Any:
        kept = inds < bins  # bincount would grow to the largest index, however far out
        return cupy.bincount(inds[kept], weights=vals[kept],
                             minlength=bins).astype(cupy.float32)

    return Bound(run)


def add_at(inputs: dict, out: Any, machine: Machine) -> Bound:
    import cupy

    inds, vals, bins = inputs["inds"], inputs["vals"], out.size

    def run() -> Any:
        kept = inds < bins
        zeroed(out)
        cupy.add.at(out, inds[kept], vals[kept])
        return out

    return Bound(run)
