"""Coalescing: the lectures' contrived row program, where the GPU recipe and the CPU's disagree.

    for each row i (parallel):
        acc = 0
        for each column j (sequential: acc carries a dependence):
            acc = sqrt(acc) + a[i][j] * a[i][j];  B[i][j] = acc

One thread per row is the only parallelism, so on a GPU a warp's 32 threads read and write 32
different rows at every step: uncoalesced. Transposing ``a`` first, running the program down
the columns of the transpose (a warp now touches 32 consecutive floats) and transposing the
result back moves about three times the data and is still faster. Staging BLOCK rows x CHUNK
columns through shared memory gets the coalescing without the extra traffic. On a CPU the
row-by-row program already reads and writes contiguously; the GPU recipe only adds two
transpositions there. Rates count the golden program's bytes (``a`` read and ``B`` written
once) for every variant, the extra passes of the transposing variants included.
"""

from __future__ import annotations

import numpy as np

from loclab.cases.base import FLOAT32_UNIT_ROUNDOFF, MATRIX_DIMS, Case, Variant, Work, lazy
from loclab.hw import Machine

CPU = "loclab.cases.coalescing.cpu"
GPU = "loclab.cases.coalescing.gpu"
TRAFFIC = "loclab.cases.coalescing.traffic"

ITEMSIZE = 4  # float32
COLS = 64  # the lectures' row length
DEFAULT_MIN_ROWS = 64 * 1024
LARGE_MIN_ROWS = 4 * 1024 * 1024
GOLDEN_ROW_BLOCK = 1 << 14  # rows converted to float64 at a time (8 MiB for 64 columns)

# Error bound. Each step maps acc -> sqrt(acc) + a*a with both terms >= 0. If acc carries a
# relative error e, sqrt(acc) carries e/2 (sqrt halves relative errors) plus its own rounding
# u = 2**-24; a*a carries u (none when fused into an FMA); the sum of two non-negative terms
# errs by at most the larger of their relative errors, plus u for its own rounding. So
# e_{j+1} <= e_j / 2 + 2u from e_0 = 0: e_j < 4u at every column, however many there are.
# The golden is exact to about 2**-51 and then rounded to float32: one more u. Every element is
# therefore within 5u (plus second-order terms of order u**2) of golden, relative to itself,
# hence normwise too. 6u leaves room for the second-order terms and is still some 10**5 times
# smaller than what dropping or swapping a column's a*a (a uniform in (0, 1)) does to B.
TOLERANCE = 6 * FLOAT32_UNIT_ROUNDOFF


