"""``loclab optimize``: from a golden sequential loop nest to verified, tuned parallel code, on
its own, each decision explained the way the lectures make it.

``optimize_file("examples/recipes.py", "transpose")`` analyses the function's dependences
(``loclab.deps``), plans every top-level nest (``planner``: remedies, a loop order with
unit-stride innermost accesses, tiles from the cache model, the parallel loop), keeps the
first plan of each nest the transformer proves legal (``build``), tunes the tiles by
measurement (``search``: ``loclab tune``'s search and cache), verifies the result against the
original run as plain Python at sizes that cover a whole tile and more (``loclab transform
--verify``), checks it again at the tuning size against the original compiled with Numba,
and times both there (``measure``). Code that fails either check is a bug in loclab: it is
reported as one (VerificationError, exit 1), never returned.

The original runs on loclab's random inputs, sized to fit every access, or on the user's
(``inputs``: ``loclab.transform.inputs.INPUTS_CONTRACT``). Where it fails on them, the inputs
do not suit it: that is said, with what to do (OriginalFailed, exit 2), never blamed on the
optimized code. The original's runs and the verification of the kept recipe are
bounds-checked (``measure``, ``loclab.transform.verify``); the recipes and tiles measured
while tuning run as they will be timed, without: each computes the same statement instances
as the original, which isl proved, and the kept one is verified with bounds checks before it
is returned.
"""

from __future__ import annotations

import itertools
import sys
import textwrap
import time
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from loclab.errors import UsageError

TARGETS = ("cpu", "gpu")
# the levels at which no loop of a nest runs in threads: why each stays sequential is said
# (a CPU nest in order, or with its sums in vector lanes; a GPU nest in one thread)
UNTHREADED = frozenset({"sequential", "in lanes", "one thread"})
VERIFY_MARGIN = 5  # verification sizes: the largest tile and a partial tile more
# Past this many statement instances (about half a second), the verification past the
# tiles runs the original compiled with Numba, not as Python: 3mm's panels of 256 need 261
# in four of its five sizes, 9 million instances in its middle product alone; a product's
# panels alone 1-2 million, which as Python added seconds to each optimize call
PYTHON_VERIFICATION_INSTANCES = 1 << 19


@dataclass(frozen=True)
class NestResult:
    """What was decided for one top-level nest."""

    line: int
    loops: tuple[str, ...]
    level: str  # tiled, reordered, as written, sequential
    steps: tuple[tuple[str, str], ...]  # (step, reason), in recipe order
    sequential: tuple[str, ...]
    refused: tuple[tuple[str, str], ...]  # (level, why the transformer refused it)
    tile: dict[str, Any] | None

    def to_json(self) -> dict[str, Any]:
        return {"line": self.line, "loops": list(self.loops), "level": self.level,
                "steps": [{"step": s, "reason": r} for s, r in self.steps],
                "sequential": list(self.sequential),
                "refused": [{"level": lv, "reason": r} for lv, r in self.refused],
                "tile": self.tile}


@dataclass(eq=False)
class Optimized:
    """The optimized function: its recipe step by step, its code, and the proof."""

    function: str
    file: str
    target: str
    nests: list[NestResult]
    recipe: str
    source: str
    verification: Any  # loclab.transform.verify.Verification (plain Python original)
    check: Any  # loclab.measure.validate.Check at the tuning sizes (original under Numba)
    timing: Any  # loclab.optimize.measure.Timing
    tuning: Any  # loclab.optimize.search.Tuned (GPU: optimize.gpu.GpuTuning) or None
    # (verification, check and timing are None only for a GPU target on a machine without
    # a GPU: the code is written, not run; the notes say so)
    candidates: list[Any]  # loclab.optimize.search.Candidate: the recipes measured
    kept: int | None  # which of them was kept (None: none was measured)
    notes: list[str] = field(default_factory=list)
    transformed: Any = field(default=None, repr=False)
    fast_math: bool = False  # the user let the compiler fuse and reorder (--fast-math)

    @property
    def parallel(self) -> bool:
        return any(nest.level not in UNTHREADED for nest in self.nests)

    def compile(self) -> Callable[..., Any]:
        """The optimized function, ready to call (Numba compiles it on the first call)."""
        return self.transformed.compile()

    def to_json(self) -> dict[str, Any]:
        return {"function": self.function, "file": self.file, "target": self.target,
                "parallel": self.parallel, "nests": [n.to_json() for n in self.nests],
                "recipe": self.recipe, "fast_math": self.fast_math, "source": self.source,
                "verification": self.verification.to_json() if self.verification else None,
                "check": {"valid": self.check.valid, "max_error": self.check.max_rel_err}
                if self.check else None,
                "timing": self.timing.to_json() if self.timing else None,
                "tuning": self.tuning.to_json() if self.tuning else None,
                "candidates": [{**c.to_json(), "kept": k == self.kept}
                               for k, c in enumerate(self.candidates)],
                "notes": list(self.notes)}


