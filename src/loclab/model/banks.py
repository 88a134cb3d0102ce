"""Shared-memory bank conflicts of one ``__shared__`` access, for every warp of a block.

Shared memory is 32 banks of 4-byte words (word ``w`` lives in bank ``w % 32``); each bank
serves one word per cycle, so a request whose threads need ``d`` different words of one bank
is served in ``d`` passes ("wavefronts"): the lectures' rule that ``s[threadIdx.x * stride]``
is conflict-free iff ``stride`` shares no factor with 32. Threads reading the same word are
served together (a broadcast), so only DISTINCT words count.

Wider elements: a thread of an 8-byte access needs two words and one of a 16-byte access
four, more than the 32 banks can deliver to a whole warp at once. The hardware then serves
the warp in phases of consecutive lanes: two halves of 16 threads for 8 bytes, four quarters
of 8 threads for 16 bytes (the CUDA C Programming Guide states this for compute capability
2.x and 3.x; for 5.x and later it documents only 4-byte words, and the phases are what
microbenchmarks and Nsight Compute's wavefront counts show). Conflicts are counted within a
phase only, and the phases' wavefronts add up: a conflict-free ``float2`` request takes 2
wavefronts, a conflict-free ``float4`` request 4.

``bank_conflicts`` is the sum over the block's warps of (wavefronts - 1), what Nsight
Compute's ``l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum`` counts per block
request if it counts every wavefront beyond the first; ``excess_wavefronts`` sums only those
beyond the phases' minimum, the conflicts proper. Which of the two the counter matches for
8- and 16-byte accesses is for a measurement to settle.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from loclab.errors import UsageError
from loclab.model.text import wrap_all
from loclab.model.access import (ELEM_NAMES, WARP, Block, Params, check_elem_bytes, describe_block,
                                 distinct_rows, plural, resolve, shape_text)

BANKS = 32
WORD = 4
MAX_PHASES = 4  # 16-byte elements: four quarter-warps


@dataclass(frozen=True)
class Collision:
    """One bank's worst case in one phase: the threads that need its different words."""

    warp: int
    bank: int
    threads: tuple[str, ...]  # "(x,y,z)", one thread per distinct word
    words: tuple[int, ...]


@dataclass(frozen=True)
class WarpBanks:
    """One warp's request: its worst bank's distinct words and its passes."""

    warp: int
    threads: int
    degree: int  # most distinct words one bank serves in one phase
    wavefronts: int  # passes over all phases
    phases: int  # phases with at least one thread

    def to_json(self) -> dict[str, int]:
        return {"warp": self.warp, "threads": self.threads, "conflict_degree": self.degree,
                "wavefronts": self.wavefronts, "phases": self.phases}


@dataclass(frozen=True)
class Banks:
    """The prediction for one block; the worst warp is what the kernel pays per request."""

    access: str
    shape: tuple[int, ...]
    block: Block
    elem_bytes: int
    params: dict[str, int]
    assumed: tuple[str, ...]
    warps: tuple[WarpBanks, ...]
    example: Collision

    @property
    def conflict_degree(self) -> int:
        return max(w.degree for w in self.warps)

    @property
    def wavefronts_per_request(self) -> int:
        return max(w.wavefronts for w in self.warps)

    @property
    def bank_conflicts(self) -> int:
        """Wavefronts beyond the first, summed over the block's warps (Nsight's count)."""
        return sum(w.wavefronts - 1 for w in self.warps)

    @property
    def excess_wavefronts(self) -> int:
        """Wavefronts beyond each phase's one, summed over the warps: conflicts proper."""
        return sum(w.wavefronts - w.phases for w in self.warps)

    def to_json(self) -> dict[str, Any]:
        return {"access": self.access, "shape": list(self.shape), "block": list(self.block),
                "elem_bytes": self.elem_bytes, "params": dict(self.params),
                "conflict_degree": self.conflict_degree,
                "wavefronts_per_request": self.wavefronts_per_request,
                "bank_conflicts": self.bank_conflicts,
                "excess_wavefronts": self.excess_wavefronts,
                "warps": [w.to_json() for w in self.warps],
                "example": {"warp": self.example.warp, "bank": self.example.bank,
                            "threads": list(self.example.threads),
                            "words": list(self.example.words)},
                "assumed": list(self.assumed)}

    def lines(self) -> list[str]:
        """Which threads collide in which bank, and what it costs: at most 80 columns."""
        size = phase_size(self.elem_bytes)
        phases = WARP // size
        example = self.example
        threads, words = _first(example.threads), _first(map(str, example.words))
        paragraphs = [
            f"__shared__ array of shape {shape_text(self.shape)}: {self.access}",
            f"{self.elem_bytes}-byte elements ({ELEM_NAMES[self.elem_bytes]}), "
            f"{describe_block(self.block)}, "
            + (f"{phases} phases of {size} threads each" if phases > 1 else "one phase"),
            f"conflict degree {self.conflict_degree}: a request takes "
            f"{plural(self.wavefronts_per_request, 'wavefront')} "
            f"(conflict-free: {plural(phases, 'wavefront')}); "
            f"{self.bank_conflicts} wavefronts beyond the first per block request",
            f"warp {example.warp}: bank {example.bank} serves {len(example.words)} different "
            f"words to threads {threads} (words {words})" if len(example.words) > 1 else
            "no bank serves two different words in one phase: no conflict",
            "assumed: " + "; ".join(self.assumed),
        ]
        return wrap_all(paragraphs)


