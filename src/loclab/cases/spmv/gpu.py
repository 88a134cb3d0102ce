"""GPU variants of the sparse matrix-vector product: CUDA C in kernels.cu, launched through
CuPy, and cuSPARSE through cupyx.scipy.sparse.

The searches that place tiles on rows (which rows a tile of nonzeros spans; where a tile of
merge items starts on the merge path) run in every run, in kernels of their own: they depend
on the matrix, and a run computes the product of a matrix it has not seen.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from loclab.cases.base import Bound, Dims
from loclab.gpu.kernels import KernelAccesses, KernelSource, Launch, blocks, source_for, zeroed
from loclab.gpu.limits import SHARED_WITHOUT_OPT_IN, refuse, threads_fit
from loclab.hw import Machine
from loclab.measure.space import Config, Space
from loclab.model.access import DeclaredAccess

WARP = 32
THREADS = 256  # gpu-row-per-thread's block; spmv_grouped's too (kernels.cu GROUPED_THREADS)
GROUPS = (1, 2, 4, 8, 16, 32)  # lanes per row of gpu-warp-per-row
SEARCH_THREADS = 256  # the search and fix-up kernels: a thread per tile
# gpu-segmented-scan: tiles of 256 x 7 nonzeros (ITEMS odd: blocked reads without bank
# conflicts). gpu-merge-path: tiles of 256 x 5 merge items. On an H100 at the default sizes
# (an earlier form of the kernel, one walk per thread) every tile shape of 128 to 512 threads
# and 3 to 11 items took 630 to 662 us (256 x 5: 636 us on both kinds; 128 x 7, CUB's choice
# for float: 641 and 645): the gathers of x from L2 bound them all, and cuSPARSE too.
SCAN_THREADS, SCAN_ITEMS = 256, 7
MERGE_THREADS, MERGE_ITEMS = 256, 5
SCAN_TILE, MERGE_TILE = SCAN_THREADS * SCAN_ITEMS, MERGE_THREADS * MERGE_ITEMS
MERGE_SPACE = {"threads": (64, 128, 256, 512), "items": (3, 5, 7, 9, 11)}

ROW_PER_THREAD = f"spmv_row_per_thread<{THREADS}>"
TILE_ROWS = f"spmv_tile_rows<{SCAN_TILE}>"
SEGMENTED_SCAN = f"spmv_segmented_scan<{SCAN_THREADS},{SCAN_ITEMS}>"


def grouped_kernel(group: int) -> str:
    return f"spmv_grouped<{group}>"


def merge_kernels(threads: int, items: int) -> tuple[str, str, str]:
    """gpu-merge-path's tile search, tile and fix-up kernels for tiles of threads x items."""
    tile = threads * items
    return (f"spmv_merge_tiles<{tile}>", f"spmv_merge_path<{threads},{items}>",
            f"spmv_merge_fixup<{tile}>")


# The kernels' main accesses at the first step of their loops (k, u = 0). Where a row or a
# tile starts depends on the matrix: a row's nonzeros are modelled as starting nnz/rows (the
# mean row length) after the previous row's, a tile's first row or nonzero at 1 (unaligned:
# `first`), the rows a thread completes as spread evenly over its share of the items. The gather
# x[indices[j]] hits a random column: a sector per lane, modelled as stride 8 (as histogram's
# random bins), cols distinct entries (served from L2 where x fits). A binary search's probes
# are data-dependent: only its last (consecutive tiles, a tile's span of rows apart) is counted.
_GATHER = DeclaredAccess("x[threadIdx.x*8]", "global", 4, note="x[indices[j]]: a random "
                         "column, a sector per lane (modelled as stride 8)", count="nnz",
                         footprint="cols")
