"""GPU variants of the radix sort: CUDA C in kernels.cu, launched through CuPy.

gpu-lsd's upsweep and downsweep run on a persistent grid (:func:`persistent_grid`): as many
blocks as fit the GPU at once, block b owning a contiguous range of whole tiles, so that the
counts the scan reads are RADIX x blocks words (a few hundred thousand bytes), not RADIX per
tile. Before its passes, gpu-lsd reads back (one synchronization) the bits some keys differ in
and launches only the passes of digits that differ; each pass reads what the one before wrote
and the last writes the output (``destinations``). Tuned configurations (digit bits, threads,
keys per thread) compile their own instantiations on first use.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from loclab.cases.base import Bound, Dims
from loclab.cases.radix_sort import (LSD_BITS, LSD_ITEMS, LSD_THREADS, SPLIT_TILE, destinations,
                                     needed_shifts)
from loclab.gpu import cub
from loclab.gpu.kernels import KernelAccesses, KernelSource, Launch, blocks, source_for
from loclab.gpu.limits import MAX_REGISTERS_PER_THREAD, refuse, registers_fit, threads_fit
from loclab.hw import Machine
from loclab.measure.space import Config, Space
from loclab.model.access import DeclaredAccess

SCAN_THREADS, SCAN_ITEMS = 1024, 16  # the one block that scans a pass's counts
DIFFER_THREADS, DIFFER_ITEMS = 256, 8  # the OR/AND reduction: loads in flight per thread
DIFFER_BLOCKS_PER_SM = 8  # a grid-stride loop over enough blocks to stream the keys
UPSWEEP_THREADS, UPSWEEP_ITEMS = 512, 8
ALL_BITS = 0xFFFF_FFFF

# Measured on an H100 at 2**28 random keys (G keys/s, keys only / pairs; cupy.sort 38.3, its
# argsort and gathers 7.9): 8-bit digits, threads x items 256 x 16 19.0 / 12.8, 512 x 12
# 26.5 / 14.0, 512 x 16 26.4 / 16.9, 1024 x 8 21.3 / 17.1; 7-bit digits at 512 x 16 21.1 /
# 14.8, 6-bit 18.7 / 13.9. Finding a digit's lanes with __match_any_sync instead of ballots:
# 12.4 G keys/s at 256 x 16 (its upsweep read 510 GB/s instead of 2.7 TB/s).
LSD_DEFAULT = {"bits": LSD_BITS, "threads": LSD_THREADS, "items": LSD_ITEMS}
BITS_CHOICES = (4, 5, 6, 7, 8)
THREADS_CHOICES = (256, 512, 1024)
ITEMS_CHOICES = (4, 8, 12, 16, 20, 24)


def radix(bits: int) -> int:
    return 1 << bits


def differ_kernel() -> str:
    return f"radix_differing_bits<{DIFFER_THREADS},{DIFFER_ITEMS}>"


def upsweep_kernel(bits: int) -> str:
    return f"radix_upsweep<{radix(bits)},{UPSWEEP_THREADS},{UPSWEEP_ITEMS}>"


def scan_kernel(bits: int) -> str:
    return f"radix_scan<{SCAN_THREADS},{SCAN_ITEMS},{radix(bits)}>"


def downsweep_kernel(bits: int, threads: int, items: int, pairs: bool) -> str:
    return f"radix_downsweep_{'pairs' if pairs else 'keys'}<{radix(bits)},{threads},{items}>"


def split_kernels(pairs: bool) -> tuple[str, str, str]:
    """gpu-split's count, scan and scatter (one key per thread, SPLIT_TILE threads a block)."""
    return (f"split_count<{SPLIT_TILE}>", f"split_scan<{SCAN_THREADS},{SCAN_ITEMS},{SPLIT_TILE}>",
            f"split_scatter_{'pairs' if pairs else 'keys'}<{SPLIT_TILE}>")


