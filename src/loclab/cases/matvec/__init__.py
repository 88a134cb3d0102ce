"""Matrix-vector product, the lectures' GPU-model example: ``y[i] = sum_k a[i][k] * x[k]``.

Every element of ``a`` is used once, so the product is memory-bound: at best it streams ``a``
at the speed of a copy, while ``x``, used by every row, is served from cache (temporal
locality). How close a version gets depends on whether all threads have work and whether
their loads are coalesced, and the answer changes with the shape: the lecture's kernel (a
block per row, thread 0 adding up) idles all threads but one while it adds; a thread per row
makes uncoalesced loads; a warp per row wastes lanes on short rows; a few long rows leave most
cores or SMs idle unless each row is split. Three shapes of about the same footprint are run:
tall-skinny, square and short-wide.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from loclab.cases.base import (MATRIX_DIMS, Case, Variant, Work, lazy, summation_tolerance,
                               uniform_nonzero)
from loclab.hw import Machine

CPU = "loclab.cases.matvec.cpu"
GPU = "loclab.cases.matvec.gpu"
TRAFFIC = "loclab.cases.matvec.traffic"
ITEMSIZE = 4  # float32
NARROW = 64  # the short side of the tall-skinny and short-wide shapes
GOLDEN_CHUNK = 1 << 22  # elements of ``a`` converted to float64 at a time (32 MiB)


def golden(inputs: dict[str, np.ndarray]) -> np.ndarray:
    """Dot products accumulated in float64, rounded to float32. Rows are converted a chunk at
    a time, so a 1 GiB ``a`` never needs a 2 GiB float64 copy."""
    a, x = inputs["a"], inputs["x"].astype(np.float64)
    rows, cols = a.shape
    step = max(1, GOLDEN_CHUNK // cols)
    y = np.empty(rows, np.float32)
    for r0 in range(0, rows, step):
        y[r0:r0 + step] = a[r0:r0 + step].astype(np.float64) @ x
    return y


def output(dims: dict[str, int]) -> tuple[tuple[int, ...], type]:
    return (dims["rows"],), np.float32


def work(dims: dict[str, int]) -> Work:
    """``a`` and ``x`` read once, ``y`` written once; a multiply and an add per element of a."""
    rows, cols = dims["rows"], dims["cols"]
    return Work(bytes=ITEMSIZE * (rows * cols + cols + rows), flops=2 * rows * cols)


def tolerance(inputs: dict[str, np.ndarray]) -> float:
    """Each y[i] is a float32 sum of ``cols`` products, in whatever order a variant adds."""
    return summation_tolerance(inputs["a"].shape[1])


def make_inputs(dims: dict[str, int], rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"a": uniform_nonzero(rng, (dims["rows"], dims["cols"])),
            "x": uniform_nonzero(rng, (dims["cols"],))}


def shapes(side: int) -> list[dict[str, int]]:
    """Tall-skinny, square and short-wide matrices of ``side * side`` elements each."""
    long = side * side // NARROW
    return [{"rows": long, "cols": NARROW}, {"rows": side, "cols": side},
            {"rows": NARROW, "cols": long}]


def _large(minimum_side: int,
           cache_bytes: Callable[[Machine], int]) -> Callable[[Machine], list[dict[str, int]]]:
    def rule(machine: Machine) -> list[dict[str, int]]:
        # side^2 * 4 bytes >= 4 * cache  <=>  side^2 >= cache; sides in multiples of 1024
        side = math.isqrt(max(cache_bytes(machine) - 1, 0)) + 1
        return shapes(max(minimum_side, -(-side // 1024) * 1024))

    return rule


def _gpu_l2(machine: Machine) -> int:
    return machine.gpu.l2_bytes if machine.gpu else 0


SIZES = {
    "small": {"cpu": [{"rows": 100003, "cols": 61}, {"rows": 3001, "cols": 2999},
                      {"rows": 61, "cols": 100003}],
              "gpu": [{"rows": 1000003, "cols": 61}, {"rows": 7817, "cols": 7811},
                      {"rows": 61, "cols": 1000003}]},
    # A of at least 4x the LLC on the CPU (144 MiB for 32 MiB), of 1 GiB on the GPU, in each
    # shape.
    "default": {"cpu": _large(2048, lambda m: m.cpu.llc_share_bytes), "gpu": shapes(16384)},
    "large": {"cpu": _large(16384, lambda m: m.cpu.llc_bytes), "gpu": _large(32768, _gpu_l2)},
}

# One row, one column, sides that are not multiples of 4 (the float4 path), 32 (a warp), the
# block size or the rows a block covers; few rows with long rows (the split strategies).
TEST_DIMS = tuple({"rows": r, "cols": c} for r, c in (
    (1, 1), (1, 1000), (1000, 1), (33, 65), (129, 257), (64, 4099), (4099, 7), (5, 100003),
    (300, 300), (7, 8196), (1027, 64)))

CASE = Case(
    name="matvec",
    lesson="coalescing; idle threads in reductions; splitting work to fill the machine; "
           "temporal locality of x",
    description="y = a @ x for a float32 rows x cols matrix (tall-skinny, square, short-wide)",
    sizes=SIZES,
    make_inputs=make_inputs,
    golden=golden,
    output=output,
    work=work,
    tolerance=tolerance,
    test_dims=TEST_DIMS,
    variants=(
        Variant("cpu-rows", "cpu", "naive",
                "numba prange over rows, one in-order float32 dot product each",
                lazy(CPU, "naive"), traffic=lazy(TRAFFIC, "by_rows")),
        Variant("cpu-split", "cpu", "optimized",
                "prange over tiles of rows x column blocks (x's block in L2), vectorized dot "
                "products, per-tile partial sums added per row: few long rows use every core "
                "(whole-row tiles when one block holds a row)",
                lazy(CPU, "split"), traffic=lazy(TRAFFIC, "split")),
        Variant("numpy", "cpu", "library", "numpy.matmul(a, x): BLAS sgemv into a new array",
                lazy(CPU, "library"), traffic=lazy(TRAFFIC, "by_rows")),
        Variant("gpu-row-per-thread", "gpu", "naive",
                "a thread per row walks it alone: a warp's loads are cols floats apart",
                lazy(GPU, "row_per_thread")),
        Variant("gpu-block-thread0", "gpu", "optimized",
                "the lecture's kernel: a block per row, products in shared Temp, thread 0 "
                "adds them while the other 255 threads wait",
                lazy(GPU, "block_thread0")),
        Variant("gpu-block-reduce", "gpu", "optimized",
                "a block per row, strided partial sums, shuffle and shared-memory tree",
                lazy(GPU, "block_reduce")),
        Variant("gpu-warp-per-row", "gpu", "optimized",
                "a warp per row, lanes strided over it (float4 when aligned), one load in "
                "flight per lane, shuffle sum",
                lazy(GPU, "warp_per_row")),
        Variant("gpu-optimized", "gpu", "optimized",
                "by shape: lane groups sized to short rows (several rows per warp), a warp "
                "with 8 float4 loads in flight per lane for long rows, or few long rows split "
                "over many blocks with a second pass adding the partial sums; a bypasses L1",
                lazy(GPU, "optimized")),
        Variant("cublas", "gpu", "library",
                "cupy.cublas.gemv: cuBLAS SGEMV into y (fp32, no TF32)",
                lazy(GPU, "library")),
    ),
    dimensions=MATRIX_DIMS,
)