def optimize_file(path: str | Path, function: str | None = None, **options: Any) -> Optimized:
    """``optimize`` the function ``function`` of a Python file (``None``: its only one)."""
    from loclab.nest import read_source

    path = Path(path)
    if path.suffix != ".py":
        raise UsageError(f"{path}: loclab optimize reads Python loop nests (.py)")
    return optimize(read_source(path), function, filename=str(path), **options)


@dataclass(frozen=True)
class Planned:
    """A function read, its plans made: every top-level nest's plans (most ambitious first),
    the sizes it is tuned and timed at, and the function as written (emitted for Numba)."""

    code: Any  # loclab.optimize.build.Source
    as_written: Any  # loclab.transform.Transformed with no step
    sizes: dict[str, int]
    plans: list[list[Any]]  # loclab.optimize.planner.NestPlan, per nest
    context: Any  # loclab.optimize.planner.Context: the analysis and the machine's caches
    notes: tuple[str, ...] = ()  # plans considered and not offered, with the number why


def plan(source: str, function: str | None = None, *, filename: str = "<source>",
         params: Mapping[str, int] | None = None, element_bytes: int = 8,
         threads: int | None = None, assume_distinct: bool = False,
         fast_math: bool = False) -> Planned:
    """Analyse ``function`` and plan each of its top-level loop nests (``planner``) for the
    caches of this CPU and ``threads`` (default: Numba's), at ``params`` (the rest of the
    sizes chosen as ``timing_sizes`` says; each a whole number of at least 1). The plans
    are for distinct arrays: the code checks arguments that may share memory and runs as
    written when they do, unless ``assume_distinct``; with ``fast_math`` each recipe ends in
    ``fastmath()``."""
    import numba

    from loclab.deps import analyze
    from loclab.deps.model import Model
    from loclab.hw import detect_cpu
    from loclab.optimize.build import Source
    from loclab.optimize.copies import with_copies
    from loclab.optimize.fusion import fused_plans
    from loclab.optimize.inner import with_inner_orders
    from loclab.optimize.lanes import with_held
    from loclab.optimize.measure import timing_sizes
    from loclab.optimize.packing import with_packs
    from loclab.optimize.pieces import piece_plans
    from loclab.optimize.planner import (Context, loop_extents, plan_nest, top_loops,
                                         with_cyclic)
    from loclab.optimize.strips import with_strips
    from loclab.optimize.timetile import time_tiled_plans

    code = Source(source, function or _only_function(source, filename), filename,
                  assume_distinct=assume_distinct, fast_math=fast_math)
    analysis = analyze(source, code.function, filename=filename, assume_distinct=True)
    if not top_loops(analysis):
        raise UsageError(f"{filename}::{code.function}: no loop to optimize")
    as_written = code.transform([])
    sizes = timing_sizes(as_written.program, dict(params or {}))
    cpu = detect_cpu()
    context = Context(analysis, Model(analysis.nest, analysis.params),
                      loop_extents(analysis, sizes), element_bytes, cpu.l1d_bytes,
                      cpu.l2_bytes, threads or numba.get_num_threads())
    tops = top_loops(analysis)
    fused = fused_plans(context, tops)
    plans: list[list[Any]] = []
    notes: list[str] = []
    for top in tops:  # the most ambitious first: time-tiled, fused, then the planner's
        tiled, note = time_tiled_plans(context, top)
        notes += [note] if note else []
        planned = with_inner_orders(context, plan_nest(context, top))
        planned = with_copies(context, with_held(context, with_packs(
            context, with_strips(code, context, planned))))
        ordered = tiled + ([fused[id(top)]] if id(top) in fused else []) + _with_pieces(
            planned, piece_plans(code, context, top))
        plans.append(with_cyclic(context, ordered))
    return Planned(code, as_written, sizes, plans, context, tuple(notes))


