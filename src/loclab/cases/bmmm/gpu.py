"""GPU variants of the masked batch product: CUDA C in kernels.cu, launched through CuPy.

The kernels take K as a template argument (the block is K x K threads, the register tiles
depend on K^2): each K compiles on first use; ``KERNELS`` lists the default sizes' (K = 4, 8,
16), which the nvcc check compiles without a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from loclab.cases.base import Bound
from loclab.cases.bmmm import DEFAULT_KS
from loclab.gpu.kernels import KernelSource, Launch, blocks, source_for
from loclab.gpu.limits import SHARED_WITHOUT_OPT_IN
from loclab.hw import Machine

SOURCE = Path(__file__).with_name("kernels.cu")
TILED_ROWS = 31  # the slides' T: rows of X per block, acc[T] per thread
TRANSPOSE_TILE = 32  # the slides': 32 x 32 threads, one byte each
MAX_BLOCK_SIDE = 32  # K x K threads per block
ROW_TILE = 8  # rows of Y per thread in gpu-optimized
THREADS_TARGET = 256
PRODUCT_THREADS = 256
INT_INDEX_LIMIT = 2 ** 31


@dataclass(frozen=True)
class Layout:
    """gpu-optimized's tiles for one K: C's K^2 columns padded to ``padded`` (whole vectors of
    ``tn``), ``bm`` rows of Y per block, slices of ``bq`` along q, tm x tn results per thread."""

    k: int
    padded: int
    bm: int
    bq: int
    tm: int
    tn: int

    @property
    def threads(self) -> int:
        return (self.bm // self.tm) * (self.padded // self.tn)

    def kernel(self, words: bool) -> str:
        flag = "true" if words else "false"
        return (f"bmmm_optimized<{self.k},{self.padded},{self.bm},{self.bq},{self.tm},"
                f"{self.tn},{flag}>")


def optimized_layout(k: int) -> Layout | None:
    """Column tiles of 4 (up to 64 columns) or 8, about 256 threads, at most 32 rows of
    threads; the longest slice along q whose shared arrays fit; None when none does."""
    kk = k * k
    tn = 4 if kk <= 64 else 8
    padded = -(-kk // tn) * tn
    rows = max(1, min(32, THREADS_TARGET // (padded // tn)))
    bm = rows * ROW_TILE
    for bq in (32, 16, 8):
        if 4 * bq * (bm + 4 + padded) <= SHARED_WITHOUT_OPT_IN:
            return Layout(k, padded, bm, bq, ROW_TILE, tn)
    return None


def naive_kernel(k: int) -> str:
    return f"bmmm_naive<{k}>"


def tiled_kernel(k: int) -> str:
    return f"bmmm_tiled<{k},{TILED_ROWS}>"


def products_kernel(layout: Layout) -> str:
    return f"bmmm_products<{layout.k},{layout.padded}>"


TRANSPOSE = f"transpose_bytes<{TRANSPOSE_TILE}>"
KERNELS = KernelSource(SOURCE, (
    TRANSPOSE,
    *(naive_kernel(k) for k in DEFAULT_KS),
    *(tiled_kernel(k) for k in DEFAULT_KS),
    *(products_kernel(optimized_layout(k)) for k in DEFAULT_KS),
    *(optimized_layout(k).kernel(words) for k in DEFAULT_KS for words in (True, False)),
))


def _launch(name: str, grid: tuple[int, ...], block: tuple[int, ...], args: tuple,
            result: Any) -> Launch:
    return Launch(source_for(KERNELS, name), name, grid=grid, block=block, args=args,
                  result=result)


def _sizes(inputs: dict) -> tuple[int, int, int]:
    """(m, k, n)."""
    (k, n), m = inputs["a"].shape, inputs["x"].shape[0]
    return m, k, n


def block_fits(dims: dict[str, int], machine: Machine) -> str | None:
    """A block of K x K threads needs K <= 32."""
    if dims["k"] > MAX_BLOCK_SIDE:
        return f"K = {dims['k']}: a block of K x K threads exceeds 1024 threads"
    return None


def tiled_fits(dims: dict[str, int], machine: Machine) -> str | None:
    """A block of K x K threads, and M x N below 2^31: the slides' kernel indexes X_tr with
    ints (a 64-bit index costs it 12% in occupancy)."""
    if dims["m"] * dims["n"] >= INT_INDEX_LIMIT:
        return (f"M x N = {dims['m'] * dims['n']:,} mask bytes: the slides' kernel indexes "
                f"them with 32-bit ints (limit 2^31)")
    return block_fits(dims, machine)


def optimized_fits(dims: dict[str, int], machine: Machine) -> str | None:
    if optimized_layout(dims["k"]) is None:
        return f"K = {dims['k']}: a slice of C (K^2 floats per q) does not fit shared memory"
    return None


def naive(inputs: dict, out: Any, machine: Machine) -> Bound:
    m, k, n = _sizes(inputs)
    launch = _launch(naive_kernel(k), (m,), (k, k),
                     (inputs["a"], inputs["b"], inputs["x"], out, np.int32(m), np.int32(n)),
                     out)
    return Bound(launch, {"block": [k, k], "reuse": "none: a·b recomputed for every row"})


def tiled(inputs: dict, out: Any, machine: Machine) -> Bound:
    """Transpose the mask (in the timed run: the input is X), then the slides' kernel."""
    import cupy

    m, k, n = _sizes(inputs)
    x_tr = cupy.empty((n, m), cupy.uint8)
    transpose = _launch(TRANSPOSE, (blocks(n, TRANSPOSE_TILE), blocks(m, TRANSPOSE_TILE)),
                        (TRANSPOSE_TILE, TRANSPOSE_TILE),
                        (inputs["x"], x_tr, np.int32(m), np.int32(n)), x_tr)
    kernel = _launch(tiled_kernel(k), (blocks(m, TILED_ROWS),), (k, k),
                     (inputs["a"], inputs["b"], x_tr, out, np.int32(m), np.int32(n)), out)

    def run() -> Any:
        transpose()
        return kernel()

    return Bound(run, {"rows_per_block": TILED_ROWS, "block": [k, k],
                       "reuse": f"a·b from a register serves {TILED_ROWS} rows; X_tr from "
                                f"shared memory serves K^2 = {k * k} threads"})


