"""GPU compaction: CUDA C in kernels.cu (and ../../gpu/block_scan.cuh), CuPy's boolean
indexing and CUB's DeviceSelect::Flagged. Every variant ends by reading the kept count back
to the host (it sizes the result): that synchronization is part of each one's time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from loclab.cases.base import Bound
from loclab.errors import LaunchError
from loclab.gpu import cub
from loclab.gpu.kernels import KernelAccesses, KernelSource, Launch, blocks, zeroed
from loclab.hw import Machine
from loclab.model.access import DeclaredAccess

THREADS, ITEMS = 256, 16  # a tile: 4096 elements, 16 flags (one 16-byte load) a thread
MAX_CHUNKS = 1024  # scan_chunk_sums scans the chunk counts in one block
ALIGNMENT = 16
SINGLE_PASS = f"compact_lookback<{THREADS},{ITEMS}>"
COUNT, SCAN_COUNTS, COMPACT = (f"count_chunks<{THREADS},{ITEMS}>",
                               f"scan_chunk_sums<int,{MAX_CHUNKS}>",
                               f"compact_chunks<{THREADS},{ITEMS}>")

# Values come in as 16-byte vectors, each warp's striped (coalesced: vector v*32 + lane), the
# flags as one 16-byte vector a thread. Kept values are written by consecutive threads to
# consecutive places: declared as a coalesced float run, `percent` of n of them.
_TILE_VECTOR = "blockIdx.x*BLOCK*(ITEMS/4) + threadIdx.x"
_FLAGS = "flags16[blockIdx.x*BLOCK + threadIdx.x]"
_KEPT = DeclaredAccess("out[threadIdx.x]", "global", 4, write=True,
                       note="kept values, gathered in shared memory first", count="n*percent/100")
ACCESSES = (
    KernelAccesses("compact_lookback", ("BLOCK", "ITEMS"), (
        DeclaredAccess(f"values4[{_TILE_VECTOR}]", "global", 16, note="read once",
                       count="(n + 3)/4"),
        DeclaredAccess(_FLAGS, "global", 16, note="read once, 16 flags a thread",
                       count="(n + 15)/16"),
        _KEPT),
        block=("BLOCK",)),
    KernelAccesses("count_chunks", ("BLOCK", "ITEMS"), (
        DeclaredAccess(_FLAGS, "global", 16, note="read (pass 1)", count="(n + 15)/16"),),
        block=("BLOCK",)),
    KernelAccesses("scan_chunk_sums", ("T", "BLOCK"), (
        DeclaredAccess("chunk_sums[threadIdx.x]", "global", 4, note="read and rewritten",
                       count="BLOCK"),),
        block=("BLOCK",)),
    KernelAccesses("compact_chunks", ("BLOCK", "ITEMS"), (
        DeclaredAccess(f"values4[{_TILE_VECTOR}]", "global", 16,
                       note="read (pass 3), blocked vectors L1 completes", count="(n + 3)/4"),
        DeclaredAccess(_FLAGS, "global", 16, note="read again (pass 3)", count="(n + 15)/16"),
        _KEPT),
        block=("BLOCK",)),
)
KERNELS = KernelSource(Path(__file__).with_name("kernels.cu"),
                       (SINGLE_PASS, COUNT, SCAN_COUNTS, COMPACT), ACCESSES)


def _staged(inputs: dict) -> tuple[Any, Any]:
    values, flags = inputs["values"], inputs["flags"]
    if values.data.ptr % ALIGNMENT or flags.data.ptr % ALIGNMENT:
        raise LaunchError(f"the kernels load 16-byte vectors: inputs must be {ALIGNMENT}-byte "
                          f"aligned")
    return values, flags


def _kept_prefix(out: Any, count: Any) -> Any:
    return out[:int(count.get()[0])]


def single_pass(inputs: dict, out: Any, machine: Machine) -> Bound:
    """One launch; the tile counter and states cleared before each run."""
    import cupy

    values, flags = _staged(inputs)
    n, tiles = values.size, blocks(values.size, THREADS * ITEMS)
    states = cupy.empty(1 + tiles, cupy.uint64)
    count = cupy.empty(1, cupy.int64)
    launch = Launch(KERNELS, SINGLE_PASS, grid=(tiles,), block=(THREADS,),
                    args=(values, flags, out, count, np.int64(n), np.int64(tiles), states),
                    result=out)

    def run() -> Any:
        zeroed(states)
        launch()
        return _kept_prefix(out, count)

    return Bound(run, {"block": [THREADS], "items_per_thread": ITEMS, "tiles": tiles})


def three_pass(inputs: dict, out: Any, machine: Machine) -> Bound:
    """At most MAX_CHUNKS chunks of whole tiles, one block each."""
    import cupy

    values, flags = _staged(inputs)
    n, tile = values.size, THREADS * ITEMS
    chunk = blocks(blocks(n, tile), MAX_CHUNKS) * tile
    chunks = blocks(n, chunk)
    counts = cupy.empty(chunks, cupy.int32)
    count = cupy.empty(1, cupy.int64)
    launches = (
        Launch(KERNELS, COUNT, grid=(chunks,), block=(THREADS,),
               args=(flags, counts, np.int64(n), np.int64(chunk)), result=out),
        Launch(KERNELS, SCAN_COUNTS, grid=(1,), block=(MAX_CHUNKS,),
               args=(counts, np.int32(chunks)), result=out),
        Launch(KERNELS, COMPACT, grid=(chunks,), block=(THREADS,),
               args=(values, flags, out, count, counts, np.int64(n), np.int64(chunk)),
               result=out))

    def run() -> Any:
        for launch in launches:
            launch()
        return _kept_prefix(out, count)

    return Bound(run, {"block": [THREADS], "items_per_thread": ITEMS, "chunks": chunks})


def library(inputs: dict, out: Any, machine: Machine) -> Bound:
    """CuPy allocates the result (a library call may)."""
    import cupy

    values, mask = inputs["values"], inputs["flags"].view(cupy.bool_)
    return Bound(lambda: values[mask])


def cub_select(inputs: dict, out: Any, machine: Machine) -> Bound:
    import cupy

    values, flags = inputs["values"], inputs["flags"]
    count = cupy.empty(1, cupy.int64)
    call = cub.prepared("select_flagged_float", values, flags, out, count, values.size,
                        result=count)
    return Bound(lambda: _kept_prefix(out, call()))
