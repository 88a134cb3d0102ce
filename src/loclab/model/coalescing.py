"""How many 32-byte sectors one warp's request of a global access moves: coalescing.

The lectures' rule is that the memory system serves a warp's 32 loads (or stores) together,
in 32-byte sectors of 128-byte lines: 32 consecutive floats need 4 sectors, the same floats
read down a column need 32 (one per thread, 28 of every 32 bytes wasted). This model computes
exactly that from the access text and the block shape, for every warp of one block, so a
kernel's design can be judged before it runs and put beside Nsight Compute's sectors per
request (``l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum / ..._requests``) after.

Assumed, and reported in ``assumed``: the array starts 256-byte aligned (as ``cudaMalloc``
gives), each thread touches ``elem_bytes`` bytes at ``index * elem_bytes``, and a block index
not given is 0. Since elements are aligned to their size and every size divides 32, a
thread's element never straddles a sector: a thread touches exactly one sector and one line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from loclab.model.text import wrap_all
from loclab.model.access import (ELEM_NAMES, WARP, Block, Params, check_elem_bytes,
                                 describe_block, distinct_rows, plural, resolve)

SECTOR = 32
LINE = 128
ALIGNMENT = "arrays start 256-byte aligned (as cudaMalloc gives)"


@dataclass(frozen=True)
class WarpRequest:
    """One warp's request: what it touches, what it needs."""

    warp: int
    first_thread: int
    threads: int
    sectors: int
    lines: int
    used_bytes: int  # distinct bytes the warp's threads need

    @property
    def moved_bytes(self) -> int:
        return self.sectors * SECTOR

    @property
    def ideal_sectors(self) -> int:
        """The sectors a perfectly coalesced access of the same bytes would need."""
        return math.ceil(self.used_bytes / SECTOR)

    def to_json(self) -> dict[str, int | float]:
        return {"warp": self.warp, "threads": self.threads, "sectors": self.sectors,
                "lines": self.lines, "used_bytes": self.used_bytes,
                "moved_bytes": self.moved_bytes, "efficiency": self.used_bytes / self.moved_bytes}


@dataclass(frozen=True)
class Coalescing:
    """The prediction for one block; the block's worst warp is what a kernel pays per request."""

    access: str
    block: Block
    elem_bytes: int
    params: dict[str, int]
    shape: tuple[int, ...] | None
    assumed: tuple[str, ...]
    warps: tuple[WarpRequest, ...]

    @property
    def worst(self) -> WarpRequest:
        return max(self.warps, key=lambda w: w.sectors)

    @property
    def sectors_per_request(self) -> int:
        return self.worst.sectors

    @property
    def mean_sectors_per_request(self) -> float:
        return sum(w.sectors for w in self.warps) / len(self.warps)

    @property
    def lines_per_request(self) -> int:
        return max(w.lines for w in self.warps)

    @property
    def ideal_sectors_per_request(self) -> int:
        return max(w.ideal_sectors for w in self.warps)

    @property
    def efficiency(self) -> float:
        """Bytes needed over bytes moved, over the whole block."""
        return sum(w.used_bytes for w in self.warps) / sum(w.moved_bytes for w in self.warps)

    def to_json(self) -> dict[str, Any]:
        return {"access": self.access, "block": list(self.block), "elem_bytes": self.elem_bytes,
                "params": dict(self.params),
                "shape": None if self.shape is None else list(self.shape),
                "sectors_per_request": self.sectors_per_request,
                "mean_sectors_per_request": self.mean_sectors_per_request,
                "lines_per_request": self.lines_per_request, "efficiency": self.efficiency,
                "ideal_sectors_per_request": self.ideal_sectors_per_request,
                "warps": [w.to_json() for w in self.warps], "assumed": list(self.assumed)}

    def lines(self) -> list[str]:
        """The explanation the slides give, at most 80 columns a line."""
        worst = self.worst
        last = worst.first_thread + worst.threads - 1
        lines_text = ("one 128-byte line" if worst.lines == 1
                      else f"{worst.lines} different 128-byte lines")
        params = ", ".join(f"{k}={v}" for k, v in self.params.items())
        paragraphs = [
            f"global {self.access}",
            f"{self.elem_bytes}-byte elements ({ELEM_NAMES[self.elem_bytes]}), "
            f"{describe_block(self.block)}" + (f", {params}" if params else ""),
            f"warp {worst.warp} (threads {worst.first_thread}-{last}): its {worst.threads} "
            f"threads touch {lines_text}: {plural(worst.sectors, 'sector')} for {worst.used_bytes} "
            f"useful bytes ({worst.used_bytes / worst.moved_bytes:.1%}); "
            f"perfectly coalesced: {worst.ideal_sectors}",
            f"per request: {plural(self.sectors_per_request, 'sector')} at most, "
            f"{self.mean_sectors_per_request:.1f} on average; "
            f"{self.efficiency:.1%} of the moved bytes are used",
            "assumed: " + "; ".join(self.assumed),
        ]
        return wrap_all(paragraphs)


def coalescing(access: str, block: tuple[int, ...] = (32, 8, 1), elem_bytes: int = 4,
               params: Params | None = None,
               shape: tuple[int, ...] | None = None) -> Coalescing:
    """Sectors, lines and bytes of every warp's request of a global ``access``.

    ``shape`` (row-major) is needed when the access has several subscripts; a single
    subscript is the linear element index (a flattened array)."""
    check_elem_bytes(elem_bytes)
    subscripts = resolve(access, block, params or {})
    start = subscripts.linear(shape) * elem_bytes
    warp = subscripts.warp_ids
    warps = _warp_requests(warp, start, elem_bytes)
    return Coalescing(subscripts.access.text, subscripts.block, elem_bytes, subscripts.params,
                      None if shape is None else tuple(shape),
                      subscripts.assumed + (ALIGNMENT,), warps)


def _warp_requests(warp: np.ndarray, start: np.ndarray,
                   elem_bytes: int) -> tuple[WarpRequest, ...]:
    """Per warp, the distinct sectors, lines and elements its threads touch (vectorized)."""
    count = int(warp[-1]) + 1

    def distinct(key: np.ndarray) -> np.ndarray:
        return np.bincount(distinct_rows(warp, key)[:, 0], minlength=count)

    sectors, lines, elements = distinct(start // SECTOR), distinct(start // LINE), distinct(start)
    threads = np.bincount(warp, minlength=count)
    return tuple(WarpRequest(w, w * WARP, int(threads[w]), int(sectors[w]), int(lines[w]),
                             int(elements[w]) * elem_bytes) for w in range(count))