def downsweep_shared_bytes(bits: int, threads: int, items: int, pairs: bool) -> int:
    """kernels.cu's DownsweepShared::WORDS in bytes: the tile of keys (and values) or the
    warps' digit counters, whichever is larger; a word per digit; the block scan's warp
    totals."""
    warps, tile = threads // 32, threads * items
    pool = max(tile * (2 if pairs else 1), warps * radix(bits))
    return 4 * (pool + radix(bits) + warps)


# --- declared accesses -------------------------------------------------------------------------

# The persistent grid depends on the GPU (SMs x blocks that fit one); the declarations take a
# typical one, 132 SMs x 2 blocks, which sets how many counts a pass writes and scans.
TYPICAL_BLOCKS = 264
# A run of one digit (or one side of a split) starts where the keys before it end: in 7 of 8
# cases not at a sector's start, so modelled at 1.
_START = 1
_WARP_STRIPED = "blockIdx.x*THREADS*ITEMS + (threadIdx.x/32)*32*ITEMS + k*32 + threadIdx.x % 32"
_STRIDED = "blockIdx.x*THREADS*ITEMS + k*THREADS + threadIdx.x"
_SCAN_ROUND = "{0}[threadIdx.x*ITEMS + j]"  # thread t's ITEMS counts of the first round
_RUN_NOTE = ("a digit's run of the tile from a data-dependent position (first = 1: unaligned); "
             "runs average THREADS*ITEMS/RADIX keys, so a warp often spans two: approximated as "
             "one run")


def _downsweep_accesses(pairs: bool) -> KernelAccesses:
    """The downsweep reads a tile warp-striped, reorders it in shared memory (writes to
    data-dependent places: not declared) and writes it back in digit runs."""
    words = [("keys", "")] + ([("vals", " (values as keys)")] if pairs else [])
    reads = tuple(DeclaredAccess(f"{name}_in[{_WARP_STRIPED}]", "global", 4,
                                 note=f"read a tile, warp-striped{extra}", count="n")
                  for name, extra in words)
    tile_reads = tuple(DeclaredAccess(f"tile_{name}[k*THREADS + threadIdx.x]", "shared", 4,
                                      ("THREADS*ITEMS",), note="read the tile in digit order")
                       for name, _ in words)
    writes = tuple(DeclaredAccess(f"{name}_out[first + threadIdx.x]", "global", 4,
                                  note=_RUN_NOTE + extra, write=True, count="n")
                   for name, extra in words)
    offsets = DeclaredAccess("offsets[threadIdx.x*blocks + blockIdx.x]", "global", 4,
                             note="each digit's first output position (threads < RADIX), once "
                             "per block", count="RADIX*blocks")
    kernel = f"radix_downsweep_{'pairs' if pairs else 'keys'}"
    return KernelAccesses(kernel, ("RADIX", "THREADS", "ITEMS"),
                          (*reads, *tile_reads, *writes, offsets),
                          at=(("k", 0), ("first", _START), ("blocks", TYPICAL_BLOCKS)),
                          block=("THREADS",))


def _split_scatter_accesses(pairs: bool) -> KernelAccesses:
    words = ["keys"] + (["vals"] if pairs else [])
    reads = tuple(DeclaredAccess(f"{name}_in[blockIdx.x*THREADS + threadIdx.x]", "global", 4,
                                 note="one key per thread", count="n") for name in words)
    writes = tuple(DeclaredAccess(f"{name}_out[first + threadIdx.x]", "global", 4,
                                  note="a warp's keys go to two runs, bit 0 from f and bit 1 "
                                  "from i - f + falses (first = 1: unaligned): approximated as "
                                  "one run", write=True, count="n") for name in words)
    return KernelAccesses(f"split_scatter_{'pairs' if pairs else 'keys'}", ("THREADS",),
                          (*reads, *writes), at=(("first", _START),), block=("THREADS",))