def optimized(inputs: dict, out: Any, machine: Machine) -> Bound:
    import cupy

    m, k, n = _sizes(inputs)
    layout = optimized_layout(k)
    c = cupy.empty((n, layout.padded), cupy.float32)
    products = _launch(products_kernel(layout), (blocks(n * layout.padded, PRODUCT_THREADS),),
                       (PRODUCT_THREADS,), (inputs["a"], inputs["b"], c, np.int32(n)), c)
    words = n % 4 == 0  # rows of X start 4-byte aligned (CuPy aligns the array)
    product = _launch(layout.kernel(words), (blocks(m, layout.bm),), (layout.threads,),
                      (inputs["x"], c, out, np.int32(m), np.int32(n)), out)

    def run() -> Any:
        products()
        return product()

    return Bound(run, {"block_rows": layout.bm, "slice": layout.bq,
                       "thread_tile": [layout.tm, layout.tn], "words": words,
                       "reuse": f"each mask value serves {layout.tn} columns and each C value "
                                f"{layout.tm} rows from registers; C's slice serves "
                                f"{layout.bm} rows from shared memory"})


def cublas(inputs: dict, out: Any, machine: Machine) -> Bound:
    import cupy

    a, b, x = inputs["a"], inputs["b"], inputs["x"]
    m, k, n = _sizes(inputs)
    flat = out.reshape(m, k * k)  # a view: matmul writes Y in place

    def run() -> Any:
        c = (a.T[:, :, None] * b[:, None, :]).reshape(n, k * k)
        cupy.matmul((x != 0).astype(cupy.float32), c, out=flat)
        return out

    return Bound(run, {"tf32": False})
