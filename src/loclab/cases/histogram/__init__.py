"""A histogram-like computation, the lectures' last-level-cache lesson (case study 5.1).

``for i in range(n): if inds[i] < bins: hist[inds[i]] += vals[i]`` is a generalized
reduction: parallel with atomic updates. With random indices each update touches a random
line of ``hist``; once ``hist`` outgrows the last-level cache (the L2 on a GPU), nearly every
update misses, and the cache thrashes. The multi-pass remedy processes the histogram one
cache-sized chunk at a time, re-reading the whole input per chunk; partitioning the input by
chunk once (beyond the lectures) makes each pass read only its own elements. On a GPU the
updates of every L2-chunk variant still go through L2 atomics, whose rate bounds them; sorting
the input into buckets small enough for one block's shared memory (beyond the lectures too)
turns every update into a shared-memory atomic at the price of one more write and read of the
input.

What that price means against the copy roof (rates count the golden bytes, 8 an element): one
pass that read the input once could reach 100% of copy, but beyond the cache it updates random
lines. A scatter into buckets and then a pass per bucket reads 8 bytes an element, writes a
record and reads it back: with 6-byte records (the bin's 16-bit offset in its bucket and the
value) 20 bytes, so at most 40% of copy; 8-byte records and a counting pass first, 28 bytes
(29%). gpu-bucketed's row gives its own bound (``max_pct_of_copy``).

Sizes sweep the histogram against the detected cache: about 1/4 of a core's L2 (CPU) or a
block's shared memory (GPU), where private sub-histograms fit; and 0.25x, 2x and 8x the
last-level cache (CPU) or L2 (GPU); the CPU's default preset stops at 2x. The input is always
several times the histogram.
"""

from __future__ import annotations

import numpy as np

from loclab.cases.base import Case, Variant, Work, lazy, summation_tolerance, uniform_nonzero
from loclab.hw import Machine

CPU = "loclab.cases.histogram.cpu"
GPU = "loclab.cases.histogram.gpu"
TRAFFIC = "loclab.cases.histogram.traffic"
BIN_BYTES = 4  # float32
# Indices are drawn from [0, bins + bins/64]: about 1.5% fall outside the histogram and must
# be skipped, as the golden code's sanity test does.
OUT_OF_RANGE_SHARE = 64
CACHE_MULTIPLES = (0.25, 2.0, 8.0)
CPU_DEFAULT_MULTIPLES = (0.25, 2.0)


def golden(inputs: dict[str, np.ndarray]) -> np.ndarray:
    """The sequential loop's result, summed in float64 and rounded once to float32."""
    inds, vals, bins = inputs["inds"], inputs["vals"], int(inputs["bins"][0])
    kept = inds < bins
    sums = np.bincount(inds[kept], weights=vals[kept], minlength=bins)
    return sums.astype(np.float32)


def tolerance(inputs: dict[str, np.ndarray]) -> np.ndarray:
    """Each bin's own bound on its absolute error: its n values added in any order (atomics,
    sub-histograms, passes) are within ``summation_tolerance(n)`` of the sum of their
    magnitudes. An empty bin must be exactly 0, and a bin of few values is held to them, not
    to the fullest bin's count."""
    inds, vals, bins = inputs["inds"], inputs["vals"], int(inputs["bins"][0])
    kept = inds < bins
    counts = np.bincount(inds[kept], minlength=bins)
    magnitudes = np.bincount(inds[kept], weights=np.abs(vals[kept]), minlength=bins)
    return summation_tolerance(counts) * magnitudes


