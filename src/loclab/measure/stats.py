"""Summary statistics of repeated timings: the median is reported, the spread beside it."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Summary:
    median: float
    min: float
    max: float
    q1: float
    q3: float
    runs: int

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1


def summarize(samples: Sequence[float]) -> Summary:
    if not samples:
        raise ValueError("no samples to summarize")
    if len(samples) == 1:
        q1 = q3 = samples[0]
    else:
        q1, _, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    return Summary(median=statistics.median(samples), min=min(samples), max=max(samples),
                   q1=q1, q3=q3, runs=len(samples))
