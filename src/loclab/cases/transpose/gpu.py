"""GPU variants of transposition: CUDA C in kernels.cu, launched through CuPy."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from loclab.cases.base import Bound
from loclab.gpu.kernels import KernelSource, Launch, blocks
from loclab.hw import Machine

OPTIMIZED_TILE, OPTIMIZED_THREADS = 64, 512
FALLBACK_TILE, FALLBACK_ROWS = 64, 8
OPTIMIZED = f"transpose_vectorized<{OPTIMIZED_TILE},{OPTIMIZED_THREADS}>"
FALLBACK = f"transpose_staged<{FALLBACK_TILE},{FALLBACK_ROWS},1>"

KERNELS = KernelSource(Path(__file__).with_name("kernels.cu"), (
    "transpose_naive<32>",
    "transpose_staged<32,8,0>",
    "transpose_staged<32,8,1>",
    FALLBACK,
    OPTIMIZED,
))


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
    a = inputs["a"]
    if not vectorizable(a, out):
        launch = _staged(inputs, out, FALLBACK_TILE, FALLBACK_ROWS, pad=1)
        return Bound(launch, {"tile": [FALLBACK_TILE, FALLBACK_TILE + 1],
                              "block": [FALLBACK_TILE, FALLBACK_ROWS], "vector": 1})
    rows, cols = a.shape
    grid = blocks(rows, OPTIMIZED_TILE) * blocks(cols, OPTIMIZED_TILE)
    launch = Launch(KERNELS, OPTIMIZED, grid=(grid,), block=(OPTIMIZED_THREADS,),
                    args=_args(inputs, out), result=out)
    return Bound(launch, {"tile": [OPTIMIZED_TILE, OPTIMIZED_TILE + 1],
                          "block": [OPTIMIZED_THREADS], "vector": 4,
                          "order": "down columns of tiles"})


def library(inputs: dict, out: Any, machine: Machine) -> Bound:
    import cupy

    # As for NumPy: cupy.array(a.T, order="C") is ascontiguousarray(a.T) that always copies.
    return Bound(partial(cupy.array, inputs["a"].T, order="C"))
