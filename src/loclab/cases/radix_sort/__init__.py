"""Radix sort of uint32 keys (and key-value pairs), built from the lecture's split primitive.

The lecture's radix sort is split, applied once per bit from the least significant: flag the
keys whose bit is 0 (e), exclusive-scan the flags (f), and scatter: a key with bit 0 goes to
f, a key with bit 1 to i - f + (number of 0 bits). Each split is stable, so after 32 splits
the keys are sorted, and values moved with their keys keep their input order among equal keys.
That is 32 passes over the data, each reading it twice and writing it once (``gpu-split``,
``cpu-split``). The lesson is locality over passes: a digit of b bits splits the keys into
2^b buckets at once, the same scan generalised from one flag to a histogram, so an 8-bit LSD
sort makes 4 passes instead of 32, and it only pays if the scatter into 256 buckets stays
coalesced.

``gpu-lsd``, per 8-bit digit (reduce-then-scan):

* upsweep: a persistent grid of ``blocks`` (the blocks that fit the GPU at once) each counts
  the digits of its contiguous range of keys (per-warp shared-memory counters; one atomic per
  warp where its 32 keys share a digit, as sorted keys' high digits do);
* scan: one block turns the digit-major counts (digit 0 of every block, then digit 1, ...)
  into each (digit, block)'s first output position;
* downsweep: each block walks its range a tile at a time (THREADS x ITEMS keys, ITEMS per
  thread in registers, loaded warp-striped, so coalesced and in input order); warps rank
  their keys by digit (the lanes with the same digit found with one ballot per digit bit, as
  CUB does: ``__match_any_sync``, which loops over the distinct digits, made the whole sort
  1.5x slower on an H100), stable since lanes and items are in input order; the tile is
  reordered by digit in shared
  memory, and each digit's run is then written with consecutive threads storing consecutive
  addresses (coalesced where runs are long: TILE / 256 keys on average).

Before the first pass one streaming kernel reduces the OR and the AND of all keys: a digit in
which no bit differs (OR ^ AND) leaves the order as it is, so its pass is skipped. An all-equal
input costs that one read and a copy; keys in [0, 2^16) cost two passes. (CUB's one-sweep
histogram serves the same early out; its decoupled look-back, which saves the upsweep's read
of the keys, is not done here.) Equal keys keep their input order in every variant, so the
output is unique and checked exactly (tolerance 0) against a stable sort.

``cpu-lsd`` is the same on the CPU: a chunk of the keys per thread, per-chunk digit histograms
(prange), a digit-major scan, a parallel stable scatter. Libraries: ``numpy.sort`` and
``cupy.sort`` (CUB's radix sort); for pairs a stable argsort and two gathers.

Dimensions: ``n`` keys; ``values`` 0 (keys only) or 1 (uint32 values too); ``order`` 0 random,
1 all equal, 2 already sorted, 3 reverse sorted (the adversarial inputs). Output: the sorted
keys, (n,); for pairs (2, n): row 0 the keys, row 1 their values.
"""

from __future__ import annotations

import math

import numpy as np

from loclab.cases.base import Case, Variant, Work, lazy
from loclab.gpu import cub
from loclab.hw import Machine

CPU = "loclab.cases.radix_sort.cpu"
GPU = "loclab.cases.radix_sort.gpu"
KEY_BITS = 32
WORD = 4  # bytes of a key or a value
# Keys and values are drawn below 2**32 - 1, the value an unwritten (poisoned) output holds.
DRAWN_BELOW = 2**32 - 1
RANDOM, EQUAL, SORTED, REVERSED = range(4)
ORDERS = {RANDOM: "random", EQUAL: "all equal", SORTED: "already sorted",
          REVERSED: "reverse sorted"}


# --- the pass structure every LSD variant shares ------------------------------------------

def digit_shifts(bits: int) -> range:
    """Where each digit of ``bits`` bits starts, least significant first (the last digit may
    be narrower: 6-bit digits end with bits 30 and 31)."""
    return range(0, KEY_BITS, bits)