ACCESSES = (
    KernelAccesses("split_count", ("THREADS",), (
        DeclaredAccess("keys[blockIdx.x*THREADS + threadIdx.x]", "global", 4,
                       note="one key per thread", count="n"),
        DeclaredAccess("falses[blockIdx.x]", "global", 4, note="the block's count: thread 0",
                       write=True, count="(n + THREADS - 1)/THREADS")),
        block=("THREADS",)),
    KernelAccesses("split_scan", ("THREADS", "ITEMS", "TILE"), (
        DeclaredAccess(_SCAN_ROUND.format("falses"), "global", 4, note="read a round's block "
                       "counts, ITEMS consecutive ones per thread (rewritten the same way)",
                       count="(n + TILE - 1)/TILE"),),
        at=(("j", 0),), block=("THREADS",)),
    _split_scatter_accesses(False),
    _split_scatter_accesses(True),
    KernelAccesses("radix_differing_bits", ("THREADS", "ITEMS"), (
        DeclaredAccess(f"keys[{_STRIDED}]", "global", 4, note="read every key once (OR, AND)",
                       count="n"),),
        at=(("k", 0),), block=("THREADS",)),
    KernelAccesses("radix_upsweep", ("RADIX", "THREADS", "ITEMS"), (
        DeclaredAccess(f"keys[{_STRIDED}]", "global", 4, note="read the block's range (its "
                       "digit counters: shared atomics on data-dependent digits, not "
                       "declared)", count="n"),
        DeclaredAccess("counts[threadIdx.x*blocks + blockIdx.x]", "global", 4,
                       note="the block's count of each digit (threads < RADIX), digit-major",
                       write=True, count="RADIX*blocks")),
        at=(("k", 0), ("blocks", TYPICAL_BLOCKS)), block=("THREADS",)),
    KernelAccesses("radix_scan", ("THREADS", "ITEMS", "RADIX"), (
        DeclaredAccess(_SCAN_ROUND.format("counts"), "global", 4, note="read a round's "
                       "digit-major counts, ITEMS consecutive ones per thread (rewritten the "
                       "same way)", count="RADIX*blocks"),),
        at=(("j", 0), ("blocks", TYPICAL_BLOCKS)), block=("THREADS",)),
    _downsweep_accesses(False),
    _downsweep_accesses(True),
)

KERNELS = KernelSource(Path(__file__).with_name("kernels.cu"), (
    *split_kernels(False), split_kernels(True)[2],
    differ_kernel(), upsweep_kernel(LSD_BITS), scan_kernel(LSD_BITS),
    *(downsweep_kernel(LSD_BITS, LSD_THREADS, LSD_ITEMS, pairs) for pairs in (False, True)),
), ACCESSES)


# --- buffers ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Buffers:
    """The arrays the passes read and write: the input, the output and a scratch pair, each
    keys and (for pairs) values, by name ("in", "out", "tmp")."""

    keys: dict[str, Any]
    vals: dict[str, Any]
    pairs: bool

    def words(self, name: str) -> tuple[Any, ...]:
        """The keys (and values) of buffer ``name``, as a kernel takes them."""
        return (self.keys[name], self.vals[name]) if self.pairs else (self.keys[name],)

    def copy_input(self) -> None:
        """The output when no pass runs: the input as it is."""
        for arrays in (self.keys, self.vals) if self.pairs else (self.keys,):
            arrays["out"][...] = arrays["in"]


def buffers(inputs: dict, out: Any) -> Buffers:
    import cupy

    keys = inputs["keys"]
    pairs = out.ndim == 2
    if not pairs:
        return Buffers({"in": keys, "out": out, "tmp": cupy.empty_like(keys)}, {}, False)
    return Buffers({"in": keys, "out": out[0], "tmp": cupy.empty_like(keys)},
                   {"in": inputs["values"], "out": out[1], "tmp": cupy.empty_like(keys)}, True)


# --- gpu-split ----------------------------------------------------------------------------------

