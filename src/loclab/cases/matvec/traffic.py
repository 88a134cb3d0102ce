"""The matrix-vector product's memory traffic by the cache model
(:mod:`loclab.model.loop_traffic`): a row of the matrix against all of x per row, as
``cpu-rows`` (and a BLAS gemv) run it; x stays in the cache when it fits, else every row
fetches it again. ``cpu-split`` walks column blocks of x sized for L2: at the last level the
same bytes, plus its partial sums written and read once."""

from __future__ import annotations

from typing import Any

from loclab.hw import Machine
from loclab.model.loop_traffic import loop_traffic
from loclab.model.time import Traffic

ROWS = """
void rows(int rows, int cols, int first, float A[rows][cols], float x[cols], float y[rows]) {
    for (int i = 0; i < first; i++) {
        float acc = 0;
        for (int k = 0; k < cols; k++)
            acc += A[i][k] * x[k];
        y[i] = acc;
    }
}
"""


def by_rows(dims: dict[str, int], machine: Machine, params: dict[str, Any]) -> Traffic:
    rows, cols = dims["rows"], dims["cols"]
    return loop_traffic(ROWS, {"rows": rows, "cols": cols}, rows, 2 * cols + 1,
                        machine.cpu.llc_share_bytes, what="a row of A and x per row")


def split(dims: dict[str, int], machine: Machine, params: dict[str, Any]) -> Traffic:
    traffic = by_rows(dims, machine, params)
    column_blocks = params.get("col_blocks", 1)
    if column_blocks <= 1:
        return traffic
    return Traffic(traffic.bytes + 2 * 4 * dims["rows"] * column_blocks,
                   f"{traffic.model}, plus {column_blocks} partial sums a row")