def _with_pieces(plans: list[Any], pieces: list[Any]) -> list[Any]:
    """The planner's plans with the distributed-into-pieces ones after its distributed ones
    (the most ambitious first: ``tiers`` measures them in that order)."""
    at = next((k for k, p in enumerate(plans) if p.level != "distributed"), len(plans))
    return [*plans[:at], *pieces, *plans[at:]]


def optimize(source: str, function: str | None = None, *, filename: str = "<source>",
             target: str = "cpu", params: Mapping[str, int] | None = None,
             tune: bool = True, threads: int | None = None, tuning_cache: Path | None = None,
             element_bytes: int = 8, timing: Any = None,
             progress: Callable[[str], None] | None = None,
             inputs: Callable[..., Any] | None = None,
             assume_distinct: bool = False, fast_math: bool = False) -> Optimized:
    """Optimize ``function`` of the Python source text ``source`` for ``target``.

    ``params`` fixes sizes the code is tuned and timed at (the rest grow until the original
    runs about 2^24 statement instances); ``tune=False`` keeps the first legal recipe and the
    cache model's tiles (no measurement but the final one); ``element_bytes`` is the size of
    the arrays' elements the tile model assumes (8: the float64 inputs it is verified and
    timed on); ``timing`` the budget of the final timing (a ``loclab.measure.timing.Budget``;
    default: ``loclab run``'s); ``inputs`` a function that returns the arguments at given
    sizes (``loclab.transform.inputs.INPUTS_CONTRACT``; default: loclab's random ones);
    ``assume_distinct``: no two arguments share memory (the code then skips the check that
    runs it as written when they do); ``fast_math``: the compiler may fuse multiplies and
    adds and reorder sums in the CPU code (``fastmath()`` ends every recipe)."""
    from loclab.cpu import vector_width
    from loclab.cpu.threads import configure_threads
    from loclab.optimize import measure
    from loclab.optimize.ahead import CompiledAhead
    from loclab.optimize.build import choose
    from loclab.optimize.build import Source
    from loclab.optimize.cuda import as_written_text, gpu_plan
    from loclab.optimize.cuda.names import c_safe_names
    from loclab.optimize.gpu import optimize_gpu, refuse_one_thread
    from loclab.optimize.temporaries import inline_temporaries
    from loclab.transform.inputs import argument_names

    started = time.perf_counter()
    say = progress or (lambda message: None)
    if target not in TARGETS:
        raise UsageError(f"--target {target}: choose from {', '.join(TARGETS)}")
    if fast_math and target != "cpu":
        raise UsageError("--fast-math: for --target cpu (the CUDA compiler fuses multiplies "
                         "and adds already)")
    used_threads = configure_threads(threads)
    users, inlined, renamed = source, (), ()
    if target == "gpu":  # a perfect band the mapping may reorder (``temporaries``), names
        # CUDA C can use (``cuda.names``)
        function = function or _only_function(source, filename)
        source, inlined = inline_temporaries(source, function)
        source, renamed = c_safe_names(source, function)
        if renamed:
            params, inputs = _renamed(params, inputs, {r.name: r.new for r in renamed})
    planned = plan(source, function, filename=filename, params=params,
                   element_bytes=element_bytes, threads=used_threads,
                   assume_distinct=assume_distinct, fast_math=fast_math)
    code, sizes = planned.code, planned.sizes
    measure.check_timed_work(planned.as_written.program, sizes)
    if target == "gpu":  # mapped first: what cannot run on a GPU is said before any run
        mapped = gpu_plan(planned)
        if inlined or renamed:  # where arguments share memory, the module runs the user's
            # function as written
            mapped = replace(mapped, original=as_written_text(
                Source(users, planned.code.function, filename).transform([]).program.syntax))
        refuse_one_thread(mapped, sizes)
    arguments = measure.make_inputs(planned.as_written.program, sizes, inputs)
    original, original_error, reference = measure.runnable_original(
        planned.as_written, arguments, sizes, inputs)
    notes: list[str] = list(planned.notes) if target == "cpu" else [
        *(i.text() for i in inlined), *(r.text() for r in renamed)]
    if original is None:
        notes.append(f"the original does not run under Numba as written ({original_error}): "
                     "nothing measured to choose; verified against it as Python only")
    else:
        code = replace(code, scalar_types=measure.scalar_types(original,
                                                               planned.as_written.program))
    if target == "gpu":
        return optimize_gpu(mapped, arguments, reference, original_error, tune=tune,
                            timing=timing, notes=notes, say=say, supplier=inputs)
    program = planned.as_written.program
    with CompiledAhead([arguments[name] for name in argument_names(program)]) as ahead:
        if tune and original is not None:
            chosen, candidates, kept, tuned, rivalry = _searched(
                code, planned, reference, arguments, used_threads, tuning_cache, say, ahead,
                started)
            notes += [rivalry] if rivalry else []
        else:
            (chosen, _), candidates, kept, tuned = choose(code, planned.plans), [], None, None
        bands = [c.plan for c in chosen if c.plan.band is not None]
        tiles = {plan.band.key: plan.band.choice.tile for plan in bands}
        tiles.update(tuned.tiles if tuned else {})
        say("verifying against the original")
        chosen, result, verification, verdict, optimized = _proved(
            code, planned.plans, chosen, tiles, reference, arguments, sizes, notes, inputs,
            ahead)
        say("timing the original and the optimized function")
        compiled_original = measure.compile_original(planned.as_written) if original else None
        times = measure.compare_times(compiled_original, optimized, result.program, arguments,
                                      sizes, used_threads, timing, original_error, inputs)
        if tune and result.steps and _clearly_slower(times):
            notes.append(f"{'; '.join(step.step for step in result.steps)} measured "
                         f"{times.speedup:.2f}x the original in the final timing: the "
                         "function is returned as written")
            written = [[nest[-1]] for nest in planned.plans]  # each nest's sequential plan
            chosen, result, verification, verdict, optimized = _proved(
                code, written, choose(code, written)[0], {}, reference, arguments, sizes,
                notes, inputs, ahead)
            times = measure.compare_times(compiled_original, optimized, result.program,
                                          arguments, sizes, used_threads, timing,
                                          original_error, inputs)
    wide = times.vector_bits == 512
    # a function returned as written has no recipe to end in fastmath(): it rounds as written
    fused = result.program.fast_math
    if fast_math and not fused:
        notes.append("--fast-math: the function is returned as written, so it rounds as "
                     "written")
    return Optimized(code.function, filename, target,
                     [_nest_result(c, tiles, tuned is not None and tuned.unsearched is None)
                      for c in chosen],
                     "; ".join(step.step for step in result.steps),  # fastmath() too
                     _with_width_comment(result.source) if wide else result.source,
                     verification, verdict, times, tuned, candidates, kept,
                     notes + list(result.notes)
                     + ([f"{vector_width.NOTE}: `{vector_width.COMMAND}`"] if wide else []),
                     result, fused)


