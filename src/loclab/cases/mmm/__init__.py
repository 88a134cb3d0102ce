"""Matrix-matrix multiplication, the lectures' temporal-locality centrepiece (case study 5.3).

``C[i][j] = sum_k A[i][k] * B[k][j]`` does 2 m n k flops on 4 (m k + k n + m n) bytes: each
input element could be used n or m times, but the naive loop nest fetches it again for every
use (data-reuse factor O(1)). Block tiling keeps T x T tiles in a cache or shared memory and
reuses each loaded element T times (O(sqrt S) for a cache of S elements); register tiling
keeps an R x R block of C in registers and reuses each loaded element R times more. The
versions of the ladder show where each factor comes from; the GPU's last rung is measured
against cuBLAS SGEMM (TF32 off), the CPU's against NumPy's BLAS.

Inputs are uniform in (0, 1]: with non-negative terms the error of any summation order is
bounded by the sum itself (see ``tolerance``), which makes the bound tight enough to catch a
missing product at the test sizes.
"""

from __future__ import annotations

import math

import numpy as np

from loclab.cases.base import (PRODUCT_DIMS, Case, Variant, Work, flop_limit, lazy,
                               summation_tolerance, uniform_nonzero)
from loclab.hw import Machine

CPU = "loclab.cases.mmm.cpu"
GPU = "loclab.cases.mmm.gpu"
ITEMSIZE = 4  # float32
# Beyond this many flops the loop nests without tiling would take minutes per run: on a CPU
# (a few GFlop/s at best on 16 cores) beyond the default 2048^3, on a GPU beyond 4096^3.
UNTILED_FLOP_LIMITS = {"cpu": 2 * 2048**3, "gpu": 2 * 4096**3}


def golden(inputs: dict[str, np.ndarray]) -> np.ndarray:
    """The product summed in float64, rounded once to float32."""
    return (inputs["a"].astype(np.float64) @ inputs["b"].astype(np.float64)).astype(np.float32)


def tolerance(inputs: dict[str, np.ndarray]) -> float:
    """Every C[i][j] sums k non-negative rounded products: in any order, with or without FMA,
    it is within (k + 1) u C[i][j] of the exact value (``summation_tolerance``), so the
    normwise relative error max|C - golden| / max|golden| is within 1.05 (k + 1) 2^-24."""
    return summation_tolerance(inputs["a"].shape[1])