def make_inputs(dims: dict[str, int], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """``a`` uniform in (0, 1): every column's a*a is non-zero, so a variant that skips one
    always errs. ``rng.random`` returns 0 once in 2**24 draws; its smallest other draw
    replaces it."""
    a = rng.random((dims["rows"], dims["cols"]), dtype=np.float32)
    np.maximum(a, np.float32(2.0 ** -24), out=a)
    return {"a": a}


def golden(inputs: dict[str, np.ndarray]) -> np.ndarray:
    """The program in float64, vectorized across rows and sequential over columns, rounded to
    float32 once at the end. Blocks of rows keep the float64 copy small at the large sizes."""
    a = inputs["a"]
    out = np.empty(a.shape, np.float32)
    for start in range(0, a.shape[0], GOLDEN_ROW_BLOCK):
        block = a[start:start + GOLDEN_ROW_BLOCK].astype(np.float64)
        acc = np.zeros(block.shape[0])
        for j in range(block.shape[1]):
            acc = np.sqrt(acc) + block[:, j] * block[:, j]
            out[start:start + GOLDEN_ROW_BLOCK, j] = acc
    return out


def output(dims: dict[str, int]) -> tuple[tuple[int, ...], type]:
    return (dims["rows"], dims["cols"]), np.float32


def work(dims: dict[str, int]) -> Work:
    """``a`` read once and ``B`` written once; a multiply, a square root and an add each."""
    elements = dims["rows"] * dims["cols"]
    return Work(bytes=2 * elements * ITEMSIZE, flops=3 * elements)


def _beyond_cache(cache_bytes: int, minimum_rows: int) -> dict[str, int]:
    """Rows such that ``a`` and ``B`` together are at least four times the cache."""
    rows = -(-4 * cache_bytes // (2 * COLS * ITEMSIZE))
    return {"rows": max(minimum_rows, -(-rows // 1024) * 1024), "cols": COLS}


def _default_cpu(machine: Machine) -> dict[str, int]:
    return _beyond_cache(machine.cpu.llc_share_bytes, DEFAULT_MIN_ROWS)


def _large_cpu(machine: Machine) -> dict[str, int]:
    return _beyond_cache(machine.cpu.llc_bytes, LARGE_MIN_ROWS)


def _large_gpu(machine: Machine) -> dict[str, int]:
    return _beyond_cache(machine.gpu.l2_bytes if machine.gpu else 0, LARGE_MIN_ROWS)


SIZES = {
    "small": {"cpu": {"rows": 100003, "cols": 61}, "gpu": {"rows": 1000003, "cols": 61}},
    "default": {"cpu": _default_cpu, "gpu": {"rows": 1048576, "cols": COLS}},
    "large": {"cpu": _large_cpu, "gpu": _large_gpu},
}

# One row, one column, fewer columns than a chunk (and a multiple of 4 below it: the float4
# path's tail), row counts that are not multiples of any block, column counts that leave a
# partial chunk of width 1 or 4 or 29, and sizes where everything divides.
TEST_DIMS = tuple({"rows": r, "cols": c} for r, c in (
    (1, 1), (1, 37), (37, 1), (513, 4), (33, 65), (129, 17), (257, 33), (300, 36), (512, 64),
    (1000, 64), (1000, 61), (4099, 100)))


CASE = Case(
    name="coalescing",
    lesson="coalesced global-memory accesses: by transposition, and by staging in shared memory",
    description="acc = sqrt(acc) + a[i][j]^2, B[i][j] = acc: rows in parallel, columns in "
                "sequence, float32 rows x cols",
    sizes=SIZES,
    make_inputs=make_inputs,
    golden=golden,
    output=output,
    work=work,
    tolerance=TOLERANCE,
    test_dims=TEST_DIMS,
    variants=(
        Variant("cpu-rows", "cpu", "naive",
                "numba prange over rows, each walked in order: contiguous reads and writes, "
                "one sqrt-and-add dependence chain per row",
                lazy(CPU, "rows"), traffic=lazy(TRAFFIC, "rows")),
        Variant("cpu-transposed", "cpu", "optimized",
                "the GPU recipe on a CPU: blocked transposition of a, the program down the "
                "columns of the transpose (chunks of rows in parallel, one column at a time), "
                "blocked transposition back: three passes over the data where one does",
                lazy(CPU, "transposed"), traffic=lazy(TRAFFIC, "transposed")),
        Variant("gpu-naive", "gpu", "naive",
                "one thread per row walking its row: a warp's 32 accesses fall in 32 rows",
                lazy(GPU, "naive")),
        Variant("gpu-transposed", "gpu", "optimized",
                "transpose a (the transpose case's gpu-optimized kernel), one thread per row "
                "down the columns of the transpose (coalesced), transpose back: about 3x the "
                "memory accesses of gpu-naive",
                lazy(GPU, "transposed")),
        Variant("gpu-staged", "gpu", "optimized",
                "fused: a block of 128 rows moves whole rows of up to 64 columns (else chunks "
                "of 32) through shared memory with coalesced 16-byte copies (4-byte where "
                "cols % 4 != 0), all in flight (cp.async), and stores; each thread walks its "
                "row's chunk there",
                lazy(GPU, "staged")),
    ),
    dimensions=MATRIX_DIMS,
)
