"""The optimized function beside the original, at the sizes it is tuned at: both compiled with
Numba (the original exactly as written), both run on copies of the same inputs (loclab's
random ones, arrays only written NaN first, or the user's), every output compared, then each
timed (median and spread, the harness's timer and budget).

The original's first run and every comparison with it use a copy compiled with bounds checks:
an index past an array's end (loclab's sizing wrong, or the user's inputs too small) is an
error that says so, never a write into memory that is not the array's. Timing uses a copy
compiled as written.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from loclab.errors import UsageError
from loclab.measure.stats import Summary, summarize
from loclab.measure.timing import Budget, PerfCounterClock, measure
from loclab.measure.validate import Check
from loclab.nest.ir import Loop
from loclab.transform.inputs import (Supplier, argument_names, check_known, check_sizes,
                                     check_work, free_sizes, instances, settled_sizes,
                                     with_given)

# The default size of a run that is timed: each size parameter as large as keeps the
# original's statement instances near this (a second or less of compiled code).
TARGET_INSTANCES = 2**24
SMALLEST_SIZE = 16
# Sizes given with --param may take longer, up to this (seconds a run, and it runs many
# times while tuned and timed).
MAX_TIMED_INSTANCES = 2**32
# Tiles whose verification past them would run more statement instances than this are not
# tried: past ``optimize.PYTHON_VERIFICATION_INSTANCES`` the original runs compiled there,
# and this many take it, its bounds checks and the transformed function's about a second.
MAX_VERIFIED_INSTANCES = 2**28


def timing_sizes(program: Any, given: Mapping[str, int]) -> dict[str, int]:
    """The sizes to tune and time at: the given ones, the rest doubled from 16 (all alike)
    while the run stays within ``TARGET_INSTANCES`` statement instances (and the sizes
    within it too: a size no loop bound uses would grow without end)."""
    check_known(program, given)
    check_sizes(given)
    parameters = list(program.nest.parameters)
    free = free_sizes(program, given)
    size = SMALLEST_SIZE
    sizes = settled_sizes(program, {**{p: size for p in free}, **given})
    if program.nest.derived:
        return with_given(parameters, _grown_apart(program, sizes, free), given)
    while free and size < TARGET_INSTANCES:
        larger = settled_sizes(program, {**sizes, **{p: size * 2 for p in free}})
        if instances(program, larger) > TARGET_INSTANCES:
            break
        size *= 2
        sizes = larger
    return with_given(parameters, sizes, given)


def _grown_apart(program: Any, sizes: dict[str, int], free: list[str]) -> dict[str, int]:
    """``sizes`` with each of ``free`` doubled in turn where that adds statement instances
    within ``TARGET_INSTANCES``: where the function computes a size (``M = N // S``), all
    alike would keep ``M`` at 1 (the divisor grows with ``N``); apart, ``S`` stays 16."""
    work = instances(program, sizes)
    grown = True
    while grown:
        grown = False
        for name in free:
            try:
                larger = settled_sizes(program, {**sizes, name: sizes[name] * 2})
            except UsageError:  # (a computed size below 1)
                continue
            more = instances(program, larger)
            if work < more <= TARGET_INSTANCES:
                sizes, work, grown = larger, more, True
    return sizes


def past_the_tiles(program: Any, tiles: Mapping[Loop, int],
                   timed: Mapping[str, int]) -> dict[str, int]:
    """The sizes the kept recipe is verified at against the original (as Python, or
    compiled where that would take long: ``optimize._verify``): each size past the longest
    tile of the loops whose range it bounds (a whole tile and a partial one), a size that
    bounds no tiled loop past the shortest tile; none given without tiles (the
    transformer's small defaults). A panel's loops are tiled by 128 or 256 where the band's
    other loop is by 16: verifying at 261 in every size would run a product's original
    seven times as long as it needs. Scalar arguments no loop uses as a size keep the
    values they are timed at (a resize's ``H``: the row it reads)."""
    from loclab.optimize import VERIFY_MARGIN

    parameters = program.nest.parameters
    sizes: dict[str, int] = {}
    if tiles:
        reach = dict.fromkeys(parameters, 0)
        for loop, tile in tiles.items():
            for name in bounding_sizes(loop, parameters):
                reach[name] = max(reach[name], tile)
        shortest = min(tiles.values())
        # a size no tiled loop needs past its tile keeps a smaller timed value: a window's
        # or a stride's (im2col's K = 3 stays 3, not past the rows' 37)
        sizes = {name: reach[name] + VERIFY_MARGIN if reach[name]
                 else min(shortest + VERIFY_MARGIN, timed.get(name, shortest + VERIFY_MARGIN))
                 for name in parameters if name not in program.nest.derived}
    sizes.update({name: value for name, value in timed.items()
                  if name not in parameters and name not in program.nest.derived})
    return settled_sizes(program, sizes) if sizes else sizes


def bounding_sizes(loop: Loop, parameters: Sequence[str]) -> set[str]:
    """The sizes ``loop``'s iterations depend on: those its bounds or stride read, and
    those of each enclosing loop whose variable they read, and so on outwards (every size
    where one of those bounds depends on data). A product's ``k`` inside ``i`` depends on
    ``NK`` alone; a triangle's ``j <= i`` on ``i``'s ``N`` too."""
    around = {outer.var: outer for outer in loop.enclosing[:-1]}
    found: set[str] = set()
    pending, seen = [loop], {id(loop)}
    while pending:
        current = pending.pop()
        if current.start is None or current.stop is None:
            return set(parameters)
        names = current.bound_symbols() | (current.stride.symbols() if current.stride
                                            else set())
        found |= names
        for name in names:
            outer = around.get(name)
            if outer is not None and id(outer) not in seen:
                seen.add(id(outer))
                pending.append(outer)
    return found & set(parameters)


def unverifiable_tiles(program: Any, tiles: Mapping[Loop, int],
                       timed: Mapping[str, int]) -> str | None:
    """Why the tile search may not try ``tiles`` (each tiled loop's): their verification
    would run past MAX_VERIFIED_INSTANCES statement instances (a batched product's four
    loops tiled by 512: 517^4, hours as Python, a minute compiled); None where it may."""
    sizes = past_the_tiles(program, tiles, timed)
    work = instances(program, sizes) if tiles else 0
    if work <= MAX_VERIFIED_INSTANCES:
        return None
    shown = ", ".join(f"{name}={sizes[name]}" for name in program.nest.parameters)
    return (f"verifying tiles of {max(tiles.values())} runs the original at {shown}: "
            f"{work:,} statement instances, past {MAX_VERIFIED_INSTANCES:,}")


def check_timed_work(program: Any, sizes: Mapping[str, int]) -> None:
    """The original at ``sizes`` runs at most MAX_TIMED_INSTANCES statement instances: it is
    run many times while tuned and timed (a planner's caller that only plans, such as a
    case's auto row at the case's own size, need not check)."""
    check_work(program, sizes, MAX_TIMED_INSTANCES, "compiled, many times over")


def runnable_original(result: Any, inputs: Mapping[str, Any], sizes: Mapping[str, int],
                      supplier: Supplier | None = None
                      ) -> tuple[Callable[..., Any] | None, str | None, Any]:
    """The original compiled with Numba as written (with bounds checks), run once on copies
    of ``inputs`` (compiling it), and its outputs there (a
    ``loclab.transform.verify.Reference``: what every candidate is checked against, the
    original not run again); or None, why (Numba refuses the code) and None. Where it
    compiles, runs and fails, the inputs do not suit it: OriginalFailed (exit 2), blaming
    loclab's sizing or inputs the function cannot take, or ``supplier``'s inputs (the
    user's)."""
    from numba.core.errors import NumbaError

    from loclab.transform.verify import (Reference, bounds_checked, describe,
                                         original_failed, run)

    program = result.program
    function = None
    arguments = named_arguments(program, inputs)
    try:
        function = bounds_checked(compile_original(result))
        returned = run(function, program, arguments)
    except UsageError:
        raise
    except Exception as err:  # Numba refusing the code, or the code raising
        if isinstance(err, NumbaError) or not getattr(function, "signatures", None):
            return None, describe(err), None
        raise original_failed(err, program, sizes, supplier) from None
    return function, None, Reference(arguments, returned, inputs, function)


def scalar_types(original: Any, program: Any) -> tuple[tuple[str, str], ...]:
    """Each local scalar's NumPy type as Numba typed ``original`` (the function as written,
    compiled) for the arguments it last ran on: the types of all its versions unified, as a
    NumPy array holding every value it takes must be (``s = np.float32(0)`` summing float32
    products stays float32; summing float64 ones it becomes float64). What an expanded
    scalar's array holds; a scalar Numba types as no NumPy scalar is left out."""
    import numpy as np
    from numba.core.errors import NumbaError
    from numba.np.numpy_support import as_dtype

    scalars = {v.name for v in program.nest.variables if not v.is_array}
    typemap = original.overloads[original.signatures[-1]].type_annotation.typemap
    found: dict[str, list[Any]] = {}
    for local, numba_type in typemap.items():
        # a variable's versions are name, name.1, ...; arg.NAME is the argument NAME (a
        # scalar called ``arg`` is not every argument)
        name, _, version = local.partition(".")
        if name in scalars and (not version or version.isdigit()):
            found.setdefault(name, []).append(numba_type)
    types = []
    for name, versions in sorted(found.items()):
        try:
            types.append((name, np.result_type(*(as_dtype(t) for t in versions)).name))
        except (NotImplementedError, TypeError, NumbaError):
            continue
    return tuple(types)


def compile_original(result: Any) -> Callable[..., Any]:
    """The original function compiled with Numba exactly as written (a UsageError saying why
    where Numba refuses it)."""
    import numba

    from loclab.transform.verify import compile_original as original

    return numba.njit(original(result))


def make_inputs(program: Any, sizes: Mapping[str, int],
                supplier: Supplier | None = None) -> dict[str, Any]:
    """The inputs at ``sizes``: what ``supplier`` returns (the user's ``--inputs``), else
    random ones that fit every access (the transformer's verification inputs: arrays only
    written hold NaN)."""
    from loclab.transform.inputs import make_inputs as random_inputs
    from loclab.transform.inputs import supplied_inputs

    if supplier is not None:
        return supplied_inputs(program, supplier, sizes)
    return random_inputs(program, dict(sizes))


def arguments(program: Any, inputs: Mapping[str, Any]) -> list[Any]:
    """The inputs as the function takes them, each array a copy of its own."""
    return [inputs[name].copy() if hasattr(inputs[name], "copy") else inputs[name]
            for name in argument_names(program)]


def named_arguments(program: Any, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The inputs by parameter name, each array a copy of its own."""
    return dict(zip(argument_names(program), arguments(program, inputs)))


def check(original: Any, optimized: Callable[..., Any], program: Any,
          inputs: Mapping[str, Any], sizes: Mapping[str, int],
          length: int | None = None) -> Check:
    """Both functions on copies of ``inputs`` (the original: or its ``Reference`` on these
    inputs, from ``runnable_original``): every output equal, or within the tolerance of a
    reordered reduction (of ``length``, where given: see ``compare_runs``)."""
    from loclab.transform.verify import compare_runs

    verification = compare_runs(original, optimized, program, dict(inputs), dict(sizes),
                                length)
    worst = max((c.error for c in verification.compared), default=0.0)
    return Check(verification.ok, worst, None if verification.ok else str(verification))


@dataclass(frozen=True)
class Timed:
    """A function's time: the median and spread of its samples, calls per sample, and
    whether each call got its inputs afresh (``restoring``)."""

    summary: Summary
    batch: int
    restored: bool


def time_function(function: Callable[..., Any], program: Any, inputs: Mapping[str, Any],
                  budget: Budget, restore: bool = False,
                  give_up_past: float | None = None) -> Timed:
    """The median time of ``function`` on copies of ``inputs``, made once (a function that
    accumulates into an output changes its values, not its time); its first call, which
    compiles, is not timed. A function that fails when it runs again on its own output (an
    LU factorization of its factors divides by zero), or any with ``restore``, is timed
    with the arrays it writes restored before each call, the copying included. What the
    function prints goes to stderr. ``give_up_past``: see ``measure.timing.measure``."""
    from loclab.transform.verify import printing_to_stderr

    with printing_to_stderr():
        if not restore:
            args = arguments(program, inputs)
            try:
                samples, batch = measure(lambda: function(*args), PerfCounterClock(), budget,
                                         give_up_past=give_up_past)
                return Timed(summarize(samples), batch, False)
            except Exception:  # run again on its own output, it failed: time it restored
                pass
        samples, batch = measure(restoring(function, program, inputs), PerfCounterClock(),
                                 budget, give_up_past=give_up_past)
    return Timed(summarize(samples), batch, True)


def restoring(function: Callable[..., Any], program: Any, inputs: Mapping[str, Any]
              ) -> Callable[[], Any]:
    """A call of ``function`` on arguments whose written arrays are copied back from
    ``inputs`` first."""
    import numpy as np

    written = {a.variable.name for s in program.nest.statements for a in s.accesses
               if a.write and a.variable.is_array and a.variable.is_argument}
    args = arguments(program, inputs)
    fresh = [(arg, inputs[name]) for name, arg in zip(argument_names(program), args)
             if name in written and isinstance(arg, np.ndarray)]

    def call() -> Any:
        for target, source in fresh:
            np.copyto(target, source)
        return function(*args)

    return call


def time_original(original: Callable[..., Any], program: Any, inputs: Mapping[str, Any],
                  sizes: Mapping[str, int], budget: Budget, supplier: Supplier | None,
                  restore: bool = False) -> Timed:
    """``time_function`` of the original (compiled as written, without bounds checks); where
    it fails even on inputs restored as they were at its check, its inputs (``supplier``'s,
    or loclab's) do not suit it: OriginalFailed."""
    from loclab.transform.verify import original_failed

    try:
        return time_function(original, program, inputs, budget, restore)
    except Exception as err:  # the user's code, raising
        raise original_failed(err, program, sizes, supplier) from None


def time_optimized(optimized: Callable[..., Any], program: Any, inputs: Mapping[str, Any],
                   budget: Budget, restore: bool = False) -> Timed:
    """``time_function`` of the optimized function; where it fails (it was checked on these
    inputs), a bug in loclab: VerificationError."""
    from loclab.transform.verify import VerificationError, describe

    try:
        return time_function(optimized, program, inputs, budget, restore)
    except Exception as err:  # code loclab wrote, raising where the original does not
        raise VerificationError(f"the optimized function fails while it is timed where the "
                                f"original does not (a bug in loclab: please report it): "
                                f"{describe(err)}") from None


def compare_times(original: Callable[..., Any] | None, optimized: Callable[..., Any],
                  program: Any, inputs: Mapping[str, Any], sizes: Mapping[str, int],
                  threads: int, budget: Budget | None = None,
                  original_error: str | None = None,
                  supplier: Supplier | None = None) -> "Timing":
    """Both functions timed at the same sizes and the same way (``loclab run``'s default
    budget each; both with their written arrays restored where either needs it); the
    optimized one alone where the original does not run under Numba (``original_error``)."""
    from loclab.measure.timing import BUDGETS

    budget = budget or BUDGETS["default"]
    fast = time_optimized(optimized, program, inputs, budget)
    slow = (time_original(original, program, inputs, sizes, budget, supplier, fast.restored)
            if original else None)
    if slow is not None and slow.restored and not fast.restored:
        fast = time_optimized(optimized, program, inputs, budget, restore=True)
    from loclab.cpu.vector_width import features_in_use, vector_bits

    return Timing(dict(sizes), threads, fast.summary, slow.summary if slow else None,
                  original_error, fast.restored, vector_bits(features_in_use()))


@dataclass(frozen=True)
class Timing:
    """The original (compiled as written) and the optimized function at the same sizes."""

    sizes: dict[str, int]
    threads: int
    optimized: Summary
    original: Summary | None
    original_error: str | None  # why the original could not be compiled or run
    restored: bool = False  # each call timed on its written arrays restored (see above)
    vector_bits: int | None = None  # LLVM's vector width for Numba's loops (cpu.vector_width)

    @property
    def speedup(self) -> float | None:
        return self.original.median / self.optimized.median if self.original else None

    def to_json(self) -> dict[str, Any]:
        return {"sizes": dict(self.sizes), "threads": self.threads,
                "optimized_s": self.optimized.median, "optimized_iqr_s": self.optimized.iqr,
                "original_s": self.original.median if self.original else None,
                "original_iqr_s": self.original.iqr if self.original else None,
                "original_error": self.original_error, "restored": self.restored,
                "vector_bits": self.vector_bits, "speedup": self.speedup}