def split(inputs: dict, out: Any, machine: Machine) -> Bound:
    """32 splits on one bit each, from the least significant: count, scan, scatter."""
    import cupy

    data = buffers(inputs, out)
    n = inputs["keys"].size
    tiles = blocks(n, SPLIT_TILE)
    falses = cupy.empty(tiles + 1, cupy.uint32)
    count, scan, scatter = split_kernels(data.pairs)
    scan_launch = Launch(KERNELS, scan, grid=(1,), block=(SCAN_THREADS,),
                         args=(falses, np.uint32(n)), result=falses)
    steps = []
    src = "in"
    for bit, dst in zip(range(32), destinations(32)):
        steps.append((
            Launch(KERNELS, count, grid=(tiles,), block=(SPLIT_TILE,),
                   args=(data.keys[src], np.uint32(n), np.uint32(bit), falses), result=falses),
            Launch(KERNELS, scatter, grid=(tiles,), block=(SPLIT_TILE,),
                   args=(*data.words(src), *data.words(dst), np.uint32(n), np.uint32(bit),
                         falses), result=out)))
        src = dst

    def run() -> Any:
        for count_launch, scatter_launch in steps:
            count_launch()
            scan_launch()
            scatter_launch()
        return out

    return Bound(run, {"passes": 32, "block": [SPLIT_TILE], "grid": [tiles]})


# --- gpu-lsd ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Grid:
    """The persistent grid of gpu-lsd's upsweep and downsweep: ``blocks`` blocks, block b
    owning tiles [b * tiles_per_block, (b + 1) * tiles_per_block) of ``tile`` keys (the last
    block fewer)."""

    tile: int
    tiles: int
    blocks: int
    tiles_per_block: int

    @property
    def per_block(self) -> int:
        return self.tiles_per_block * self.tile


