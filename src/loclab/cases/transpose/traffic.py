"""Transposition's memory traffic by the cache model (:mod:`loclab.model.loop_traffic`): the
CPU variants' loop orders as C nests, traced through the LLC share. ``cpu-naive`` writes a
column of ``out`` per row of ``a``: its lines stay until their next 15 elements come only if
the cache holds a column of lines (and their sets are not all the same: a power-of-two row
length maps them onto few sets); ``cpu-blocked`` moves tiles, whose lines are reused at once."""

from __future__ import annotations

from typing import Any

from loclab.hw import Machine
from loclab.model.loop_traffic import loop_traffic
from loclab.model.time import Traffic

NAIVE = """
void naive(int rows, int cols, int first, float A[rows][cols], float B[cols][rows]) {
    for (int i = 0; i < first; i++)
        for (int j = 0; j < cols; j++)
            B[j][i] = A[i][j];
}
"""
# The outer tiles (outer x outer) in row-major tile order, inner tiles in them, the innermost
# loop down a column of a (along a row of out), as transpose_blocked runs them.
BLOCKED = """
void blocked(int rows, int cols, int first, int across, int outer, int inners, int inner,
             float A[rows][cols], float B[cols][rows]) {
    for (int ti = 0; ti < first; ti++)
        for (int tj = 0; tj < across; tj++)
            for (int ii = 0; ii < inners; ii++)
                for (int jj = 0; jj < inners; jj++)
                    for (int j = 0; j < inner; j++)
                        for (int i = 0; i < inner; i++)
                            if (ti * outer + ii * inner + i < rows &&
                                tj * outer + jj * inner + j < cols)
                                B[tj * outer + jj * inner + j][ti * outer + ii * inner + i] =
                                    A[ti * outer + ii * inner + i][tj * outer + jj * inner + j];
}
"""


def naive(dims: dict[str, int], machine: Machine, params: dict[str, Any]) -> Traffic:
    rows, cols = dims["rows"], dims["cols"]
    return loop_traffic(NAIVE, {"rows": rows, "cols": cols}, rows, 2 * cols,
                        machine.cpu.llc_share_bytes, what="a row of a to a column of out")


def blocked(dims: dict[str, int], machine: Machine, params: dict[str, Any]) -> Traffic:
    rows, cols = dims["rows"], dims["cols"]
    outer, inner = params["outer_tile"], params["inner_tile"]
    across = -(-cols // outer)
    values = {"rows": rows, "cols": cols, "across": across, "outer": outer,
              "inners": -(-outer // inner), "inner": inner}
    return loop_traffic(BLOCKED, values, -(-rows // outer), 2 * across * outer * outer,
                        machine.cpu.llc_share_bytes,
                        what=f"{outer}x{outer} tiles of {inner}x{inner} tiles")
