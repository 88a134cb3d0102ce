"""Repeated timing until a time budget, with a minimum number of runs.

CPU runs are timed with ``time.perf_counter``; GPU runs with CUDA events recorded on the
stream around the launches. Runs shorter than ``Budget.min_sample_s`` are timed in batches of
back-to-back calls and a sample is the batch's mean: the cost of recording and waiting for the
events, and the gap before the first launch, are then spread over the batch. (If launching took
longer than the kernel, the GPU would idle inside a sample; every case's sizes keep kernels far
longer than a launch.) With batches, ``min_s`` and ``max_s`` are extremes of batch means, so
they understate the spread of single calls; rows record their ``batch``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol


class Clock(Protocol):
    name: str

    def per_call(self, run: Callable[[], Any], calls: int) -> float:
        """Seconds per call, over ``calls`` back-to-back calls."""


class PerfCounterClock:
    name = "perf_counter"

    def per_call(self, run: Callable[[], Any], calls: int) -> float:
        start = time.perf_counter()
        for _ in range(calls):
            run()
        return (time.perf_counter() - start) / calls


class CudaEventClock:
    name = "cuda-events"

    def __init__(self) -> None:
        import cupy

        self._cupy = cupy
        self._start = cupy.cuda.Event()
        self._end = cupy.cuda.Event()

    def per_call(self, run: Callable[[], Any], calls: int) -> float:
        self._start.record()
        for _ in range(calls):
            run()
        self._end.record()
        self._end.synchronize()
        return self._cupy.cuda.get_elapsed_time(self._start, self._end) / 1e3 / calls


@dataclass(frozen=True)
class Budget:
    """Time each variant for ``seconds`` (after warm-up), at least ``min_runs`` samples and at
    most ``max_runs``; batch calls so that each sample lasts at least ``min_sample_s``."""

    seconds: float
    min_runs: int = 5
    max_runs: int = 1000
    min_sample_s: float = 1e-3


SLOW_CALL_S = 1.0  # a call longer than this is timed only SLOW_RUNS times (at least)
SLOW_RUNS = 3
BUDGETS = {
    "small": Budget(seconds=0.2, min_runs=3),
    "default": Budget(seconds=1.0, min_runs=5),
    "large": Budget(seconds=2.0, min_runs=3),
}


def measure(run: Callable[[], Any], clock: Clock, budget: Budget,
            warmed_up: bool = False, give_up_past: float | None = None
            ) -> tuple[list[float], int]:
    """Warm up (unless the caller just ran it, e.g. to validate), then sample until the budget
    is spent. Returns (seconds per call, batch size).

    The first timed call estimates the batch size; when calls are long enough to be timed one
    by one it is also the first sample, so a variant that takes seconds runs no extra time.
    A call longer than ``give_up_past`` (a candidate that slow cannot be the fastest) ends
    the timing at once: that call is the only sample.
    """
    if not warmed_up:
        warm = clock.per_call(run, 1)  # caches, clocks, lazy initialisation
        if give_up_past is not None and warm > give_up_past:
            return [warm], 1
    estimate = clock.per_call(run, 1)
    if give_up_past is not None and estimate > give_up_past:
        return [estimate], 1
    batch = 1 if estimate >= budget.min_sample_s else min(
        math.ceil(budget.min_sample_s / max(estimate, 1e-9)), 1000)
    samples: list[float] = [estimate] if batch == 1 else []
    # a call of seconds (a naive loop nest): three samples still give a median and a spread
    least = min(budget.min_runs, SLOW_RUNS) if estimate > SLOW_CALL_S else budget.min_runs
    deadline = time.perf_counter() + budget.seconds
    while len(samples) < budget.max_runs and (
            len(samples) < least or time.perf_counter() < deadline):
        samples.append(clock.per_call(run, batch))
    return samples, batch
