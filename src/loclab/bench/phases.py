"""Where a run's time goes: a variant whose run is a sequence of steps (``Bound.steps``: copy
in, compute, copy out) is timed step by step with the run's own clock, so that a row can say
how much of it was copies and how much compute (the device-centric ``A x B x C`` spends most of
its time moving the intermediate back and forth), and the ideal overlapped time can use the
compute measured alone (``loclab.bench.interconnect``).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from loclab.cases.base import Step
from loclab.measure.timing import Clock

PHASE_RUNS = 5  # runs timed step by step after the timed runs; each phase's median is kept


def time_phases(steps: Sequence[Step], clock: Clock, runs: int = PHASE_RUNS
                ) -> dict[str, float]:
    """Seconds per phase of one run, the median over ``runs`` runs, phases in the order they
    first run. Each step is timed on its own (CUDA events around it on the GPU, so that a
    step is charged for its own work only); steps of the same phase add up within a run."""
    samples: dict[str, list[float]] = {}
    for _ in range(runs):
        totals = dict.fromkeys((step.phase for step in steps), 0.0)
        for step in steps:
            totals[step.phase] += clock.per_call(step.run, 1)
        for phase, seconds in totals.items():
            samples.setdefault(phase, []).append(seconds)
    return {phase: statistics.median(values) for phase, values in samples.items()}