def _first(items: Iterable[str], shown: int = 4) -> str:
    """``a, b, c, d, ...``: an example needs only the start of a long list."""
    listed = list(items)
    return ", ".join(listed[:shown]) + (", ..." if len(listed) > shown else "")


def phase_size(elem_bytes: int) -> int:
    """Threads served together: 32 up to 4-byte elements, 16 for 8 bytes, 8 for 16 bytes."""
    return WARP // max(1, elem_bytes // WORD)


def bank_conflicts(access: str, shape: tuple[int, ...], block: tuple[int, ...] = (32, 8, 1),
                   elem_bytes: int = 4, params: Params | None = None) -> Banks:
    """The bank conflicts of every warp's request of a ``__shared__`` array of ``shape``
    (the arithmetic holds for any shape; :func:`check_fits_shared_memory` asks whether a
    GPU could declare it)."""
    check_elem_bytes(elem_bytes)
    subscripts = resolve(access, block, params or {})
    start = subscripts.linear(tuple(shape)) * elem_bytes
    words_per_thread = max(1, elem_bytes // WORD)
    tid = np.repeat(np.arange(start.size), words_per_thread)
    word = (start[:, None] // WORD + np.arange(words_per_thread)).ravel()
    # One key per (warp, phase): the group of threads the banks serve together.
    group = tid // WARP * MAX_PHASES + tid % WARP // phase_size(elem_bytes)
    served = distinct_rows(group, word % BANKS, word)  # (group, bank, word), each once
    pairs, per_bank = np.unique(served[:, :2], axis=0, return_counts=True)
    count = int(subscripts.warp_ids[-1]) + 1
    degree = np.zeros(count * MAX_PHASES, dtype=np.int64)
    np.maximum.at(degree, pairs[:, 0], per_bank)
    threads = np.bincount(subscripts.warp_ids, minlength=count)
    warps = tuple(WarpBanks(w, int(threads[w]), int(d.max()), int(d.sum()), int((d > 0).sum()))
                  for w, d in enumerate(degree.reshape(count, MAX_PHASES)))
    worst_group, worst_bank = (int(v) for v in pairs[int(np.argmax(per_bank))])
    words = served[(served[:, 0] == worst_group) & (served[:, 1] == worst_bank), 2]
    first = [int(tid[(group == worst_group) & (word == w)][0]) for w in words]
    example = Collision(worst_group // MAX_PHASES, worst_bank,
                        tuple(subscripts.thread_name(t) for t in first),
                        tuple(int(w) for w in words))
    return Banks(subscripts.access.text, tuple(shape), subscripts.block, elem_bytes,
                 subscripts.params, subscripts.assumed + _assumptions(elem_bytes), warps, example)


def check_fits_shared_memory(shape: tuple[int, ...], elem_bytes: int,
                             gpu: str | None = None) -> None:
    """A ``__shared__`` array larger than a block may have cannot be declared: a model of
    its conflicts would describe a kernel that does not compile."""
    from loclab.model.occupancy import shared_block_limit

    size = math.prod(shape) * elem_bytes
    most, whose = shared_block_limit(gpu)
    if size > most:
        raise UsageError(f"__shared__ array of shape {shape_text(tuple(shape))} x {elem_bytes} "
                         f"B = {size:,} B: more than a block's shared memory {whose}, "
                         f"{most:,} B")


def _assumptions(elem_bytes: int) -> tuple[str, ...]:
    phases, size = WARP // phase_size(elem_bytes), phase_size(elem_bytes)
    return (f"{BANKS} banks of {WORD} bytes; the array starts at bank 0",
            f"a warp is served in {phases} phases of {size} threads" if phases > 1
            else "a warp is served in one phase")
