"""The pipeline on the CPU: a fresh buffer, the input copied in, the rounds, the result copied
out; what differs is which thread first touches each page of the buffer.

Linux places a page on the NUMA node of the thread that first writes it. Every parallel pass
here splits the elements into one contiguous part per thread, in the same order (a
``prange`` over the parts: numba's static schedule gives part t to the same thread each time),
so a part copied in by its own thread stays local to the thread that computes on it.
"""

from __future__ import annotations

import mmap

import numba
import numpy as np
from numba import njit, prange

from loclab.cases.base import COMPUTE, COPY_IN, COPY_OUT, Bound, Step, stepped
from loclab.cases.overlap import SCALE, SHIFT
from loclab.hw import Machine


def fresh(n: int) -> np.ndarray:
    """n float32 in pages nobody has touched yet (an anonymous mapping of its own: the
    allocator cannot hand back pages an earlier run placed)."""
    pages = mmap.mmap(-1, max(n, 1) * 4)
    return np.frombuffer(pages, np.float32, count=n)


@njit(cache=True)
def _part(t: int, parts: int, n: int) -> tuple[int, int]:
    return t * n // parts, (t + 1) * n // parts


@njit(cache=True)
def copy_one_thread(src, dst):
    for i in range(src.size):
        dst[i] = src[i]


@njit(parallel=True, cache=True)
def copy_by_parts(src, dst, parts):
    for t in prange(parts):
        start, stop = _part(t, parts, src.size)
        for i in range(start, stop):
            dst[i] = src[i]


@njit(parallel=True, cache=True)
def rounds_by_parts(values, rounds, scale, shift, parts):
    for t in prange(parts):
        start, stop = _part(t, parts, values.size)
        for i in range(start, stop):
            v = values[i]
            for _ in range(rounds):
                v = v * scale + shift
            values[i] = v


def _pipeline(inputs: dict, out: np.ndarray, parallel_copy_in: bool) -> Bound:
    x = inputs["x"]
    rounds = int(inputs["rounds"][0])
    parts = numba.get_num_threads()
    scale, shift = np.float32(SCALE), np.float32(SHIFT)
    held: list[np.ndarray] = []

    def copy_in() -> None:
        buffer = fresh(x.size)
        if parallel_copy_in:
            copy_by_parts(x, buffer, parts)
        else:
            copy_one_thread(x, buffer)
        held.append(buffer)

    def copy_out() -> None:
        copy_by_parts(held[0], out, parts)
        held.clear()  # the buffer's pages go back: the next run touches fresh ones

    return stepped([Step(COPY_IN, copy_in),
                    Step(COMPUTE, lambda: rounds_by_parts(held[0], rounds, scale, shift,
                                                            parts)),
                    Step(COPY_OUT, copy_out)],
                   out, {"threads": parts, "copy_in": "parallel" if parallel_copy_in
                         else "one thread"})


def serial_init(inputs: dict, out: np.ndarray, machine: Machine) -> Bound:
    return _pipeline(inputs, out, parallel_copy_in=False)


def first_touch(inputs: dict, out: np.ndarray, machine: Machine) -> Bound:
    return _pipeline(inputs, out, parallel_copy_in=True)