def persistent_grid(n: int, tile: int, resident: int) -> Grid:
    """At most ``resident`` blocks (those that fit the GPU at once), each the same number of
    whole tiles, none empty."""
    tiles = blocks(n, tile)
    per = -(-tiles // max(1, min(tiles, resident)))
    return Grid(tile, tiles, -(-tiles // per), per)


def lsd_restriction(config: Config, dims: Dims, machine: Machine) -> str | None:
    """Threads per block (a thread per digit, so at least RADIX), the downsweep's shared memory
    (for pairs where ``dims`` says so) and a floor of registers (a key, a rank and for pairs a
    value per item, about 16 more)."""
    bits, threads, items = config["bits"], config["threads"], config["items"]
    pairs = bool(dims.get("values", 1))
    if threads < radix(bits):
        return f"{threads} threads cannot hold a thread per digit ({radix(bits)} digits)"
    if reason := threads_fit(threads, machine.gpu):
        return reason
    shared = downsweep_shared_bytes(bits, threads, items, pairs)
    if shared > machine.gpu.shared_mem_per_block_optin:
        return (f"a tile of {threads} x {items} keys needs {shared} bytes of shared memory, "
                f"more than a block may have ({machine.gpu.shared_mem_per_block_optin})")
    registers = items * (3 if pairs else 2) + 16
    if registers > MAX_REGISTERS_PER_THREAD:
        return f"{items} items per thread need {registers}+ registers"
    return registers_fit(registers, threads, machine.gpu)


def lsd_space(machine: Machine) -> Space:
    return Space({"bits": BITS_CHOICES, "threads": THREADS_CHOICES, "items": ITEMS_CHOICES},
                 LSD_DEFAULT, lsd_restriction)


def lsd(inputs: dict, out: Any, machine: Machine, bits: int = LSD_BITS,
        threads: int = LSD_THREADS, items: int = LSD_ITEMS) -> Bound:
    """The OR ^ AND of the keys, then per digit they differ in: upsweep, scan, downsweep."""
    import cupy

    data = buffers(inputs, out)
    refuse(lsd_restriction({"bits": bits, "threads": threads, "items": items},
                           {"values": int(data.pairs)}, machine))
    keys, n = inputs["keys"], inputs["keys"].size
    name = downsweep_kernel(bits, threads, items, data.pairs)
    shared = downsweep_shared_bytes(bits, threads, items, data.pairs)
    fitting = Launch(source_for(KERNELS, name), name, grid=(1,), block=(threads,), args=(),
                     result=None, shared_mem=shared).cuda_blocks_per_sm()
    grid = persistent_grid(n, threads * items, machine.gpu.sms * max(1, fitting))
    counts = cupy.empty(radix(bits) * grid.blocks + 1, cupy.uint32)
    differing = cupy.empty(2, cupy.uint32)
    neutral = cupy.array([0, ALL_BITS], cupy.uint32)  # OR and AND of no key
    sizes = (np.uint32(n), np.uint32(grid.per_block))
    differ = Launch(KERNELS, differ_kernel(),
                    grid=(min(blocks(n, DIFFER_THREADS * DIFFER_ITEMS),
                              machine.gpu.sms * DIFFER_BLOCKS_PER_SM),),
                    block=(DIFFER_THREADS,), args=(keys, np.uint32(n), differing),
                    result=differing)
    scan = Launch(source_for(KERNELS, scan_kernel(bits)), scan_kernel(bits), grid=(1,),
                  block=(SCAN_THREADS,), args=(counts, np.uint32(grid.blocks)), result=counts)

    @functools.cache
    def upsweep(src: str, shift: int) -> Launch:
        return Launch(source_for(KERNELS, upsweep_kernel(bits)), upsweep_kernel(bits),
                      grid=(grid.blocks,), block=(UPSWEEP_THREADS,),
                      args=(data.keys[src], *sizes, np.uint32(shift), np.uint32(grid.blocks),
                            counts), result=counts)

    @functools.cache
    def downsweep(src: str, dst: str, shift: int) -> Launch:
        return Launch(source_for(KERNELS, name), name, grid=(grid.blocks,), block=(threads,),
                      args=(*data.words(src), *data.words(dst), np.uint32(n),
                            np.uint32(grid.tiles_per_block), np.uint32(shift),
                            np.uint32(grid.blocks), counts),
                      result=out, shared_mem=shared)

    params: dict[str, Any] = {"bits": bits, "threads": threads, "items": items,
                              "tile": grid.tile, "blocks": grid.blocks,
                              "tiles_per_block": grid.tiles_per_block, "shared_bytes": shared}

    def run() -> Any:
        differing[...] = neutral
        differ()
        any_bit, all_bits = (int(word) for word in differing.get())  # waits for the kernel
        shifts = needed_shifts(any_bit ^ all_bits, bits)
        params["passes"] = len(shifts)  # the row shows the last run's
        if not shifts:
            data.copy_input()
        src = "in"
        for shift, dst in zip(shifts, destinations(len(shifts))):
            upsweep(src, shift)()
            scan()
            downsweep(src, dst, shift)()
            src = dst
        return out

    return Bound(run, params)


# --- cupy ---------------------------------------------------------------------------------------

def library(inputs: dict, out: Any, machine: Machine) -> Bound:
    """cupy.sort (CUB's radix sort) into a new array; for pairs cupy.argsort, stable as
    CuPy documents, and gathers of the keys and values into the output's rows."""
    import cupy

    keys = inputs["keys"]
    if out.ndim == 1:
        return Bound(lambda: cupy.sort(keys))

    values = inputs["values"]

    def run() -> Any:
        order = cupy.argsort(keys)
        cupy.take(keys, order, out=out[0])
        cupy.take(values, order, out=out[1])
        return out

    return Bound(run)


def cub_sort(inputs: dict, out: Any, machine: Machine) -> Bound:
    """CUB's DeviceRadixSort into the output (pairs: keys into row 0, values into row 1)."""
    keys = inputs["keys"]
    if out.ndim == 1:
        return Bound(cub.prepared("sort_keys_uint", keys, out, keys.size, result=out))
    return Bound(cub.prepared("sort_pairs_uint", keys, out[0], inputs["values"], out[1],
                              keys.size, result=out))