def _clearly_slower(times: Any) -> bool:
    """Whether the final timing found the optimized function slower than the original
    beyond their spread (its first quartile past the original's third): what the search
    measured at its own sizes and trials did not hold, and a user is never handed code
    slower than their own (``--no-tune`` asks for the first legal recipe, kept as it is)."""
    return times.original is not None and times.optimized.q1 > times.original.q3


def _with_width_comment(source: str) -> str:
    """``source`` with comments below its first line (loclab's header) that say it was timed
    with 512-bit vectors and how to run it so: the file alone must tell its reader."""
    from loclab.cpu.vector_width import COMMAND, NOTE

    first, _, rest = source.partition("\n")
    prose = textwrap.wrap(f"{NOTE}:", 92, break_on_hyphens=False)
    return "\n".join([first, *(f"# {line}" for line in prose), f"#     {COMMAND}", rest])


def _searched(code: Any, planned: Planned, reference: Any, arguments: dict[str, Any],
              threads: int, tuning_cache: Path | None, say: Callable[[str], None],
              ahead: Any, started: float
              ) -> tuple[list[Any], list[Any], int, Any, str | None]:
    """The recipe measured fastest and its tiles tuned by measurement, every candidate
    compiled ahead (``ahead``, a ``CompiledAhead``), the tiles searched within what is left
    of ``SEARCH_SECONDS`` since ``started``: (its plans chosen, the candidates, which was
    kept, the tiles' search or None where it has no band, a note where a recipe with tiles
    to tune was measured again against a faster one without: ``search.tunable_rival``).
    The candidates are built as the result will be, checking whether arguments share memory
    (a compile about a tenth longer): the one kept is proved and timed as the search
    compiled it."""
    from loclab.hw import detect_machine
    from loclab.measure.cache import device_name
    from loclab.optimize.explain import milliseconds
    from loclab.optimize.search import (SEARCH_SECONDS, TIE_MARGIN, fastest_recipe,
                                        remeasured, tunable_rival, tune_tiles)

    sizes = planned.sizes
    say("measuring the acceptable recipes")
    kept, candidates = fastest_recipe(code, planned.plans, reference, arguments, sizes,
                                      ahead)
    rival = tunable_rival(candidates, kept)
    tried = candidates[kept if rival is None else rival]
    plans = [c.plan for c in tried.chosen]
    if not any(plan.band is not None for plan in plans):
        return tried.chosen, candidates, kept, None, None
    say("tuning the tiles by measurement")
    # a batch of tiles takes about as long as the slowest recipe took to build and compile
    seconds = SEARCH_SECONDS - (time.perf_counter() - started) - ahead.slowest_s
    tuned = tune_tiles(code, plans, reference, arguments, sizes,
                       device_name("cpu", detect_machine(with_gpu=False), threads),
                       tuning_cache, ahead=ahead, seconds=seconds)
    if rival is None:
        return tried.chosen, candidates, kept, tuned, None
    fastest = candidates[kept]
    measured = (f"{tried.recipe}, within {TIE_MARGIN:.0%} of the fastest recipe at the "
                f"cache model's tiles ({milliseconds(tried.attempt.summary.median)} against "
                f"{milliseconds(fastest.attempt.summary.median)})")
    other = f"{fastest.recipe or 'as written'} kept"
    if tuned.unsearched is not None:  # the model's tiles: measured already, and slower
        return fastest.chosen, candidates, kept, None, \
            f"{measured}, had no time to tune its tiles ({tuned.unsearched}): {other}"
    median = remeasured(code, plans, tuned.tiles, reference, arguments, sizes, ahead)
    against = remeasured(code, [c.plan for c in fastest.chosen], {}, reference, arguments,
                         sizes, ahead)
    times = (f"{measured}, had its tiles tuned; measured again, {milliseconds(median)} "
             f"against {milliseconds(against)}")
    if median is not None and (against is None or median < against):
        return tried.chosen, candidates, rival, tuned, f"{times}: kept"
    return fastest.chosen, candidates, kept, None, f"{times}: {other}"


