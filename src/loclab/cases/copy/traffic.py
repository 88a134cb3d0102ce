"""The copy's memory traffic by the cache model (:mod:`loclab.model.loop_traffic`): a
row-major read and write, each written line first allocated (read) then written back. The
same nest measures the copy roof in the model's bytes, so that every CPU prediction divides
model bytes by model bytes a second."""

from __future__ import annotations

from typing import Any

from loclab.hw import Machine
from loclab.model.loop_traffic import loop_traffic
from loclab.model.time import Traffic

COPY = """
void copy(int rows, int cols, int first, float A[rows][cols], float B[rows][cols]) {
    for (int i = 0; i < first; i++)
        for (int j = 0; j < cols; j++)
            B[i][j] = A[i][j];
}
"""


def copy(dims: dict[str, int], machine: Machine, params: dict[str, Any]) -> Traffic:
    rows, cols = dims["rows"], dims["cols"]
    return loop_traffic(COPY, {"rows": rows, "cols": cols}, rows, 2 * cols,
                        machine.cpu.llc_share_bytes, what="row-major copy")
