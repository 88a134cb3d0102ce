"""The clock the CPU's cores really run at, measured: the fp32 peak is computed from it.

/proc/cpuinfo reports the base clock in a virtual machine (2.6 GHz where the cores run at 4.5
under load), and sysfs's maximum frequency is often missing there, so a peak taken from either
can be far too low: NumPy's SGEMM then runs at "104% of peak". Here every thread runs a chain
of dependent steps ``x += x >> 3`` at the same time; each step is a shift and an add that
needs the shift's result, so it takes at least two cycles on any core: steps x 2 / seconds is
a lower bound of the all-core clock (exact where both instructions take one cycle, as on
every x86-64 core since 2012). Where sysfs knows a higher maximum, that one bounds the peak.
"""

from __future__ import annotations

import platform
import time

import numba
import numpy as np

CYCLES_PER_STEP = 2  # a shift, then an add that reads it: one cycle each on x86-64
STEPS = 5_000_000  # 2.5 ms at 4 GHz: long against the timer, short against a run
REPEATS = 10  # the fastest of several: a thread the OS preempted makes its run slower


@numba.njit(parallel=True, cache=True)
def _chains(steps: int, count: int) -> np.ndarray:
    """One dependent chain per thread, all at once (the all-core clock)."""
    out = np.empty(count, np.uint64)
    for thread in numba.prange(count):
        x = np.uint64(thread + 12345)
        for _ in range(steps):
            x += x >> np.uint64(3)
        out[thread] = x
    return out


def measure_clock_mhz(cores: int) -> float | None:
    """The all-core clock in MHz: ``cores`` threads busy at once (whatever ``--threads`` the
    run uses, since the peak counts every core), or None where a step's cycles are not known
    (not x86-64)."""
    if platform.machine().lower() not in {"x86_64", "amd64"}:
        return None
    threads = max(1, min(cores, numba.config.NUMBA_NUM_THREADS))
    chosen = numba.get_num_threads()
    numba.set_num_threads(threads)
    try:
        _chains(1000, threads)  # compile
        best = float("inf")
        for _ in range(REPEATS):
            start = time.perf_counter()
            _chains(STEPS, threads)
            best = min(best, time.perf_counter() - start)
    finally:
        numba.set_num_threads(chosen)
    return STEPS * CYCLES_PER_STEP / best / 1e6
