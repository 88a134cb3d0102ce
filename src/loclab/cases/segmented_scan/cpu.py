"""CPU variants of the segmented scan: numba loops and the NumPy cumsum formulation."""

from __future__ import annotations

from functools import partial

import numba
import numpy as np
from numba import njit, prange

from loclab.cases.base import Bound
from loclab.cases.segmented_scan import cumsum_formulation
from loclab.hw import Machine

# Chunks per thread in cpu-two-pass: several, so that a thread whose chunks need a long fix-up
# (no head near their start) does not hold the others up; none smaller than MIN_CHUNK. A task
# scans INTERLEAVE chunks side by side (scan_two_pass spells its 4 chains out).
INTERLEAVE = 4
CHUNKS_PER_THREAD = 4 * INTERLEAVE
MIN_CHUNK = 1 << 12


@njit(inline="always")
def _step(values, flags, out, i, running):
    """Element i of a chunk's scan: the running sum restarts at a head."""
    if flags[i] != 0:
        running = values[i]
    else:
        running += values[i]
    out[i] = running
    return running


@njit(cache=True)
def scan_sequential(values, flags, out):
    """The golden loop: the running sum restarts at each head."""
    running = np.float32(0.0)
    for i in range(values.size):
        running = _step(values, flags, out, i, running)
    return out


@njit(inline="always")
def _scan_chunk(values, flags, out, lo, hi):
    """Elements [lo, hi) scanned as if lo began a segment: (sum since the last head, whether
    there is a head)."""
    running, heads = np.float32(0.0), 0
    for i in range(lo, hi):
        running = _step(values, flags, out, i, running)
        heads |= flags[i]
    return running, heads


@njit(parallel=True, cache=True)
def scan_two_pass(values, flags, out, chunk):
    """Scan-then-propagate over chunks of ``chunk`` elements.

    1. In parallel, each chunk is scanned as if it began a segment, keeping its sum since its
       last head (all of it without one) and whether it holds a head. A task takes INTERLEAVE
       consecutive chunks and steps through them side by side: independent chains of adds,
       where one chain would wait for each add's latency (a loop-carried dependence).
    2. Sequentially, the carry into each chunk: the previous chunk's sum if that chunk holds a
       head, else the carry into it plus its sum (the segmented operator, chunk by chunk).
    3. In parallel, each chunk adds its carry to its elements before its first head: the only
       ones whose segment began in an earlier chunk (none when segments are short).
    """
    n = values.size
    chunks = (n + chunk - 1) // chunk
    tasks = (chunks + INTERLEAVE - 1) // INTERLEAVE
    sums = np.zeros(tasks * INTERLEAVE, np.float32)
    heads = np.zeros(tasks * INTERLEAVE, np.int64)
    for t in prange(tasks):
        lo = t * INTERLEAVE * chunk
        if lo + INTERLEAVE * chunk <= n:
            r0, r1, r2, r3 = np.float32(0.0), np.float32(0.0), np.float32(0.0), np.float32(0.0)
            h0, h1, h2, h3 = 0, 0, 0, 0
            for i in range(lo, lo + chunk):
                r0 = _step(values, flags, out, i, r0)
                r1 = _step(values, flags, out, i + chunk, r1)
                r2 = _step(values, flags, out, i + 2 * chunk, r2)
                r3 = _step(values, flags, out, i + 3 * chunk, r3)
                h0 |= flags[i]
                h1 |= flags[i + chunk]
                h2 |= flags[i + 2 * chunk]
                h3 |= flags[i + 3 * chunk]
            c = INTERLEAVE * t
            sums[c], sums[c + 1], sums[c + 2], sums[c + 3] = r0, r1, r2, r3
            heads[c], heads[c + 1], heads[c + 2], heads[c + 3] = h0, h1, h2, h3
        else:  # the last, partial task: its chunks one after the other
            for c in range(INTERLEAVE * t, min(INTERLEAVE * (t + 1), chunks)):
                sums[c], heads[c] = _scan_chunk(values, flags, out, c * chunk,
                                                min((c + 1) * chunk, n))
    carry = np.zeros(chunks, np.float32)
    for c in range(1, chunks):
        carry[c] = sums[c - 1] if heads[c - 1] != 0 else carry[c - 1] + sums[c - 1]
    for c in prange(1, chunks):
        lo, hi = c * chunk, min((c + 1) * chunk, n)
        first = lo
        while first < hi and flags[first] == 0:
            first += 1
        into = carry[c]
        for i in range(lo, first):  # a loop LLVM vectorizes
            out[i] += into
    return out


def two_pass_chunk(n: int) -> int:
    """Elements per chunk: CHUNKS_PER_THREAD chunks per thread, none below MIN_CHUNK."""
    chunks = numba.get_num_threads() * CHUNKS_PER_THREAD
    return max(MIN_CHUNK, -(-n // chunks))


def sequential(inputs: dict, out: np.ndarray, machine: Machine) -> Bound:
    return Bound(partial(scan_sequential, inputs["values"], inputs["flags"], out))


def two_pass(inputs: dict, out: np.ndarray, machine: Machine) -> Bound:
    values = inputs["values"]
    chunk = two_pass_chunk(values.size)
    return Bound(partial(scan_two_pass, values, inputs["flags"], out, chunk),
                 {"chunk": chunk, "chunks": -(-values.size // chunk)})


def library(inputs: dict, out: np.ndarray, machine: Machine) -> Bound:
    return Bound(partial(cumsum_formulation, inputs["values"], inputs["flags"], np))
