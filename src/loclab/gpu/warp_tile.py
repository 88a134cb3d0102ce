"""The host side of ``gpu/warp_tile.cuh`` (``loclab::WarpTile``), shared by the cases whose
kernels compute a matrix product's tile with it (mmm's and bmmm's gpu-optimized): the warp
tile a configuration makes, and a lane's place in the block tile as the access texts that
declare its shared-memory reads and its stores."""

from __future__ import annotations

WARP = 32

# A lane's first row and column in the block tile (WarpTile::row and ::col), in the template's
# names BN, WM, WN, TN: warps tile the block row by row, lanes their warp tile.
LANE_ROW = "(threadIdx.x/32)/(BN/WN)*WM + (threadIdx.x % 32)/(WN/TN)*4"
LANE_COL = "(threadIdx.x/32) % (BN/WN)*WN + (threadIdx.x % 32) % (WN/TN)*4"


def warp_tile(lanes_m: int, tm: int, tn: int) -> tuple[int, int]:
    """(WM, WN): a warp's 32 lanes as lanes_m x (32 / lanes_m), each lane tm x tn.
    Parametrizing by lanes_m (not by WM and WN) keeps every configuration 32 lanes, so that a
    local search's one-parameter steps stay mostly legal."""
    return lanes_m * tm, WARP // lanes_m * tn


def block_threads(bm: int, bn: int, lanes_m: int, tm: int, tn: int) -> int:
    """A block's threads: a warp per WM x WN warp tile of the bm x bn block tile."""
    wm, wn = warp_tile(lanes_m, tm, tn)
    return (bm // wm) * (bn // wn) * WARP
