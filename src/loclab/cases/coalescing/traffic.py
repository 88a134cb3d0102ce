"""The row program's memory traffic by the cache model (:mod:`loclab.model.loop_traffic`):
``cpu-rows`` walks each row of a and b once, as a copy does; ``cpu-transposed`` transposes a
(blocked), walks the transposed arrays a chunk of rows at a time, and transposes the result
back: three passes over the data."""

from __future__ import annotations

from typing import Any

from loclab.cases.copy import traffic as copy_traffic
from loclab.cases.transpose import traffic as transpose_traffic
from loclab.hw import Machine
from loclab.model.loop_traffic import loop_traffic
from loclab.model.time import Traffic

# columns_program: for a chunk of rows (columns of the transposed arrays), every column step.
COLUMNS = """
void columns(int rows, int cols, int first, int chunk, float At[cols][rows],
             float Bt[cols][rows]) {
    for (int t = 0; t < first; t++)
        for (int j = 0; j < cols; j++)
            for (int i = 0; i < chunk; i++)
                if (t * chunk + i < rows)
                    Bt[j][t * chunk + i] = At[j][t * chunk + i];
}
"""


def rows(dims: dict[str, int], machine: Machine, params: dict[str, Any]) -> Traffic:
    return copy_traffic.copy(dims, machine, params)


def transposed(dims: dict[str, int], machine: Machine, params: dict[str, Any]) -> Traffic:
    rows_, cols = dims["rows"], dims["cols"]
    chunk = params["row_chunk"]
    there = transpose_traffic.blocked(dims, machine, params)
    back = transpose_traffic.blocked({"rows": cols, "cols": rows_}, machine, params)
    walk = loop_traffic(COLUMNS, {"rows": rows_, "cols": cols, "chunk": chunk},
                        -(-rows_ // chunk), 2 * cols * chunk, machine.cpu.llc_share_bytes,
                        what=f"columns in chunks of {chunk} rows")
    return Traffic(there.bytes + walk.bytes + back.bytes,
                   f"{there.model}; {walk.model}; and back")
