"""GPU variants of the masked batch product: CUDA C in kernels.cu, launched through CuPy.

The kernels take K as a template argument (gpu-naive's and gpu-tiled's block is K x K
threads; gpu-optimized's tiles of Y follow C's K^2 columns, ``optimized_layout``;
gpu-subset-sums' blocks take 32 of them, ``subset_sums_layout``): each K compiles on first
use; ``KERNELS`` lists the default sizes' (K = 4, 8, 16), which the nvcc check compiles
without a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from loclab.cases.base import Bound
from loclab.cases.bmmm import DEFAULT_KS
from loclab.gpu.kernels import KernelAccesses, KernelSource, Launch, blocks, source_for
from loclab.gpu.warp_tile import LANE_COL, LANE_ROW, block_threads, warp_tile
from loclab.hw import Machine
from loclab.model.access import DeclaredAccess

SOURCE = Path(__file__).with_name("kernels.cu")
TILED_ROWS = 31  # the slides' T: rows of X per block, acc[T] per thread
TRANSPOSE_TILE = 32  # the slides': 32 x 32 threads, one byte each
MAX_BLOCK_SIDE = 32  # K x K threads per block
PRODUCT_THREADS = 256
INT_INDEX_LIMIT = 2 ** 31
VECTOR_BYTES = 16  # gpu-optimized's and gpu-subset-sums' loads of the mask
MASK_BITS_ROWS = 128  # bmmm_mask_bits: a block's rows, two threads a row


@dataclass(frozen=True)
class Layout:
    """gpu-optimized's tiles for one K: C's K^2 columns padded to ``padded`` (whole tiles of
    ``bn``), a ``bm`` x ``bn`` tile of Y per block, slices of ``bq`` along q (``stages`` of
    C's in shared memory), ``lanes_m`` x (32 / lanes_m) lanes a warp of tm x tn results each
    (gpu/warp_tile.py), launch bounds asking ``blocks_per_sm`` blocks an SM."""

    k: int
    padded: int
    bm: int
    bn: int
    bq: int
    tm: int
    tn: int
    lanes_m: int
    stages: int
    blocks_per_sm: int

    @property
    def threads(self) -> int:
        return block_threads(self.bm, self.bn, self.lanes_m, self.tm, self.tn)

    @property
    def shared_bytes(self) -> int:
        """Two buffers of a slice of the mask (as floats), ``stages`` of C's."""
        return (2 * self.bm + self.stages * self.bn) * self.bq * 4

    def rows(self, n: int) -> int:
        """C's rows: N padded to whole slices."""
        return -(-n // self.bq) * self.bq

    def kernel(self, vectors: bool) -> str:
        wm, wn = warp_tile(self.lanes_m, self.tm, self.tn)
        flag = "true" if vectors else "false"
        return (f"bmmm_optimized<{self.k},{self.padded},{self.bm},{self.bn},{self.bq},{wm},"
                f"{wn},{self.tm},{self.tn},{self.stages},{flag},{self.blocks_per_sm}>")


# By the column tile (C's K^2 columns, padded to a power of two from 16 up to 256, wider K^2
# spread over several blocks of 256): the row tile, the slice along q, lanes of tm x tn,
# lanes_m, C's stages and blocks an SM. From 128 columns up, mmm's warp tile: lanes of 16 x 8
# (128 FMAs per 6 shared loads), 256 threads, one block an SM, slices of 32 (at K = 16 on an
# H100: 0.77 ms against 0.88 with slices of 16, whose barriers and edges a slice cost more than
# two warps a scheduler hide); narrower tiles take 256 rows and lanes of 8 x 8 or 8 x 4, two
# blocks an SM.
_TILES = {256: (128, 32, 16, 8, 8, 2, 1), 128: (256, 32, 16, 8, 8, 2, 1),
          64: (256, 32, 8, 8, 8, 2, 2), 32: (256, 16, 8, 4, 8, 2, 2),
          16: (256, 16, 8, 4, 8, 2, 2)}
WIDE_COLUMNS = max(_TILES)


def optimized_layout(k: int) -> Layout:
    """The narrowest column tile that holds K^2 columns (or several of the widest), the rest
    of its layout from ``_TILES``."""
    kk = k * k
    bn = min(WIDE_COLUMNS, max(min(_TILES), 1 << (kk - 1).bit_length()))
    bm, bq, tm, tn, lanes_m, stages, blocks_per_sm = _TILES[bn]
    return Layout(k, -(-kk // bn) * bn, bm, bn, bq, tm, tn, lanes_m, stages, blocks_per_sm)


@dataclass(frozen=True)
class SubsetSums:
    """gpu-subset-sums' layout for one K: C's K^2 columns padded to ``padded`` (whole tiles of
    ``COLUMNS``), ``threads`` a block in quarter warps of 8 lanes, each lane summing 4 columns
    of ``rows_per_lane`` rows; launch bounds asking ``blocks_per_sm`` blocks an SM."""

    k: int
    padded: int
    rows_per_lane: int
    threads: int
    blocks_per_sm: int

    COLUMNS: ClassVar[int] = 32  # a block's columns: a quarter warp's 16-byte loads
    GROUP: ClassVar[int] = 32  # q's a 32-bit word of the mask's bits, 4 chunks of 8
    SLOTS: ClassVar[int] = 3  # groups of C and of the bits in shared memory

    @property
    def rows(self) -> int:
        """A block's rows: a quarter warp's ``rows_per_lane`` each."""
        return self.threads // 8 * self.rows_per_lane

    @property
    def shared_bytes(self) -> int:
        """Two tables (256 entries of two chunks' 32 floats), ``SLOTS`` groups of C's 32 x 32
        floats and of the block's words of bits."""
        return (2 * 256 * 2 * self.COLUMNS + self.SLOTS * self.GROUP * self.COLUMNS
                + self.SLOTS * self.rows) * 4

    def groups(self, n: int) -> int:
        return -(-n // self.GROUP)

    def kernel(self) -> str:
        return (f"bmmm_subset_sums<{self.k},{self.padded},{self.rows_per_lane},{self.threads},"
                f"{self.SLOTS},{self.blocks_per_sm}>")


# One block of 512 threads an SM, 16 rows a lane: 1024 rows share each table (at K = 16 on an
# H100, 0.52 ms against 0.53 with 14 rows a lane, which spill nothing, and 0.54 with 384
# threads of 20; at K = 4, measured before the builders' rows left local memory, 0.12 ms
# against 0.14 with two blocks of 256 an SM).
SUBSET_SUMS_LANES = (16, 512, 1)  # rows a lane, threads, blocks an SM


def subset_sums_layout(k: int) -> SubsetSums:
    columns = SubsetSums.COLUMNS
    return SubsetSums(k, -(-k * k // columns) * columns, *SUBSET_SUMS_LANES)


def subset_sums_fits(dims: dict[str, int], machine: Machine) -> str | None:
    """Two tables of 64 KiB and the copies in flight: more shared memory than some GPUs let
    a block have (sm_86, sm_89: 99 KiB; sm_80 and sm_90 have room)."""
    shared = subset_sums_layout(dims["k"]).shared_bytes
    if machine.gpu is not None and shared > machine.gpu.shared_mem_per_block_optin:
        return (f"its tables and copies need {shared} bytes of shared memory a block, more "
                f"than this GPU's {machine.gpu.shared_mem_per_block_optin}")
    return None


def mask_bits_kernel(vectors: bool) -> str:
    return f"bmmm_mask_bits<{'true' if vectors else 'false'}>"


def naive_kernel(k: int) -> str:
    return f"bmmm_naive<{k}>"


def tiled_kernel(k: int) -> str:
    return f"bmmm_tiled<{k},{TILED_ROWS}>"


def products_kernel(k: int, padded: int, slice_rows: int) -> str:
    return f"bmmm_products<{k},{padded},{slice_rows}>"


TRANSPOSE = f"transpose_bytes<{TRANSPOSE_TILE}>"

# The main accesses at the first step of each loop (q = 0, r = 0). K is the template's K (the
# size's k); the mask is bytes. In bmmm_tiled thread t = ty*K + tx < T stages X_tr[q][ii + t]
# (for K*K > T the others idle: "% T" keeps them in bounds, on an address a stager uses).
_TID = "(threadIdx.y*K + threadIdx.x)"
# bmmm_products: thread e computes C[q][j] for q = e / KKP, j = e % KKP (j < K*K load A, B).
_E = f"(blockIdx.x*{PRODUCT_THREADS} + threadIdx.x)"
ACCESSES = (
    KernelAccesses("bmmm_naive", ("K",), (
        DeclaredAccess("X[blockIdx.x*n + q]", "global", 1,
                       note="X[i][q]: a broadcast to the block", count="m*K*K*n"),
        DeclaredAccess("A[threadIdx.y*n + q]", "global", 4,
                       note="A[j1][q]: n apart across j1, from L1/L2", count="m*K*K*n"),
        DeclaredAccess("B[q*K + threadIdx.x]", "global", 4,
                       note="B[q][j2]: along a row, from L1/L2", count="m*K*K*n"),
        DeclaredAccess("Y[blockIdx.x*K*K + threadIdx.y*K + threadIdx.x]", "global", 4,
                       note="Y[i][j1][j2]: along a row", write=True, count="m*K*K")),
        at=(("q", 0),), block=("K", "K")),
    KernelAccesses("transpose_bytes", ("TILE",), (
        DeclaredAccess("X[(blockIdx.y*TILE + threadIdx.y)*n + blockIdx.x*TILE + threadIdx.x]",
                       "global", 1, note="read a row of X", count="m*n"),
        DeclaredAccess("tile[threadIdx.y][threadIdx.x]", "shared", 1, ("TILE", "TILE + 1"),
                       note="stage a row", write=True),
        DeclaredAccess("tile[threadIdx.x][threadIdx.y]", "shared", 1, ("TILE", "TILE + 1"),
                       note="read a column"),
        DeclaredAccess("Xtr[(blockIdx.x*TILE + threadIdx.y)*m + blockIdx.y*TILE + "
                       "threadIdx.x]", "global", 1, note="write a row of X_tr", write=True,
                       count="m*n")),
        block=("TILE", "TILE")),
    KernelAccesses("bmmm_tiled", ("K", "T"), (
        DeclaredAccess("A[threadIdx.y*n + q]", "global", 4,
                       note="A[j1][q]: once per T rows, from L1/L2",
                       count="(m + T - 1)/T*K*K*n"),
        DeclaredAccess("B[q*K + threadIdx.x]", "global", 4,
                       note="B[q][j2]: once per T rows, from L1/L2",
                       count="(m + T - 1)/T*K*K*n"),
        DeclaredAccess(f"Xtr[q*m + blockIdx.x*T + {_TID} % T]", "global", 1,
                       note="stage X_tr[q][ii:ii+T]: along a row", count="m*n"),
        DeclaredAccess(f"Xsh_tr[{_TID} % T]", "shared", 4, ("T",),
                       note="stage the mask slice", write=True),
        DeclaredAccess("Xsh_tr[r]", "shared", 4, ("T",), note="Xsh_tr[r]: a broadcast"),
        DeclaredAccess("Y[(blockIdx.x*T + r)*K*K + threadIdx.y*K + threadIdx.x]", "global", 4,
                       note="Y[ii + r][j1][j2]: along a row", write=True, count="m*K*K")),
        at=(("q", 0), ("r", 0)), block=("K", "K")),
    KernelAccesses("bmmm_products", ("K", "KKP", "BQ"), (
        DeclaredAccess(f"A[{_E} % KKP / K * n + {_E} / KKP]", "global", 4,
                       note="A[j1][q]: n apart, K lanes each", count="n*K*K"),
        DeclaredAccess(f"B[{_E} / KKP * K + {_E} % KKP % K]", "global", 4,
                       note="B[q][j2]: along a row", count="n*K*K"),
        DeclaredAccess(f"C[{_E}]", "global", 4, note="C[q][j]: along a row", write=True,
                       count="(n + BQ - 1)/BQ*BQ*KKP")),
        block=(PRODUCT_THREADS,)),
)
# bmmm_optimized at q0 = 0, c = 0, a thread's first load of each slice. The mask is staged
# W = 4 + 12*VECTORS bytes per load (a vector, or 4 bytes), load e at q W*(e / BM) of row
# e % BM, declared in bytes (one element size per template: a lane's first byte gives its
# sector either way). Where a slice has fewer loads (of the mask, of C's 16 bytes) than the
# block threads, the others idle: "% loads" keeps them on an address a loader uses.
_W = "(4 + 12*VECTORS)"
_XE = f"threadIdx.x % (BM*BQ/{_W})"
_CE = "threadIdx.x % (BQ*BN/4)"
_ROW0 = "blockIdx.x/(KKP/BN)*BM"
_COL0 = "blockIdx.x % (KKP/BN)*BN"
OPTIMIZED_ACCESSES = KernelAccesses(
    "bmmm_optimized", ("K", "KKP", "BM", "BN", "BQ", "WM", "WN", "TM", "TN", "STAGES",
                       "VECTORS", "MIN"), (
        DeclaredAccess(f"X[({_ROW0} + {_XE} % BM)*n + q0 + {_XE}/BM*{_W}]",
                       "global", 1, note="stage the mask: a row a lane, 16 or 4 bytes",
                       count=f"KKP/BN*m*((n + {_W} - 1)/{_W})"),
        DeclaredAccess(f"Xs[{_XE}/BM*{_W}][{_XE} % BM]", "shared", 4, ("BQ", "BM"),
                       note="Xs[q][row]: the mask transposed, as 0/1", write=True),
        DeclaredAccess(f"C4[q0*(KKP/4) + {_COL0}/4 + {_CE}/(BN/4)*(KKP/4) + {_CE} % (BN/4)]",
                       "global", 16, note="cp.async a slice of C: along rows (from L2)",
                       count="(m + BM - 1)/BM*((n + BQ - 1)/BQ*BQ)*(KKP/4)"),
        DeclaredAccess(f"Cs4[{_CE}/(BN/4)][{_CE} % (BN/4)]", "shared", 16,
                       ("BQ", "BN/4"), note="Cs[q][col], float4", write=True),
        DeclaredAccess(f"Xs4[c][({LANE_ROW})/4]", "shared", 16, ("BQ", "BM/4"),
                       note="a lane's 4 rows of Xs[q], float4"),
        DeclaredAccess(f"Cs4[c][({LANE_COL})/4]", "shared", 16, ("BQ", "BN/4"),
                       note="a lane's 4 columns of Cs[q], float4"),
        DeclaredAccess(f"Y4[({_ROW0} + {LANE_ROW})*(K*K/4) + ({_COL0} + {LANE_COL})/4]",
                       "global", 16, note="Y[i][col], float4 (K*K % 4 == 0)", write=True,
                       count="m*((K*K + 3)/4)")),
    at=(("q0", 0), ("c", 0)), block=("(BM/WM)*(BN/WN)*32",))

# bmmm_mask_bits at g = 0: lanes 2 r and 2 r + 1 read row r's 16-byte halves of a group
# (declared in bytes, as above); even lanes store the word. Stores past row m (whole row tiles
# of bmmm_subset_sums) are not counted.
MASK_BITS_ACCESSES = KernelAccesses("bmmm_mask_bits", ("VECTORS",), (
    DeclaredAccess(f"X[(blockIdx.x*{MASK_BITS_ROWS} + threadIdx.x/2)*n + g*32 + "
                   "16*(threadIdx.x % 2)]", "global", 1,
                   note="a row's 32 bytes by two lanes, 16 each",
                   count="m*(VECTORS*((n + 15)/16) + (1 - VECTORS)*n)"),
    DeclaredAccess(f"S[g*m + blockIdx.x*{MASK_BITS_ROWS} + threadIdx.x/2]", "global", 4,
                   note="S[g][row]: words of consecutive rows", write=True,
                   count="m*((n + 31)/32)")),
    at=(("g", 0),), block=(2 * MASK_BITS_ROWS,))
# bmmm_subset_sums at g = 0, chunk 0, a lane's first row. Rows a block: THREADS/8*RPL. The
# table's entries are float4 indices T4[entry*16 + half*8 + quad]; a row's entry is its mask
# byte (data): declared as entry = the row's index, which gives what any entries do, one
# wavefront a quarter warp.
_SS_ROWS = "(THREADS/8*RPL)"
_SS_COLUMN_TILES = "(KKP/32)"
_SS_BLOCKS = f"{_SS_COLUMN_TILES}*((m + {_SS_ROWS} - 1)/{_SS_ROWS})"
_SS_GROUPS = "((n + 31)/32)"
SUBSET_SUMS_ACCESSES = KernelAccesses(
    "bmmm_subset_sums", ("K", "KKP", "RPL", "THREADS", "SLOTS", "MIN"), (
        DeclaredAccess(f"C4[threadIdx.x % 256 / 8*(KKP/4) + blockIdx.x % {_SS_COLUMN_TILES}*8 + "
                       "threadIdx.x % 8]", "global", 16,
                       note="cp.async a group's 32 x 32 floats of C (from L2)",
                       count=f"{_SS_BLOCKS}*{_SS_GROUPS}*256"),
        DeclaredAccess(f"S4[blockIdx.x/{_SS_COLUMN_TILES}*{_SS_ROWS}/4 + threadIdx.x % "
                       f"({_SS_ROWS}/4)]", "global", 16,
                       note="cp.async the rows' words of a group", count=(
                           f"{_SS_BLOCKS}*{_SS_GROUPS}*({_SS_ROWS}/4)")),
        DeclaredAccess("Cs4[4][threadIdx.x % 8]", "shared", 16, ("SLOTS*32", "8"),
                       note="a builder's first row of C (row 4 of the chunk), 4 columns"),
        DeclaredAccess("T4[threadIdx.x % 128 / 8*16*16 + threadIdx.x % 8]", "shared", 16,
                       ("2*256*16",), note="a builder's first entry", write=True),
        DeclaredAccess("Ss[threadIdx.x/8]", "shared", 4, (f"SLOTS*{_SS_ROWS}",),
                       note="a row's word of bits: a broadcast to its quarter warp"),
        DeclaredAccess("T4[threadIdx.x/8 % 256*16 + threadIdx.x % 8]", "shared", 16,
                       ("2*256*16",), note="a row's entry: 32 columns a quarter warp"),
        DeclaredAccess(f"Y4[(blockIdx.x/{_SS_COLUMN_TILES}*{_SS_ROWS} + threadIdx.x/8)*(K*K/4) "
                       f"+ blockIdx.x % {_SS_COLUMN_TILES}*8 + threadIdx.x % 8]", "global", 16,
                       note="Y[i][col], float4 (K*K % 4 == 0)", write=True,
                       count="m*((K*K + 3)/4)")),
    at=(("g", 0),), block=("THREADS",))

KERNELS = KernelSource(SOURCE, tuple(dict.fromkeys((  # the two variants share some products
    TRANSPOSE,
    *(naive_kernel(k) for k in DEFAULT_KS),
    *(tiled_kernel(k) for k in DEFAULT_KS),
    *(products_kernel(k, optimized_layout(k).padded, optimized_layout(k).bq) for k in DEFAULT_KS),
    *(optimized_layout(k).kernel(vectors) for k in DEFAULT_KS for vectors in (True, False)),
    *(products_kernel(k, subset_sums_layout(k).padded, SubsetSums.GROUP) for k in DEFAULT_KS),
    *(mask_bits_kernel(vectors) for vectors in (True, False)),
    *(subset_sums_layout(k).kernel() for k in DEFAULT_KS),
))), (*ACCESSES, OPTIMIZED_ACCESSES, MASK_BITS_ACCESSES, SUBSET_SUMS_ACCESSES))


def _launch(name: str, grid: tuple[int, ...], block: tuple[int, ...], args: tuple,
            result: Any, shared_mem: int = 0) -> Launch:
    return Launch(source_for(KERNELS, name), name, grid=grid, block=block, args=args,
                  result=result, shared_mem=shared_mem)


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


def _products(inputs: dict, rows: int, padded: int, slice_rows: int) -> Launch:
    """Step 1 of gpu-optimized and gpu-subset-sums: a launch writing C (its result), ``rows``
    (N in whole slices of ``slice_rows``) x ``padded`` columns, zeros in the padding."""
    import cupy

    _, k, n = _sizes(inputs)
    c = cupy.empty((rows, padded), cupy.float32)
    return _launch(products_kernel(k, padded, slice_rows), (blocks(c.size, PRODUCT_THREADS),),
                   (PRODUCT_THREADS,), (inputs["a"], inputs["b"], c, np.int32(n)), c)


def _mask_vectors(x: Any) -> bool:
    """Whether the mask can be read as 16-byte vectors: every row starts on one."""
    return x.shape[1] % VECTOR_BYTES == 0 and x.data.ptr % VECTOR_BYTES == 0


def optimized(inputs: dict, out: Any, machine: Machine) -> Bound:
    m, k, n = _sizes(inputs)
    layout = optimized_layout(k)
    products = _products(inputs, layout.rows(n), layout.padded, layout.bq)
    vectors = _mask_vectors(inputs["x"])
    column_tiles = layout.padded // layout.bn
    tiles = column_tiles * blocks(m, layout.bm)
    product = _launch(layout.kernel(vectors), (tiles,), (layout.threads,),
                      (inputs["x"], products.result, out, np.int32(m), np.int32(n)), out,
                      shared_mem=layout.shared_bytes).filling_the_gpu(tiles, machine.gpu.sms)

    def run() -> Any:
        products()
        return product()

    return Bound(run, {"block_tile": [layout.bm, layout.bn],
                       "column_tiles": column_tiles, "slice": layout.bq,
                       "stages": layout.stages, "thread_tile": [layout.tm, layout.tn],
                       "warp_tile": list(warp_tile(layout.lanes_m, layout.tm, layout.tn)),
                       "threads": layout.threads, "vectors": vectors, "tiles": tiles,
                       "blocks": product.grid[0],
                       "reuse": f"each mask value serves {layout.tn} columns and each C value "
                                f"{layout.tm} rows from registers; C's slice serves "
                                f"{layout.bm} rows from shared memory"})


def mask_bits(x: Any, groups: int, rows: int) -> Launch:
    """gpu-subset-sums' step 1: a launch writing ``groups`` x ``rows`` words of the mask ``x``'s
    bits (its result), word [g][i] bit b = (x[i][32 g + b] != 0), zero past x's rows."""
    import cupy

    m, n = x.shape
    bits = cupy.empty((groups, rows), cupy.uint32)
    return _launch(mask_bits_kernel(_mask_vectors(x)), (blocks(rows, MASK_BITS_ROWS),),
                   (2 * MASK_BITS_ROWS,), (x, bits, np.int32(m), np.int32(n), np.int32(rows)),
                   bits)


def subset_sums(inputs: dict, out: Any, machine: Machine,
                layout: SubsetSums | None = None) -> Bound:
    """C (padded to whole groups of q and column tiles), the mask's bits, then the sums;
    ``layout`` replaces the default one (tests, measurements)."""
    m, k, n = _sizes(inputs)
    layout = layout or subset_sums_layout(k)
    groups = layout.groups(n)
    rows = blocks(m, layout.rows) * layout.rows  # whole row tiles: the bits' rows past M are 0
    products = _products(inputs, groups * layout.GROUP, layout.padded, layout.GROUP)
    bits = mask_bits(inputs["x"], groups, rows)
    column_tiles = layout.padded // layout.COLUMNS
    sums = _launch(layout.kernel(), (column_tiles * rows // layout.rows,), (layout.threads,),
                   (bits.result, products.result, out, np.int32(m), np.int32(n),
                    np.int32(rows)), out,
                   shared_mem=layout.shared_bytes)

    def run() -> Any:
        products()
        bits()
        return sums()

    return Bound(run, {"block_tile": [layout.rows, layout.COLUMNS],
                       "column_tiles": column_tiles, "threads": layout.threads,
                       "rows_per_lane": layout.rows_per_lane,
                       "vectors": _mask_vectors(inputs["x"]), "chunks": -(-n // 8),
                       "reuse": f"each subset sum of 8 rows of C serves {layout.rows} rows "
                                f"from shared memory, one addition for 8 multiply-adds of the "
                                f"product (rates count the golden's flops: past the FMA peak)"})


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
