"""One configuration of one variant: build, validate against golden, time.

``loclab run`` and ``loclab tune`` both go through :func:`attempt`, so a tuned configuration is
checked and timed exactly as the run that later uses it: inputs from the same seeded RNG, an
output poisoned before the validating run, the same clock.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from loclab.bench.backend import Staging, output_problem
from loclab.bench.phases import time_phases
from loclab.cases.base import Case, Dims, Variant
from loclab.hw import Machine
from loclab.measure.attempt import Attempt, describe
from loclab.measure.space import Config
from loclab.measure.stats import summarize
from loclab.measure.timing import Budget, measure
from loclab.measure.validate import Check, compare, poison


@dataclass(frozen=True)
class Golden:
    """The golden output at one size, and how far a variant's output may be from it."""

    output: np.ndarray
    tolerance: float | np.ndarray  # normwise, or each element's own bound (validate.compare)


def inputs_and_golden(case: Case, dims: Dims) -> tuple[dict[str, np.ndarray], Golden]:
    """The inputs at ``dims`` (the same for every run and tuning of the case at that size) and
    their golden output."""
    seed = zlib.crc32(f"{case.name}:{sorted(dims.items())}".encode())
    inputs = case.make_inputs(dims, np.random.default_rng(seed))
    return inputs, Golden(case.golden(inputs), case.tolerance_for(inputs))


def attempt(case: Case, variant: Variant, dims: Dims, staging: Staging, golden: Golden,
            machine: Machine, budget: Budget, config: Config | None = None,
            time_invalid: bool = True) -> Attempt:
    """Set up ``variant`` with ``config`` (its setup's keywords) on its inputs, staged where it
    reads them, run it once into a poisoned output, compare with golden, then time it (and
    each phase of a run made of steps). Never raises.

    ``time_invalid``: time an output that differs from golden too (``loclab run`` shows how
    fast a wrong variant is); the tuner does not spend time on configurations it cannot keep.
    """
    params: dict[str, Any] = {}
    check = None
    backend = staging.backend
    try:
        staged = staging.inputs_for(variant)
        shape, dtype = case.output(dims)
        out = staging.output_for(variant, shape, dtype)
        bound = variant.setup(staged, out, machine, **(config or {}))
        params = bound.params
        poison(out)
        result = bound.run()
        backend.synchronize()
        problem = output_problem(result, staged)
        check = (compare(backend.to_host(result), golden.output, golden.tolerance)
                 if problem is None else Check(False, None, problem))
        if not check.valid and not time_invalid:
            return Attempt(params, check)
        samples, batch = measure(bound.run, backend.clock, budget, warmed_up=True)
        phases = time_phases(bound.steps, backend.clock) if bound.steps else {}
        backend.synchronize()
    except Exception as err:  # recorded; the caller goes on with the next variant or config
        return Attempt(params, check, describe(err))
    return Attempt(params, check, None, summarize(samples), batch, phases)
