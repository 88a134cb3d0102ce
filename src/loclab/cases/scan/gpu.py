"""GPU scans: CUDA C in kernels.cu (and ../../gpu/block_scan.cuh), launched through CuPy;
CuPy's cumsum and CUB's DeviceScan as the libraries.

The block scans (Hillis-Steele, Blelloch) cover an array of any size level by level: scan the
blocks, scan the block sums the same way (recursively, inclusive), add each block's offset.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from loclab.cases.base import Bound, Dims
from loclab.errors import LaunchError
from loclab.gpu import cub
from loclab.gpu.kernels import (KernelAccesses, KernelSource, Launch, blocks, in_order,
                                source_for, zeroed)
from loclab.gpu.limits import threads_fit
from loclab.hw import Machine
from loclab.measure.space import Config, Space
from loclab.model.access import DeclaredAccess

TYPES = {np.dtype(np.float32): "float", np.dtype(np.int32): "int"}
MODES = ("false", "true")  # EXCLUSIVE
BLOCK_SCAN_THREADS = 512  # Hillis-Steele: 512 elements a block; Blelloch: 1024
OFFSET_THREADS = 256
CHUNK_THREADS, CHUNK_ITEMS = 256, 16  # reduce-then-scan's tiles
MAX_CHUNKS = 1024  # one block of scan_chunk_sums scans the chunk sums
# 8 chunks of 4 elements a thread; 700 ns before each read of the predecessors' states
LOOKBACK_DEFAULT = {"block": 128, "chunks": 8, "delay_ns": 700}
ALIGNMENT = 16  # the tile loads are 16-byte vectors


def hillis_steele_kernel(t: str, exclusive: str) -> str:
    return f"scan_hillis_steele<{t},{exclusive},{BLOCK_SCAN_THREADS}>"


def blelloch_kernel(t: str, exclusive: str) -> str:
    return f"scan_blelloch<{t},{exclusive},{BLOCK_SCAN_THREADS}>"


def chunk_kernels(t: str, exclusive: str) -> tuple[str, str, str]:
    return (f"reduce_chunks<{t},{CHUNK_THREADS},{CHUNK_ITEMS}>",
            f"scan_chunk_sums<{t},{MAX_CHUNKS}>",
            f"scan_chunks<{t},{exclusive},{CHUNK_THREADS},{CHUNK_ITEMS}>")


def lookback_kernel(t: str, exclusive: str, block: int, chunks: int, delay_ns: int) -> str:
    return f"scan_lookback<{t},{exclusive},{block},{chunks},{delay_ns}>"


# Each thread's ITEMS consecutive elements are loaded as ITEMS/4 16-byte vectors: a warp's
# loads cover 32 x ITEMS contiguous elements, and L1 serves the lines the first load brought,
# so the accesses are declared as the coalesced vectors they amount to (in4/out4). The block
# scans are declared at their first level (the levels of block sums add 1/512 more).
_TILE_VECTOR = "blockIdx.x*BLOCK*(ITEMS/4) + threadIdx.x"
_BLOCK_ELEMENT = "blockIdx.x*BLOCK + threadIdx.x"
ACCESSES = (
    KernelAccesses("scan_hillis_steele", ("T", "EXCLUSIVE", "BLOCK"), (
        DeclaredAccess(f"in[{_BLOCK_ELEMENT}]", "global", 4, note="read", count="n",
                       count_per_run=True),
        DeclaredAccess(f"out[{_BLOCK_ELEMENT}]", "global", 4, note="write", write=True,
                       count="n", count_per_run=True),
        DeclaredAccess("buffer[0][threadIdx.x]", "shared", 4, shape=(2, "BLOCK"),
                       note="a step's reads and writes, one word a thread (9 steps)",
                       count="n*9", count_per_run=True)),
        block=("BLOCK",)),
    KernelAccesses("scan_blelloch", ("T", "EXCLUSIVE", "BLOCK"), (
        DeclaredAccess("in[blockIdx.x*2*BLOCK + threadIdx.x]", "global", 4,
                       note="read, two rows of BLOCK", count="n", count_per_run=True),
        DeclaredAccess("out[blockIdx.x*2*BLOCK + threadIdx.x]", "global", 4, write=True,
                       note="write, two rows of BLOCK", count="n", count_per_run=True),
        DeclaredAccess("tree[2*threadIdx.x + (2*threadIdx.x)/32]", "shared", 4,
                       shape=("2*BLOCK + (2*BLOCK - 1)/32",),
                       note="the up-sweep's first step, padded j + j/32 (unpadded: 2-way)",
                       count="n", count_per_run=True)),
        block=("BLOCK",)),
    KernelAccesses("add_block_offsets", ("T",), (
        DeclaredAccess("out[(blockIdx.x + 1)*1024 + threadIdx.x]", "global", 4,
                       note="read, add the offset (Hillis-Steele: blocks of 512)", count="n",
                       count_per_run=True),
        DeclaredAccess("out[(blockIdx.x + 1)*1024 + threadIdx.x]", "global", 4, write=True,
                       note="write back", count="n", count_per_run=True)),
        block=(OFFSET_THREADS,)),
    KernelAccesses("reduce_chunks", ("T", "BLOCK", "ITEMS"), (
        DeclaredAccess(f"in4[{_TILE_VECTOR}]", "global", 16, note="read (pass 1)",
                       count="(n + 3)/4"),),
        block=("BLOCK",)),
    KernelAccesses("scan_chunk_sums", ("T", "BLOCK"), (
        DeclaredAccess("chunk_sums[threadIdx.x]", "global", 4, note="read and rewritten",
                       count="BLOCK"),),
        block=("BLOCK",)),
    KernelAccesses("scan_chunks", ("T", "EXCLUSIVE", "BLOCK", "ITEMS"), (
        DeclaredAccess(f"in4[{_TILE_VECTOR}]", "global", 16, note="read again (pass 3)",
                       count="(n + 3)/4"),
        DeclaredAccess(f"out4[{_TILE_VECTOR}]", "global", 16, write=True, note="write",
                       count="(n + 3)/4")),
        block=("BLOCK",)),
    KernelAccesses("scan_lookback", ("T", "EXCLUSIVE", "BLOCK", "V", "DELAY_NS"), (
        DeclaredAccess("in4[blockIdx.x*BLOCK*V + threadIdx.x]", "global", 16,
                       note="read once: lane l of a warp's chunk reads vector l",
                       count="(n + 3)/4"),
        DeclaredAccess("out4[blockIdx.x*BLOCK*V + threadIdx.x]", "global", 16, write=True,
                       note="write once", count="(n + 3)/4")),
        block=("BLOCK",)),
)
KERNELS = KernelSource(
    Path(__file__).with_name("kernels.cu"),
    tuple(name for t in TYPES.values() for e in MODES for name in (
        hillis_steele_kernel(t, e), blelloch_kernel(t, e), *chunk_kernels(t, e),
        lookback_kernel(t, e, **LOOKBACK_DEFAULT))
          ) + tuple(f"add_block_offsets<{t}>" for t in TYPES.values()),
    ACCESSES)


def _kind(inputs: dict) -> tuple[Any, str, str]:
    """The input, its CUDA type and the EXCLUSIVE template argument."""
    a = inputs["a"]
    if a.data.ptr % ALIGNMENT:
        raise LaunchError(f"the scans load 16-byte vectors: the input must be {ALIGNMENT}-byte "
                          f"aligned")
    return a, TYPES[a.dtype], MODES[int(inputs["exclusive"][0])]


def _levels(kernel: Callable[[str, str], str], per_block: int, a: Any, out: Any, t: str,
            exclusive: str) -> list[Launch]:
    """The launches that scan ``a`` into ``out`` with a block scan of ``per_block`` elements a
    block: the blocks, then (several blocks) their sums scanned the same way, inclusive, and
    each block's offset added."""
    import cupy

    n, count = a.size, blocks(a.size, per_block)
    sums = cupy.empty(count, a.dtype)
    launches = [Launch(KERNELS, kernel(t, exclusive), grid=(count,), block=(BLOCK_SCAN_THREADS,),
                       args=(a, out, sums, np.int64(n)), result=out)]
    if count > 1:
        scanned = cupy.empty(count, a.dtype)
        launches += _levels(kernel, per_block, sums, scanned, t, "false")
        launches.append(Launch(KERNELS, f"add_block_offsets<{t}>", grid=(count - 1,),
                               block=(OFFSET_THREADS,),
                               args=(out, scanned, np.int64(n), np.int32(per_block)),
                               result=out))
    return launches


