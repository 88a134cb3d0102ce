"""The optimized function beside the original, at the sizes it is tuned at: both compiled with
Numba (the original exactly as written), both run on copies of the same random inputs (arrays
only written are NaN first), every output compared, then each timed (median and spread, the
harness's timer and budget).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from loclab.bench.stats import Summary, summarize
from loclab.bench.timing import Budget, PerfCounterClock, measure
from loclab.bench.validate import Check
from loclab.errors import UsageError

# The default size of a run that is timed: each size parameter as large as keeps the
# original's statement instances near this (a second or less of compiled code).
TARGET_INSTANCES = 2**24
SMALLEST_SIZE = 16


def timing_sizes(program: Any, given: Mapping[str, int]) -> dict[str, int]:
    """The sizes to tune and time at: the given ones, the rest doubled from 16 (all alike)
    while the run stays within ``TARGET_INSTANCES`` statement instances."""
    from loclab.transform.verify import instances

    parameters = list(program.nest.parameters)
    unknown = sorted(set(given) - set(parameters))
    if unknown:
        raise UsageError(f"--param {unknown[0]}: the function has no size {unknown[0]} "
                         f"(its sizes: {', '.join(parameters) or 'none'})")
    free = [p for p in parameters if p not in given]
    size = SMALLEST_SIZE
    sizes = {**{p: size for p in free}, **given}
    while free:
        larger = {**sizes, **{p: size * 2 for p in free}}
        if instances(program, larger) > TARGET_INSTANCES:
            break
        size *= 2
        sizes = larger
    return {p: sizes[p] for p in parameters}


def runnable_original(result: Any, inputs: Mapping[str, Any]
                      ) -> tuple[Callable[..., Any] | None, str | None]:
    """The original compiled with Numba as written and run once on ``inputs`` (compiling
    it); or None and why, where Numba refuses it or it fails at these sizes."""
    try:
        function = compile_original(result)
        function(*arguments(result.program, inputs))
    except Exception as err:  # the user's code under Numba: any failure is reported
        return None, f"{type(err).__name__}: {str(err).splitlines()[0]}"
    return function, None


def scalar_types(original: Any, program: Any) -> tuple[tuple[str, str], ...]:
    """Each local scalar's NumPy type as Numba typed ``original`` (the function as written,
    compiled) for the arguments it last ran on: the types of all its versions unified, as a
    NumPy array holding every value it takes must be (``s = np.float32(0)`` summing float32
    products stays float32; summing float64 ones it becomes float64). What an expanded
    scalar's array holds; a scalar Numba types as no NumPy scalar is left out."""
    import numpy as np
    from numba.np.numpy_support import as_dtype

    scalars = {v.name for v in program.nest.variables if not v.is_array}
    typemap = original.overloads[original.signatures[-1]].type_annotation.typemap
    found: dict[str, list[Any]] = {}
    for local, numba_type in typemap.items():
        name = local.split(".")[0]
        if name in scalars:
            found.setdefault(name, []).append(numba_type)
    types = []
    for name, versions in sorted(found.items()):
        try:
            types.append((name, np.result_type(*(as_dtype(t) for t in versions)).name))
        except (NotImplementedError, TypeError):
            continue
    return tuple(types)


def compile_original(result: Any) -> Callable[..., Any]:
    """The original function compiled with Numba exactly as written (a UsageError saying why
    where Numba refuses it)."""
    import numba

    from loclab.transform.verify import compile_original as original

    return numba.njit(original(result))


def make_inputs(program: Any, sizes: Mapping[str, int]) -> dict[str, Any]:
    """Random inputs that fit every access at ``sizes`` (the transformer's verification
    inputs: arrays only written hold NaN)."""
    from loclab.transform.verify import make_inputs as inputs

    return inputs(program, dict(sizes))


def arguments(program: Any, inputs: Mapping[str, Any]) -> list[Any]:
    """The inputs as the function takes them, each array a copy of its own."""
    from loclab.transform.verify import argument_names

    return [inputs[name].copy() if hasattr(inputs[name], "copy") else inputs[name]
            for name in argument_names(program)]


def check(original: Callable[..., Any], optimized: Callable[..., Any], program: Any,
          inputs: Mapping[str, Any], sizes: Mapping[str, int],
          length: int | None = None) -> Check:
    """Both functions on copies of ``inputs``: every output equal, or within the tolerance of
    a reordered reduction (of ``length``, where given: see ``compare_runs``)."""
    from loclab.transform.verify import compare_runs

    verification = compare_runs(original, optimized, program, dict(inputs), dict(sizes),
                                length)
    worst = max((c.error for c in verification.compared), default=0.0)
    return Check(verification.ok, worst, None if verification.ok else str(verification))


def time_function(function: Callable[..., Any], program: Any, inputs: Mapping[str, Any],
                  budget: Budget) -> tuple[Summary, int]:
    """The median time of ``function`` on copies of ``inputs`` (made once: a function that
    accumulates into an output changes its values, not its time); its first call, which
    compiles, is not timed."""
    args = arguments(program, inputs)
    samples, batch = measure(lambda: function(*args), PerfCounterClock(), budget)
    return summarize(samples), batch


def compare_times(original: Callable[..., Any] | None, optimized: Callable[..., Any],
                  program: Any, inputs: Mapping[str, Any], sizes: Mapping[str, int],
                  threads: int, budget: Budget | None = None,
                  original_error: str | None = None) -> "Timing":
    """Both functions timed at the same sizes (``loclab run``'s default budget each); the
    optimized one alone where the original does not run under Numba (``original_error``)."""
    from loclab.bench.timing import BUDGETS

    budget = budget or BUDGETS["default"]
    fast, _ = time_function(optimized, program, inputs, budget)
    slow = time_function(original, program, inputs, budget)[0] if original else None
    return Timing(dict(sizes), threads, fast, slow, original_error)


@dataclass(frozen=True)
class Timing:
    """The original (compiled as written) and the optimized function at the same sizes."""

    sizes: dict[str, int]
    threads: int
    optimized: Summary
    original: Summary | None
    original_error: str | None  # why the original could not be compiled or run

    @property
    def speedup(self) -> float | None:
        return self.original.median / self.optimized.median if self.original else None

    def to_json(self) -> dict[str, Any]:
        return {"sizes": dict(self.sizes), "threads": self.threads,
                "optimized_s": self.optimized.median, "optimized_iqr_s": self.optimized.iqr,
                "original_s": self.original.median if self.original else None,
                "original_iqr_s": self.original.iqr if self.original else None,
                "original_error": self.original_error, "speedup": self.speedup}
