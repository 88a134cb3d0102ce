"""Products of 4-byte floats as warp tiles: a register-tiled kernel whose staged loop
accumulates ``acc[i, j] += f(i, k) * g(k, j)`` lays each thread's iterations out in groups
of four consecutive rows and columns, so that a strip's values come from shared memory as
16-byte vectors (one ``ld.shared.v4`` for four iterations' factors) instead of one load
per value.

Why: with one iteration ``R`` threads apart (the plain layout), a thread's ``T`` x ``T``
tile loads ``2 T`` scalars per ``T^2`` multiply-adds at every step of the strip; a 4-byte
load serves a warp at the rate of one instruction a cycle per SM, four times slower than
the FMA pipes, so an 8 x 8 tile spends a shared-memory cycle per four FMA cycles and stays
near half of cuBLAS (the auto kernel of MMM at 4096^3 on an H200: 52.6-56.5%). In groups of
four, the same tile takes ``2 T / 4`` vector loads, and a warp whose lanes are a
``32 / lanes_x`` x ``lanes_x`` patch reads at most eight distinct 16-byte groups a load
(one wavefront; lanes of the same row or column group read the same address). This is the
layout of the hand-written kernel's ``loclab::WarpTile`` (``gpu/warp_tile.cuh``).

How. A block's ``BM`` x ``BN`` iterations of the grid loops on y and x are split into warp
tiles of ``WM = lanes_y * TM`` x ``WN = lanes_x * TN`` (``TM`` x ``TN`` a thread, both
multiples of 4); lane ``l`` of warp ``w`` holds rows ``(w / warps_x) WM + (l / lanes_x) 4 +
(r / 4) lanes_y 4 + r % 4`` and the matching columns. Like ``cuda.mma``'s fragments, it is
only a bijection of the block's iterations to its threads: every statement still runs per
iteration, guarded as before. A tile read along the y loop is stored transposed (the
staged loop first), its rows padded to 4 (mod 32) elements so that rows stay 16-byte
aligned and a warp's 4-byte copies into it (8 steps x 4 rows) hit 32 banks.
"""

from __future__ import annotations

from dataclasses import dataclass

from loclab.optimize.cuda.mapping import WARP, Config, NestMapping, planar

VECTOR = 4  # a group: the elements of one 16-byte load of 4-byte values
COMPONENTS = "xyzw"  # a float4's fields, by place in its group
# The lane's place, from the block's flat thread index ``tid``: its warp and its lane.
LANE_NAMES = ("wt_warp", "wt_lane")


@dataclass(frozen=True)
class WarpLayout:
    """``rows`` of the y loop and ``columns`` of the x loop a thread (multiples of 4),
    ``lanes_x`` lanes of a warp along x, ``warps_x`` warps side by side along x. Each
    method gives an offset in the block's span as C text."""

    rows: int
    columns: int
    lanes_x: int
    warps_x: int

    @property
    def lanes_y(self) -> int:
        return WARP // self.lanes_x

    def row(self, r: int) -> str:
        warp, lane = LANE_NAMES
        return (f"({warp} / {self.warps_x}) * {self.lanes_y * self.rows} + "
                f"({lane} / {self.lanes_x}) * {VECTOR} + {self.row_step(r)}")

    def column(self, c: int) -> str:
        warp, lane = LANE_NAMES
        return (f"({warp} % {self.warps_x}) * {self.lanes_x * self.columns} + "
                f"({lane} % {self.lanes_x}) * {VECTOR} + {self.column_step(c)}")

    def row_step(self, r: int) -> int:
        """How far the thread's ``r``-th row is from its first."""
        return (r // VECTOR) * self.lanes_y * VECTOR + r % VECTOR

    def column_step(self, c: int) -> int:
        """How far the thread's ``c``-th column is from its first."""
        return (c // VECTOR) * self.lanes_x * VECTOR + c % VECTOR


def warp_layout_for(mapping: NestMapping, config: Config) -> WarpLayout | None:
    """The warp tiles' layout for ``config``, where it has one: warp tiles asked for, tiles
    staged, no loop split across threads, grid loops on x and y with register tiles a
    multiple of 4 each, whole warps of 4 x 8 or 8 x 4 lanes tiling the block (4 along x
    preferred: a lane's column groups then fill a 64-byte half of a bank row, its row
    groups a whole one), and any third grid loop one iteration a block."""
    axes = planar(mapping, config) if config.warp_tiles else None
    if axes is None:
        return None
    x, y = axes
    if config.tile[x] % VECTOR or config.tile[y] % VECTOR:
        return None
    for lanes_x in (4, 8):
        if config.block[x] % lanes_x == 0 and config.block[y] % (WARP // lanes_x) == 0:
            return WarpLayout(config.tile[y], config.tile[x], lanes_x,
                              config.block[x] // lanes_x)
    return None


def vector_pad(extent: int) -> int:
    """Elements added to a vector-read tile's rows: rows 4 (mod 32) elements long, so that
    every row starts 16-byte aligned and 8 rows' first elements fall in distinct banks."""
    return (VECTOR - extent) % 32
