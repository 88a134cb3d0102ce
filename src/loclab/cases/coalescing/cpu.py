"""CPU variants of the row program: the golden loop nest, and the GPU's transposition recipe."""

from __future__ import annotations

from functools import partial

import numpy as np
from numba import njit, prange

from loclab.cases.base import Bound
from loclab.cases.transpose.cpu import blocked_tiles, transpose_blocked
from loclab.hw import Machine

ITEMSIZE = 4  # float32
VECTOR_FLOATS = 16  # a 64-byte line: chunks of rows start on line boundaries


@njit(parallel=True, cache=True)
def rows_program(a, out):
    """The golden loop nest with the row loop parallel: every thread streams through whole
    rows of ``a`` and ``out``, contiguous both ways, which is all a cache line asks for."""
    rows, cols = a.shape
    for i in prange(rows):
        acc = np.float32(0.0)
        for j in range(cols):
            x = a[i, j]
            acc = np.sqrt(acc) + x * x
            out[i, j] = acc
    return out


@njit(parallel=True, cache=True)
def columns_program(a_t, b_t, chunk):
    """The program on the transposes (``a_t`` and ``b_t`` are cols x rows), as the GPU's
    coalesced kernel runs it: a chunk of rows of the original (parallel) advances one column
    at a time, so each step reads and writes ``chunk`` consecutive floats. Row ``j - 1`` of
    ``b_t`` holds every row's ``acc`` after column ``j - 1``; it is still in L1. The steps go
    through 1-D row views: with them LLVM vectorizes the step (16 rows per AVX-512 sqrt),
    indexing ``b_t[j - 1, i]`` and ``b_t[j, i]`` directly it did not (3.7x slower)."""
    cols, rows = a_t.shape
    for t in prange((rows + chunk - 1) // chunk):
        i0 = t * chunk
        n = min(chunk, rows - i0)
        x = a_t[0, i0:i0 + n]
        acc = b_t[0, i0:i0 + n]
        for i in range(n):
            acc[i] = x[i] * x[i]  # acc starts at 0: sqrt(0) + x * x
        for j in range(1, cols):
            x = a_t[j, i0:i0 + n]
            prev = acc
            acc = b_t[j, i0:i0 + n]
            for i in range(n):
                acc[i] = np.sqrt(prev[i]) + x[i] * x[i]
    return b_t


def column_chunk(machine: Machine) -> int:
    """Rows per parallel chunk of ``columns_program``: the three runs a step touches (a row
    of ``a_t``, the rows ``j - 1`` and ``j`` of ``b_t``) fill half of L1d."""
    chunk = machine.cpu.l1d_bytes // 2 // (3 * ITEMSIZE)
    return max(VECTOR_FLOATS, chunk // VECTOR_FLOATS * VECTOR_FLOATS)


def rows(inputs: dict, out: np.ndarray, machine: Machine) -> Bound:
    return Bound(partial(rows_program, inputs["a"], out))


def transposed(inputs: dict, out: np.ndarray, machine: Machine) -> Bound:
    """Transpose ``a`` (blocked, the transpose case's kernel), run ``columns_program``,
    transpose the result back into ``out``; the two temporaries are allocated here."""
    a = inputs["a"]
    a_t = np.empty(a.shape[::-1], np.float32)
    b_t = np.empty_like(a_t)
    outer, inner = blocked_tiles(machine)
    chunk = column_chunk(machine)

    def run() -> np.ndarray:
        transpose_blocked(a, a_t, outer, inner)
        columns_program(a_t, b_t, chunk)
        return transpose_blocked(b_t, out, outer, inner)

    return Bound(run, {"outer_tile": outer, "inner_tile": inner, "row_chunk": chunk})
