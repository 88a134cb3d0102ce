"""GPU variants of the summed-area table: CUDA C in kernels.cu, launched through CuPy.

Each variant is a fixed sequence of launches on one stream (each sees the last one's output);
temporaries are allocated at setup, not in the timed run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from loclab.cases.base import Bound
from loclab.errors import LaunchError
from loclab.gpu.kernels import KernelAccesses, KernelSource, Launch, blocks, in_order
from loclab.hw import Machine
from loclab.model.access import DeclaredAccess

THREADS = 256  # the naive, row-scan and scan-down kernels' block size
ROW_SCAN_ITEMS = 8  # elements per thread per chunk of a row scan: loads in flight
TRANSPOSE_TILE, TRANSPOSE_ROWS = 32, 8
MAX_GRID_Y = 65535  # CUDA's limit; sat_transpose loops over further tile-rows
MAX_SIDE = 2**31 - 2**16  # kernels.cu indexes with ints that may run past a side by a tile
# gpu-coalesced-columns: tiles of TILE_ROWS x TILE_COLS, a warp each, TILE_WARPS warps a block
# (kernels.cu's LANE_COLS, TILE_COLS and TILE_WARPS), UNROLL[vector] rows' loads in flight per
# warp (the scalar path's 4 bytes a lane are 4 loads: with 8 rows, ptxas spilled at 80
# registers). 8192 x 8192 makes 64 x 64 tiles: 4096 warps, about 31 per SM on an H100.
# Measured on an H100 (copy 2690 GB/s) at 8192 x 8192, CUDA events, medians: all five launches
# 199 us (62% of copy on the golden's 5 bytes an element); sat_tile_scan alone 139 us (its
# 1 + 4 bytes an element at 2.4 TB/s), sat_tile_totals 45 us (64 MiB read at only 1.5 TB/s:
# the one to improve), the three carry kernels about 10 us each (mostly launch and event
# overhead). Tiles of 64 or 256 rows and UNROLL 4 or 16 ran within -4% and +1% of these.
# gpu-transpose took 705 us (its 29 bytes an element at about the copy rate), the naive
# kernels 6.1 ms, cupy's two cumsums 7.6 ms.
LANE_COLS, TILE_COLS, TILE_WARPS = 4, 128, 8
TILE_ROWS = 128
UNROLL = {4: 8, 1: 4}
SCAN_DOWN_BATCH = 8  # rows loaded before stored by sat_scan_down

ROWS_NAIVE = f"sat_rows_naive<{THREADS}>"
COLUMNS_NAIVE = f"sat_columns_naive<{THREADS}>"
TRANSPOSE = f"sat_transpose<{TRANSPOSE_TILE},{TRANSPOSE_ROWS}>"
SCAN_DOWN = f"sat_scan_down<{THREADS},{SCAN_DOWN_BATCH}>"
TOP_SCAN = f"sat_top_scan<{THREADS},{ROW_SCAN_ITEMS}>"


def row_scan_kernel(in_bytes: int) -> str:
    """gpu-transpose's row scan of the image (1-byte elements) or of the table (4-byte)."""
    return f"sat_row_scan<{in_bytes},{THREADS},{ROW_SCAN_ITEMS}>"


def totals_kernel(vector: int) -> str:
    return f"sat_tile_totals<{TILE_ROWS},{vector},{UNROLL[vector]}>"


def tile_scan_kernel(vector: int) -> str:
    return f"sat_tile_scan<{TILE_ROWS},{vector},{UNROLL[vector]}>"


# The main accesses at the first step of each loop (j, i, k, b = 0: the first element, row,
# item or batch; the first chunk of a row). A tile kernel's warp w of block 0 owns tile w:
# band w / strips, strip w % strips; its lane l column strip*128 + 4 l.
_TILE = f"(blockIdx.x*{TILE_WARPS} + threadIdx.x/32)"
_STRIPS = f"((cols + {TILE_COLS - 1})/{TILE_COLS})"
_BAND_OF_TILE = f"{_TILE}/{_STRIPS}"
_COLUMN = f"{_TILE}%{_STRIPS}*{TILE_COLS} + threadIdx.x%32*{LANE_COLS}"
_BANDS = "((rows + TILE_ROWS - 1)/TILE_ROWS)"
_ROW_OFFSET = f"{_TILE}%{_STRIPS}*rows + {_BAND_OF_TILE}*TILE_ROWS + threadIdx.x%32"
# With VEC = 4 a lane loads its 4 bytes as one word and stores its 4 words as one uint4: the
# accesses are declared per element (1-byte and 4-byte elements, 4 apart across lanes), which
# gives both instantiations' sectors per request; ``count`` is the loads or stores executed.
_PER_LANE = "((cols + VEC - 1)/VEC)"
# sat_scan_down runs twice: on T (bands x cols, as the texts say) and on R (strips x rows).
_SCAN_DOWN_ELEMENTS = f"((rows + {TILE_ROWS - 1})/{TILE_ROWS})*cols + {_STRIPS}*rows"
# A row scan's shared tile: element i at i + i/32 (kernels.cu's padded()); thread t stages
# elements t + k*THREADS and scans t*ITEMS + k.
_TILE_SIDE = "THREADS*ITEMS + THREADS*ITEMS/32"
_STAGED = "k*THREADS + threadIdx.x"
_OWNED = "threadIdx.x*ITEMS + k"


