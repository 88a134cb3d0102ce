"""Stream compaction: keep the elements whose flag is set, in input order.

Where a kept element goes is the number of kept elements before it: an exclusive scan of the
flags (the lectures' "primitives built on scan"). A multi-pass version counts, scans the
counts, then scatters (reading the flags twice); the single pass counts each tile, learns the
count before it by decoupled look-back, and writes its kept values at once. Either way a tile's
kept values are gathered in shared memory first so that the writes are one contiguous,
coalesced run. Rates count the values and flags read plus the kept values written.

Inputs: float32 values in (0, 1] and uint8 flags with exactly ``n * percent // 100`` set, at
random places (so every rate has an exact byte count).
"""

from __future__ import annotations

import math

import numpy as np

from loclab.cases.base import Case, Variant, Work, lazy, uniform_nonzero
from loclab.gpu import cub

CPU = "loclab.cases.compaction.cpu"
GPU = "loclab.cases.compaction.gpu"
VALUE_BYTES, FLAG_BYTES = 4, 1
DEFAULT_PERCENT = 50


def kept_count(dims: dict[str, int]) -> int:
    return dims["n"] * dims["percent"] // 100


def golden(inputs: dict[str, np.ndarray]) -> np.ndarray:
    return inputs["values"][inputs["flags"] != 0]


def exact_flags(n: int, kept: int, rng: np.random.Generator) -> np.ndarray:
    """uint8 flags, exactly ``kept`` of them 1, at random places: the ``kept`` smallest of n
    random numbers (ties at the threshold broken by position)."""
    flags = np.zeros(n, np.uint8)
    if kept == 0:
        return flags
    draws = rng.random(n, dtype=np.float32)
    threshold = np.partition(draws, kept - 1)[kept - 1]
    flags[draws < threshold] = 1
    ties = np.flatnonzero(draws == threshold)
    flags[ties[:kept - int(np.count_nonzero(flags))]] = 1
    return flags


def make_inputs(dims: dict[str, int], rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"values": uniform_nonzero(rng, dims["n"]),
            "flags": exact_flags(dims["n"], kept_count(dims), rng)}


def output(dims: dict[str, int]) -> tuple[tuple[int, ...], type]:
    """Room for every element; a variant returns the kept prefix (its length is the count)."""
    return (dims["n"],), np.float32


def work(dims: dict[str, int]) -> Work:
    """Every value and flag read once, every kept value written once."""
    n = dims["n"]
    return Work(bytes=(VALUE_BYTES + FLAG_BYTES) * n + VALUE_BYTES * kept_count(dims), flops=0,
                items=n)


def sizes(n_values: tuple[int, ...]) -> list[dict[str, int]]:
    return [{"n": n, "percent": DEFAULT_PERCENT} for n in n_values]


def beyond(cache_bytes: int, least: int) -> list[dict[str, int]]:
    """A power of two at least ``least`` whose values and flags fill four times the cache."""
    return sizes((1 << math.ceil(math.log2(max(least, 4 * cache_bytes / 5))),))


SIZES = {
    "small": {"cpu": sizes((2**20,)), "gpu": sizes((2**20,))},
    "default": {"cpu": lambda m: beyond(m.cpu.llc_share_bytes, 2**22),
                "gpu": sizes((2**20, 2**24, 2**28))},
    "large": {"cpu": lambda m: beyond(m.cpu.llc_bytes, 2**24),
              "gpu": lambda m: beyond(m.gpu.l2_bytes if m.gpu else 0, 2**28)},
}

# Tile edges (tiles of 4096, 16 flags a thread), a partial last tile, none and all kept.
TEST_DIMS = tuple({"n": n, "percent": p} for n, p in (
    (1, 100), (1, 0), (31, 50), (32, 100), (33, 3), (4095, 50), (4096, 0), (4097, 99),
    (2**13 - 1, 50), (70_001, 100), (70_001, 0), (300_007, 10), (600_001, 50)))


CASE = Case(
    name="compaction",
    lesson="stream compaction: the exclusive scan of the flags says where each kept element goes",
    description="out = the float32 values whose uint8 flag is set, in order (percent of n kept)",
    sizes=SIZES,
    make_inputs=make_inputs,
    golden=golden,
    output=output,
    work=work,
    tolerance=0.0,
    test_dims=TEST_DIMS,
    variants=(
        Variant("cpu-sequential", "cpu", "naive", "one thread, one pass: the golden loop",
                lazy(CPU, "sequential")),
        Variant("cpu-two-pass", "cpu", "optimized",
                "numba prange: each thread counts its chunk's kept elements, the counts are "
                "scanned, each thread copies its kept elements from its offset",
                lazy(CPU, "two_pass")),
        Variant("numpy", "cpu", "library", "values[flags != 0] (boolean mask, one thread)",
                lazy(CPU, "library")),
        Variant("gpu-three-pass", "gpu", "naive",
                "count each chunk's kept elements, scan the counts in one block, each block "
                "compacts its chunk tile by tile (reads the flags twice)",
                lazy(GPU, "three_pass")),
        Variant("gpu-single-pass", "gpu", "optimized",
                "each tile counts, scans its flags, learns the count before it by decoupled "
                "look-back and writes its kept values gathered in shared memory",
                lazy(GPU, "single_pass")),
        Variant("cupy", "gpu", "library", "values[flags.view(bool)] (CuPy boolean indexing)",
                lazy(GPU, "library")),
        Variant("cub", "gpu", "library", "CUB's DeviceSelect::Flagged (built with nvcc, "
                "called through ctypes)", lazy(GPU, "cub_select"), skip=cub.skip_rule),
    ),
    dimensions=("n", "percent"),
    ranges={"percent": (0, 100)},
    unit="elements",
)
