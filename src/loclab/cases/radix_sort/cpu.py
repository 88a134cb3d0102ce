"""CPU variants of the radix sort: numba, one thread (the lecture's split) or ``prange``.

cpu-lsd splits the keys into one chunk per thread. A pass counts each chunk's digits
(prange), scans the counts digit-major (digit 0 of every chunk, then digit 1, ...: a chunk's
keys of a digit go after the earlier chunks' keys of that digit), and scatters each chunk in
order (prange): stable, as the next pass needs. The passes alternate between the output and a
scratch buffer, the last writing the output; digits every key shares are skipped.
"""

from __future__ import annotations

from functools import partial

import numba
import numpy as np
from numba import njit, prange

from loclab.cases.base import Bound
from loclab.cases.radix_sort import KEY_BITS, LSD_BITS, destinations, needed_shifts
from loclab.hw import Machine


# --- cpu-split: the lecture's one-bit split, 32 times ---------------------------------------

@njit(cache=True)
def split_pass(keys_in, vals_in, keys_out, vals_out, bit, falses_before, pairs):
    """One split on ``bit``, as the lecture writes it: e = 1 for a 0 bit, f = exclusive scan
    of e (``falses_before``), totalFalses; then d = b ? i - f + totalFalses : f."""
    n = keys_in.size
    total_falses = 0
    for i in range(n):
        falses_before[i] = total_falses
        total_falses += 1 - ((keys_in[i] >> bit) & 1)
    for i in range(n):
        b = (keys_in[i] >> bit) & 1
        d = i - falses_before[i] + total_falses if b else falses_before[i]
        keys_out[d] = keys_in[i]
        if pairs:
            vals_out[d] = vals_in[i]


def split_sort(keys: np.ndarray, vals: np.ndarray, out_keys: np.ndarray, out_vals: np.ndarray,
               tmp_keys: np.ndarray, tmp_vals: np.ndarray, falses: np.ndarray,
               pairs: bool) -> None:
    """32 splits, bit 0 first, alternating between the scratch and the output."""
    buffers = {"out": (out_keys, out_vals), "tmp": (tmp_keys, tmp_vals)}
    src = (keys, vals)
    for bit, dst in zip(range(KEY_BITS), destinations(KEY_BITS)):
        split_pass(*src, *buffers[dst], bit, falses, pairs)
        src = buffers[dst]


# --- cpu-lsd ----------------------------------------------------------------------------------