_ROW = "(blockIdx.x*THREADS + threadIdx.x)"  # a thread's row (row per thread)
_GROUP_ROW = f"(blockIdx.x*{THREADS} + threadIdx.x)/G"  # a group's row (lanes per row)
_MEAN_ROW = "(nnz/rows)"
_STRIPED = "first + k*THREADS + threadIdx.x"  # element k of a thread in a tile's stripes
_SEARCH = f"(blockIdx.x*{SEARCH_THREADS} + threadIdx.x)"  # a thread per tile
_SCAN_TILES = "(nnz + TILE - 1)/TILE"
_MERGE_TILES = "(rows + nnz + TILE - 1)/TILE"
ACCESSES = (
    KernelAccesses("spmv_row_per_thread", ("THREADS",), (
        DeclaredAccess(f"indptr[{_ROW} + 1]", "global", 4, note="each row's end (its start, "
                       "the previous row's end, is in the same sectors)", count="rows"),
        DeclaredAccess(f"data[{_ROW}*{_MEAN_ROW} + k]", "global", 4, note="the k-th value of "
                       "each lane's row: rows apart (uncoalesced)", count="nnz"),
        DeclaredAccess(f"indices[{_ROW}*{_MEAN_ROW} + k]", "global", 4,
                       note="the k-th column, as the values", count="nnz"),
        _GATHER,
        DeclaredAccess(f"y[{_ROW}]", "global", 4, note="y[row]", write=True, count="rows")),
        at=(("k", 0),), block=("THREADS",)),
    KernelAccesses("spmv_grouped", ("G",), (
        DeclaredAccess(f"indptr[{_GROUP_ROW} + 1]", "global", 4, note="every lane reads its "
                       "row's start and end", count="rows*G"),
        DeclaredAccess(f"data[{_GROUP_ROW}*{_MEAN_ROW} + threadIdx.x % G + u*G]", "global", 4,
                       note="G lanes along a row (coalesced)", count="nnz"),
        DeclaredAccess(f"indices[{_GROUP_ROW}*{_MEAN_ROW} + threadIdx.x % G + u*G]", "global",
                       4, note="the columns, as the values", count="nnz"),
        _GATHER,
        DeclaredAccess(f"y[{_GROUP_ROW}]", "global", 4, note="y[row]: lane 0 of each group",
                       write=True, count="rows")),
        at=(("u", 0),), block=(THREADS,)),
    KernelAccesses("spmv_tile_rows", ("TILE",), (
        DeclaredAccess(f"indptr[{_SEARCH}*TILE*rows/nnz]", "global", 4, note="the last probe "
                       "of a tile's two binary searches (about log2(rows) probes each)",
                       count=f"2*{_SCAN_TILES}"),
        DeclaredAccess(f"first_row[{_SEARCH}]", "global", 4, note="the row of the tile's first "
                       "nonzero", write=True, count=_SCAN_TILES),
        DeclaredAccess(f"last_row[{_SEARCH}]", "global", 4, note="the row of its last",
                       write=True, count=_SCAN_TILES)),
        block=(SEARCH_THREADS,)),
    KernelAccesses("spmv_segmented_scan", ("THREADS", "ITEMS"), (
        DeclaredAccess("data[blockIdx.x*THREADS*ITEMS + k*THREADS + threadIdx.x]", "global", 4,
                       note="the tile's values, striped (coalesced)", count="nnz"),
        DeclaredAccess("indices[blockIdx.x*THREADS*ITEMS + k*THREADS + threadIdx.x]",
                       "global", 4, note="the tile's columns, striped", count="nnz"),
        _GATHER,
        DeclaredAccess("products[k*THREADS + threadIdx.x]", "shared", 4, ("THREADS*ITEMS",),
                       note="products stored striped", write=True),
        DeclaredAccess("products[threadIdx.x*ITEMS + k]", "shared", 4, ("THREADS*ITEMS",),
                       note="read blocked: a thread's ITEMS consecutive products (twice)"),
        DeclaredAccess("indptr[first + threadIdx.x]", "global", 4, note="the starts of the "
                       "tile's rows, for the head flags (first: the tile's first row)",
                       count="rows"),
        DeclaredAccess("y[first + threadIdx.x*ITEMS*rows/nnz]", "global", 4, note="row totals "
                       "at row ends (stores; atomicAdd at the tile's edges)", write=True,
                       count="rows")),
        at=(("k", 0), ("first", 1)), block=("THREADS",)),
    KernelAccesses("spmv_merge_tiles", ("TILE",), (
        DeclaredAccess(f"indptr[{_SEARCH}*TILE*rows/(rows + nnz) + 1]", "global", 4,
                       note="the last probe of a tile's merge-path search (about log2(rows) "
                       "probes)", count=f"{_MERGE_TILES} + 1"),
        DeclaredAccess(f"tile_row[{_SEARCH}]", "global", 4, note="the rows before the tile's "
                       "first item", write=True, count=f"{_MERGE_TILES} + 1")),
        block=(SEARCH_THREADS,)),
    KernelAccesses("spmv_merge_path", ("THREADS", "ITEMS"), (
        DeclaredAccess(f"indptr[{_STRIPED}]", "global", 4, note="the tile's row ends, striped "
                       "(from row0 + 1)", count="rows"),
        DeclaredAccess(f"data[{_STRIPED}]", "global", 4, note="the tile's values, striped "
                       "(from nz0)", count="nnz"),
        DeclaredAccess(f"indices[{_STRIPED}]", "global", 4, note="the tile's columns",
                       count="nnz"),
        _GATHER,
        DeclaredAccess("products[k*THREADS + threadIdx.x]", "shared", 4, ("THREADS*ITEMS",),
                       note="products stored striped", write=True),
        DeclaredAccess("products[threadIdx.x*ITEMS*nnz/(rows + nnz) + k]", "shared", 4,
                       ("THREADS*ITEMS",), note="a thread's nonzeros: its share of the items "
                       "that are nonzeros"),
        DeclaredAccess("y[first + threadIdx.x*ITEMS*rows/(rows + nnz)]", "global", 4,
                       note="the rows each thread completes", write=True, count="rows")),
        at=(("k", 0), ("first", 1)), block=("THREADS",)),
    KernelAccesses("spmv_merge_fixup", ("TILE",), (
        DeclaredAccess(f"carry_row[{_SEARCH}]", "global", 4, note="each tile's carry row",
                       count=_MERGE_TILES),
        DeclaredAccess(f"carry_sum[{_SEARCH}]", "global", 4, note="and partial sum",
                       count=_MERGE_TILES),
        DeclaredAccess(f"y[{_SEARCH}*TILE*rows/(rows + nnz)]", "global", 4, note="atomicAdd "
                       "into the carry rows (a tile's span of rows apart)", write=True,
                       count=_MERGE_TILES)),
        block=(SEARCH_THREADS,)),
)