def _renamed(params: Mapping[str, int] | None, inputs: Callable[..., Any] | None,
             renames: Mapping[str, str]) -> tuple[dict[str, int] | None,
                                                  Callable[..., Any] | None]:
    """``--param`` sizes and the user's inputs function in the renamed function's names
    (``cuda.names``): the inputs function is still called, and answers, in the user's."""
    back = {new: old for old, new in renames.items()}
    sizes = {renames.get(k, k): v for k, v in params.items()} if params else params
    if inputs is None:
        return sizes, None
    supplier = inputs

    def supplied(**given: int) -> Any:
        result = supplier(**{back.get(k, k): v for k, v in given.items()})
        return {renames.get(k, k): v for k, v in result.items()} \
            if isinstance(result, Mapping) else result

    return sizes, supplied


def _only_function(source: str, filename: str) -> str:
    from loclab.nest.python import python_functions

    names = [name for name, _ in python_functions(source, filename)]
    if len(names) != 1:
        raise UsageError(f"{filename}: name the function to optimize (functions: "
                         f"{', '.join(names) or 'none'})")
    return names[0]


def _proved(code: Any, plans: list[list[Any]], chosen: list[Any], tiles: Mapping[str, int],
            original: Any, inputs: Mapping[str, Any],
            sizes: Mapping[str, int], notes: list[str],
            supplier: Callable[..., Any] | None, ahead: Any) -> tuple[Any, ...]:
    """The kept recipe, verified (against the original as Python, past the largest tile)
    and checked (against it under Numba at the tuning sizes); where it fails, which is a bug
    in loclab, the failure is noted as one and the next less ambitious recipe is proved
    instead, down to the function as written. The original failing on its inputs is no
    bug of the recipe's: raised as it is. Each recipe proved is compiled with bounds
    checks, and as timed where the search did not compile it, by workers of ``ahead`` (a
    ``CompiledAhead``) at once.
    (chosen, result, verification, check, compiled function)."""
    from loclab.measure.validate import Check
    from loclab.optimize import measure
    from loclab.optimize.build import choose, loop_tiles, tiers
    from loclab.transform.verify import describe

    tried: set[tuple[str, ...]] = set()
    for attempt in itertools.chain([chosen], (kept for kept, _ in tiers(code, plans))):
        final, result = choose(code, [[c.plan] for c in attempt], tiles)
        recipe = tuple(step.step for step in result.steps)
        if recipe in tried:
            continue
        tried.add(recipe)
        ahead.prove(result)
        try:
            optimized = ahead.function(result)
            verification = _verify(result, loop_tiles([c.plan for c in final], tiles),
                                   sizes, supplier, optimized,
                                   ahead.checked_function(result),
                                   original.original if original is not None else None)
            verdict = (measure.check(original, optimized, result.program, inputs, sizes)
                       if original is not None else Check(True, None, None))
        except UsageError:  # the original failing on its inputs, the sizes too large
            raise
        except Exception as err:  # the code failed to compile or to run: a bug too
            if not result.steps:
                raise
            notes.append(f"BUG in loclab: {result.source.splitlines()[0][2:]} failed: "
                         f"{describe(err)}; not kept")
            continue
        if verification.ok and verdict.valid:
            return ([replace(new, refused=old.refused) for new, old in zip(final, attempt)],
                    result, verification, verdict, optimized)
        if not result.steps:
            raise _bug(verification if not verification.ok else verdict.problem)
        notes.append(f"BUG in loclab: {result.source.splitlines()[0][2:]} computed something "
                     f"else ({verification if not verification.ok else verdict.problem}); "
                     "not kept")
    raise _bug("no recipe held, not even the function as written")


