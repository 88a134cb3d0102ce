"""CPU compaction: the sequential loop, a two-pass parallel one (count, scan, copy), NumPy's
boolean mask. Each returns the kept prefix of its output.

The copy loops store every value at the next free place and advance it by the flag: with
random flags a branch on the flag is mispredicted half the time (about 3x slower at 50%).
A value not kept is overwritten by the next one. In parallel a thread's copy loop stops at its
slice's last kept element: a store after it would land on the next thread's first place."""

from __future__ import annotations

import numba
import numpy as np
from numba import njit, prange

from loclab.cases.base import Bound
from loclab.hw import Machine


@njit(cache=True)
def compact_sequential(values, flags, out):
    """The kept count. Indices that provably start at 0 matter: with a ``kept`` passed in,
    numba's negative-index wraparound stays in the loop and it ran 3x slower."""
    kept = 0
    for i in range(values.size):
        out[kept] = values[i]  # kept <= i: in bounds
        kept += flags[i] != 0
    return kept


@njit(parallel=True, cache=True)
def compact_two_pass(values, flags, out, threads):
    n = values.size
    chunk = (n + threads - 1) // threads
    offsets = np.zeros(threads + 1, np.int64)
    for t in prange(threads):
        count = 0
        for i in range(min(t * chunk, n), min((t + 1) * chunk, n)):
            count += flags[i] != 0
        offsets[t + 1] = count
    for t in range(threads):
        offsets[t + 1] += offsets[t]
    for t in prange(threads):
        kept = offsets[t]
        if kept == offsets[t + 1]:
            continue
        lo, stop = min(t * chunk, n), min((t + 1) * chunk, n)
        while flags[stop - 1] == 0:  # up to the last kept element
            stop -= 1
        compact_sequential(values[lo:stop], flags[lo:stop], out[kept:])
    return offsets[threads]


def sequential(inputs: dict, out: np.ndarray, machine: Machine) -> Bound:
    values, flags = inputs["values"], inputs["flags"]
    return Bound(lambda: out[:compact_sequential(values, flags, out)])


def two_pass(inputs: dict, out: np.ndarray, machine: Machine) -> Bound:
    values, flags = inputs["values"], inputs["flags"]
    threads = numba.get_num_threads()
    return Bound(lambda: out[:compact_two_pass(values, flags, out, threads)],
                 {"threads": threads})


def library(inputs: dict, out: np.ndarray, machine: Machine) -> Bound:
    """NumPy allocates the result (a library call may)."""
    values, mask = inputs["values"], inputs["flags"].view(np.bool_)
    return Bound(lambda: values[mask])