def _row_scan_tile() -> tuple[DeclaredAccess, ...]:
    """The shared-tile accesses of a row scan (kernels.cu's scan_rows)."""
    staged = f"tile[{_STAGED} + ({_STAGED})/32]"
    owned = f"tile[{_OWNED} + ({_OWNED})/32]"
    return (
        DeclaredAccess(staged, "shared", 4, (_TILE_SIDE,), note="stage the chunk", write=True),
        DeclaredAccess(owned, "shared", 4, (_TILE_SIDE,),
                       note="each thread scans ITEMS consecutive elements (padded)"),
        DeclaredAccess(owned, "shared", 4, (_TILE_SIDE,), note="write them back, offset",
                       write=True),
        DeclaredAccess(staged, "shared", 4, (_TILE_SIDE,), note="read the chunk to store it"))


ACCESSES = (
    KernelAccesses("sat_rows_naive", ("THREADS",), (
        DeclaredAccess("a[(blockIdx.x*THREADS + threadIdx.x)*cols + j]", "global", 1,
                       note="a[row][j]: rows apart (uncoalesced; L1 keeps the lines)",
                       count="rows*cols"),
        DeclaredAccess("out[(blockIdx.x*THREADS + threadIdx.x)*cols + j]", "global", 4,
                       note="out[row][j]: rows apart (uncoalesced)", write=True,
                       count="rows*cols")),
        at=(("j", 0),), block=("THREADS",)),
    KernelAccesses("sat_columns_naive", ("THREADS",), (
        DeclaredAccess("out[i*cols + blockIdx.x*THREADS + threadIdx.x]", "global", 4,
                       note="out[i][col]: along row i (coalesced)", count="rows*cols"),
        DeclaredAccess("out[i*cols + blockIdx.x*THREADS + threadIdx.x]", "global", 4,
                       note="the running sum written back", write=True, count="rows*cols")),
        at=(("i", 0),), block=("THREADS",)),
    KernelAccesses("sat_row_scan", ("IN_BYTES", "THREADS", "ITEMS"), (
        DeclaredAccess(f"in[(blockIdx.x*cols + {_STAGED})*IN_BYTES]", "global", 1,
                       note="in[row][k0 + i]: along the row (declared in bytes, IN_BYTES "
                       "apart)", count="rows*cols"),
        *_row_scan_tile(),
        DeclaredAccess(f"out[blockIdx.x*cols + {_STAGED}]", "global", 4,
                       note="out[row][k0 + i]: along the row", write=True, count="rows*cols")),
        at=(("k", 0),), block=("THREADS",)),
    KernelAccesses("sat_transpose", ("TILE", "BLOCK_ROWS"), (
        DeclaredAccess("in[(blockIdx.y*TILE + threadIdx.y + k)*cols + blockIdx.x*TILE + "
                       "threadIdx.x]", "global", 4, note="read a row", count="rows*cols"),
        DeclaredAccess("tile[threadIdx.y + k][threadIdx.x]", "shared", 4, ("TILE", "TILE + 1"),
                       note="stage a row", write=True),
        DeclaredAccess("tile[threadIdx.x][threadIdx.y + k]", "shared", 4, ("TILE", "TILE + 1"),
                       note="read a column"),
        DeclaredAccess("out[(blockIdx.x*TILE + threadIdx.y + k)*rows + blockIdx.y*TILE + "
                       "threadIdx.x]", "global", 4, note="write a row", write=True,
                       count="rows*cols")),
        at=(("k", 0),), block=("TILE", "BLOCK_ROWS")),
    KernelAccesses("sat_tile_totals", ("TILE_ROWS", "VEC", "UNROLL"), (
        DeclaredAccess(f"a[({_BAND_OF_TILE}*TILE_ROWS + k)*cols + {_COLUMN}]", "global", 1,
                       note="a[row][c..c+3]: 128 bytes a warp", count=f"rows*{_PER_LANE}"),
        DeclaredAccess(f"col_totals[{_BAND_OF_TILE}*cols + {_COLUMN}]", "global", 4,
                       note="T[band][c..c+3]: the tile's column totals", write=True,
                       count=f"{_BANDS}*{_PER_LANE}"),
        DeclaredAccess(f"row_totals[{_ROW_OFFSET}]", "global", 4,
                       note="R[strip][row]: lane k the total of row k of every 32",
                       write=True, count=f"rows*{_STRIPS}")),
        at=(("k", 0),), block=(TILE_WARPS * 32,)),
    KernelAccesses("sat_scan_down", ("THREADS", "BATCH"), (
        DeclaredAccess("m[b*cols + blockIdx.x*THREADS + threadIdx.x]", "global", 4,
                       note="T and R down their columns (coalesced; in L2)",
                       count=_SCAN_DOWN_ELEMENTS, count_per_run=True),
        DeclaredAccess("m[b*cols + blockIdx.x*THREADS + threadIdx.x]", "global", 4,
                       note="the exclusive sums written back", write=True,
                       count=_SCAN_DOWN_ELEMENTS, count_per_run=True)),
        at=(("b", 0),), block=("THREADS",)),
    KernelAccesses("sat_top_scan", ("THREADS", "ITEMS"), (
        DeclaredAccess(f"sums_above[blockIdx.x*cols + {_STAGED}]", "global", 4,
                       note="U[band][k0 + i]: along the band's row (in L2)",
                       count=f"((rows + {TILE_ROWS - 1})/{TILE_ROWS})*cols"),
        *_row_scan_tile(),
        DeclaredAccess(f"sums_above[blockIdx.x*cols + {_STAGED}]", "global", 4,
                       note="top[band][k0 + i], in place", write=True,
                       count=f"((rows + {TILE_ROWS - 1})/{TILE_ROWS})*cols")),
        at=(("k", 0),), block=("THREADS",)),
    KernelAccesses("sat_tile_scan", ("TILE_ROWS", "VEC", "UNROLL"), (
        DeclaredAccess(f"a[({_BAND_OF_TILE}*TILE_ROWS + k)*cols + {_COLUMN}]", "global", 1,
                       note="a[row][c..c+3]: 128 bytes a warp", count=f"rows*{_PER_LANE}"),
        DeclaredAccess(f"top[{_BAND_OF_TILE}*cols + {_COLUMN}]", "global", 4,
                       note="top[band][c..c+3]: the table's row above the band (L2)",
                       count=f"{_BANDS}*{_PER_LANE}"),
        DeclaredAccess(f"rowoff[{_ROW_OFFSET}]", "global", 4,
                       note="rowoff[strip][row]: lane k the offset of row k of every 32 (L2)",
                       count=f"rows*{_STRIPS}"),
        DeclaredAccess(f"out[({_BAND_OF_TILE}*TILE_ROWS + k)*cols + {_COLUMN}]", "global", 4,
                       note="out[row][c..c+3]: 512 bytes a warp", write=True,
                       count=f"rows*{_PER_LANE}")),
        at=(("k", 0),), block=(TILE_WARPS * 32,)),
)

