"""Brute-force nearest neighbour in 1-D, the lectures' shared-memory case study.

For M queries and N reference points (float32), ``nns[i]`` is the index of the point nearest
to ``queries[i]``, the smaller index on a tie, exactly as the lectures' loop finds it::

    for i in prange(M):                       # queries in parallel
        best, nearest = inf, -1
        for j in range(N):                    # sequential over the points
            d = abs(queries[i] - points[j])   # float32
            if d < best: best, nearest = d, j

Every query reads the same points in the same order: temporal locality across queries. A
block of queries can stage the points in shared memory (a cache) a tile at a time and serve
all its queries from there; a CPU tile of points in L1 serves a tile of queries. Once the
points come from a cache, the instructions are the limit: a pair takes four (subtract,
compare |d| with the best, select the distance, select the index), so rows are rated in
query-point pairs per second and, on a GPU, against the issue limit of that 4-instruction
pair. Its flops are the subtraction and the comparison, 2 a pair: far below the fp32 peak
(which counts an FMA as 2), since the selects take issue slots that do no arithmetic. The
min-first variants change the loop, not the answer: they find the smallest distance first
(subtract and min, two instructions a pair) and recover the index afterwards.

Every variant computes ``|q - p|`` as one rounded float32 subtraction, so every variant
finds exactly the golden index (tolerance 0), ties included. Inputs are finite and their
differences do not overflow (make_inputs' lie in (0, 1]); ``check_dims`` refuses no query, no
point, or more than int32 indices hold, wherever a size enters (inputs, golden, setups).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from loclab.cases.base import Case, Device, UnitRoof, Variant, Work, lazy, uniform_nonzero
from loclab.errors import UsageError
from loclab.hw import Machine

CPU = "loclab.cases.nearest_neighbour.cpu"
GPU = "loclab.cases.nearest_neighbour.gpu"
ITEMSIZE = 4  # float32 queries and points, int32 indices
INSTRUCTIONS_PER_PAIR = 4  # subtract, compare, two selects
FLOPS_PER_PAIR = 2  # subtract, compare
# Every SM since Maxwell has 4 schedulers, each issuing one warp instruction (32 lanes) per
# clock: the most thread-instructions an SM can start per clock, whatever the pipes.
ISSUE_PER_SM_CLOCK = 4 * 32
# Indices are int32, and the CUDA kernels compute ints that run up to a tile (at most 2^13
# queries, 2^12 points) past m or n: both stay below this.
MAX_EXTENT = 2**31 - 2**16


def check_dims(dims: Mapping[str, Any]) -> None:
    """Refuse, in one line that names it, a size no variant can run: no query or no point
    (the loop's answer would be -1, or nothing), or more than int32 indices hold."""
    for name in ("queries", "points"):
        size = dims[name]
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or not (
                1 <= size <= MAX_EXTENT):
            raise UsageError(f"nearest-neighbour: {name} = {size}: must be a whole number "
                             f"from 1 to {MAX_EXTENT:,}")


def queries_and_points(inputs: dict[str, Any]) -> tuple[Any, Any]:
    """The queries and points of (NumPy or CuPy) inputs, once their sizes are checked: every
    variant and the golden start here, so none meets an empty or oversized input."""
    queries, points = inputs["queries"], inputs["points"]
    check_dims({"queries": queries.size, "points": points.size})
    return queries, points


def golden(inputs: dict[str, np.ndarray]) -> np.ndarray:
    """The loop's answer, found by sorting instead of scanning (2^36 pairs at the GPU's
    default size would take NumPy minutes).

    Rounding is monotone, so along the sorted distinct point values the float32 distance
    ``|q - p|`` never increases up to q and never decreases after it: the smallest distance
    is that of q's neighbour below or above, and the values at exactly that distance (one,
    two, or more where rounding merges distances) form one run around q. The answer is the
    smallest first index among the values of that run.
    """
    queries, points = queries_and_points(inputs)
    values, first = np.unique(points, return_index=True)  # sorted; first index of each value
    above = np.searchsorted(values, queries)  # values[above - 1] < q <= values[above]
    best = np.minimum(_distance(queries, values, above - 1), _distance(queries, values, above))
    low = _first_true(lambda k: _distance(queries, values, k) <= best, np.zeros_like(above),
                      above)
    high = _first_true(lambda k: _distance(queries, values, k) > best, above,
                       np.full_like(above, values.size))
    return _range_min(first.astype(np.int32), low, high)


def _distance(queries: np.ndarray, values: np.ndarray, k: np.ndarray) -> np.ndarray:
    """float32 ``|queries - values[k]|``, infinite where k is outside ``values``."""
    inside = (k >= 0) & (k < values.size)
    distance = np.abs(queries - values[np.clip(k, 0, values.size - 1)])
    return np.where(inside, distance, np.float32(np.inf))


def _first_true(test: Callable[[np.ndarray], np.ndarray], low: np.ndarray,
                high: np.ndarray) -> np.ndarray:
    """For each i, the smallest k in [low[i], high[i]) where ``test(k)[i]`` holds, or
    high[i]: a binary search, for all i at once, of a test that is false and then true."""
    low, high = low.copy(), high.copy()
    while (searching := low < high).any():
        middle = (low + high) // 2
        holds = test(middle)
        high = np.where(searching & holds, middle, high)
        low = np.where(searching & ~holds, middle + 1, low)
    return low


def _range_min(values: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """``min(values[low[i]:high[i]])`` for each i (no range empty), from a sparse table:
    level k holds the minimum of every run of 2^k values, and two runs cover any range."""
    levels = [values]
    while 2 ** len(levels) <= values.size:
        half = 2 ** (len(levels) - 1)
        levels.append(np.minimum(levels[-1][:-half], levels[-1][half:]))
    level = np.frexp(high - low)[1] - 1  # floor(log2(length))
    result = np.empty(low.shape, values.dtype)
    for k in np.unique(level):
        rows = level == k
        table = levels[k]
        result[rows] = np.minimum(table[low[rows]], table[high[rows] - 2 ** k])
    return result


def broadcast_argmin(xp: Any, queries: Any, points: Any, out: Any, buffer: Any) -> Any:
    """The library rows: ``argmin(|q - points|)`` over a chunk of queries at a time, through
    NumPy or CuPy (``xp``); ``buffer`` (rows x N) bounds the memory. argmin returns the first
    minimum: the loop's tie rule."""
    rows = buffer.shape[0]
    for i0 in range(0, queries.size, rows):
        chunk = buffer[:min(rows, queries.size - i0)]
        xp.subtract(queries[i0:i0 + rows, None], points[None, :], out=chunk)
        xp.abs(chunk, out=chunk)
        out[i0:i0 + rows] = chunk.argmin(axis=1)
    return out


def output(dims: dict[str, int]) -> tuple[tuple[int, ...], type]:
    """An int32 index per query (int32: half the bytes of NumPy's int64 argmin)."""
    return (dims["queries"],), np.int32


def work(dims: dict[str, int]) -> Work:
    """Queries and points read once, an index written per query; M x N pairs, 2 flops each."""
    m, n = dims["queries"], dims["points"]
    return Work(bytes=ITEMSIZE * (2 * m + n), flops=FLOPS_PER_PAIR * m * n, items=m * n)


def make_inputs(dims: dict[str, int], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """float32 queries and points in (0, 1], multiples of 2^-24: every difference is exact,
    and at the default sizes some points repeat and some queries sit halfway between two."""
    check_dims(dims)
    return {"queries": uniform_nonzero(rng, dims["queries"]),
            "points": uniform_nonzero(rng, dims["points"])}


def issue_limit(machine: Machine, instructions: float) -> float:
    """Pairs per second if every scheduler of the GPU issued one warp instruction per clock
    and a pair took ``instructions``: the roof of a loop made of instructions alone."""
    gpu = machine.gpu
    return gpu.sms * ISSUE_PER_SM_CLOCK * gpu.clock_mhz * 1e6 / instructions


def pairs_roof(device: Device, machine: Machine) -> UnitRoof | None:
    """On a GPU, the issue limit of the lectures' 4-instruction pair. None on a CPU: there the
    pair's instructions depend on the vector width and ports, not on a count of schedulers."""
    if device != "gpu" or machine.gpu is None:
        return None
    return UnitRoof(issue_limit(machine, INSTRUCTIONS_PER_PAIR),
                    f"issue limit at {INSTRUCTIONS_PER_PAIR} instructions a pair")


def _many_queries(minimum: int, points: int,
                  cache_bytes: Callable[[Machine], int]) -> Callable[[Machine], dict[str, int]]:
    """Queries (and their indices) of at least 4x the cache, a power of two; few points.
    The pairs grow with queries x points, so only the queries grow with the cache."""

    def rule(machine: Machine) -> dict[str, int]:
        queries = max(minimum, 4 * cache_bytes(machine) // (2 * ITEMSIZE))
        return {"queries": 1 << (queries - 1).bit_length(), "points": points}

    return rule


def _gpu_l2(machine: Machine) -> int:
    """The GPU's L2 in bytes; 0 without a GPU (the preset's minimum then sets the size)."""
    return machine.gpu.l2_bytes if machine.gpu else 0


SIZES = {
    "small": {"cpu": {"queries": 10_007, "points": 9_973},
              "gpu": {"queries": 100_003, "points": 99_991}},
    # The GPU's is the lectures' M = N = 2^18 (2^36 pairs). CI runs every CPU variant at the
    # CPU's default on 2 cores: 2^30 pairs, 0.4 to 0.7 s a run for cpu-naive and 0.15 s for
    # numpy on a 2-core EPYC VM (2^36 pairs: 30 to 50 s a run of cpu-naive).
    "default": {"cpu": {"queries": 2**15, "points": 2**15},
                "gpu": {"queries": 2**18, "points": 2**18}},
    "large": {"cpu": _many_queries(2**24, 2**10, lambda machine: machine.cpu.llc_bytes),
              "gpu": _many_queries(2**25, 2**14, _gpu_l2)},
}

# One query, one point, sizes one either side of the GPU's tiles (B = 1024 points, 512
# queries a block) and of the CPU's tiles and vector widths.
TEST_DIMS = tuple({"queries": m, "points": n} for m, n in (
    (1, 1), (1, 1000), (1000, 1), (7, 3), (33, 65), (511, 1023), (513, 1025), (1000, 4099),
    (4099, 1000), (3001, 2999)))

CASE = Case(
    name="nearest-neighbour",
    lesson="temporal locality across parallel iterations: shared memory as a programmable "
           "cache; then instructions per pair",
    description="nns[i] = argmin_j |queries[i] - points[j]| in float32, ties to the smaller "
                "j; rated in query-point pairs per second",
    sizes=SIZES,
    make_inputs=make_inputs,
    golden=golden,
    output=output,
    work=work,
    tolerance=0.0,
    test_dims=TEST_DIMS,
    unit="pairs",
    unit_roof=pairs_roof,
    variants=(
        Variant("cpu-naive", "cpu", "naive",
                "the lectures' loop: queries in parallel, each a scalar scan of every point",
                lazy(CPU, "naive")),
        Variant("cpu-tiled", "cpu", "optimized",
                "tiles of points in L1 serve tiles of queries; each point in a register "
                "serves a block of queries, vectorized across them (compare and selects)",
                lazy(CPU, "tiled"), space=lazy(CPU, "tiled_space")),
        Variant("cpu-min-first", "cpu", "optimized",
                "tiles as cpu-tiled; each query's smallest distance first (subtract, abs, min "
                "vectorized across the points), the index afterwards from one chunk",
                lazy(CPU, "min_first"), space=lazy(CPU, "min_first_space")),
        Variant("numpy", "cpu", "library",
                "argmin(abs(q[:, None] - points), axis=1) over L2-sized chunks of queries",
                lazy(CPU, "library")),
        Variant("gpu-naive", "gpu", "naive",
                "a thread per query, the points read from global memory (L1)",
                lazy(GPU, "naive")),
        Variant("gpu-shared", "gpu", "optimized",
                "the slides' kernel: points staged B at a time in shared memory; Q queries "
                "per thread in registers, broadcast float4 reads, branch-free updates on the "
                "FMA pipe (one ALU instruction a pair)",
                lazy(GPU, "shared"), space=lazy(GPU, "shared_space")),
        Variant("gpu-min-first", "gpu", "optimized",
                "gpu-shared's staging, but the inner loop only finds the smallest distance "
                "(2 instructions a pair); the index afterwards from one chunk of C points",
                lazy(GPU, "min_first"), space=lazy(GPU, "min_first_space")),
        Variant("cupy", "gpu", "library",
                "argmin(abs(q[:, None] - points), axis=1) over 256 MiB chunks of queries",
                lazy(GPU, "library")),
    ),
    limit="unit",
    dimensions=("queries", "points"),
    check=check_dims,
)
