"""Shared-memory bank conflicts of a staged slice's reads, counted on the first warp.

Shared memory serves a warp's request in one pass when its 32 threads' words fall in 32
different banks (a word's bank is its address over 4 bytes, modulo 32) or are the same word
(a broadcast); two different words in one bank take two passes, and so on. Whether the rows
of a staged tile need padding depends on what a warp reads at once, not on what one thread
reads over time: the threads of a register tile read along rows, a transposition's along
columns. This module evaluates each read's subscripts for the first warp's threads (the loops
mapped to threads at their first iterations, everything else at zero: conflicts depend on
differences between threads, which the other names do not change) and counts the passes, for
each padding tried, so that the emitter pads only where padding removes conflicts (an
unpadded row keeps whole rows aligned for the compiler's vector loads).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from dataclasses import dataclass

WARP = 32
BANKS = 32
WORD = 4  # bytes a bank serves in a pass
PADDINGS = (0, 1)  # elements added to each row, the first of equal cost preferred
_EVAL_BUILTINS = {"min": min, "max": max, "abs": abs, "int": int}


@dataclass(frozen=True)
class ThreadLoop:
    """A loop mapped to threads: its variable is ``step`` times the thread's index along
    ``axis`` (0: x, 1: y, 2: z) past values that are the same in every thread."""

    var: str
    axis: int
    step: int


def passes(indices: list[ast.expr], extents: list[int], pad: int, itemsize: int,
           loops: list[ThreadLoop], block: list[int]) -> int | None:
    """The passes shared memory takes to serve the first warp's read at ``indices`` of a
    buffer with these ``extents`` and rows padded by ``pad`` elements (None: a subscript
    this model cannot evaluate)."""
    widths = extents[1:-1] + [extents[-1] + pad] if len(extents) > 1 else []
    codes = [compile(ast.Expression(index), "<subscript>", "eval") for index in indices]
    words: dict[int, set[int]] = defaultdict(set)
    for thread in range(min(WARP, block[0] * block[1] * block[2])):
        position = (thread % block[0], thread // block[0] % block[1],
                    thread // (block[0] * block[1]))
        names: dict[str, int] = defaultdict(int)
        for loop in loops:
            names[loop.var] = position[loop.axis] * loop.step
        try:
            values = [int(eval(code, {"__builtins__": _EVAL_BUILTINS}, names))
                      for code in codes]
        except Exception:  # a subscript the warp model cannot evaluate: no opinion
            return None
        flat = values[0]
        for width, value in zip(widths, values[1:]):
            flat = flat * width + value
        word = flat * itemsize // WORD
        words[word % BANKS].add(word)
    return max((len(found) for found in words.values()), default=1)


def best_padding(reads: list[list[ast.expr]], extents: list[int], itemsize: int,
                 loops: list[ThreadLoop], block: list[int]) -> int | None:
    """The row padding (of PADDINGS) under which the reads take the fewest passes in all
    (None: a read this model cannot evaluate)."""
    if len(extents) < 2 or not reads:
        return 0
    costs = []
    for pad in PADDINGS:
        counts = [passes(indices, extents, pad, itemsize, loops, block) for indices in reads]
        if any(count is None for count in counts):
            return None
        costs.append(sum(c for c in counts if c is not None))
    return PADDINGS[costs.index(min(costs))]
