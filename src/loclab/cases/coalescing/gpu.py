"""GPU variants of the row program: CUDA C in kernels.cu, launched through CuPy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from loclab.cases.base import Bound
from loclab.cases.transpose import gpu as transpose_gpu
from loclab.gpu.kernels import KernelAccesses, KernelSource, Launch, blocks
from loclab.hw import Machine
from loclab.model.access import DeclaredAccess

THREADS = 256  # rows_naive and columns_coalesced: one thread per row
# (CHUNK, BLOCK) of rows_staged. 32-column chunks: a warp moves one 128-byte line of a row.
# Where cols % 8 != 0 the pieces of a row end inside 32-byte sectors, each then written by
# two store phases, and the L2 reads such a sector back from DRAM (ncu on an H100 at
# 1000003 x 61: 461 MB read for 244 MB of input, 47% of copy); rows of at most 64 floats are
# then staged whole, so that a block's rows are one contiguous run (244 MB read, 93%). At
# 1048576 x 64, <32, 128> reached 89% of copy on an H200 and 93% on an H100, <64, 128> 86.5%
# and 96%; on the H200 <32, 256> 87% and <16, 256> 59% (half-line runs, 2-way bank
# conflicts in a stride-17 tile, twice the barriers).
NARROW, WIDE = (32, 128), (64, 128)
STAGED_SHAPES = (NARROW, WIDE)
SECTOR_FLOATS = 8  # 32 bytes


def staged_shape(cols: int) -> tuple[int, int]:
    """(CHUNK, BLOCK) for rows of ``cols`` floats (see above)."""
    return WIDE if cols % SECTOR_FLOATS and cols <= WIDE[0] else NARROW


def staged_name(chunk: int, block: int) -> str:
    return f"rows_staged<{chunk},{block}>"


_ROW = "blockIdx.x*blockDim.x + threadIdx.x"  # thread i owns row i (j = 0: the first step)
ACCESSES = (
    KernelAccesses("rows_naive", (), (
        DeclaredAccess(f"a[({_ROW})*cols + j]", "global", 4, note="read along its row",
                       count="rows*cols"),
        DeclaredAccess(f"b[({_ROW})*cols + j]", "global", 4, note="write along its row",
                       write=True, count="rows*cols")),
        at=(("j", 0),), block=(THREADS,)),
    KernelAccesses("columns_coalesced", (), (
        DeclaredAccess(f"at[j*rows + {_ROW}]", "global", 4, note="read a row of at",
                       count="rows*cols"),
        DeclaredAccess(f"bt[j*rows + {_ROW}]", "global", 4, note="write a row of bt",
                       write=True, count="rows*cols")),
        at=(("j", 0),), block=(THREADS,)),
    # rows_staged at its first chunk of columns (col0 = 0) and first pass (k = 0): thread t
    # moves column t % CHUNK of row t / CHUNK through the tile, whose rows are CHUNK + 1
    # floats apart; then runs the program along its own row of the tile.
    KernelAccesses("rows_staged", ("CHUNK", "BLOCK"), (
        DeclaredAccess("a[(blockIdx.x*BLOCK + threadIdx.x/CHUNK + k*(BLOCK/CHUNK))*cols + "
                       "col0 + threadIdx.x % CHUNK]", "global", 4,
                       note="load a chunk of rows", count="rows*cols"),
        DeclaredAccess("smem[(threadIdx.x/CHUNK + k*(BLOCK/CHUNK))*(CHUNK + 1) + "
                       "threadIdx.x % CHUNK]", "shared", 4, ("BLOCK*(CHUNK + 1)",),
                       note="stage it", write=True),
        DeclaredAccess("smem[threadIdx.x*(CHUNK + 1) + c]", "shared", 4,
                       ("BLOCK*(CHUNK + 1)",), note="walk a row of the tile"),
        DeclaredAccess("b[(blockIdx.x*BLOCK + threadIdx.x/CHUNK + k*(BLOCK/CHUNK))*cols + "
                       "col0 + threadIdx.x % CHUNK]", "global", 4,
                       note="store a chunk of rows", write=True, count="rows*cols")),
        at=(("k", 0), ("col0", 0), ("c", 0)), block=("BLOCK",)),
)

KERNELS = KernelSource(Path(__file__).with_name("kernels.cu"), (
    "rows_naive",
    "columns_coalesced",
    *(staged_name(chunk, block) for chunk, block in STAGED_SHAPES),
), ACCESSES)


def _row_launch(name: str, a: Any, out: Any, rows: int, cols: int) -> Launch:
    """A one-thread-per-row kernel over ``rows`` rows."""
    return Launch(KERNELS, name, grid=(blocks(rows, THREADS),), block=(THREADS,),
                  args=(a, out, np.int32(rows), np.int32(cols)), result=out)


def staged_launch(a: Any, out: Any, chunk: int, block: int) -> Launch:
    """rows_staged<chunk, block> over ``a``: one block per ``block`` rows."""
    rows, cols = a.shape
    return Launch(KERNELS, staged_name(chunk, block), grid=(blocks(rows, block),),
                  block=(block,), args=(a, out, np.int32(rows), np.int32(cols)), result=out)


def naive(inputs: dict, out: Any, machine: Machine) -> Bound:
    a = inputs["a"]
    return Bound(_row_launch("rows_naive", a, out, *a.shape), {"block": [THREADS]})


def transposed(inputs: dict, out: Any, machine: Machine) -> Bound:
    """Three launches: a -> at (the transpose case's gpu-optimized), the program down the
    columns of at into bt, bt -> out. The two cols x rows temporaries are allocated here."""
    import cupy

    a = inputs["a"]
    rows, cols = a.shape
    a_t = cupy.empty((cols, rows), cupy.float32)
    b_t = cupy.empty_like(a_t)
    there = transpose_gpu.optimized({"a": a}, a_t, machine)
    middle = _row_launch("columns_coalesced", a_t, b_t, rows, cols)
    back = transpose_gpu.optimized({"a": b_t}, out, machine)

    def run() -> Any:
        there.run()
        middle()
        return back.run()

    return Bound(run, {"block": [THREADS], "transpose": there.params})


def staged(inputs: dict, out: Any, machine: Machine) -> Bound:
    a = inputs["a"]
    chunk, block = staged_shape(a.shape[1])
    return Bound(staged_launch(a, out, chunk, block),
                 {"chunk": chunk, "block": [block], "tile": [block, chunk + 1]})
