"""``loclab optimize --target gpu``: each nest's loops mapped to threads (``cuda.plan``), the
kernels written (``cuda.kernel``), their launch knobs tuned by measurement, the result checked
against the original compiled with Numba at the tuning sizes and against it run as Python at
sizes past a block's tile, then both timed (the GPU function on arrays already on the device,
CUDA events; the original on the CPU).

Without a GPU the code is still written and shown, with the model's knobs, and the result
says it was neither validated nor timed. A config whose kernels fail to compile or compute
something else is a bug in loclab: noted as one and never kept; where even the model's
config fails, the exception names it (VerificationError, exit 1).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from loclab.optimize.cuda import GpuPlan, argument_types
from loclab.optimize.cuda.mapping import Config, neighbours
from loclab.transform.inputs import settled_sizes

SEARCH_TRIALS = 12  # configs measured beyond the model's, at most
ONE_THREAD_MOST = 2**24  # statement instances one GPU thread may run (about 0.1-1 s)


@dataclass(frozen=True)
class Trial:
    """One set of configs (one per nest) as measured."""

    configs: tuple[Config, ...]
    median_s: float | None
    problem: str | None = None

    def text(self) -> str:
        return "; ".join(c.text() for c in self.configs if c.block) or "one thread"

    def to_json(self) -> dict[str, Any]:
        return {"configs": [c.to_json() for c in self.configs], "median_s": self.median_s,
                "valid": self.problem is None, "problem": self.problem}


@dataclass
class GpuTuning:
    """The configs measured, the kept one first among the valid."""

    trials: list[Trial] = field(default_factory=list)
    kept: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"trials": [t.to_json() for t in self.trials], "kept": self.kept}


def optimize_gpu(plan: GpuPlan, inputs: Mapping[str, Any], original: Any,
                 original_error: str | None, *, tune: bool, timing: Any,
                 notes: list[str], say: Callable[[str], None],
                 supplier: Callable[..., Any] | None = None) -> Any:
    """The ``Optimized`` result for the GPU (see the module) of the function mapped as
    ``plan``; ``original``: the original's outputs on ``inputs`` (a ``Reference`` from
    ``measure.runnable_original``; None where it does not run under Numba: nothing
    measured to choose), ``supplier``: the user's inputs function, where the inputs are
    theirs."""
    from loclab.gpu import gpu_unavailable_reason
    from loclab.optimize import Optimized

    planned = plan.users_planned  # the kernels may map a rewrite of it (``cuda.reorder``)
    program = planned.as_written.program
    notes.extend(plan.notes)
    arrays, scalars = argument_types(inputs, list(program.nest.parameters))
    configs = tuple(plan.default_configs())
    missing = gpu_unavailable_reason()
    if missing is not None:
        emitted = plan.emit(arrays, scalars, configs)
        notes.append(f"not run: {missing}; the code is the model's (knobs not tuned, not "
                     "validated, not timed)")
        return Optimized(planned.code.function, program.syntax.filename, "gpu",
                         nest_results(plan, emitted, configs), _recipe(plan), emitted.module,
                         None, None, None, None, [], None, notes, emitted)
    check_device_memory(inputs, planned.sizes)
    tuning = GpuTuning()
    kept = configs
    if tune and original is not None:
        say("tuning the launch (threads, iterations per thread, staging) by measurement")
        kept = _search(plan, arrays, scalars, original, inputs, planned.sizes, tuning, notes)
    say("verifying against the original")
    emitted, function, verification, check = _proved(plan, arrays, scalars, kept, original,
                                                     inputs, planned.sizes, supplier)
    say("timing the original and the GPU function")
    as_written = planned.as_written if original is not None else None
    times = _times(function, as_written, program, inputs, planned.sizes, timing,
                   original_error, supplier)
    return Optimized(planned.code.function, program.syntax.filename, "gpu",
                     nest_results(plan, emitted, kept), _recipe(plan), emitted.module,
                     verification, check, times, tuning if tuning.trials else None, [], None,
                     notes, emitted)


def refuse_one_thread(plan: GpuPlan, sizes: Mapping[str, int]) -> None:
    """Refuse (UsageError, one line) a function none of whose loops runs on GPU threads
    (dependences on every loop) at sizes where one thread would run more than
    ONE_THREAD_MOST statement instances: slower than the host by far, and too slow to time."""
    from loclab.errors import UsageError
    from loclab.transform.inputs import instances, sizes_text

    if any(mapping.threads_share for mapping in plan.mappings):
        return
    program = plan.users_planned.as_written.program
    work = instances(program, sizes)
    if work <= ONE_THREAD_MOST:
        return
    why = next((why for mapping in plan.mappings for step, why in mapping.reasons
                if step == "one thread"), "every loop carries a dependence")
    function = plan.users_planned.code.function
    raise UsageError(f"{program.syntax.filename}::{function}: no loop can "
                     f"run on GPU threads ({why}); at {sizes_text(sizes)} its {work:.3g} "
                     "statement instances would run in one GPU thread, far slower than on "
                     "the host: optimize it with --target cpu, or choose smaller sizes with "
                     "--param")


def check_device_memory(inputs: Mapping[str, Any], sizes: Mapping[str, int],
                        free: int | None = None) -> None:
    """Refuse, before anything is copied there, arrays the GPU's free memory (``free``
    bytes; default: CUDA's count) cannot hold: the host's memory was checked, the GPU's may
    be smaller."""
    import numpy as np

    from loclab.errors import UsageError
    from loclab.transform.inputs import sizes_text

    nbytes = sum(a.nbytes for a in inputs.values() if isinstance(a, np.ndarray))
    if free is None:
        import cupy

        free = int(cupy.cuda.runtime.memGetInfo()[0])
    if nbytes > free:
        raise UsageError(f"at {sizes_text(sizes)} the function's arrays take "
                         f"{nbytes / 2**30:.3g} GiB and {free / 2**30:.3g} GiB of GPU memory "
                         "is free: choose smaller sizes with --param")


def _recipe(plan: GpuPlan) -> str:
    return "; ".join(str(step) for m in plan.mappings for step in m.steps)


def _attempt(plan: GpuPlan, emitted: Any, configs: tuple[Config, ...],
             original: Any, inputs: Mapping[str, Any],
             sizes: Mapping[str, int]) -> Trial:
    """``emitted`` (the module written for ``configs``) compiled, checked against the
    original and timed."""
    from loclab.measure.timing import BUDGETS
    from loclab.optimize import measure
    from loclab.gpu.transfers import on_host_arrays
    from loclab.optimize.cuda.run import time_on_device
    from loclab.transform.inputs import argument_names

    program = plan.users_planned.as_written.program
    try:
        function = emitted.compile()
        verdict = measure.check(original, on_host_arrays(function), program, inputs, sizes,
                                rounding_length(program, sizes))
        if not verdict.valid:
            return Trial(configs, None, f"computed something else: {verdict.problem}")
        summary = time_on_device(function, argument_names(program), inputs, BUDGETS["small"])
    except Exception as err:  # a kernel that fails to compile or launch: a bug too
        return Trial(configs, None, f"{type(err).__name__}: {str(err).splitlines()[0]}")
    return Trial(configs, summary.median)


def _search(plan: GpuPlan, arrays: Any, scalars: Any, original: Any,
            inputs: Mapping[str, Any], sizes: Mapping[str, int], tuning: GpuTuning,
            notes: list[str]) -> tuple[Config, ...]:
    """Local search from the model's configs: one nest's knobs moved at a time to a
    neighbour (``mapping.neighbours``), kept where faster, until no neighbour is or the
    trials run out. The nests with the most statement instances are walked first: the trials
    go where the time is (gemm's product before its scaling of C). A neighbour whose module
    is one already measured (a switch that changes no kernel: tensor cores for floats) is
    passed over."""
    first = tuple(plan.default_configs())
    emitted = plan.emit(arrays, scalars, first)
    best = _attempt(plan, emitted, first, original, inputs, sizes)
    tuning.trials.append(best)
    seen, modules = {best.configs}, {emitted.module}
    order = _by_work(plan, sizes)
    improved = True
    while improved and len(tuning.trials) <= SEARCH_TRIALS:
        improved = False
        for index in order:
            mapping = plan.mappings[index]
            for config in neighbours(mapping, best.configs[index]):
                configs = best.configs[:index] + (config,) + best.configs[index + 1:]
                if configs in seen or len(tuning.trials) > SEARCH_TRIALS:
                    continue
                seen.add(configs)
                emitted = plan.emit(arrays, scalars, configs)
                if emitted.module in modules:
                    continue
                modules.add(emitted.module)
                trial = _attempt(plan, emitted, configs, original, inputs, sizes)
                tuning.trials.append(trial)
                if trial.problem is not None:
                    notes.append(f"BUG in loclab: the kernels with {trial.text()} failed "
                                 f"({trial.problem}); not kept")
                elif best.median_s is None or trial.median_s < best.median_s:
                    best, improved = trial, True
    tuning.kept = tuning.trials.index(best)
    return best.configs


def _by_work(plan: GpuPlan, sizes: Mapping[str, int]) -> list[int]:
    """The indices of ``plan.mappings``, the nest running the most statement instances at
    ``sizes`` first (ties in program order)."""
    from loclab.transform.inputs import instances

    program = plan.planned.as_written.program
    work = [instances(program, sizes, mapping.statements()) for mapping in plan.mappings]
    return sorted(range(len(work)), key=lambda index: -work[index])


def _proved(plan: GpuPlan, arrays: Any, scalars: Any, configs: tuple[Config, ...],
            original: Any, inputs: Mapping[str, Any],
            sizes: Mapping[str, int], supplier: Callable[..., Any] | None = None
            ) -> tuple[Any, Any, Any, Any]:
    """The kept configs' function verified against the original run as Python past a
    block's tile (on ``supplier``'s inputs where given), and checked against it under Numba
    at the tuning sizes. (emitted code, its compiled function, verification, check)"""
    from loclab.measure.validate import Check
    from loclab.optimize import VERIFY_MARGIN, _bug, measure
    from loclab.gpu.transfers import on_host_arrays
    from loclab.transform.verify import compare_runs, compile_original

    program = plan.users_planned.as_written.program
    emitted = plan.emit(arrays, scalars, configs)
    compiled = emitted.compile()
    function = on_host_arrays(compiled)
    span = max((c.block[i] * c.tile[i] for c in configs for i in range(len(c.block))),
               default=1)
    small = verification_sizes(plan, span + VERIFY_MARGIN, VERIFY_MARGIN)
    small_inputs = measure.make_inputs(program, small, supplier)
    small_inputs = {name: value.astype(arrays[name][0]) if name in arrays else value
                    for name, value in small_inputs.items()}
    verification = compare_runs(compile_original(plan.users_planned.as_written), function,
                                program, small_inputs, small, rounding_length(program, small),
                                supplier)
    check = (measure.check(original, function, program, inputs, sizes,
                           rounding_length(program, sizes))
             if original is not None else Check(True, None, None))
    if not verification.ok:
        raise _bug(verification)
    if not check.valid:
        raise _bug(check.problem)
    return emitted, compiled, verification, check


def verification_sizes(plan: GpuPlan, past_a_block: int, few: int) -> dict[str, int]:
    """Sizes the original runs at as Python to verify the kernels: ``past_a_block`` (a
    block's tile and a partial one more) for every size that bounds a loop threads share (a
    grid loop, a split loop, one around either); ``few`` for a size that only bounds host
    loops (a stencil's time steps): their count changes no kernel's edges, and a Python
    original runs them all; for the others (the user's sizes that bound no loop too),
    ``past_a_block`` or their timed value where smaller: a polynomial's degree of 8 stays 8
    (133^4 Horner steps as Python would take hours), a stride 2. Sizes the function
    computes (``Nest.derived``) are computed."""
    host = {id(loop) for mapping in plan.mappings for loop in mapping.host}
    threads = {id(loop) for mapping in plan.mappings
               for shared in (*mapping.grid, *([mapping.split] if mapping.split else []))
               for loop in (shared, *shared.enclosing)}
    loops = plan.planned.context.analysis.nest.loops
    in_kernels = set().union(*(loop.bound_symbols() for loop in loops if id(loop) not in host))
    host_only = set().union(*(loop.bound_symbols() for loop in loops
                              if id(loop) in host)) - in_kernels
    across = set().union(*(loop.bound_symbols() for loop in loops if id(loop) in threads))
    timed = plan.users_planned.sizes
    # every size the user gave, those no loop reads too (an image's ``H`` and ``W`` where
    # the loops run over the output's: the user's inputs function takes them)
    program = plan.users_planned.as_written.program
    names = [p for p in dict.fromkeys([*program.nest.parameters, *timed])
             if p not in program.nest.derived]
    return settled_sizes(program, {
        p: few if p in host_only else past_a_block if p in across
        else min(past_a_block, timed.get(p, past_a_block)) for p in names})


def rounding_length(program: Any, sizes: Mapping[str, int]) -> int:
    """How many float operations one result may chain, for the tolerance of the GPU's
    rounding: nvcc contracts ``a * b + c`` into one fused multiply-add (one rounding, not
    two), atomic adds land in any order and the GPU's ``exp``, ``sin`` ... differ from the
    CPU's in the last place: each result within 8 x that many ulps of the largest value
    (the bound of a reordered sum). Integers are still compared exactly. The chain is
    followed through the variables (``verify.dataflow_chain``) where values flow around no
    cycle; else, or where that is longer, the largest size to the power of the depth."""
    from loclab.transform.verify import dataflow_chain

    depth = max((len(loop.enclosing) + 1 for loop in program.nest.loops), default=1)
    nested = max(sizes.values(), default=1) ** depth
    chain = dataflow_chain(program.nest, sizes)
    return nested if chain is None else min(nested, chain)


def _times(function: Callable[..., Any], as_written: Any, program: Any,
           inputs: Mapping[str, Any], sizes: Mapping[str, int], budget: Any,
           original_error: str | None, supplier: Callable[..., Any] | None) -> Any:
    """The GPU function timed on the device; the original (``as_written``, compiled without
    bounds checks; None where it does not run under Numba) on the CPU."""
    from loclab.measure.timing import BUDGETS
    from loclab.optimize.cuda.run import time_on_device
    from loclab.optimize.measure import Timing, compile_original, time_original
    from loclab.transform.inputs import argument_names

    budget = budget or BUDGETS["default"]
    fast = time_on_device(function, argument_names(program), inputs, budget)
    slow = (time_original(compile_original(as_written), program, inputs, sizes, budget,
                          supplier) if as_written is not None else None)
    return Timing(dict(sizes), 0, fast, slow.summary if slow else None, original_error,
                  slow.restored if slow else False)


def nest_results(plan: GpuPlan, emitted: Any, configs: tuple[Config, ...]) -> list[Any]:
    """Each nest's decisions in words: the grid and why, threadIdx.x and why, the launch,
    what the kernel stages and keeps in registers; or why it runs in one thread."""
    from loclab.optimize import NestResult
    from loclab.optimize.planner import label

    out = []
    for mapping, kernel, config, refused in zip(plan.mappings, emitted.kernels, configs,
                                                plan.refused):
        steps = list(mapping.reasons)
        if mapping.block_splits:
            steps.append((f"launch: {config.text()}", "the model's choice"))
            steps += [(f"keep {text}", "each thread sums its part in a register, the "
                                       "parts combined after the loop") for text in
                      kernel.promoted]
        if mapping.grid:
            steps.append((f"launch: {config.text()}",
                          "the model's choice" if not config.tile or max(config.tile) == 1
                          else "register tiling: each thread runs several iterations of the "
                               "grid loops, jammed through the loops inside"))
            steps += [(f"stage {text}", "threads of a block share it, or would not read it "
                                        "coalesced") for text in kernel.staged]
            steps += [(f"keep {text}", "scalar replacement: one load and one store instead "
                                       "of one of each per iteration") for text in
                      kernel.promoted]
            if kernel.tensor_cores:
                steps.append(("the product's whole strips on the FP64 tensor cores (mma.sync "
                              "m16n8k4)", "twice the rate of one multiply-add per thread; "
                              "each thread's iterations laid out as the instruction's "
                              "fragments"))
        loops = tuple(loop.var for loop in mapping.top.statements()[0].loops) \
            if mapping.top.statements() else (mapping.top.var,)
        level = "threads over " + ", ".join(label(g) for g in mapping.grid) \
            if mapping.grid else "one block" if mapping.block_splits else "one thread"
        if mapping.host:
            level += " in each iteration of " + ", ".join(label(h) for h in mapping.host) \
                + " (on the host)"
        out.append(NestResult(mapping.top.line, loops, level,
                              tuple(s for s in steps if s[0] != "one thread"),
                              tuple(why for step, why in steps if step == "one thread"),
                              tuple(refused), None))
    return out
