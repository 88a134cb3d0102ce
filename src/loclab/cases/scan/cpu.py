"""CPU scans: the sequential loop, a cache-blocked two-pass parallel scan, NumPy's.

The two-pass scan is the lectures' per-thread sums, scan of sums, fix-up, done in rounds: a
round gives each thread a slice small enough for its L2, so the second pass re-reads the slice
from cache and memory sees one read and one write of the array (a plain two-pass scan over
whole-array chunks reads it twice: at best two thirds of copy speed). A running sum is a chain
of dependent additions (one per 4 cycles or so, whatever the memory does), so each thread
scans its slice as CHAINS parts side by side: independent chains the core overlaps.
"""

from __future__ import annotations

from functools import partial

import numba
import numpy as np
from numba import njit, prange

from loclab.cases.base import Bound, Dims
from loclab.hw import Machine
from loclab.measure.space import Config, Space

SLICES_KIB = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
CHAINS = 4  # parts of a thread's slice scanned side by side


@njit(cache=True)
def scan_from(a, out, running, exclusive):
    """Scan ``a`` into ``out`` from ``running`` (the sum of everything before a[0]). Slices are
    passed as views: loops over indices that provably start at 0 skip numba's
    negative-index wraparound (with lo/hi passed in, a compaction loop ran 3x slower)."""
    if exclusive:
        for i in range(a.size):
            out[i] = running
            running += a[i]
    else:
        for i in range(a.size):
            running += a[i]
            out[i] = running
    return out


@njit(cache=True)
def scan_sequential(a, out, exclusive):
    return scan_from(a, out, a.dtype.type(0), exclusive)


@njit(parallel=True, cache=True, fastmath={"reassoc", "nsz"})
def _slice_sums(a, sums, start, stop, chunk):
    """sums[p] = the sum of part p of a[start:stop] (any order: reassociated)."""
    for t in prange(sums.size):
        lo = min(start + t * chunk, stop)
        hi = min(lo + chunk, stop)
        total = a.dtype.type(0)
        for i in range(lo, hi):
            total += a[i]
        sums[t] = total


@njit(cache=True)
def scan_four_from(a0, a1, a2, a3, o0, o1, o2, o3, r0, r1, r2, r3, exclusive):
    """Four scans in one loop (parts of a slice, from their offsets r0..r3): four independent
    chains of additions in flight. Parts may be shorter at the array's end: the common length
    goes side by side, each rest alone."""
    common = min(a0.size, a1.size, a2.size, a3.size)
    if exclusive:
        for i in range(common):
            o0[i] = r0
            o1[i] = r1
            o2[i] = r2
            o3[i] = r3
            r0 += a0[i]
            r1 += a1[i]
            r2 += a2[i]
            r3 += a3[i]
    else:
        for i in range(common):
            r0 += a0[i]
            r1 += a1[i]
            r2 += a2[i]
            r3 += a3[i]
            o0[i] = r0
            o1[i] = r1
            o2[i] = r2
            o3[i] = r3
    scan_from(a0[common:], o0[common:], r0, exclusive)
    scan_from(a1[common:], o1[common:], r1, exclusive)
    scan_from(a2[common:], o2[common:], r2, exclusive)
    scan_from(a3[common:], o3[common:], r3, exclusive)


@njit(parallel=True, cache=True)
def scan_two_pass(a, out, exclusive, slice_elements, threads):
    parts = threads * CHAINS
    sums = np.zeros(parts, a.dtype)
    carry = a.dtype.type(0)
    round_elements = threads * slice_elements
    for start in range(0, a.size, round_elements):
        stop = min(start + round_elements, a.size)
        part = (stop - start + parts - 1) // parts
        _slice_sums(a, sums, start, stop, part)
        for p in range(parts):  # the sums become each part's offset
            total = sums[p]
            sums[p] = carry
            carry += total
        for t in prange(threads):
            b = [min(start + (CHAINS * t + c) * part, stop) for c in range(CHAINS)]
            e = [min(b[c] + part, stop) for c in range(CHAINS)]
            first = CHAINS * t
            scan_four_from(a[b[0]:e[0]], a[b[1]:e[1]], a[b[2]:e[2]], a[b[3]:e[3]],
                           out[b[0]:e[0]], out[b[1]:e[1]], out[b[2]:e[2]], out[b[3]:e[3]],
                           sums[first], sums[first + 1], sums[first + 2], sums[first + 3],
                           exclusive)
    return out


def _exclusive(inputs: dict) -> bool:
    return bool(inputs["exclusive"][0])


def sequential(inputs: dict, out: np.ndarray, machine: Machine) -> Bound:
    return Bound(partial(scan_sequential, inputs["a"], out, _exclusive(inputs)))


def space(machine: Machine) -> Space:
    """A slice of half a core's L2 by default: it and its share of the output stay cached
    between the two passes."""
    half_l2_kib = machine.cpu.l2_bytes // 2048
    default = max((s for s in SLICES_KIB if s <= half_l2_kib), default=SLICES_KIB[0])
    return Space({"slice_kib": SLICES_KIB}, {"slice_kib": default}, _slice_fits)


def _slice_fits(config: Config, dims: Dims, machine: Machine) -> str | None:
    if config["slice_kib"] * 1024 > machine.cpu.l2_bytes:
        return f"a slice of {config['slice_kib']} KiB exceeds L2"
    return None


def two_pass(inputs: dict, out: np.ndarray, machine: Machine, **config: int) -> Bound:
    slice_kib = space(machine).configure(config)["slice_kib"]
    a = inputs["a"]
    elements = slice_kib * 1024 // a.itemsize
    threads = numba.get_num_threads()
    return Bound(partial(scan_two_pass, a, out, _exclusive(inputs), elements, threads),
                 {"slice_kib": slice_kib, "threads": threads})


def _cumsum(a: np.ndarray, out: np.ndarray, exclusive: bool) -> np.ndarray:
    if exclusive:
        out[0] = 0
        np.cumsum(a[:-1], dtype=a.dtype, out=out[1:])
    else:
        np.cumsum(a, dtype=a.dtype, out=out)
    return out


def library(inputs: dict, out: np.ndarray, machine: Machine) -> Bound:
    return Bound(partial(_cumsum, inputs["a"], out, _exclusive(inputs)))