def make_inputs(dims: dict[str, int], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """``inds`` uint32 uniform over the histogram and a little beyond, ``vals`` float32 in
    (0, 1]; ``bins`` travels with them (one element) so that variants and golden agree."""
    bins, n = dims["bins"], dims["n"]
    inds = rng.integers(0, bins + bins // OUT_OF_RANGE_SHARE + 1, size=n, dtype=np.uint32)
    vals = uniform_nonzero(rng, n)
    return {"inds": inds, "vals": vals, "bins": np.array([bins], np.int64)}


def output(dims: dict[str, int]) -> tuple[tuple[int, ...], type]:
    return (dims["bins"],), np.float32


def work(dims: dict[str, int]) -> Work:
    """The golden loop reads each index and value once, writes the histogram once, and adds
    once per element."""
    return Work(bytes=8 * dims["n"] + BIN_BYTES * dims["bins"], flops=dims["n"])


def _sweep(private_bytes: int, cache_bytes: int, n_min: int,
           multiples: tuple[float, ...] = CACHE_MULTIPLES) -> list[dict[str, int]]:
    """Histograms of ``private_bytes`` and ``multiples`` of ``cache_bytes``; the input (8
    bytes per element) at least four times the largest histogram."""
    sizes = [private_bytes] + [int(m * cache_bytes) for m in multiples]
    bins = [max(1, size // BIN_BYTES) for size in sizes]
    n = max(n_min, 2 * max(bins))
    return [{"bins": b, "n": n} for b in bins]


def _cpu_sweep(n_min: int, multiples: tuple[float, ...] = CACHE_MULTIPLES,
               share: bool = False):
    """``share``: relative to the LLC these cores can count on (the default preset), not all
    of it (large)."""
    def rule(machine: Machine) -> list[dict[str, int]]:
        llc = machine.cpu.llc_share_bytes if share else machine.cpu.llc_bytes
        return _sweep(machine.cpu.l2_bytes // 4, llc, n_min, multiples)
    return rule


def _gpu_sweep(n_min: int):
    def rule(machine: Machine) -> list[dict[str, int]]:
        gpu = machine.gpu
        if gpu is None:
            return []
        return _sweep(gpu.shared_mem_per_block, gpu.l2_bytes, n_min)
    return rule


SIZES = {
    "small": {"cpu": [{"bins": 1000, "n": 100_003}, {"bins": 100_003, "n": 1_000_003},
                      {"bins": 1_000_003, "n": 2_000_003}],
              "gpu": [{"bins": 1000, "n": 1_000_003}, {"bins": 1_000_003, "n": 4_000_037},
                      {"bins": 20_000_003, "n": 40_000_003}]},
    # On the CPU the largest histogram is 2x the LLC, not 8x: it thrashes already, and a
    # first run on 2 cores stays within minutes.
    "default": {"cpu": _cpu_sweep(0, CPU_DEFAULT_MULTIPLES, share=True),
                "gpu": _gpu_sweep(2**29)},
    "large": {"cpu": _cpu_sweep(2**28), "gpu": _gpu_sweep(2**30)},
}

# Awkward sizes: one bin, bins not a multiple of any chunk or block, fewer elements than
# threads, and many terms per bin (a tight test of the tolerance).
TEST_DIMS = tuple({"bins": b, "n": n} for b, n in (
    (1, 1), (1, 1000), (7, 3), (1000, 1), (33, 100_003), (1000, 65_537), (4099, 70_001),
    (100_003, 300_007), (12_289, 50_000)))


CASE = Case(
    name="histogram",
    lesson="last-level-cache thrashing; multi-pass chunking; privatization",
    description="hist[inds[i]] += vals[i] for inds[i] < bins (uint32 indices, float32 values)",
    sizes=SIZES,
    make_inputs=make_inputs,
    golden=golden,
    output=output,
    work=work,
    tolerance=tolerance,
    test_dims=TEST_DIMS,
    sweep="bins",
    variants=(
        Variant("cpu-atomic", "cpu", "naive",
                "prange over the input, atomic float add (LLVM atomicrmw fadd)",
                lazy(CPU, "atomic"), traffic=lazy(TRAFFIC, "single_pass")),
        Variant("cpu-multipass", "cpu", "optimized",
                "the lectures' multi-pass: one pass over the whole input per LLC-sized chunk "
                "of the histogram (chunk = fraction x LLC)",
                lazy(CPU, "multipass"), traffic=lazy(TRAFFIC, "multipass")),
        Variant("cpu-privatized", "cpu", "optimized",
                "a private sub-histogram per thread (no atomics), then a parallel merge; "
                "only where all of them fit in the LLC",
                lazy(CPU, "privatized"), skip=lazy(CPU, "privatized_fits"),
                traffic=lazy(TRAFFIC, "privatized")),
        Variant("numpy", "cpu", "library",
                "numpy.bincount(inds[kept], weights=vals[kept], minlength=bins) as float32, "
                "kept = inds < bins (sums in float64)",
                lazy(CPU, "library")),
        Variant("gpu-atomic", "gpu", "naive",
                "one element per thread, atomicAdd into the histogram in global memory",
                lazy(GPU, "atomic")),
        Variant("gpu-multipass", "gpu", "optimized",
                "one pass over the whole input per L2-sized chunk of the histogram "
                "(chunk = fraction x L2)",
                lazy(GPU, "multipass")),
        Variant("gpu-partitioned", "gpu", "optimized",
                "partition the input by chunk once (block-local counting sort), then one "
                "pass per chunk over its own elements only",
                lazy(GPU, "partitioned")),
        Variant("gpu-bucketed", "gpu", "optimized",
                "one scatter of the input into buckets of bins that fit one block's shared "
                "memory, as 6-byte records (rooms sized from a 1/64 sample, overflow added by "
                "global atomics), then one block per bucket: shared-memory atomics only; 20 "
                "bytes moved an element against one pass's 8 (at most 40% of copy)",
                lazy(GPU, "bucketed"), skip=lazy(GPU, "bucketed_fits")),
        Variant("gpu-shared", "gpu", "optimized",
                "a sub-histogram per block in shared memory, merged with global atomics; "
                "only where the histogram fits a block's shared memory",
                lazy(GPU, "shared"), skip=lazy(GPU, "shared_fits")),
        Variant("cupy.bincount", "gpu", "library",
                "cupy.bincount(inds[kept], weights=vals[kept], minlength=bins) as float32, "
                "kept = inds < bins (sums in float64)",
                lazy(GPU, "bincount")),
        Variant("cupy.add.at", "gpu", "library",
                "cupy.add.at(hist, inds[inds < bins], vals[inds < bins])",
                lazy(GPU, "add_at")),
    ),
    dimensions=("bins", "n"),
)
