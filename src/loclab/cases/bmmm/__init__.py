"""Batch matrix multiplication under a mask, the lectures' case study 5.4 (from satellite
change detection): ``Y[i][j1][j2] = sum_q A[j1][q] * B[q][j2] * (X[i][q] != 0)``.

Every one of the M products reuses the same small A (K x N) and B (N x K); what differs is the
mask row X[i]. The naive nest recomputes a·b for every i; strip-mining i and moving the tile
innermost reuses a·b from a register across T rows of X (read from L1, or from shared memory
on a GPU, through the transposed mask so that the loads coalesce). Beyond the lectures, the
algebra is a plain matrix product: Y = X' · C with X' the 0/1 mask and
C[q][(j1, j2)] = A[j1][q] · B[q][j2], which a GEMM-like kernel computes at near-peak rate; and
since the mask is 0/1, 8 of its bits select one of the 256 subset sums of 8 rows of C (the
method of the Four Russians): one addition for 8 multiply-adds.

Inputs: A and B uniform in (0, 1]; X bytes, about 10% zeros, the others any non-zero byte.
"""

from __future__ import annotations

import numpy as np

from loclab.cases.base import (Case, Variant, Work, flop_limit, lazy, summation_tolerance,
                               uniform_nonzero)

CPU = "loclab.cases.bmmm.cpu"
GPU = "loclab.cases.bmmm.gpu"
ZERO_SHARE = 0.1  # of the mask bytes
DEFAULT_M, DEFAULT_N = 131_000, 512
CPU_DEFAULT_M = 32_000  # the naive nest runs at K = 16 too: 3 M K^2 N is within its limit
DEFAULT_KS = (8, 4, 16)  # the lectures' K first, then the issue's other two


def golden(inputs: dict[str, np.ndarray]) -> np.ndarray:
    """Y = mask · C in float64, C[q][(j1, j2)] = A[j1][q] B[q][j2], rounded once to float32."""
    a, b, x = (inputs[name] for name in ("a", "b", "x"))
    k, n = a.shape
    products = (a.T.astype(np.float64)[:, :, None] * b.astype(np.float64)[:, None, :])
    y = (x != 0).astype(np.float64) @ products.reshape(n, k * k)
    return y.reshape(x.shape[0], k, k).astype(np.float32)


def tolerance(inputs: dict[str, np.ndarray]) -> float:
    """Each Y element sums at most N non-negative rounded products."""
    return summation_tolerance(inputs["a"].shape[1])


def make_inputs(dims: dict[str, int], rng: np.random.Generator) -> dict[str, np.ndarray]:
    m, k, n = dims["m"], dims["k"], dims["n"]
    x = rng.integers(1, 256, size=(m, n), dtype=np.uint8)
    x[rng.random((m, n), dtype=np.float32) < ZERO_SHARE] = 0
    return {"a": uniform_nonzero(rng, (k, n)), "b": uniform_nonzero(rng, (n, k)), "x": x}


def output(dims: dict[str, int]) -> tuple[tuple[int, ...], type]:
    return (dims["m"], dims["k"], dims["k"]), np.float32


def work(dims: dict[str, int]) -> Work:
    """The lectures' count: 3 M K^2 N flops (a·b, times the mask, plus); X read once as bytes,
    A and B once, Y written once."""
    m, k, n = dims["m"], dims["k"], dims["n"]
    return Work(bytes=m * n + 4 * 2 * k * n + 4 * m * k * k, flops=3 * m * k * k * n)


# The naive nest runs at the lectures' K = 8 at the default size, not beyond: it would take
# minutes.
NAIVE_FLOP_LIMIT = work({"m": DEFAULT_M, "k": 8, "n": DEFAULT_N}).flops


