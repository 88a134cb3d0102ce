"""GPU variants of transposition: CUDA C in kernels.cu, launched through CuPy."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from loclab.cases.base import Bound
from loclab.gpu.kernels import KernelAccesses, KernelSource, Launch, blocks
from loclab.hw import Machine
from loclab.model.access import DeclaredAccess

OPTIMIZED_TILE, OPTIMIZED_THREADS = 64, 512
FALLBACK_TILE, FALLBACK_ROWS = 64, 8
OPTIMIZED = f"transpose_vectorized<{OPTIMIZED_TILE},{OPTIMIZED_THREADS}>"
SECTORS = "transpose_sectors<{tile},{threads},{shift}>"
FALLBACK = f"transpose_staged<{FALLBACK_TILE},{FALLBACK_ROWS},1>"

# A thread q of transpose_vectorized handles float4 number q % (TILE/4) of tile row
# q / (TILE/4) (k = 0: its first); the float4 accesses are indexed in float4s.
_VECTOR = "(threadIdx.x + k*THREADS)"
ACCESSES = (
    KernelAccesses("transpose_naive", ("TILE",), (
        DeclaredAccess("in[(blockIdx.y*TILE + threadIdx.y)*cols + blockIdx.x*TILE + threadIdx.x]",
                       "global", 4, note="read a row", count="rows*cols"),
        DeclaredAccess("out[(blockIdx.x*TILE + threadIdx.x)*rows + blockIdx.y*TILE + threadIdx.y]",
                       "global", 4, note="write a column", write=True, count="rows*cols")),
        block=("TILE", "TILE")),
    KernelAccesses("transpose_staged", ("TILE", "BLOCK_ROWS", "PAD"), (
        DeclaredAccess("in[(blockIdx.y*TILE + threadIdx.y + k)*cols + blockIdx.x*TILE + "
                       "threadIdx.x]", "global", 4, note="read a row", count="rows*cols"),
        DeclaredAccess("tile[threadIdx.y + k][threadIdx.x]", "shared", 4,
                       ("TILE", "TILE + PAD"), note="stage a row", write=True),
        DeclaredAccess("tile[threadIdx.x][threadIdx.y + k]", "shared", 4,
                       ("TILE", "TILE + PAD"), note="read a column"),
        DeclaredAccess("out[(blockIdx.x*TILE + threadIdx.y + k)*rows + blockIdx.y*TILE + "
                       "threadIdx.x]", "global", 4, note="write a row", write=True,
                       count="rows*cols")), at=(("k", 0),), block=("TILE", "BLOCK_ROWS")),
    KernelAccesses("transpose_vectorized", ("TILE", "THREADS"), (
        DeclaredAccess(f"in4[{_VECTOR} / (TILE/4) * (cols/4) + {_VECTOR} % (TILE/4)]",
                       "global", 16, note="read a row, float4", count="(rows*cols + 3)/4"),
        DeclaredAccess(f"tile[{_VECTOR} / (TILE/4)][4*({_VECTOR} % (TILE/4))]", "shared", 4,
                       ("TILE", "TILE + 1"), note="stage a row", write=True),
        DeclaredAccess(f"tile[4*({_VECTOR} % (TILE/4))][{_VECTOR} / (TILE/4)]", "shared", 4,
                       ("TILE", "TILE + 1"), note="read a column"),
        DeclaredAccess(f"out4[{_VECTOR} / (TILE/4) * (rows/4) + {_VECTOR} % (TILE/4)]",
                       "global", 16, note="write a row, float4", write=True,
                       count="(rows*cols + 3)/4")), at=(("k", 0),), block=("THREADS",)),
    # transpose_sectors: TILE threads along a row of `in` (scalar loads), then as
    # transpose_vectorized, float4 w of row cc of the out tile (declared unshifted)
    KernelAccesses("transpose_sectors", ("TILE", "THREADS", "SHIFT"), (
        DeclaredAccess("in[(threadIdx.x / TILE + k*(THREADS/TILE))*cols + threadIdx.x % TILE]",
                       "global", 4, note="read a row", count="rows*cols"),
        DeclaredAccess("tile[threadIdx.x / TILE + k*(THREADS/TILE)][threadIdx.x % TILE]",
                       "shared", 4, ("TILE + 8*SHIFT", "TILE + 1"), note="stage a row",
                       write=True),
        DeclaredAccess(f"tile[4*({_VECTOR} % (TILE/4))][{_VECTOR} / (TILE/4)]", "shared", 4,
                       ("TILE + 8*SHIFT", "TILE + 1"), note="read a column"),
        DeclaredAccess(f"out4[{_VECTOR} / (TILE/4) * (rows/4) + {_VECTOR} % (TILE/4)]",
                       "global", 16, note="write a row, float4", write=True,
                       count="(rows*cols + 3)/4")), at=(("k", 0),), block=("THREADS",)),
)

KERNELS = KernelSource(Path(__file__).with_name("kernels.cu"), (
    "transpose_naive<32>",
    "transpose_staged<32,8,0>",
    "transpose_staged<32,8,1>",
    FALLBACK,
    OPTIMIZED,
    SECTORS.format(tile=OPTIMIZED_TILE, threads=OPTIMIZED_THREADS, shift=0),
    SECTORS.format(tile=OPTIMIZED_TILE, threads=OPTIMIZED_THREADS, shift=1),
), ACCESSES)


MAX_GRID_Y = 65535  # CUDA's limit; the naive and staged kernels loop over further tile-rows


def _grid(rows: int, cols: int, tile: int) -> tuple[int, int]:
    return blocks(cols, tile), min(blocks(rows, tile), MAX_GRID_Y)


def _args(inputs: dict, out: Any) -> tuple:
    a = inputs["a"]
    return a, out, np.int32(a.shape[0]), np.int32(a.shape[1])


def _staged(inputs: dict, out: Any, tile: int, block_rows: int, pad: int) -> Launch:
    rows, cols = inputs["a"].shape
    return Launch(KERNELS, f"transpose_staged<{tile},{block_rows},{pad}>",
                  grid=_grid(rows, cols, tile), block=(tile, block_rows),
                  args=_args(inputs, out), result=out)


def naive(inputs: dict, out: Any, machine: Machine) -> Bound:
    rows, cols = inputs["a"].shape
    launch = Launch(KERNELS, "transpose_naive<32>", grid=_grid(rows, cols, 32), block=(32, 32),
                    args=_args(inputs, out), result=out)
    return Bound(launch, {"block": [32, 32]})


def shared(inputs: dict, out: Any, machine: Machine) -> Bound:
    return Bound(_staged(inputs, out, 32, 8, pad=0), {"tile": [32, 32], "block": [32, 8]})


def shared_padded(inputs: dict, out: Any, machine: Machine) -> Bound:
    return Bound(_staged(inputs, out, 32, 8, pad=1), {"tile": [32, 33], "block": [32, 8]})


def vectorizable(a: Any, out: Any) -> bool:
    """float4 accesses need every row to start on a 16-byte boundary."""
    rows, cols = a.shape
    return rows % 4 == 0 and cols % 4 == 0 and a.data.ptr % 16 == 0 and out.data.ptr % 16 == 0


def optimized(inputs: dict, out: Any, machine: Machine) -> Bound:
    """transpose_vectorized where every row is 16-byte aligned; transpose_sectors (each
    block owns whole sectors of ``out``, float4 stores) at any other shape; the padded staged
    kernel only for an output that does not start on a 16-byte boundary."""
    a = inputs["a"]
    rows, cols = a.shape
    params = {"tile": [OPTIMIZED_TILE, OPTIMIZED_TILE + 1], "block": [OPTIMIZED_THREADS],
              "vector": 4, "order": "down columns of tiles"}
    if vectorizable(a, out):
        grid = blocks(rows, OPTIMIZED_TILE) * blocks(cols, OPTIMIZED_TILE)
        launch = Launch(KERNELS, OPTIMIZED, grid=(grid,), block=(OPTIMIZED_THREADS,),
                        args=_args(inputs, out), result=out)
        return Bound(launch, {**params, "writes": "rows aligned"})
    if out.data.ptr % 16 == 0:
        shift = int(rows % 8 != 0)  # windows shifted to start on a sector
        grid = blocks(rows + 8 * shift, OPTIMIZED_TILE) * blocks(cols, OPTIMIZED_TILE)
        kernel = SECTORS.format(tile=OPTIMIZED_TILE, threads=OPTIMIZED_THREADS, shift=shift)
        launch = Launch(KERNELS, kernel, grid=(grid,), block=(OPTIMIZED_THREADS,),
                        args=_args(inputs, out), result=out)
        return Bound(launch, {**params, "writes": "whole sectors a block"})
    launch = _staged(inputs, out, FALLBACK_TILE, FALLBACK_ROWS, pad=1)
    return Bound(launch, {"tile": [FALLBACK_TILE, FALLBACK_TILE + 1],
                          "block": [FALLBACK_TILE, FALLBACK_ROWS], "vector": 1})


def library(inputs: dict, out: Any, machine: Machine) -> Bound:
    import cupy

    # As for NumPy: cupy.array(a.T, order="C") is ascontiguousarray(a.T) that always copies.
    return Bound(partial(cupy.array, inputs["a"].T, order="C"))
