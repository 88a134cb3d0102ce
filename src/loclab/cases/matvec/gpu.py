"""GPU variants of the matrix-vector product: CUDA C in kernels.cu, launched through CuPy.

``gpu-optimized`` picks its kernel from the shape with :func:`choose_strategy`, a pure
function (tested without a GPU): rows long enough or many enough to keep every SM streaming
get a group of lanes per row; a few long rows are split into chunks over many blocks.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from loclab.cases.base import Bound
from loclab.errors import LaunchError
from loclab.gpu.kernels import KernelAccesses, KernelSource, Launch, blocks, in_order
from loclab.hw import Machine
from loclab.model.access import DeclaredAccess

THREADS = 256  # every kernel's block size (kernels.cu's GROUPED_THREADS too)
WARP = 32
MAX_GRID_X = 2**31 - 1
MAX_SIDE = 2**31 - 2**16  # kernels.cu indexes with ints that may run past a side by a block
GROUPS = (1, 2, 4, 8, 16, 32)  # lanes per row of matvec_grouped
VECTORS = (1, 4)  # floats per load: scalar, or float4 when rows start 16-byte aligned
# Measured on an H100 at the default sizes (1 GiB matrices), in % of copy bandwidth: a warp per
# 16384-column row with 1, 2, 4, 8 loads in flight per lane ran at 98.9, 98.3, 97.5, 100.0;
# splitting 64 rows of 4M columns into blocks of 4 float4 per thread and 1, 2, 4 rows at 103.1,
# 103.2, 101.1 (8 float4 and 1 row: 102.8); 4M rows of 64 columns with 16 lanes per row at 98,
# with a warp per row at 72.
OPTIMIZED_UNROLL = 8  # loads in flight per lane when a warp walks a long row
SPLIT_PER_THREAD, SPLIT_ROWS = 4, 2  # vectors each thread loads per row, rows per block
# A row kernel needs about this many lanes per SM streaming its rows (half of an SM's 2048
# threads) to keep memory busy; with fewer rows, gpu-optimized splits the rows instead.
LANES_PER_SM = 1024

ROW_PER_THREAD = f"matvec_row_per_thread<{THREADS}>"
BLOCK_THREAD0 = f"matvec_block_thread0<{THREADS}>"
BLOCK_REDUCE = f"matvec_block_reduce<{THREADS}>"
SUM_PARTIALS = f"matvec_sum_partials<{THREADS}>"


def grouped_kernel(group: int, vector: int, unroll: int) -> str:
    return f"matvec_grouped<{group},{vector},{unroll}>"


def split_kernel(vector: int) -> str:
    return f"matvec_split_partials<{THREADS},{vector},{SPLIT_PER_THREAD},{SPLIT_ROWS}>"


# The main accesses at the first step of each loop (k0 = 0: the first tile or stride of a row;
# u, j, r = 0: the first unrolled load, piece, row). x is read once per row (count rows*cols):
# from L1 or L2, not memory. A row of matvec_grouped is the thread's global index / G.
# float4 loads (VEC = 4) are declared as 4-byte elements VEC apart: a template's accesses
# have one element size, and this keeps both instantiations' sectors per request and count
# (loads executed) right, though the models then see a quarter of a float4's bytes as used.
_GROUP_ROW = f"(blockIdx.x*{THREADS} + threadIdx.x)/G"  # GROUPED_THREADS = THREADS
_GROUP_K = "(threadIdx.x % G + u*G)*VEC"
_SPLIT_ROW = "blockIdx.x % ((rows + ROWS - 1)/ROWS)*ROWS + r"  # row0 + r
_SPLIT_K = ("blockIdx.x/((rows + ROWS - 1)/ROWS)*(THREADS*VEC*PER_THREAD) + "
            "(j*THREADS + threadIdx.x)*VEC")  # chunk*CHUNK + (j*THREADS + tid)*VEC
_SPLIT_CHUNKS = "(cols + THREADS*VEC*PER_THREAD - 1)/(THREADS*VEC*PER_THREAD)"
# matvec_sum_partials does not know the split's VEC: its chunks are counted as float4 ones
# (the aligned case; partials are at most 1/1024 of the traffic either way).
_FLOAT4_CHUNK = THREADS * 4 * SPLIT_PER_THREAD  # split_chunk(4)
_SUM_CHUNKS = f"(cols + {_FLOAT4_CHUNK - 1})/{_FLOAT4_CHUNK}"
# x is read by every row; its cols floats stay in L2 where they fit (footprint).
ACCESSES = (
    KernelAccesses("matvec_row_per_thread", ("THREADS",), (
        DeclaredAccess("a[(blockIdx.x*THREADS + threadIdx.x)*cols + k]", "global", 4,
                       note="a[row][k]: rows apart (uncoalesced)", count="rows*cols"),
        DeclaredAccess("x[k]", "global", 4, note="x[k]: a broadcast, from L1",
                       count="rows*cols", footprint="cols"),
        DeclaredAccess("y[blockIdx.x*THREADS + threadIdx.x]", "global", 4, note="y[row]",
                       write=True, count="rows")),
        at=(("k", 0),), block=("THREADS",)),
    KernelAccesses("matvec_block_thread0", ("THREADS",), (
        DeclaredAccess("a[blockIdx.x*cols + k0 + threadIdx.x]", "global", 4,
                       note="a[row][k]: along the row", count="rows*cols"),
        DeclaredAccess("x[k0 + threadIdx.x]", "global", 4, note="x[k]: along x, from L1/L2",
                       count="rows*cols", footprint="cols"),
        DeclaredAccess("temp[threadIdx.x]", "shared", 4, ("THREADS",),
                       note="Temp[k] = a[row][k]*x[k]", write=True),
        DeclaredAccess("temp[j]", "shared", 4, ("THREADS",),
                       note="thread 0 adds up Temp (one lane active)"),
        DeclaredAccess("y[blockIdx.x]", "global", 4, note="y[row]: thread 0", write=True,
                       count="rows")),
        at=(("k0", 0), ("j", 0)), block=("THREADS",)),
    KernelAccesses("matvec_block_reduce", ("THREADS",), (
        DeclaredAccess("a[blockIdx.x*cols + k0 + threadIdx.x]", "global", 4,
                       note="a[row][k]: strided over the row", count="rows*cols"),
        DeclaredAccess("x[k0 + threadIdx.x]", "global", 4, note="x[k]: along x, from L1/L2",
                       count="rows*cols", footprint="cols"),
        DeclaredAccess("y[blockIdx.x]", "global", 4, note="y[row]: thread 0", write=True,
                       count="rows")),
        at=(("k0", 0),), block=("THREADS",)),
    KernelAccesses("matvec_grouped", ("G", "VEC", "UNROLL"), (
        DeclaredAccess(f"a[{_GROUP_ROW}*cols + {_GROUP_K}]", "global", 4,
                       note="a[row][k]: G lanes along a row, VEC floats a load",
                       count="rows*((cols + VEC - 1)/VEC)"),
        DeclaredAccess(f"x[{_GROUP_K}]", "global", 4,
                       note="x[k]: along x, shared by the warp's rows; from L1/L2",
                       count="rows*((cols + VEC - 1)/VEC)", footprint="cols"),
        DeclaredAccess(f"y[{_GROUP_ROW}]", "global", 4, note="y[row]: lane 0 of each group",
                       write=True, count="rows")),
        at=(("u", 0),), block=(THREADS,)),
    KernelAccesses("matvec_split_partials", ("THREADS", "VEC", "PER_THREAD", "ROWS"), (
        DeclaredAccess(f"a[({_SPLIT_ROW})*cols + {_SPLIT_K}]", "global", 4,
                       note="a[row][k]: a chunk of a row, VEC floats a load",
                       count="rows*((cols + VEC - 1)/VEC)"),
        DeclaredAccess(f"x[{_SPLIT_K}]", "global", 4,
                       note="x[k]: the chunk of x, once for ROWS rows; from L2",
                       count="(rows + ROWS - 1)/ROWS*((cols + VEC - 1)/VEC)", footprint="cols"),
        DeclaredAccess(f"partial[({_SPLIT_ROW})*{_SPLIT_CHUNKS} + "
                       f"blockIdx.x/((rows + ROWS - 1)/ROWS)]", "global", 4,
                       note="partial[row][chunk]: thread 0", write=True,
                       count=f"rows*{_SPLIT_CHUNKS}")),
        at=(("j", 0), ("r", 0)), block=("THREADS",)),
    KernelAccesses("matvec_sum_partials", ("THREADS",), (
        DeclaredAccess(f"partial[blockIdx.x*{_SUM_CHUNKS} + c0 + threadIdx.x]", "global", 4,
                       note="partial[row][c]: along the row's partials",
                       count=f"rows*{_SUM_CHUNKS}"),
        DeclaredAccess("y[blockIdx.x]", "global", 4, note="y[row]: thread 0", write=True,
                       count="rows")),
        at=(("c0", 0),), block=("THREADS",)),
)

KERNELS = KernelSource(Path(__file__).with_name("kernels.cu"), (
    ROW_PER_THREAD,
    BLOCK_THREAD0,
    BLOCK_REDUCE,
    *(grouped_kernel(group, vector, 1) for group in GROUPS for vector in VECTORS),
    *(grouped_kernel(WARP, vector, OPTIMIZED_UNROLL) for vector in VECTORS),
    *(split_kernel(vector) for vector in VECTORS),
    SUM_PARTIALS,
), ACCESSES)


@dataclass(frozen=True)
class Strategy:
    """How gpu-optimized computes a shape: ``rows`` (``group`` lanes per row, ``unroll`` loads
    in flight per lane) or ``split`` (blocks of ``split_chunk(vector)`` columns of
    ``SPLIT_ROWS`` rows, then a sum of each row's partials); ``vector`` floats per load."""

    kind: Literal["rows", "split"]
    vector: int
    group: int = WARP
    unroll: int = 1


def lanes_per_row(cols: int, vector: int) -> int:
    """The smallest power of two of lanes that gives each lane at most one load of a row, at
    most a warp: 64 columns in float4 make 16 loads, so 16 lanes and two rows per warp."""
    loads = max(1, -(-cols // vector))
    return min(WARP, 1 << (loads - 1).bit_length())


def split_chunk(vector: int) -> int:
    """Columns one block of matvec_split_partials covers."""
    return THREADS * vector * SPLIT_PER_THREAD


def choose_strategy(rows: int, cols: int, sms: int, vector: int) -> Strategy:
    """Split the rows when too few lanes would stream them to fill ``sms`` SMs and a row is
    longer than one chunk (short-wide); otherwise a group of lanes per row, a warp with
    several loads in flight for long rows (square), fewer lanes for short ones (tall-skinny)."""
    group = lanes_per_row(cols, vector)
    if rows * group < sms * LANES_PER_SM and cols > split_chunk(vector):
        return Strategy("split", vector)
    return Strategy("rows", vector, group, OPTIMIZED_UNROLL if group == WARP else 1)


def vectorizable(a: Any, x: Any) -> bool:
    """float4 loads need every row of ``a`` and ``x`` to start on a 16-byte boundary."""
    return a.shape[1] % 4 == 0 and a.data.ptr % 16 == 0 and x.data.ptr % 16 == 0


def _shape(a: Any) -> tuple[int, int]:
    rows, cols = a.shape
    if max(rows, cols) >= MAX_SIDE:
        raise LaunchError(f"matvec kernels index with 32-bit ints: {rows} x {cols} is too large")
    return rows, cols


def _launch(name: str, inputs: dict, out: Any, grid: int) -> Launch:
    """One of the kernels that take (a, x, y, rows, cols), with THREADS-thread blocks."""
    a = inputs["a"]
    rows, cols = _shape(a)
    return Launch(KERNELS, name, grid=(min(grid, MAX_GRID_X),), block=(THREADS,),
                  args=(a, inputs["x"], out, np.int32(rows), np.int32(cols)), result=out)


def _grouped(inputs: dict, out: Any, group: int, vector: int, unroll: int) -> Launch:
    rows = inputs["a"].shape[0]
    return _launch(grouped_kernel(group, vector, unroll), inputs, out,
                   blocks(rows, THREADS // group))


def _split(inputs: dict, out: Any, vector: int) -> Bound:
    """Partial sums of chunks into a rows x chunks temporary (allocated here, not in the timed
    run), then one sum per row."""
    import cupy

    a = inputs["a"]
    rows, cols = _shape(a)
    chunk = split_chunk(vector)
    chunks = blocks(cols, chunk)
    partial = cupy.empty((rows, chunks), cupy.float32)
    first = Launch(KERNELS, split_kernel(vector),
                   grid=(min(blocks(rows, SPLIT_ROWS) * chunks, MAX_GRID_X),), block=(THREADS,),
                   args=(a, inputs["x"], partial, np.int32(rows), np.int32(cols),
                         np.int32(chunks)),
                   result=partial)
    second = Launch(KERNELS, SUM_PARTIALS, grid=(min(rows, MAX_GRID_X),), block=(THREADS,),
                    args=(partial, out, np.int32(rows), np.int32(chunks)), result=out)
    return Bound(in_order(first, second),
                 {"strategy": "split", "vector": vector, "chunk": chunk, "chunks": chunks,
                  "rows_per_block": SPLIT_ROWS, "block": [THREADS]})


def bind(inputs: dict, out: Any, strategy: Strategy) -> Bound:
    """gpu-optimized with a given strategy (tests force each one on awkward shapes)."""
    if strategy.kind == "split":
        return _split(inputs, out, strategy.vector)
    launch = _grouped(inputs, out, strategy.group, strategy.vector, strategy.unroll)
    return Bound(launch, {"strategy": "rows", "lanes_per_row": strategy.group,
                          "vector": strategy.vector, "unroll": strategy.unroll,
                          "block": [THREADS]})


def row_per_thread(inputs: dict, out: Any, machine: Machine) -> Bound:
    launch = _launch(ROW_PER_THREAD, inputs, out, blocks(inputs["a"].shape[0], THREADS))
    return Bound(launch, {"block": [THREADS]})


def block_thread0(inputs: dict, out: Any, machine: Machine) -> Bound:
    return Bound(_launch(BLOCK_THREAD0, inputs, out, inputs["a"].shape[0]), {"block": [THREADS]})


def block_reduce(inputs: dict, out: Any, machine: Machine) -> Bound:
    return Bound(_launch(BLOCK_REDUCE, inputs, out, inputs["a"].shape[0]), {"block": [THREADS]})


def warp_per_row(inputs: dict, out: Any, machine: Machine) -> Bound:
    vector = 4 if vectorizable(inputs["a"], inputs["x"]) else 1
    return Bound(_grouped(inputs, out, WARP, vector, 1),
                 {"block": [THREADS], "lanes_per_row": WARP, "vector": vector})


def optimized(inputs: dict, out: Any, machine: Machine) -> Bound:
    a = inputs["a"]
    rows, cols = a.shape
    vector = 4 if vectorizable(a, inputs["x"]) else 1
    return bind(inputs, out, choose_strategy(rows, cols, machine.gpu.sms, vector))


def library(inputs: dict, out: Any, machine: Machine) -> Bound:
    from cupy import cublas

    a, x = inputs["a"], inputs["x"]

    def run() -> Any:
        # cuBLAS SGEMV, y = 1 * a @ x + 0 * y (beta = 0: the poisoned y is not read). A
        # C-contiguous rows x cols matrix is a column-major cols x rows one, so CuPy calls
        # sgemv with op T on it (op N for a single row or column, which is both). SGEMV runs
        # fp32 FMAs on the CUDA cores: TF32 applies only to tensor-core GEMMs, never to GEMV.
        cublas.gemv("N", 1.0, a, x, 0.0, out)
        return out

    return Bound(run, {"routine": "cublasSgemv"})