DEFAULT = [{"m": DEFAULT_M, "k": k, "n": DEFAULT_N} for k in DEFAULT_KS]
# The lesson is registers and L1, not the memory: a quarter of the rows keeps a first run on
# 2 cores within minutes (the naive nest at K = 8: 0.3 s a run, not 1.3 s).
CPU_DEFAULT = [{**size, "m": CPU_DEFAULT_M} for size in DEFAULT]
SIZES = {
    "small": {"cpu": {"m": 1001, "k": 5, "n": 127}, "gpu": {"m": 10_007, "k": 7, "n": 129}},
    "default": {"cpu": CPU_DEFAULT, "gpu": DEFAULT},
    "large": {"cpu": [{"m": 4 * DEFAULT_M, "k": 8, "n": DEFAULT_N}],
              "gpu": [{"m": 8 * DEFAULT_M, "k": k, "n": DEFAULT_N} for k in DEFAULT_KS]},
}

# One row, K of one, tiles of rows (31, 128, 256) and q-slices (16) not dividing M or N, N
# not a multiple of 16 (gpu-optimized's vector loads of the mask) and a multiple at K = 16
# (two column tiles), an odd count of slices (its double buffer).
TEST_DIMS = tuple({"m": m, "k": k, "n": n} for m, k, n in (
    (1, 1, 1), (1, 3, 5), (31, 4, 33), (33, 8, 64), (100, 2, 7), (257, 16, 130),
    (129, 5, 31), (1000, 8, 512), (300, 16, 48)))


CASE = Case(
    name="bmmm",
    lesson="registers and L1/shared memory: a·b reused across a tile of rows",
    description="Y[i][j1][j2] = sum_q A[j1][q] B[q][j2] (X[i][q] != 0); X bytes",
    sizes=SIZES,
    make_inputs=make_inputs,
    golden=golden,
    output=output,
    work=work,
    tolerance=tolerance,
    test_dims=TEST_DIMS,
    variants=(
        Variant("cpu-naive", "cpu", "naive",
                "rows in parallel; for each (j1, j2) the sum over q recomputes a·b",
                lazy(CPU, "naive"), skip=flop_limit(work, NAIVE_FLOP_LIMIT, "the naive nest")),
        Variant("cpu-tiled", "cpu", "optimized",
                "i strip-mined by T and the tile moved innermost: a·b from a register serves "
                "T rows, the T x N slice of X stays in L1",
                lazy(CPU, "tiled")),
        Variant("gpu-naive", "gpu", "naive",
                "a block of K x K threads per row of X, the sum over q from global memory",
                lazy(GPU, "naive"), skip=lazy(GPU, "block_fits")),
        Variant("gpu-tiled", "gpu", "optimized",
                "the slides' recipe: T = 31 rows per block, X transposed (counted), the slice "
                "X_tr[q][ii:ii+T] staged in shared memory, acc[T] in registers",
                lazy(GPU, "tiled"), skip=lazy(GPU, "tiled_fits")),
        Variant("gpu-optimized", "gpu", "optimized",
                "Y = mask · C as a tiled matrix product (mmm's warp tiling): mask bytes read "
                "as 16-byte vectors and staged as 0/1 floats, slices of C copied by "
                "cp.async; 16 x 8 results a thread from K = 9 (8 x 8 from K = 6, 8 x 4 "
                "below); a persistent grid streaming slices across its tiles",
                lazy(GPU, "optimized")),
        Variant("gpu-subset-sums", "gpu", "optimized",
                "the method of the Four Russians: the mask packed to bits, q cut into chunks "
                "of 8; per chunk a block builds the 256 subset sums of C's 8 rows (32 "
                "columns) in shared memory and each row adds the one its byte of bits "
                "selects: 8 times fewer additions than the product has multiply-adds",
                lazy(GPU, "subset_sums"), skip=lazy(GPU, "subset_sums_fits")),
        Variant("cublas", "gpu", "library",
                "(X != 0).astype(float32) @ C through cuBLAS (CuPy), conversion and C "
                "included",
                lazy(GPU, "cublas")),
    ),
    # The default and large GPU presets run K = 4, 8, 16: the report plots each variant's
    # GFlop/s against K, where a register tile's reuse grows with K^2 columns.
    sweep="k",
    sweep_rate=True,
    limit="compute",
    dimensions=("m", "k", "n"),
)
