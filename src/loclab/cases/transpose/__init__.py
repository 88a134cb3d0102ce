"""Matrix transposition, the lectures' spatial-locality case study (float32, row-major).

``out[j][i] = a[i][j]``: a row of ``a`` is read contiguously but written as a column, one
element per cache line (CPU) or per memory sector (GPU). Blocking (CPU) and staging a tile in
shared memory (GPU) make both sides contiguous.
"""

from __future__ import annotations

import numpy as np

from loclab.cases.base import Variant, lazy
from loclab.cases.matrix import matrix_case

CPU = "loclab.cases.transpose.cpu"
GPU = "loclab.cases.transpose.gpu"
TRAFFIC = "loclab.cases.transpose.traffic"


def golden(inputs: dict[str, np.ndarray]) -> np.ndarray:
    return np.ascontiguousarray(inputs["a"].T)


def output(dims: dict[str, int]) -> tuple[tuple[int, ...], type]:
    return (dims["cols"], dims["rows"]), np.float32


CASE = matrix_case(
    name="transpose",
    lesson="spatial locality; coalescing; shared-memory bank conflicts",
    description="out = a.T for a float32 rows x cols matrix",
    golden=golden,
    output=output,
    variants=(
        Variant("cpu-naive", "cpu", "naive",
                "numba prange over rows of a; writes walk down columns of out",
                lazy(CPU, "naive"), traffic=lazy(TRAFFIC, "naive")),
        Variant("cpu-blocked", "cpu", "optimized",
                "two-level blocking: L2-sized outer tiles (parallel), L1-sized inner tiles",
                lazy(CPU, "blocked"), traffic=lazy(TRAFFIC, "blocked"),
                space=lazy(CPU, "blocked_space")),
        Variant("numpy", "cpu", "library",
                "numpy.array(a.T, order='C'): ascontiguousarray(a.T), always a copy",
                lazy(CPU, "library")),
        Variant("gpu-naive", "gpu", "naive",
                "one thread per element, 32x32 blocks: coalesced reads, strided writes",
                lazy(GPU, "naive")),
        Variant("gpu-shared", "gpu", "optimized",
                "32x32 tile in shared memory tile[32][32], 32x8 threads (4 elements each): "
                "coalesced both ways, 32-way bank conflicts reading columns",
                lazy(GPU, "shared")),
        Variant("gpu-shared-padded", "gpu", "optimized",
                "as gpu-shared with tile[32][33]: a column spans all 32 banks",
                lazy(GPU, "shared_padded")),
        Variant("gpu-optimized", "gpu", "optimized",
                "64x64 tile[64][65], 512 threads, 16-byte loads and stores, blocks "
                "numbered down columns of tiles; scalar 64x8-thread path when a side is not "
                "a multiple of 4",
                lazy(GPU, "optimized")),
        Variant("cupy", "gpu", "library",
                "cupy.array(a.T, order='C'): ascontiguousarray(a.T), always a copy",
                lazy(GPU, "library")),
    ),
)