def _bug(what: Any) -> Exception:
    from loclab.transform.verify import VerificationError

    return VerificationError(f"loclab optimize built code that differs from the original "
                             f"(a bug in loclab: please report it): {what}")


def _verify(result: Any, tiles: Mapping[Any, int], timed: Mapping[str, int],
            supplier: Callable[..., Any] | None, compiled: Callable[..., Any],
            checked: Callable[..., Any] | None,
            compiled_original: Callable[..., Any] | None) -> Any:
    """The transformed function (``compiled``; ``checked``: compiled with bounds checks
    already, where it was) against the original run as Python, at sizes past the tiles
    (``tiles``: each tiled loop's; a whole tile and a partial one; ``past_the_tiles``),
    or the transformer's small defaults; on ``supplier``'s inputs where given. Past
    ``PYTHON_VERIFICATION_INSTANCES`` the original runs as ``compiled_original`` (Numba,
    bounds-checked) where it compiled. Scalar arguments no loop uses as a size keep the
    values they are timed at (a resize's ``H``: the row it reads)."""
    from loclab.optimize.measure import past_the_tiles
    from loclab.transform.inputs import instances
    from loclab.transform.verify import verify

    sizes = past_the_tiles(result.program, tiles, timed)
    slow = sizes and instances(result.program, sizes) > PYTHON_VERIFICATION_INSTANCES
    return verify(result, sizes, inputs=supplier, most_instances=None, compiled=compiled,
                  checked=checked, compiled_original=compiled_original if slow else None)