VECTORS = tuple(UNROLL)
KERNELS = KernelSource(Path(__file__).with_name("kernels.cu"), (
    ROWS_NAIVE,
    COLUMNS_NAIVE,
    row_scan_kernel(1),
    row_scan_kernel(4),
    TRANSPOSE,
    *(totals_kernel(vector) for vector in VECTORS),
    SCAN_DOWN,
    TOP_SCAN,
    *(tile_scan_kernel(vector) for vector in VECTORS),
), ACCESSES)


def _shape(a: Any) -> tuple[int, int]:
    rows, cols = a.shape
    if max(rows, cols) >= MAX_SIDE:
        raise LaunchError(f"summed-area kernels index with 32-bit ints: {rows} x {cols} is "
                          "too large")
    return rows, cols


def _sizes(rows: int, cols: int) -> tuple[np.int32, np.int32]:
    return np.int32(rows), np.int32(cols)


def rows_then_columns(inputs: dict, out: Any, machine: Machine) -> Bound:
    """A thread per row scans it (uncoalesced), then a thread per column (coalesced)."""
    a = inputs["a"]
    rows, cols = _shape(a)
    along = Launch(KERNELS, ROWS_NAIVE, grid=(blocks(rows, THREADS),), block=(THREADS,),
                   args=(a, out, *_sizes(rows, cols)), result=out)
    down = Launch(KERNELS, COLUMNS_NAIVE, grid=(blocks(cols, THREADS),), block=(THREADS,),
                  args=(out, *_sizes(rows, cols)), result=out)
    return Bound(in_order(along, down), {"block": [THREADS]})