def needed_shifts(differing: int, bits: int) -> list[int]:
    """The digits some keys differ in, given ``differing`` = OR ^ AND of all keys: a digit
    that is the same in every key leaves their order as it is, so its pass is skipped."""
    mask = (1 << bits) - 1
    return [shift for shift in digit_shifts(bits) if (differing >> shift) & mask]


def destinations(passes: int) -> list[str]:
    """Where each of ``passes`` passes writes, "out" or "tmp", alternating so that the last
    writes the output (the first reads the input, each later one what the one before wrote)."""
    return ["out" if (passes - 1 - p) % 2 == 0 else "tmp" for p in range(passes)]


# --- the case --------------------------------------------------------------------------------

def is_pairs(dims: dict[str, int]) -> bool:
    return bool(dims["values"])


def make_inputs(dims: dict[str, int], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """``keys`` uint32 in the order ``order`` names (random keys have duplicates once n is in
    the tens of thousands); with ``values`` 1, random uint32 ``values``, so that a value lost
    or swapped between equal keys shows."""
    n, order = dims["n"], dims["order"]
    if order == EQUAL:
        keys = np.full(n, rng.integers(0, DRAWN_BELOW), np.uint32)
    else:
        keys = rng.integers(0, DRAWN_BELOW, size=n, dtype=np.uint32)
        if order in (SORTED, REVERSED):
            keys.sort()
        if order == REVERSED:
            keys = np.ascontiguousarray(keys[::-1])
    inputs = {"keys": keys}
    if is_pairs(dims):
        inputs["values"] = rng.integers(0, DRAWN_BELOW, size=n, dtype=np.uint32)
    return inputs


def stable_order(keys: np.ndarray) -> np.ndarray:
    """``np.argsort(keys, kind="stable")``, computed as an unstable sort of (key, index) pairs
    packed in uint64: they are all distinct, so any sort orders them the same way, and
    NumPy's SIMD quicksort of them is 4x faster than its stable (timsort) argsort."""
    packed = keys.astype(np.uint64) << np.uint64(32)
    packed |= np.arange(keys.size, dtype=np.uint64)
    packed.sort()
    return (packed & np.uint64(0xFFFF_FFFF)).astype(np.intp)


def golden(inputs: dict[str, np.ndarray]) -> np.ndarray:
    """The sorted keys; for pairs, the keys and their values in the stable order."""
    keys = inputs["keys"]
    if "values" not in inputs:
        return np.sort(keys)
    order = stable_order(keys)
    return np.stack([keys[order], inputs["values"][order]])


def output(dims: dict[str, int]) -> tuple[tuple[int, ...], type]:
    n = dims["n"]
    return ((2, n) if is_pairs(dims) else (n,)), np.uint32


def work(dims: dict[str, int]) -> Work:
    """What an ideal sort moves: the keys (and values) read once and written once; no flops;
    rated in keys per second."""
    words = 2 if is_pairs(dims) else 1
    return Work(bytes=2 * words * WORD * dims["n"], flops=0, items=dims["n"])


def _both(n: int) -> list[dict[str, int]]:
    """Random keys, then random key-value pairs, of ``n`` keys."""
    return [{"n": n, "values": values, "order": RANDOM} for values in (0, 1)]


def _at_least(cache_bytes: int, floor: int) -> list[dict[str, int]]:
    """Keys (a power of two, at least ``floor``) that fill at least four times the cache."""
    return _both(max(floor, 1 << math.ceil(math.log2(max(cache_bytes, 1)))))


def _cpu_large(machine: Machine) -> list[dict[str, int]]:
    return _at_least(machine.cpu.llc_bytes, 2**24)


def _gpu_large(machine: Machine) -> list[dict[str, int]]:
    return _at_least(machine.gpu.l2_bytes, 2**29) if machine.gpu else []


SIZES = {
    "small": {"cpu": _both(2**16), "gpu": _both(2**20)},
    # The CPU default keeps a run of every CPU variant (cpu-split makes 32 passes on one
    # thread) within seconds on 2 cores; the GPU's is the 2**28 keys.
    "default": {"cpu": _both(2**21), "gpu": _both(2**28)},
    "large": {"cpu": _cpu_large, "gpu": _gpu_large},
}

# gpu-lsd's default digit and tile (THREADS x ITEMS keys), and gpu-split's keys per block (one
# per thread): the test sizes step over their tiles.
LSD_BITS, LSD_THREADS, LSD_ITEMS = 8, 512, 16
LSD_TILE = LSD_THREADS * LSD_ITEMS
SPLIT_TILE = 256


def _dims(n: int, values: int = 0, order: int = RANDOM) -> dict[str, int]:
    return {"n": n, "values": values, "order": order}


# Fewer keys than a warp, a warp and one more or less, one tile of each kernel and one more, a
# last tile almost empty, 2^k - 1; every order, keys and pairs, all-equal keys with values
# (stability: the values must stay in input order).
TEST_DIMS = (
    *(_dims(n) for n in (1, 2, 31, 32, 33)),
    _dims(SPLIT_TILE + 1, 1), _dims(LSD_TILE + 1), _dims(LSD_TILE + 1, 1),
    _dims(3 * LSD_TILE + 1, 1), _dims(2**16 - 1), _dims(2**16 - 1, 1),
    *(_dims(n, values, order) for order in (EQUAL, SORTED, REVERSED)
      for n, values in ((1000, 0), (5003, 1))),
    _dims(1, 1, EQUAL), _dims(33, 1, EQUAL), _dims(70_001, 1, EQUAL),
    _dims(70_001, 1, REVERSED),
)


CASE = Case(
    name="radix-sort",
    lesson="split = scan of flags; radix sort as splits; fewer passes with wider digits; "
           "block-local ranking for coalesced scatters",
    description="stable LSD radix sort of n uint32 keys (values=1: with uint32 values); "
                "order: 0 random, 1 all equal, 2 sorted, 3 reverse sorted",
    sizes=SIZES,
    make_inputs=make_inputs,
    golden=golden,
    output=output,
    work=work,
    tolerance=0.0,
    test_dims=TEST_DIMS,
    unit="keys",
    variants=(
        Variant("cpu-split", "cpu", "naive",
                "the lecture's: 32 one-bit splits on one thread (flags e, scan f, "
                "d = b ? i - f + falses : f, scatter)",
                lazy(CPU, "split")),
        Variant("cpu-lsd", "cpu", "optimized",
                "8-bit LSD: per-thread digit histograms (prange over chunks), a digit-major "
                "scan, a parallel stable scatter; digits every key shares are skipped",
                lazy(CPU, "lsd")),
        Variant("numpy", "cpu", "library",
                "numpy.sort(keys); pairs: numpy.argsort(keys, kind='stable') and two gathers",
                lazy(CPU, "library")),
        Variant("gpu-split", "gpu", "naive",
                "the lecture's: 32 one-bit splits, each a flag count per block, a scan of "
                "the counts and a scatter (d = b ? i - f + falses : f), one key per thread",
                lazy(GPU, "split")),
        Variant("gpu-lsd", "gpu", "optimized",
                "8-bit LSD, reduce-then-scan per digit: upsweep (per-block digit counts), "
                "digit-major scan, downsweep (ballot-match ranking of ITEMS keys per thread, "
                "tile reordered by digit in shared memory, coalesced runs); digits every key "
                "shares are skipped (OR ^ AND of the keys)",
                lazy(GPU, "lsd"), space=lazy(GPU, "lsd_space")),
        Variant("cupy", "gpu", "library",
                "cupy.sort(keys) (CUB radix sort); pairs: cupy.argsort(keys) (stable) and "
                "two gathers",
                lazy(GPU, "library")),
        Variant("cub", "gpu", "library",
                "CUB's DeviceRadixSort::SortKeys / SortPairs (built with nvcc, called through "
                "ctypes)", lazy(GPU, "cub_sort"), skip=cub.skip_rule),
    ),
    limit="unit",
    dimensions=("n", "values", "order"),
    ranges={"values": (0, 1), "order": (0, 3)},
)
