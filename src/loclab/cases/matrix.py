"""What the cases on one float32 matrix (``copy``, ``transpose``) share: inputs, work, sizes.

``small`` runs in seconds on 2 CPU cores and has odd sides, so every run exercises the edges
of the tiles; ``default`` keeps the footprint (input plus output) at least four times the
last-level cache of the machine on the CPU (5120 x 5120 for 32 MiB: beyond the cache, yet
seconds on 2 cores) and is the lectures' 16384 x 16384 on the GPU, where it takes that much to
fill the chip; ``large`` is at least 16384 (CPU) or 32768 (GPU) and four times the cache.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from loclab.cases.base import MATRIX_DIMS, Case, Variant, Work
from loclab.hw import Machine

ITEMSIZE = 4  # float32


def _beyond_cache(minimum_side: int,
                  cache_bytes: Callable[[Machine], int]) -> Callable[[Machine], dict]:
    """Square matrices of at least ``minimum_side`` whose input and output are at least four
    times the cache, sides a multiple of 1024."""

    def rule(machine: Machine) -> dict[str, int]:
        # 2 matrices * side^2 * 4 bytes >= 4 * cache  <=>  side >= sqrt(cache / 2)
        side = math.isqrt(cache_bytes(machine) // 2) + 1
        side = max(minimum_side, -(-side // 1024) * 1024)
        return {"rows": side, "cols": side}

    return rule


def _gpu_l2(machine: Machine) -> int:
    return machine.gpu.l2_bytes if machine.gpu else 0


MATRIX_SIZES = {
    "small": {"cpu": {"rows": 1999, "cols": 3001}, "gpu": {"rows": 5003, "cols": 7001}},
    "default": {"cpu": _beyond_cache(2048, lambda m: m.cpu.llc_share_bytes),
                "gpu": {"rows": 16384, "cols": 16384}},
    "large": {"cpu": _beyond_cache(16384, lambda m: m.cpu.llc_bytes),
              "gpu": _beyond_cache(32768, _gpu_l2)},
}


# Odd and even sides, single rows and columns, multiples of 4 (the float4 path) and not, and
# tall, thin matrices (hundreds of tile-rows, one tile-column).
MATRIX_TEST_DIMS = tuple({"rows": r, "cols": c} for r, c in (
    (1, 1), (1, 37), (37, 1), (33, 65), (64, 64), (100, 260), (129, 257), (300, 200),
    (4, 128), (16388, 12), (16387, 13)))


def make_matrix(dims: dict[str, int], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """The input ``a``: uniform in [0, 1), never zeros that would hide unwritten outputs."""
    return {"a": rng.random((dims["rows"], dims["cols"]), dtype=np.float32)}


def matrix_work(dims: dict[str, int]) -> Work:
    """One matrix read and one written, no arithmetic: the golden algorithm's traffic."""
    return Work(bytes=2 * dims["rows"] * dims["cols"] * ITEMSIZE, flops=0)


def matrix_case(*, name: str, lesson: str, description: str,
                golden: Callable[[dict[str, np.ndarray]], np.ndarray],
                output: Callable[[dict[str, int]], tuple[tuple[int, ...], type]],
                variants: tuple[Variant, ...]) -> Case:
    """A case on one float32 matrix ``a`` whose output must match golden exactly."""
    return Case(name=name, lesson=lesson, description=description, sizes=MATRIX_SIZES,
                test_dims=MATRIX_TEST_DIMS, make_inputs=make_matrix, golden=golden,
                output=output, work=matrix_work, tolerance=0.0, variants=variants,
                dimensions=MATRIX_DIMS)
