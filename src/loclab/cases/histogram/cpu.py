"""CPU variants of the histogram: numba ``prange`` with LLVM atomics (OpenMP's atomic)."""

from __future__ import annotations

from functools import partial

import numba
import numpy as np
from numba import njit, prange

from loclab.cases.base import Bound
from loclab.cpu.atomics import atomic_add
from loclab.hw import Machine

# The lectures keep 3/7 of the LLC for the chunk of the histogram: the rest holds the
# streamed input and whatever else the cores touch.
LLC_FRACTION = 3 / 7


@njit(parallel=True, cache=True)
def zero(hist):
    for b in prange(hist.size):
        hist[b] = 0.0


@njit(parallel=True, cache=True)
def accumulate_atomic(inds, vals, hist, low, high):
    """One pass over the whole input, updating only bins in [low, high) (the golden code's
    sanity test when the range is the whole histogram)."""
    for i in prange(inds.size):
        ind = inds[i]
        if low <= ind and ind < high:
            atomic_add(hist, ind, vals[i])


def histogram_multipass(inds: np.ndarray, vals: np.ndarray, hist: np.ndarray,
                        chunk: int) -> np.ndarray:
    """The lectures' ``multiStep``: the passes run in sequence, each in parallel (one pass
    over the whole histogram is the direct parallelization, cpu-atomic)."""
    zero(hist)
    for low in range(0, hist.size, chunk):
        accumulate_atomic(inds, vals, hist, low, min(low + chunk, hist.size))
    return hist


@njit(parallel=True, cache=True)
def histogram_privatized(inds, vals, hist, private):
    """Thread-sized slices of the input each fill their own row of ``private`` with plain
    adds; then each bin sums its column (the bins are split among the threads)."""
    parts, bins = private.shape
    n = inds.size
    for p in prange(parts):
        row = private[p]
        row[:] = 0.0
        for i in range(p * n // parts, (p + 1) * n // parts):
            ind = inds[i]
            if ind < bins:
                row[ind] += vals[i]
    for b in prange(bins):
        total = np.float32(0.0)
        for p in range(parts):
            total += private[p, b]
        hist[b] = total
    return hist


def multipass_chunk(machine: Machine, fraction: float = LLC_FRACTION) -> int:
    """Bins per pass: ``fraction`` of the LLC."""
    return max(1, int(fraction * machine.cpu.llc_bytes) // 4)


def privatized_fits(dims: dict[str, int], machine: Machine) -> str | None:
    """Private sub-histograms pay off while all of them stay in the LLC (else: why not)."""
    bins, threads = dims["bins"], numba.get_num_threads()
    need = threads * bins * 4
    if need > machine.cpu.llc_bytes:
        return (f"{threads} sub-histograms of {bins} bins ({need / 2**20:.0f} MiB) exceed the "
                f"LLC ({machine.cpu.llc_bytes / 2**20:.0f} MiB)")
    return None


def atomic(inputs: dict, out: np.ndarray, machine: Machine) -> Bound:
    return Bound(partial(histogram_multipass, inputs["inds"], inputs["vals"], out, out.size))


def multipass(inputs: dict, out: np.ndarray, machine: Machine,
              fraction: float = LLC_FRACTION) -> Bound:
    chunk = multipass_chunk(machine, fraction)
    return Bound(partial(histogram_multipass, inputs["inds"], inputs["vals"], out, chunk),
                 {"chunk_bins": chunk, "llc_fraction": round(fraction, 4),
                  "passes": -(-out.size // chunk)})


def privatized(inputs: dict, out: np.ndarray, machine: Machine) -> Bound:
    threads = numba.get_num_threads()
    private = np.empty((threads, out.size), np.float32)
    return Bound(partial(histogram_privatized, inputs["inds"], inputs["vals"], out, private),
                 {"sub_histograms": threads})


def library(inputs: dict, out: np.ndarray, machine: Machine) -> Bound:
    inds, vals, bins = inputs["inds"], inputs["vals"], out.size

    def run() -> np.ndarray:
        kept = inds < bins  # bincount would grow to the largest index, however far out
        return np.bincount(inds[kept], weights=vals[kept], minlength=bins).astype(np.float32)

    return Bound(run)
