"""Prefix sums: the lectures' scans, and what it takes to run one at copy speed.

``out[i] = a[0] + ... + a[i]`` (inclusive) or ``... + a[i - 1]`` (exclusive) looks sequential:
every output depends on the one before (the dependence ``loclab analyze`` names a scan). It is
parallel because + is associative: Hillis and Steele add, in log2 n steps, the element 1, 2,
4, ... places back (O(n log n) additions); Blelloch's up-sweep and down-sweep do it in O(n).
On a GPU both work inside a block; a whole array then needs the block sums scanned and added
back, which reads and writes the array again. Reduce-then-scan reads it twice and writes it
once (three passes); the single-pass scan with decoupled look-back (Merrill & Garland, 2016)
reads it once and writes it once, as a copy does: each tile learns the sum of everything
before it from its predecessors' published aggregates and prefixes.

Rates count one read and one write of the array (a copy's bytes), so a scan's % of copy is
how close it gets to the memory roof. The GPU default sweeps n from 2**16 to 2**28, where launch
overhead gives way to bandwidth.

Float inputs are multiples of 1/64 (``dyadic_nonzero``): every summation order is then exact,
so the check is exact too; int32 sums wrap around (modulo 2**32) in every variant and golden.
"""

from __future__ import annotations

import math

import numpy as np

from loclab.cases.base import Case, Variant, Work, dyadic_nonzero, exact_sums_tolerance, lazy
from loclab.gpu import cub
from loclab.hw import Machine

CPU = "loclab.cases.scan.cpu"
GPU = "loclab.cases.scan.gpu"
ELEMENT_BYTES = 4  # float32 or int32
INT_LIMIT = 100  # int32 inputs in [-100, 100] without 0
GPU_SWEEP = tuple(2**k for k in range(16, 29, 2))  # 2**16 ... 2**28


def golden(inputs: dict[str, np.ndarray]) -> np.ndarray:
    """The sequential scan, in float64 (or int64) rounded once to the input's type."""
    a = inputs["a"]
    wide = np.cumsum(a, dtype=np.float64 if a.dtype == np.float32 else np.int64)
    if int(inputs["exclusive"][0]):
        wide = np.concatenate(([0], wide[:-1]))
    return wide.astype(a.dtype)  # int64 -> int32 wraps around, as every variant does


def tolerance(inputs: dict[str, np.ndarray]) -> float:
    """0 for integers; for floats the bound that holds for any summation order (exact while
    the prefix sums stay in float32's exact range for multiples of 1/64)."""
    a = inputs["a"]
    if a.dtype != np.float32:
        return 0.0
    return exact_sums_tolerance(np.cumsum(a, dtype=np.float64), a.size)


def make_inputs(dims: dict[str, int], rng: np.random.Generator) -> dict[str, np.ndarray]:
    n = dims["n"]
    if dims["integer"]:
        a = rng.integers(1, INT_LIMIT + 1, size=n, dtype=np.int32)
        a *= rng.choice(np.array([-1, 1], np.int32), size=n)
    else:
        a = dyadic_nonzero(rng, n)
    return {"a": a, "exclusive": np.array([dims["exclusive"]], np.int64)}


def output(dims: dict[str, int]) -> tuple[tuple[int, ...], type]:
    return (dims["n"],), np.int32 if dims["integer"] else np.float32


def work(dims: dict[str, int]) -> Work:
    """The sequential scan reads every element and writes every sum once: n additions."""
    return Work(bytes=2 * ELEMENT_BYTES * dims["n"], flops=dims["n"], items=dims["n"])


def sweep(sizes: tuple[int, ...]) -> list[dict[str, int]]:
    """float32 inclusive scans of each size."""
    return [{"n": n, "exclusive": 0, "integer": 0} for n in sizes]


def beyond(cache_bytes: int, least: int) -> list[dict[str, int]]:
    """One size, a power of two at least ``least``, whose input and output fill at least four
    times ``cache_bytes``."""
    n = 1 << math.ceil(math.log2(max(least, 4 * cache_bytes / (2 * ELEMENT_BYTES))))
    return sweep((n,))