def make_inputs(dims: dict[str, int], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """A (m x k) and B (k x n), float32 in (0, 1]."""
    return {"a": uniform_nonzero(rng, (dims["m"], dims["k"])),
            "b": uniform_nonzero(rng, (dims["k"], dims["n"]))}


def output(dims: dict[str, int]) -> tuple[tuple[int, ...], type]:
    return (dims["m"], dims["n"]), np.float32


def work(dims: dict[str, int]) -> Work:
    """2 m n k flops; A and B read once and C written once (the compulsory traffic)."""
    m, n, k = dims["m"], dims["n"], dims["k"]
    return Work(bytes=ITEMSIZE * (m * k + k * n + m * n), flops=2 * m * n * k)


UNTILED_TOO_SLOW = {device: flop_limit(work, limit, "untiled loops")
                    for device, limit in UNTILED_FLOP_LIMITS.items()}


def _cube(side: int) -> dict[str, int]:
    return {"m": side, "n": side, "k": side}


def _cpu_default(machine: Machine) -> dict[str, int]:
    """Each matrix at least twice a core's L2 (768 for 1 MiB), a multiple of 256: beyond the
    cache that tiles are sized for, and the untiled nests take a second, not minutes, on 2
    cores."""
    side = math.isqrt(2 * machine.cpu.l2_bytes // ITEMSIZE - 1) + 1
    return _cube(-(-side // 256) * 256)


def _cpu_large(machine: Machine) -> dict[str, int]:
    """Three side x side float32 matrices at least four times the LLC, at least 4096."""
    side = math.isqrt(4 * machine.cpu.llc_bytes // (3 * ITEMSIZE)) + 1
    return _cube(max(4096, -(-side // 1024) * 1024))


SIZES = {
    "small": {"cpu": {"m": 500, "n": 499, "k": 501}, "gpu": {"m": 1000, "n": 999, "k": 1001}},
    "default": {"cpu": _cpu_default, "gpu": [_cube(4096), _cube(8192)]},
    "large": {"cpu": _cpu_large, "gpu": _cube(16384)},
}

# Sides of one, primes, one past and one short of every tile and vector width, K of one.
TEST_DIMS = tuple({"m": m, "n": n, "k": k} for m, n, k in (
    (1, 1, 1), (1, 37, 5), (37, 1, 5), (5, 7, 1), (33, 65, 17), (64, 64, 64),
    (100, 130, 129), (129, 67, 300), (127, 129, 131), (1000, 999, 1001)))


CASE = Case(
    name="mmm",
    lesson="temporal locality: block tiling, register tiling, autotuned tiles",
    description="C = A . B, float32, A m x k, B k x n",
    sizes=SIZES,
    make_inputs=make_inputs,
    golden=golden,
    output=output,
    work=work,
    tolerance=tolerance,
    test_dims=TEST_DIMS,
    variants=(
        Variant("cpu-naive", "cpu", "naive",
                "i, j in parallel, k sequential: B read down a column (no spatial locality)",
                lazy(CPU, "naive"), skip=UNTILED_TOO_SLOW["cpu"]),
        Variant("cpu-transposed-b", "cpu", "optimized",
                "B transposed first, so the k loop reads both operands along rows (spatial "
                "locality only; no reuse beyond a cache line)",
                lazy(CPU, "transposed_b"), skip=UNTILED_TOO_SLOW["cpu"]),
        Variant("cpu-blocked", "cpu", "optimized",
                "block tiling: tiles of A, B and C sized from the caches, each element reused "
                "a tile's width of times while it is cached",
                lazy(CPU, "blocked"), space=lazy(CPU, "blocked_space")),
        Variant("cpu-register-tiled", "cpu", "optimized",
                "GotoBLAS's loop nest: packed kc x nc blocks of B in L2, kc x r panels of A "
                "in L1, r x width register blocks of the ISA's full vector width (explicit "
                "512-bit vectors on AVX-512), sums along k in order",
                lazy(CPU, "register_tiled"), space=lazy(CPU, "register_tiled_space")),
        Variant("numpy", "cpu", "library", "numpy.matmul (the BLAS NumPy links, SGEMM)",
                lazy(CPU, "library")),
        Variant("gpu-naive", "gpu", "naive",
                "a thread per C element, k sequential, operands from global memory",
                lazy(GPU, "naive"), skip=UNTILED_TOO_SLOW["gpu"]),
        Variant("gpu-block-tiled", "gpu", "optimized",
                "T x T shared-memory tiles of A and B, one C element per thread",
                lazy(GPU, "block_tiled"), space=lazy(GPU, "block_tiled_space")),
        Variant("gpu-register-tiled", "gpu", "optimized",
                "the slides' block + register tiling: T x T threads, R x R results per thread, "
                "shared slices Aloc[T*R][T] and Bloc[T][T*R]",
                lazy(GPU, "register_tiled"), space=lazy(GPU, "register_tiled_space")),
        Variant("gpu-optimized", "gpu", "optimized",
                "A^T written first, then warp tiling fed by 16-byte cp.async copies of A^T and "
                "B, 3 slices in flight, one barrier per slice",
                lazy(GPU, "optimized"), space=lazy(GPU, "optimized_space")),
        Variant("cublas", "gpu", "library", "cuBLAS SGEMM through CuPy, TF32 off",
                lazy(GPU, "cublas")),
    ),
    limit="compute",
    dimensions=PRODUCT_DIMS,
)