def _levels_bound(launches: list[Launch]) -> Bound:
    return Bound(in_order(*launches), {"launches": len(launches), "block": [BLOCK_SCAN_THREADS]})


def hillis_steele(inputs: dict, out: Any, machine: Machine) -> Bound:
    a, t, exclusive = _kind(inputs)
    return _levels_bound(_levels(hillis_steele_kernel, BLOCK_SCAN_THREADS, a, out, t, exclusive))


def blelloch(inputs: dict, out: Any, machine: Machine) -> Bound:
    a, t, exclusive = _kind(inputs)
    return _levels_bound(_levels(blelloch_kernel, 2 * BLOCK_SCAN_THREADS, a, out, t, exclusive))


def reduce_then_scan(inputs: dict, out: Any, machine: Machine) -> Bound:
    """At most MAX_CHUNKS contiguous chunks of whole tiles, one block each."""
    import cupy

    a, t, exclusive = _kind(inputs)
    n, tile = a.size, CHUNK_THREADS * CHUNK_ITEMS
    tiles = blocks(n, tile)
    chunk = blocks(tiles, MAX_CHUNKS) * tile
    chunks = blocks(n, chunk)
    sums = cupy.empty(chunks, a.dtype)
    reduce, scan_sums, scan = chunk_kernels(t, exclusive)
    launches = [
        Launch(KERNELS, reduce, grid=(chunks,), block=(CHUNK_THREADS,),
               args=(a, sums, np.int64(n), np.int64(chunk)), result=out),
        Launch(KERNELS, scan_sums, grid=(1,), block=(MAX_CHUNKS,),
               args=(sums, np.int32(chunks)), result=out),
        Launch(KERNELS, scan, grid=(chunks,), block=(CHUNK_THREADS,),
               args=(a, out, sums, np.int64(n), np.int64(chunk)), result=out)]
    return Bound(in_order(*launches), {"chunks": chunks, "block": [CHUNK_THREADS],
                                       "items_per_thread": CHUNK_ITEMS})