def _transposition(source: Any, target: Any, rows: int, cols: int) -> Launch:
    """target (cols x rows) = source (rows x cols) transposed."""
    grid = (blocks(cols, TRANSPOSE_TILE), min(blocks(rows, TRANSPOSE_TILE), MAX_GRID_Y))
    return Launch(KERNELS, TRANSPOSE, grid=grid, block=(TRANSPOSE_TILE, TRANSPOSE_ROWS),
                  args=(source, target, *_sizes(rows, cols)), result=target)


def transpose(inputs: dict, out: Any, machine: Machine) -> Bound:
    """Scan the image's rows into out, transpose out into a cols x rows temporary, scan its
    rows (the columns) in place, transpose back into out."""
    import cupy

    a = inputs["a"]
    rows, cols = _shape(a)
    transposed = cupy.empty((cols, rows), cupy.uint32)
    launches = (
        Launch(KERNELS, row_scan_kernel(1), grid=(rows,), block=(THREADS,),
               args=(a, out, *_sizes(rows, cols)), result=out),
        _transposition(out, transposed, rows, cols),
        Launch(KERNELS, row_scan_kernel(4), grid=(cols,), block=(THREADS,),
               args=(transposed, transposed, *_sizes(cols, rows)), result=transposed),
        _transposition(transposed, out, cols, rows),
    )
    return Bound(in_order(*launches),
                 {"block": [THREADS], "row_chunk": THREADS * ROW_SCAN_ITEMS,
                  "tile": [TRANSPOSE_TILE, TRANSPOSE_TILE + 1]})


def vectorizable(a: Any, out: Any) -> bool:
    """4-byte loads of the image and 16-byte stores of the table need every row to start
    aligned: cols a multiple of 4, and aligned arrays."""
    return a.shape[1] % 4 == 0 and a.data.ptr % 4 == 0 and out.data.ptr % 16 == 0


def tiled(inputs: dict, out: Any, vector: int) -> Bound:
    """gpu-coalesced-columns with ``vector`` (1 or 4) bytes per lane load (tests force each)."""
    import cupy

    a = inputs["a"]
    rows, cols = _shape(a)
    bands, strips = blocks(rows, TILE_ROWS), blocks(cols, TILE_COLS)
    # T, then U (the column sums of the bands above), then top (the table's row above each
    # band), in place; R, then rowoff (each row's sum left of each strip), in place.
    sums_above = cupy.empty((bands, cols), cupy.uint32)
    row_offsets = cupy.empty((strips, rows), cupy.uint32)
    grid = (blocks(bands * strips, TILE_WARPS),)
    tile_block = (TILE_WARPS * 32,)
    launches = (
        Launch(KERNELS, totals_kernel(vector), grid=grid, block=tile_block,
               args=(a, sums_above, row_offsets, *_sizes(rows, cols)), result=sums_above),
        Launch(KERNELS, SCAN_DOWN, grid=(blocks(cols, THREADS),), block=(THREADS,),
               args=(sums_above, *_sizes(bands, cols)), result=sums_above),
        Launch(KERNELS, SCAN_DOWN, grid=(blocks(rows, THREADS),), block=(THREADS,),
               args=(row_offsets, *_sizes(strips, rows)), result=row_offsets),
        Launch(KERNELS, TOP_SCAN, grid=(bands,), block=(THREADS,),
               args=(sums_above, *_sizes(bands, cols)), result=sums_above),
        Launch(KERNELS, tile_scan_kernel(vector), grid=grid, block=tile_block,
               args=(a, sums_above, row_offsets, out, *_sizes(rows, cols)), result=out),
    )
    return Bound(in_order(*launches),
                 {"tile": [TILE_ROWS, TILE_COLS], "vector": vector, "unroll": UNROLL[vector],
                  "block": list(tile_block), "tiles": bands * strips})


def coalesced_columns(inputs: dict, out: Any, machine: Machine) -> Bound:
    return tiled(inputs, out, 4 if vectorizable(inputs["a"], out) else 1)


def library(inputs: dict, out: Any, machine: Machine) -> Bound:
    import cupy

    a = inputs["a"]
    down = cupy.empty(out.shape, cupy.uint32)

    def run() -> Any:
        # The golden's two cumsums, into preallocated arrays (no allocation timed).
        cupy.cumsum(a, axis=0, dtype=cupy.uint32, out=down)
        cupy.cumsum(down, axis=1, dtype=cupy.uint32, out=out)
        return out

    return Bound(run, {"routine": "cupy.cumsum x 2"})