@njit(parallel=True, cache=True)
def differing_bits(keys, chunks):
    """OR ^ AND of all keys: the bits in which some keys differ (a chunk per thread, reduced
    in registers)."""
    n = keys.size
    ors = np.zeros(chunks, np.uint32)
    ands = np.full(chunks, 0xFFFF_FFFF, np.uint32)
    for c in prange(chunks):
        any_bit, all_bits = np.uint32(0), np.uint32(0xFFFF_FFFF)
        for i in range(c * n // chunks, (c + 1) * n // chunks):
            any_bit |= keys[i]
            all_bits &= keys[i]
        ors[c], ands[c] = any_bit, all_bits
    any_bit, all_bits = np.uint32(0), np.uint32(0xFFFF_FFFF)
    for c in range(chunks):
        any_bit |= ors[c]
        all_bits &= ands[c]
    return any_bit ^ all_bits


@njit(parallel=True, cache=True)
def count_digits(keys, shift, mask, counts):
    """counts[c, d]: the keys of chunk c (of counts.shape[0]) whose digit is d, tallied in a
    thread-local row."""
    chunks, n = counts.shape[0], keys.size
    for c in prange(chunks):
        row = np.zeros(counts.shape[1], np.int64)
        for i in range(c * n // chunks, (c + 1) * n // chunks):
            row[(keys[i] >> shift) & mask] += 1
        counts[c, :] = row


def digit_major_offsets(counts: np.ndarray) -> np.ndarray:
    """Each (chunk, digit)'s first output position: an exclusive scan of the counts taken
    digit by digit, chunks in order within a digit."""
    by_digit = counts.T.ravel()
    return (np.cumsum(by_digit) - by_digit).reshape(counts.T.shape).T.copy()


@njit(parallel=True, cache=True)
def scatter(keys_in, vals_in, keys_out, vals_out, shift, mask, offsets, pairs):
    """Each chunk moves its keys, in order, to its digits' next positions (stable)."""
    chunks, n = offsets.shape[0], keys_in.size
    for c in prange(chunks):
        cursor = offsets[c].copy()
        for i in range(c * n // chunks, (c + 1) * n // chunks):
            digit = (keys_in[i] >> shift) & mask
            to = cursor[digit]
            cursor[digit] = to + 1
            keys_out[to] = keys_in[i]
            if pairs:
                vals_out[to] = vals_in[i]


def lsd_sort(keys: np.ndarray, vals: np.ndarray, out_keys: np.ndarray, out_vals: np.ndarray,
             tmp_keys: np.ndarray, tmp_vals: np.ndarray, counts: np.ndarray, pairs: bool,
             bits: int, params: dict) -> None:
    """The passes of the digits the keys differ in; none: the input is the output."""
    chunks, mask = counts.shape[0], (1 << bits) - 1
    shifts = needed_shifts(int(differing_bits(keys, chunks)), bits)
    params["passes"] = len(shifts)  # the row shows the last run's
    buffers = {"out": (out_keys, out_vals), "tmp": (tmp_keys, tmp_vals)}
    src = (keys, vals)
    for shift, dst in zip(shifts, destinations(len(shifts))):
        count_digits(src[0], shift, mask, counts)
        scatter(*src, *buffers[dst], shift, mask, digit_major_offsets(counts), pairs)
        src = buffers[dst]
    if not shifts:
        out_keys[:] = keys
        if pairs:
            out_vals[:] = vals


# --- setups -----------------------------------------------------------------------------------

def _words(inputs: dict, out: np.ndarray) -> tuple[np.ndarray, ...]:
    """(keys, values, output keys, output values, scratch keys, scratch values, pairs);
    without values, empty value arrays that the kernels never touch."""
    keys = inputs["keys"]
    if out.ndim == 1:
        none = np.empty(0, np.uint32)
        return keys, none, out, none, np.empty_like(keys), none, False
    return (keys, inputs["values"], out[0], out[1], np.empty_like(keys), np.empty_like(keys),
            True)


def split(inputs: dict, out: np.ndarray, machine: Machine) -> Bound:
    *words, pairs = _words(inputs, out)
    falses = np.empty(inputs["keys"].size, np.int64)

    def run() -> np.ndarray:
        split_sort(*words, falses, pairs)
        return out

    return Bound(run, {"passes": KEY_BITS})


def lsd(inputs: dict, out: np.ndarray, machine: Machine, bits: int = LSD_BITS) -> Bound:
    *words, pairs = _words(inputs, out)
    threads = numba.get_num_threads()
    counts = np.empty((threads, 1 << bits), np.int64)
    params: dict = {"bits": bits, "chunks": threads}

    def run() -> np.ndarray:
        lsd_sort(*words, counts, pairs, bits, params)
        return out

    return Bound(run, params)


def library(inputs: dict, out: np.ndarray, machine: Machine) -> Bound:
    """numpy.sort (SIMD quicksort: the sorted keys are the same whatever the algorithm); for
    pairs the stable argsort (timsort) and gathers into the output's rows."""
    keys = inputs["keys"]
    if out.ndim == 1:
        return Bound(partial(np.sort, keys))

    def run() -> np.ndarray:
        order = np.argsort(keys, kind="stable")
        np.take(keys, order, out=out[0])
        np.take(inputs["values"], order, out=out[1])
        return out

    return Bound(run)
