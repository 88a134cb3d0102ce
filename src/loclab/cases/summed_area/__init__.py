"""Summed-area tables, one of the lectures' primitives built on scan: a 2-D inclusive scan.

``out[i][j] = sum of a[0..i][0..j]``: a scan along every row, then down every column (or the
other way round). Along a row, neighbours are neighbours in memory; down a column they are a
row apart. The lesson is where the column scan's threads sit:

- one thread per row, walking it (``gpu-rows-then-columns``' first pass): a warp's 32 threads
  touch 32 rows at once, uncoalesced; one thread per column carrying its running sum down the
  rows (its second pass) is coalesced, but has only ``cols`` threads;
- transpose, so that both scans run along rows (``gpu-transpose``: scan, transpose through
  shared-memory tiles, scan, transpose back): coalesced everywhere, at 29 bytes of traffic an
  element where the golden algorithm moves 5;
- no transpose: threads of a warp on neighbouring columns walk down together, each carrying
  its column's sum, so that every step is a coalesced row segment (``gpu-coalesced-columns``).
  It also fuses both scans into one pass over tiles (a warp per tile of 128 x 128): a
  read-only pass gives each tile its carries (the table's row above it, and each of its rows'
  sum left of it), then each tile writes its part of the table once. 6 bytes an element.
On the CPU the same holds for cache lines: ``cpu-parallel`` scans rows, then walks strips of
columns down the rows (contiguous runs, the row above in cache); ``cpu-bands`` fuses the two
into one pass over bands of rows, with a read-only first pass for the bands' carries.

Validation is exact: a uint8 image of 1..255 (never zero, so a dropped element changes the
sum) and a uint32 table whose sums wrap modulo 2**32 (beyond 16.8 M elements they do), which
any order of addition gives exactly: tolerance 0. The work is one read of the image and one
write of the table (5 bytes an element) and no floating-point arithmetic: memory-bound.
Sizes: the lectures' kind of image on the GPU (8192 x 8192, a 256 MiB table); on the CPU the
image and table together four times the last-level cache these cores can count on.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from loclab.cases.base import MATRIX_DIMS, Case, Variant, Work, lazy
from loclab.hw import Machine

CPU = "loclab.cases.summed_area.cpu"
GPU = "loclab.cases.summed_area.gpu"
IMAGE_BYTES, TABLE_BYTES = 1, 4  # uint8 in, uint32 out


def golden(inputs: dict[str, np.ndarray]) -> np.ndarray:
    """Running sums down the columns, then along the rows, modulo 2**32."""
    return np.cumsum(np.cumsum(inputs["a"], axis=0, dtype=np.uint32), axis=1, dtype=np.uint32)


def make_inputs(dims: dict[str, int], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """An image of uint8 values uniform in 1..255."""
    return {"a": rng.integers(1, 256, size=(dims["rows"], dims["cols"]), dtype=np.uint8)}


def output(dims: dict[str, int]) -> tuple[tuple[int, ...], type]:
    return (dims["rows"], dims["cols"]), np.uint32


def work(dims: dict[str, int]) -> Work:
    """The image read once and the table written once; the adds are integer, not flops."""
    return Work(bytes=(IMAGE_BYTES + TABLE_BYTES) * dims["rows"] * dims["cols"], flops=0)


def _square(minimum_side: int, multiple: int, bytes_per_element: int,
            cache_bytes: Callable[[Machine], int]) -> Callable[[Machine], dict[str, int]]:
    """Square images of at least ``minimum_side`` whose ``bytes_per_element`` come to at least
    four times the cache, sides a multiple of ``multiple``."""

    def rule(machine: Machine) -> dict[str, int]:
        # bytes_per_element * side^2 >= 4 * cache
        side = math.isqrt(max(4 * cache_bytes(machine) // bytes_per_element - 1, 0)) + 1
        side = max(minimum_side, -(-side // multiple) * multiple)
        return {"rows": side, "cols": side}

    return rule


def _gpu_l2(machine: Machine) -> int:
    return machine.gpu.l2_bytes if machine.gpu else 0


FOOTPRINT = IMAGE_BYTES + TABLE_BYTES
SIZES = {
    "small": {"cpu": {"rows": 1999, "cols": 3001}, "gpu": {"rows": 1024, "cols": 1024}},
    # CPU: image and table 4x the LLC share (5632 x 5632 for 32 MiB: numpy's two cumsums take
    # 0.3 s a run on 2 cores, the golden 0.7 s).
    "default": {"cpu": _square(2048, 512, FOOTPRINT, lambda m: m.cpu.llc_share_bytes),
                "gpu": {"rows": 8192, "cols": 8192}},
    # The table alone at least 4x the LLC / L2.
    "large": {"cpu": _square(16384, 1024, TABLE_BYTES, lambda m: m.cpu.llc_bytes),
              "gpu": _square(16384, 1024, TABLE_BYTES, _gpu_l2)},
}

# One row, one column, sides one off a warp (31, 32, 33), the GPU tiles' edges (128 x 128: a
# last tile of one row or one column), one off the row scans' chunk (2048), 2^k - 1 sides, cols
# a multiple of 4 (the vector path) with a last strip of one word per lane, tall and thin.
TEST_DIMS = tuple({"rows": r, "cols": c} for r, c in (
    (1, 1), (1, 33), (33, 1), (31, 32), (32, 33), (65, 257), (127, 129), (129, 129),
    (255, 511), (1, 2049), (257, 1028), (300, 132), (4099, 3)))

CASE = Case(
    name="summed-area",
    lesson="coalescing a column scan without a transpose; fusing two passes into one over "
           "tiles with carries",
    description="out[i][j] = sum of a[0..i][0..j] for a uint8 rows x cols image into uint32 "
                "(sums modulo 2**32)",
    sizes=SIZES,
    make_inputs=make_inputs,
    golden=golden,
    output=output,
    work=work,
    tolerance=0.0,
    test_dims=TEST_DIMS,
    variants=(
        Variant("cpu-sequential", "cpu", "naive",
                "one thread: the golden's two loops, running sums down the columns (row by "
                "row), then along the rows",
                lazy(CPU, "sequential")),
        Variant("cpu-parallel", "cpu", "optimized",
                "prange over rows (a running sum each), then prange over strips of columns, "
                "one per thread, each walking down the rows adding the row above (in cache)",
                lazy(CPU, "rows_then_strips")),
        Variant("cpu-bands", "cpu", "optimized",
                "a band of rows per thread: the bands' column totals (read-only), the table's "
                "row above each band, then each band written once in one pass",
                lazy(CPU, "bands")),
        Variant("numpy", "cpu", "library",
                "numpy.cumsum along axis 0 then axis 1, in place on the table (the image "
                "copied into it first)",
                lazy(CPU, "library")),
        Variant("gpu-rows-then-columns", "gpu", "naive",
                "a thread per row scans it (uncoalesced), then a thread per column carries "
                "its sum down the rows (coalesced, cols threads)",
                lazy(GPU, "rows_then_columns")),
        Variant("gpu-transpose", "gpu", "optimized",
                "block-per-row scans (coalesced, shared-memory tile), transpose through "
                "32x33 tiles, scan the rows again, transpose back",
                lazy(GPU, "transpose")),
        Variant("gpu-coalesced-columns", "gpu", "optimized",
                "a warp per 128x128 tile, lanes on neighbouring columns walking down: tile "
                "totals (read-only), carries scanned, then each tile's table written once "
                "from its carries; 4-byte loads and 16-byte stores where aligned",
                lazy(GPU, "coalesced_columns")),
        Variant("cupy", "gpu", "library",
                "cupy.cumsum along axis 0 then axis 1 (dtype uint32), into preallocated "
                "arrays",
                lazy(GPU, "library")),
    ),
    dimensions=MATRIX_DIMS,
)
