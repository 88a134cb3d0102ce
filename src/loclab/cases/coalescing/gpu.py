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
# (CHUNK, BLOCK) of rows_staged and rows_staged_vec. Rows of at most 64 floats are staged
# whole: a block's rows are then one contiguous run of memory, one chunk, two barriers. At
# 1048576 x 64 on an H100 (2026-11-27, one run, copy 2,976 GB/s, means of two repetitions),
# 16-byte cp.async: whole rows 97.8% of copy, 32-column chunks 92.2%, 32 x 256 91.1%, 64 x 64
# 97.4%; the previous kernels (scalar loads through registers) 96.3% (whole rows) and 92.9%
# (32-column chunks, then the default). At 1000003 x 61 (4-byte copies) whole rows with
# cp.async reached 93.3% of copy, the previous whole rows 93.9% (same run). Not yet measured
# on an H200, where the previous kernels at 1048576 x 64 gave <32, 128> 89%, <64, 128> 86.5%,
# <32, 256> 87% and <16, 256> 59% (half-line runs, 2-way bank conflicts in a stride-17 tile,
# twice the barriers): whole rows then lost there, with loads that ptxas had interleaved with
# the shared stores (see Tile::load in kernels.cu). Longer rows go in
# 32-column chunks (a warp moves whole 128-byte lines of a row). Where cols % 8 != 0 the pieces
# of a row end inside 32-byte sectors, each then written by two store phases, and the L2 reads
# such a sector back from DRAM (ncu on an H100 at 1000003 x 61 with 32-column chunks: 461 MB
# read for 244 MB of input, 47% of copy; whole rows: 244 MB read, 93%).
NARROW, WIDE = (32, 128), (64, 128)
STAGED_SHAPES = (NARROW, WIDE)
VECTOR = 4  # floats a 16-byte access moves: rows_staged_vec, where cols % 4 == 0


def staged_shape(cols: int) -> tuple[int, int]:
    """(CHUNK, BLOCK) for rows of ``cols`` floats (see above)."""
    return WIDE if cols <= WIDE[0] else NARROW


def staged_vector(cols: int) -> int:
    """Floats per access: 4 (16 bytes) where every row starts 16-byte aligned, else 1."""
    return VECTOR if cols % VECTOR == 0 else 1


STAGED_KERNELS = {1: "rows_staged", VECTOR: "rows_staged_vec"}  # by floats per access


def staged_name(chunk: int, block: int, vector: int) -> str:
    return f"{STAGED_KERNELS[vector]}<{chunk},{block}>"


def _staged_accesses(vector: int) -> KernelAccesses:
    """rows_staged (vector 1) or rows_staged_vec (4) at its first chunk of columns (col0 = 0)
    and first pass (k = 0), indices in vectors of ``vector`` floats: thread t copies vector
    t % LANES of row t / LANES into the tile, whose rows are (CHUNK + vector) floats apart;
    then runs the program along its own row of the tile."""
    lanes, rows_apart = f"(CHUNK/{vector})", f"((CHUNK + {vector})/{vector})"
    row = f"(threadIdx.x/{lanes} + k*(BLOCK/{lanes}))"
    element = f"(blockIdx.x*BLOCK + {row})*(cols/{vector}) + col0/{vector} + threadIdx.x % {lanes}"
    cell = f"{row}*{rows_apart} + threadIdx.x % {lanes}"
    tile = (f"BLOCK*{rows_apart}",)
    width = 4 * vector
    count = f"rows*((cols + {vector - 1})/{vector})"  # rows*cols/vector where it runs
    return KernelAccesses(STAGED_KERNELS[vector], ("CHUNK", "BLOCK"), (
        DeclaredAccess(f"a[{element}]", "global", width, note="copy a chunk of rows (cp.async)",
                       count=count),
        DeclaredAccess(f"smem[{cell}]", "shared", width, tile, note="into the tile",
                       write=True),
        DeclaredAccess(f"smem[threadIdx.x*{rows_apart} + c]", "shared", width, tile,
                       note="walk a row of the tile"),
        DeclaredAccess(f"b[{element}]", "global", width, note="store a chunk of rows",
                       write=True, count=count)),
        at=(("k", 0), ("col0", 0), ("c", 0)), block=("BLOCK",))


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
    *(_staged_accesses(vector) for vector in (1, VECTOR)),
)

KERNELS = KernelSource(Path(__file__).with_name("kernels.cu"), (
    "rows_naive",
    "columns_coalesced",
    *(staged_name(chunk, block, vector) for chunk, block in STAGED_SHAPES
      for vector in (1, VECTOR)),
), ACCESSES)


def _row_launch(name: str, a: Any, out: Any, rows: int, cols: int) -> Launch:
    """A one-thread-per-row kernel over ``rows`` rows."""
    return Launch(KERNELS, name, grid=(blocks(rows, THREADS),), block=(THREADS,),
                  args=(a, out, np.int32(rows), np.int32(cols)), result=out)


def staged_launch(a: Any, out: Any, chunk: int, block: int, vector: int) -> Launch:
    """rows_staged<chunk, block> (vector 1) or rows_staged_vec (4) over ``a``: one block per
    ``block`` rows."""
    rows, cols = a.shape
    return Launch(KERNELS, staged_name(chunk, block, vector), grid=(blocks(rows, block),),
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
    """One launch: whole rows of up to 64 floats, else 32-column chunks; 16-byte accesses
    where every row starts 16-byte aligned; every copy into the tile in flight at once."""
    a = inputs["a"]
    cols = a.shape[1]
    chunk, block = staged_shape(cols)
    vector = staged_vector(cols)
    return Bound(staged_launch(a, out, chunk, block, vector),
                 {"chunk": chunk, "block": [block], "vector": vector,
                  "tile": [block, chunk + vector], "copies": "cp.async, all in flight"})