KERNELS = KernelSource(Path(__file__).with_name("kernels.cu"), (
    ROW_PER_THREAD,
    *(grouped_kernel(group) for group in GROUPS),
    TILE_ROWS,
    SEGMENTED_SCAN,
    *merge_kernels(MERGE_THREADS, MERGE_ITEMS),
), ACCESSES)


def lanes_per_row(rows: int, nnz: int) -> int:
    """Lanes per row of gpu-warp-per-row: the smallest power of two at least the mean row
    length (each lane about one nonzero of a mean row), at most a warp."""
    mean = -(-nnz // rows)
    return min(WARP, 1 << (mean - 1).bit_length())


def _csr(inputs: dict) -> tuple[Any, ...]:
    return inputs["data"], inputs["indices"], inputs["indptr"], inputs["x"]


def row_per_thread(inputs: dict, out: Any, machine: Machine) -> Bound:
    rows = out.size
    launch = Launch(KERNELS, ROW_PER_THREAD, grid=(blocks(rows, THREADS),), block=(THREADS,),
                    args=(*_csr(inputs), out, np.int32(rows)), result=out)
    return Bound(launch, {"block": [THREADS], "grid": list(launch.grid)})


def warp_per_row(inputs: dict, out: Any, machine: Machine) -> Bound:
    rows = out.size
    group = lanes_per_row(rows, inputs["data"].size)
    launch = Launch(KERNELS, grouped_kernel(group), grid=(blocks(rows, THREADS // group),),
                    block=(THREADS,), args=(*_csr(inputs), out, np.int32(rows)), result=out)
    return Bound(launch, {"lanes_per_row": group, "block": [THREADS],
                          "grid": list(launch.grid)})


def segmented_scan(inputs: dict, out: Any, machine: Machine) -> Bound:
    """y zeroed, the tiles' first and last rows searched, then one block per tile of
    SCAN_TILE nonzeros."""
    import cupy

    rows, nnz = out.size, inputs["data"].size
    tiles = blocks(nnz, SCAN_TILE)
    first_row = cupy.empty(tiles, cupy.int32)
    last_row = cupy.empty(tiles, cupy.int32)
    search = Launch(KERNELS, TILE_ROWS, grid=(blocks(tiles, SEARCH_THREADS),),
                    block=(SEARCH_THREADS,), args=(inputs["indptr"], np.int32(rows),
                                                   np.int32(nnz), first_row, last_row),
                    result=first_row)
    scan = Launch(KERNELS, SEGMENTED_SCAN, grid=(tiles,), block=(SCAN_THREADS,),
                  args=(*_csr(inputs), out, first_row, last_row, np.int32(nnz)), result=out)

    def run() -> Any:
        zeroed(out)
        search()
        return scan()

    return Bound(run, {"block": [SCAN_THREADS], "items": SCAN_ITEMS, "tiles": tiles})


def merge_restriction(config: Config, dims: Dims, machine: Machine) -> str | None:
    """A tile's row ends and products (8 bytes an item) in static shared memory."""
    threads, items = config["threads"], config["items"]
    if reason := threads_fit(threads, machine.gpu):
        return reason
    if 8 * threads * items + 4 > SHARED_WITHOUT_OPT_IN:
        return (f"a tile of {threads} x {items} items exceeds {SHARED_WITHOUT_OPT_IN} bytes of "
                f"static shared memory")
    return None


def merge_space(machine: Machine) -> Space:
    return Space(MERGE_SPACE, {"threads": MERGE_THREADS, "items": MERGE_ITEMS},
                 merge_restriction)


def merge_path(inputs: dict, out: Any, machine: Machine, threads: int = MERGE_THREADS,
               items: int = MERGE_ITEMS) -> Bound:
    """The tiles' places on the merge path searched, one block per tile of threads x items
    merge items, then the tiles' carries added."""
    import cupy

    refuse(merge_restriction({"threads": threads, "items": items}, {}, machine))
    rows, nnz = out.size, inputs["data"].size
    tiles = blocks(rows + nnz, threads * items)
    tile_row = cupy.empty(tiles + 1, cupy.int32)
    carry_row = cupy.empty(tiles, cupy.int32)
    carry_sum = cupy.empty(tiles, cupy.float32)
    sizes = (np.int32(rows), np.int32(nnz))
    search_name, merge_name, fixup_name = merge_kernels(threads, items)
    search = Launch(source_for(KERNELS, search_name), search_name,
                    grid=(blocks(tiles + 1, SEARCH_THREADS),), block=(SEARCH_THREADS,),
                    args=(inputs["indptr"], *sizes, tile_row), result=tile_row)
    merge = Launch(source_for(KERNELS, merge_name), merge_name, grid=(tiles,), block=(threads,),
                   args=(*_csr(inputs), out, tile_row, carry_row, carry_sum, *sizes),
                   result=out)
    fixup = Launch(source_for(KERNELS, fixup_name), fixup_name,
                   grid=(blocks(tiles, SEARCH_THREADS),), block=(SEARCH_THREADS,),
                   args=(carry_row, carry_sum, *sizes, out), result=out)

    def run() -> Any:
        search()
        merge()
        return fixup()

    return Bound(run, {"threads": threads, "items": items, "tiles": tiles})


def library(inputs: dict, out: Any, machine: Machine) -> Bound:
    """cuSPARSE's SpMV through cupyx (a new y each call). The matrix wraps the staged arrays
    (no copy); whether its columns are sorted and distinct is checked here, once, where
    ``@`` would otherwise check it in the first timed run."""
    import cupyx.scipy.sparse

    matrix = cupyx.scipy.sparse.csr_matrix(
        (inputs["data"], inputs["indices"], inputs["indptr"]),
        shape=(out.size, inputs["x"].size))
    x = inputs["x"]
    return Bound(lambda: matrix @ x, {"canonical": bool(matrix.has_canonical_format)})