def lookback_restriction(config: Config, dims: Dims, machine: Machine) -> str | None:
    return threads_fit(config["block"], machine.gpu)


def lookback_space(machine: Machine) -> Space:
    return Space({"block": (64, 128, 256, 512), "chunks": (1, 2, 3, 4, 6, 8),
                  "delay_ns": (0, 350, 700, 1100)}, LOOKBACK_DEFAULT, lookback_restriction)


def decoupled_lookback(inputs: dict, out: Any, machine: Machine, **config: int) -> Bound:
    """One launch, a block a tile; the tile counter and states are cleared before each run
    (8 bytes a tile)."""
    import cupy

    config = lookback_space(machine).configure(config)
    if reason := lookback_restriction(config, {}, machine):
        raise LaunchError(reason)
    a, t, exclusive = _kind(inputs)
    block, chunks = config["block"], config["chunks"]
    tiles = blocks(a.size, block * 4 * chunks)
    states = cupy.empty(1 + tiles, cupy.uint64)  # the counter, then a state per tile
    name = lookback_kernel(t, exclusive, **config)
    launch = Launch(source_for(KERNELS, name), name, grid=(tiles,), block=(block,),
                    args=(a, out, np.int64(a.size), states), result=out)
    return Bound(in_order(launch, before=partial(zeroed, states)),
                 {"block": [block], "items_per_thread": 4 * chunks, "tiles": tiles,
                       "delay_ns": config["delay_ns"]})


def library(inputs: dict, out: Any, machine: Machine) -> Bound:
    """cupy.cumsum; the exclusive scan as the inclusive one of all but the last element,
    written one place on."""
    import cupy

    a = inputs["a"]
    exclusive = bool(int(inputs["exclusive"][0]))

    def run() -> Any:
        if exclusive:
            out[:1] = 0
            cupy.cumsum(a[:-1], dtype=a.dtype, out=out[1:])
        else:
            cupy.cumsum(a, dtype=a.dtype, out=out)
        return out

    return Bound(run)


def cub_scan(inputs: dict, out: Any, machine: Machine) -> Bound:
    a, t, exclusive = _kind(inputs)
    mode = "exclusive" if exclusive == "true" else "inclusive"
    return Bound(cub.prepared(f"{mode}_sum_{t}", a, out, a.size, result=out))
