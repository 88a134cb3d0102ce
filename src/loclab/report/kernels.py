"""The kernels behind each GPU row: occupancy from the compiled kernel (registers, shared
memory, block size; a mismatch with CUDA's own answer is shown), and, for the main accesses
a case declares, the predicted 32-byte sectors per warp request (global) and bank-conflict
degree (shared), loads and stores in the order the kernel makes them."""

from __future__ import annotations

from loclab.report.text import Column, Row, Table

LIMITS = {"warps": "warps", "blocks": "blks", "registers": "regs", "shared_memory": "smem"}


def kernel_entries(rows: list[Row]) -> list[Row]:
    """One line per kernel of each row, with the row's variant and validity. The occupancy
    column names the resource that limits it (regs, smem, warps or blks: block slots)."""
    return [{**kernel, "variant": row["variant"], "valid": True}
            for row in rows for kernel in row.get("kernels") or [] if not kernel.get("error")]


def disagreements(rows: list[Row]) -> list[str]:
    """Kernels whose predicted blocks per SM differ from CUDA's own answer (the tests on a GPU
    say there are none; a GPU the table does not describe right would show here)."""
    return [f"{k['variant']} {k['kernel']}: the occupancy model gives {k['blocks_per_sm']} "
            f"blocks an SM, CUDA {k['cuda_blocks_per_sm']}" for k in kernel_entries(rows)
            if k["cuda_blocks_per_sm"] != k["blocks_per_sm"]]


def _predicted(kernel: Row, space: str, key: str) -> str:
    values = [str(access[key]) for access in kernel.get("accesses", [])
              if access["space"] == space and not access.get("error")]
    return ",".join(values) or "-"


KERNEL_COLUMNS = [
    Column("variant", lambda k: k["variant"], numeric=False),
    Column("kernel", lambda k: k["kernel"].partition("<")[0], numeric=False),
    Column("block", lambda k: "x".join(str(side) for side in k["block"]), numeric=False),
    Column("regs/smem B",
           lambda k: f"{k['registers']}/{k['static_shared'] + k['dynamic_shared']}"),
    Column("occupancy", lambda k: f"{k['occupancy']:.2f} {LIMITS[k['limited_by']]}",
           numeric=False),
    Column("sectors per req", lambda k: _predicted(k, "global", "sectors_per_request")),
    Column("bank ways", lambda k: _predicted(k, "shared", "conflict_degree")),
]


def kernel_table(rows: list[Row]) -> Table | None:
    """The kernels of ``rows`` (one device and size of a case), or None where none ran."""
    kernels = kernel_entries(rows)
    return Table.of(kernels, KERNEL_COLUMNS) if kernels else None


def kernel_note() -> str:
    return ("occupancy from each compiled kernel's registers, shared memory and block; "
            "sectors per warp request and bank-conflict ways predicted for its main accesses "
            "(loclab model)")