def cpu_default(machine: Machine) -> list[dict[str, int]]:
    return beyond(machine.cpu.llc_share_bytes, 2**22)


SIZES = {
    "small": {"cpu": sweep((2**20,)), "gpu": sweep((2**20,))},
    "default": {"cpu": cpu_default, "gpu": sweep(GPU_SWEEP)},
    "large": {"cpu": lambda m: beyond(m.cpu.llc_bytes, 2**24),
              "gpu": lambda m: beyond(m.gpu.l2_bytes if m.gpu else 0, 2**28)},
}

# Block and tile edges of every GPU variant (512 threads; 1024 per Blelloch block; tiles of
# 4096), a second level of block sums (600,000 > 512 x 1024), and each mode.
_EDGES = (1, 31, 32, 33, 511, 512, 513, 1025, 4095, 4097, 2**13 - 1, 2**16 + 1, 600_001)
TEST_DIMS = (*({"n": n, "exclusive": n % 2, "integer": 0} for n in _EDGES),
             *({"n": n, "exclusive": e, "integer": 1} for n in (1, 33, 4097, 600_001)
               for e in (0, 1)))


CASE = Case(
    name="scan",
    lesson="prefix sums: Hillis-Steele, Blelloch, reduce-then-scan, single pass with look-back",
    description="out[i] = a[0] + ... + a[i] (inclusive; exclusive: up to a[i-1]) over n "
                "float32 or int32",
    sizes=SIZES,
    make_inputs=make_inputs,
    golden=golden,
    output=output,
    work=work,
    tolerance=tolerance,
    test_dims=TEST_DIMS,
    sweep="n",
    sweep_rate=True,
    variants=(
        Variant("cpu-sequential", "cpu", "naive", "one thread, one pass: the golden loop",
                lazy(CPU, "sequential")),
        Variant("cpu-two-pass", "cpu", "optimized",
                "numba prange over cache-sized rounds: each thread sums its slice, the sums "
                "are scanned, each thread scans its slice again from its offset (the second "
                "read hits its cache)", lazy(CPU, "two_pass"), space=lazy(CPU, "space")),
        Variant("numpy", "cpu", "library", "numpy.cumsum (one thread)", lazy(CPU, "library")),
        Variant("gpu-hillis-steele", "gpu", "naive",
                "the lecture's scan per block of 512 (log2 512 double-buffered steps in "
                "shared memory), block sums scanned the same way, then added back",
                lazy(GPU, "hillis_steele")),
        Variant("gpu-blelloch", "gpu", "optimized",
                "work-efficient up-sweep/down-sweep per block of 1024 in bank-conflict-free "
                "padded shared memory, block sums scanned the same way, then added back",
                lazy(GPU, "blelloch")),
        Variant("gpu-reduce-then-scan", "gpu", "optimized",
                "three passes: each block sums a contiguous chunk, one block scans the chunk "
                "sums, each block scans its chunk from its prefix (reads the input twice)",
                lazy(GPU, "reduce_then_scan")),
        Variant("gpu-decoupled-lookback", "gpu", "optimized",
                "single pass: each tile publishes its aggregate, a warp looks back over its "
                "predecessors' states for its prefix (32 items a thread, coalesced 16-byte "
                "loads)",
                lazy(GPU, "decoupled_lookback"), space=lazy(GPU, "lookback_space")),
        Variant("cupy", "gpu", "library", "cupy.cumsum", lazy(GPU, "library")),
        Variant("cub", "gpu", "library", "CUB's DeviceScan::InclusiveSum / ExclusiveSum "
                "(built with nvcc, called through ctypes)", lazy(GPU, "cub_scan"),
                skip=cub.skip_rule),
    ),
    dimensions=("n", "exclusive", "integer"),
    ranges={"exclusive": (0, 1), "integer": (0, 1)},
    unit="elements",
)