def _nest_result(chosen: Any, tiles: Mapping[str, int], tuned: bool) -> NestResult:
    from loclab.optimize.planner import label, uneven_work

    plan = chosen.plan
    reasons = [(str(d.step), d.reason) for d in plan.before if d.step]
    tile = None
    if plan.band is not None:
        band = plan.band
        size = tiles[band.key]
        tile = {"band": [label(loop) for loop in band.loops], "model": band.choice.tile,
                "model_reason": band.choice.reason(), "reuse": band.reuse.text(),
                "tuned": size if tuned else None,
                "fixed": {label(loop): size for loop, size in zip(band.loops, band.fixed)
                          if size} or None, "fixed_reason": band.panel or None}
        panel = f"; the model's longer tiles: {band.panel}" if band.panel else ""
        reasons.append((str(band.step(size)), f"reuse: {band.reuse.text()}; tile "
                                         f"{band.choice.tile} from the cache model ("
                                         f"{band.choice.reason()})" + (
                                             f", {size} by measurement" if tuned else "")
                        + panel))
    if plan.wavefront is not None:
        time, fused = (loop.var for loop in plan.wavefront)
        why = {"skew": f"a tile's wave is the sum of its {time} and {fused} tiles: the tiles "
                       f"it needs (the steps before it, the rows before it) are in earlier "
                       "waves",
               "interchange": f"the waves run one after another, the {time} tiles of one "
                              "wave inside"}
        before = {d.step for d in plan.before}
        reasons += [(str(s), why[s.name]) for s in chosen.steps
                    if s.name in why and s not in before]
    reasons += [(str(d.step), d.reason) for d in (*plan.after, *plan.registers, *plan.lanes)
                if d.step]
    staged = [str(s) for s in chosen.steps if s.name == "stage"]
    reasons += [(step, pack.reason) for step, pack in zip(staged, plan.packs)]
    sides = {d.step for d in plan.after}  # parallel nests beside a distributed band's
    parallel_steps = [str(s) for s in chosen.steps if s.name == "parallel" and s not in sides]
    dealt = dict(plan.cyclic)
    reasons += [(step, why + (f"; {uneven_work(loop)}: its iterations dealt in turn to "
                              f"the {dealt[loop]} threads" if loop in dealt else ""))
                for step, (loop, why) in zip(parallel_steps, plan.parallel)]
    loops = tuple(loop.var for loop in plan.top.statements()[0].loops) \
        if plan.top.statements() else (plan.top.var,)
    # plans refused at the same step say the same: said once
    refused = tuple(dict.fromkeys((p.level, why) for p, why in chosen.refused))
    return NestResult(plan.top.line, loops, plan.level, tuple(reasons), plan.sequential,
                      refused, tile)


class _CallableModule(types.ModuleType):
    """``loclab.optimize(...)`` calls :func:`optimize`, as ``loclab.transform(...)`` calls
    its verb."""

    def __call__(self, *args: Any, **kwargs: Any) -> Optimized:
        return optimize(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule

__all__ = ["NestResult", "Optimized", "Planned", "optimize", "optimize_file", "plan"]
