"""``loclab run``: every selected case and variant, validated, timed and compared.

For each case, inputs come from a seeded RNG and the golden output is computed once per size;
each variant then gets a poisoned output buffer, runs once to be validated, and is timed
until the budget is spent. A failure (wrong output, launch error, anything raised) is recorded
on that variant's row and the run goes on. A variant that ``loclab tune`` tuned for this
device and size runs with the cached configuration (``loclab.measure.cache``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from loclab.bench.attempt import Golden, attempt, inputs_and_golden
from loclab.bench.auto import AUTO_VARIANTS, get_case
from loclab.bench.backend import Staging, make_backend
from loclab.bench.interconnect import add_ideals, link_bytes
from loclab.bench.metrics import Row, add_comparisons, derive_references, peak_clock, rates
from loclab.bench.predictions import add_predictions
from loclab.bench.results import build_document
from loclab.cases import (LINK_ROOF_CASE, ROOF_CASE, case_choices, case_names, expand_families, family_of)
from loclab.cases.base import DEVICE_CHOICES, SIZE_PRESETS, Case, Variant, Work, dims_text
from loclab.cpu.threads import configure_threads
from loclab.errors import GpuUnavailableError, UsageError
from loclab.gpu import gpu_unavailable_reason
from loclab.hw import Machine, detect_machine
from loclab.hw.cpu import read_meminfo
from loclab.measure.attempt import Attempt, describe
from loclab.measure.cache import Entry, TuningCache, device_name
from loclab.measure.cache import load as load_tuning_cache
from loclab.measure.space import text as config_text
from loclab.measure.timing import BUDGETS, Budget

Progress = Callable[[int, int, str], None]
# Memory per byte of golden traffic. Host: inputs, golden output, an output or the copy
# fetched from the GPU. GPU: inputs, an output, a library's temporary.
HOST_BYTES_PER_WORK_BYTE = 2.0
GPU_BYTES_PER_WORK_BYTE = 1.5
CUSTOM_SIZE = "custom"  # the document's size when the user gave dims instead of a preset
# What a run costs besides its timing budgets (Plan.expected_seconds), in seconds of an idle
# machine: calibrated on the small and default presets on a 2-core VM (2026-11-28, its load
# divided out as Plan.slowdown does: the default's CPU run is 88 s of budgets and about 200 s
# besides, 11 minutes at a load of 4; the small one's 18 s and 50 s). The unit is the golden
# work: the golden algorithm's bytes and flops at these rates (made once a size).
HOST_BYTES_PER_S = 1e9
HOST_FLOPS_PER_S = 20e9
# A CPU variant, besides its budget, is validated, warmed up and (a slow one) run until its
# minimum of runs: about this many golden works, a naive or auto row's (loops as written:
# mmm's naive run takes 30 times the golden's) far more than the others'.
SLOW_GOLDEN_WORKS = 18.0
GOLDEN_WORKS = 4.5
# A GPU variant: a second (compile, validate, warm up); a size on the GPU: a second to stage
# its inputs, and the golden work (an H100 host).
VARIANT_OVERHEAD_S = 1.0
GPU_SIZE_OVERHEAD_S = 1.0
# A case's auto rows (bench/auto.py) plan ``loclab optimize``'s recipe and compile it on each
# device (mmm's nest about 10 s, a 2-deep nest's 1 s), and plan again at each further size.
AUTO_CASE_S = 2.5
AUTO_SIZE_S = 0.5
# Once every row ran: the traffic model of each CPU row whose variant declares one (a cache
# simulation of its loops) for its predicted time (24 of them: 15 to 20 s).
PREDICTION_S = 0.8
# A numba function compiles before its first call where numba has no cache of it on disk (a
# first run, or its source changed since): the small preset's 45 took about a minute more.
COMPILE_S = 1.3
# The load is the median of this many counts of the running threads, this far apart.
LOAD_SAMPLES = 5
LOAD_SAMPLE_GAP_S = 0.02


def choose(kind: str, value: str, choices: Sequence[str]) -> str:
    if value not in choices:
        raise UsageError(f"unknown {kind} {value!r}; choose from {', '.join(choices)}")
    return value


def resolve_cases(names: Sequence[str] | None, devices: Sequence[str] = ("cpu",),
                  link_roof: bool = False) -> list[Case]:
    """The requested cases (a family stands for its cases), the roofs first whether asked for
    or not: copy always; on a GPU, the link between host and device (host-device) before
    any case rated against it, or with ``link_roof``."""
    wanted = expand_families([choose("case", name, case_choices())
                              for name in (names or case_names())])
    cases = [get_case(name) for name in wanted]
    roofs = [ROOF_CASE]
    if "gpu" in devices and (link_roof or any(case.limit == "interconnect" for case in cases)):
        roofs.append(LINK_ROOF_CASE)
    return [get_case(name) for name in roofs] + [case for case in cases
                                                 if case.name not in roofs]


def resolve_devices(device: str) -> list[str]:
    choose("device", device, DEVICE_CHOICES)
    reason = gpu_unavailable_reason() if device in ("gpu", "all") else None
    if device == "gpu" and reason:
        raise GpuUnavailableError(f"--device gpu: no GPU: {reason}")
    if device == "cpu" or reason:
        return ["cpu"]
    return ["gpu"] if device == "gpu" else ["cpu", "gpu"]


def memory_shortfall(case: Case, device: str, dims: dict[str, int]) -> str | None:
    """What ``case`` at ``dims`` on ``device`` needs beyond the memory that is free ("needs
    about 149.0 GiB of memory, 22.8 GiB is free"), or None where it fits."""
    work = case.work(dims).bytes
    needs = [("memory", work * HOST_BYTES_PER_WORK_BYTE, read_meminfo("MemAvailable"))]
    if device == "gpu":
        import cupy

        free = cupy.cuda.runtime.memGetInfo()[0]
        needs.append(("GPU memory", work * GPU_BYTES_PER_WORK_BYTE, free))
    for where, need, free in needs:
        if free is not None and need > free:
            return (f"needs about {need / 2**30:.1f} GiB of {where}, "
                    f"{free / 2**30:.1f} GiB is free")
    return None


def check_memory(case: Case, device: str, dims: dict[str, int], size: str) -> None:
    """Refuse a size that cannot fit, in one line, before allocating anything; ``size`` is
    the preset it came from, or CUSTOM_SIZE for the user's ``--dims``."""
    shortfall = memory_shortfall(case, device, dims)
    if shortfall:
        origin = "--dims" if size == CUSTOM_SIZE else f"size {size}"
        raise UsageError(f"{case.name} at {dims_text(dims)} ({origin}) on the {device} "
                         f"{shortfall}")


def empty_row(case: Case, variant: Variant, dims: dict[str, int], timer: str,
              machine: Machine) -> Row:
    """The row of ``variant`` at ``dims`` before it is run: what the case and the variant say
    of it (work, roofs, where its data lives, the bytes it moves over the link)."""
    work = case.work(dims)
    roof = case.roof_of_unit(variant.device, machine)
    placement = variant.placement if variant.device == "gpu" else None
    to_device, to_host = link_bytes(variant, work)
    return {"case": case.name, "variant": variant.name, "device": variant.device,
            "role": variant.role, "description": variant.description, "size": dict(dims),
            "params": {}, "median_s": None, "min_s": None, "max_s": None, "iqr_s": None,
            "q1_s": None, "q3_s": None,
            "runs": 0, "batch": 0, "timer": timer, "bytes": work.bytes, "flops": work.flops,
            "gbps": None, "gflops": None, "unit": case.unit, "items": work.items,
            "items_per_s": None,
            "unit_roof": {"per_s": roof.per_s, "what": roof.what} if roof else None,
            "valid": False, "max_rel_err": None, "error": None, "skipped": None,
            "tuned": None, "kernels": [],
            "memory": ({"inputs": placement.inputs, "output": placement.output} if placement
                       else {"inputs": "host", "output": "host"}),
            "to_device_bytes": to_device, "to_host_bytes": to_host, "link_gbps": None,
            "baseline": variant.baseline, "phases": {}}


def _other_parameters(config: dict[str, int], names: Mapping[str, Any]) -> str | None:
    """Why a tuned configuration cannot be this variant's: it was tuned for a version of it
    whose parameters were other than ``names`` (a space that gained, lost or renamed one)."""
    missing = sorted(set(names) - set(config))
    unknown = sorted(set(config) - set(names))
    if not missing and not unknown:
        return None
    differences = [f"lacks {', '.join(missing)}" if missing else "",
                   f"has {', '.join(unknown)}" if unknown else ""]
    return (f"tuned for another version of this variant (it "
            f"{' and '.join(filter(None, differences))}): run loclab tune again")


def measure_variant(case: Case, variant: Variant, dims: dict[str, int], staging: Staging,
                    golden: Golden, machine: Machine, budget: Budget,
                    tuned: Entry | None = None) -> Row:
    """Validate (poisoned output, golden comparison), then time one variant. Never raises.

    A variant that does not apply at this size (``Variant.skip``) is neither run nor counted
    as a failure: its row says why. ``tuned``, a tuning cache entry, gives the configuration to
    set the variant up with; if it no longer validates the row says so and fails, rather than
    falling back on another configuration.
    """
    row = empty_row(case, variant, dims, staging.backend.clock.name, machine)
    config = tuned["params"] if tuned else None
    if tuned:
        row["tuned"] = {"params": config, "date": tuned.get("date")}
    problem = None
    try:
        row["skipped"] = variant.skip_reason(dims, machine)
        if config is not None and variant.space:
            space = variant.space(machine)
            problem = _other_parameters(config, space.values) or (
                (rejected := space.restriction(config, dims, machine))
                and f"rejected on this machine: {rejected}")
    except Exception as err:  # a bug in a skip rule or a space: recorded, the run goes on
        problem = describe(err)
    if row["skipped"]:
        return row
    if problem:
        row["error"] = problem
    elif variant.device == "gpu" and machine.gpu is not None:
        from loclab.bench.kernels import counting_runs, kernel_rows
        from loclab.gpu.kernels import recording_launches

        counted, counter = counting_runs(variant)
        with recording_launches() as launches:
            _record(row, attempt(case, counted, dims, staging, golden, machine, budget,
                                 config))
        row["kernels"] = kernel_rows(launches, machine.gpu, dims, counter.runs)
    else:
        _record(row, attempt(case, variant, dims, staging, golden, machine, budget, config))
    if tuned and not row["valid"]:
        row["error"] = (f"the tuned configuration {config_text(config)} (tuning cache, "
                        f"{tuned.get('date')}) failed: {row['error']}")
    return row


def _record(row: Row, result: Attempt) -> None:
    """What one attempt gave, on its row: the check, what raised, the timings and rates, the
    time of each phase."""
    row["params"] = result.params
    row["phases"] = result.phases
    if result.check:
        check = result.check
        row.update(valid=check.valid, max_rel_err=check.max_rel_err, error=check.problem)
    if result.error:
        row.update(valid=False, error=result.error)
    if result.summary:
        summary = result.summary
        row.update(median_s=summary.median, min_s=summary.min, max_s=summary.max,
                   iqr_s=summary.iqr, q1_s=summary.q1, q3_s=summary.q3, runs=summary.runs,
                   batch=result.batch)
        rates(row)


@dataclass(frozen=True)
class Plan:
    """A checked request: every name resolved, sizes fixed, memory known to suffice."""

    size: str
    devices: list[str]
    machine: Machine
    numba_threads: int | None
    budget: Budget
    work: list[tuple[Case, str, dict[str, int]]]  # (case, device, dims) in run order
    tuning: TuningCache | None = None  # configurations ``loclab tune`` found; None: untuned
    # The machine's load when the run was planned (``load_average``: threads of other work,
    # which the run's own share the CPUs with), and how many numba functions of its CPU
    # variants have no cache on disk yet.
    load: float = 0.0
    uncompiled: int = 0

    @property
    def variant_count(self) -> int:
        return sum(len(case.variants_on(device)) for case, device, _ in self.work)

    @property
    def case_names(self) -> list[str]:
        return list(dict.fromkeys(case.name for case, _, _ in self.work))

    def expected_seconds(self) -> float:
        """How long the run takes: the timing budgets of the variants that apply, which are
        wall-clock time, and the run's own work besides them on an idle machine
        (``work_seconds``) stretched by the load of this one (``slowdown``)."""
        budgets = sum(self.budget.seconds for case, device, dims in self.work
                      for variant in case.variants_on(device)
                      if _applies(variant, dims, self.machine))
        return budgets + self.work_seconds() * self.slowdown()

    def work_seconds(self) -> float:
        """The run's work besides the timing budgets, in seconds of an idle machine: per
        size the inputs and the golden output, per variant its validation, warm-up and the
        runs a slow one takes beyond its budget, the auto rows' planning, the numba
        functions to compile first, and once all ran the rows' traffic models."""
        sizes = sum(_size_seconds(case, device, dims) for case, device, dims in self.work)
        variants = sum(_variant_seconds(variant, case.work(dims))
                       for case, device, dims in self.work
                       for variant in case.variants_on(device))
        models = sum(variant.traffic is not None for case, device, _ in self.work
                     for variant in case.variants_on(device))
        return (sizes + variants + _auto_seconds(self.work) + models * PREDICTION_S
                + self.uncompiled * COMPILE_S)

    def slowdown(self) -> float:
        """How many times longer than on an idle machine the run's own work takes here: its
        threads share the CPUs with the load's (which counts every CPU of the machine,
        ``os.cpu_count``, where the run may be allowed fewer)."""
        threads = self.numba_threads or 1
        return max(1.0, (self.load + threads) / (os.cpu_count() or 1))

    def tuned(self, case: Case, device: str, dims: dict[str, int]) -> dict[str, Entry]:
        """The cached configurations of the tunable variants at this size, by variant name."""
        if self.tuning is None:
            return {}
        key = device_name(device, self.machine, self.numba_threads)
        found = {variant.name: self.tuning.lookup(key, case.name, variant.name, dims)
                 for variant in case.variants_on(device) if variant.space}
        return {name: entry for name, entry in found.items() if entry}


def load_average() -> float:
    """How many threads of other work are running now: on Linux the runnable threads
    /proc/loadavg counts, less this one, at a few moments (the median); elsewhere the load
    average over the last minute (0 where the system keeps none). The minute's average alone
    would count what ran just before the run, the install a script ran first, as load."""
    import statistics
    import time

    try:
        samples = []
        for _ in range(LOAD_SAMPLES):
            running = Path("/proc/loadavg").read_text().split()[3].partition("/")[0]
            samples.append(max(0, int(running) - 1))
            time.sleep(LOAD_SAMPLE_GAP_S)
        return float(statistics.median(samples))
    except (OSError, IndexError, ValueError):
        pass
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return 0.0


def _applies(variant: Variant, dims: dict[str, int], machine: Machine) -> bool:
    """Whether ``variant`` runs (and spends its budget) at ``dims``: a skip rule that raises
    is the run's to record, counted as running."""
    try:
        return variant.skip_reason(dims, machine) is None
    except Exception:
        return True


def _golden_seconds(work: Work) -> float:
    """The golden work of a size, in seconds: the unit the estimate counts costs in."""
    return work.bytes / HOST_BYTES_PER_S + work.flops / HOST_FLOPS_PER_S


def _size_seconds(case: Case, device: str, dims: dict[str, int]) -> float:
    """Making a size's inputs and golden output on the host, and staging them on a GPU."""
    golden = _golden_seconds(case.work(dims))
    return golden + (GPU_SIZE_OVERHEAD_S if device == "gpu" else 0.0)


def _variant_seconds(variant: Variant, work: Work) -> float:
    """What a variant costs besides its timing budget (see SLOW_GOLDEN_WORKS)."""
    if variant.device == "gpu":
        return VARIANT_OVERHEAD_S
    slow = variant.role == "naive" or variant.name in AUTO_VARIANTS
    return (SLOW_GOLDEN_WORKS if slow else GOLDEN_WORKS) * _golden_seconds(work)


def _auto_seconds(work: list[tuple[Case, str, dict[str, int]]]) -> float:
    """The auto rows' planning and compiling: once a case and device, less at a further
    size."""
    sizes = [(case.name, device) for case, device, _ in work
             if any(v.name in AUTO_VARIANTS for v in case.variants_on(device))]
    return len(set(sizes)) * AUTO_CASE_S + (len(sizes) - len(set(sizes))) * AUTO_SIZE_S


def cpu_modules(work: list[tuple[Case, str, dict[str, int]]]) -> list[str]:
    """The modules of the CPU variants in ``work`` (their setups, imported on first call)."""
    return sorted({variant.setup.target[0] for case, device, _ in work
                   for variant in case.variants_on(device)
                   if device == "cpu" and hasattr(variant.setup, "target")})


def uncached_numba_functions(modules: Iterable[str]) -> int:
    """How many numba functions (``cache=True``) of ``modules`` must compile before their
    first call: numba has no cache of them on disk, or one older than their source (a first
    run, an edited kernel). Read from numba's own cache files; where numba keeps them
    otherwise than this version does, none is counted."""
    return sum(not _numba_cached(function) for name in modules
               for function in _cached_functions(name))


def _cached_functions(module_name: str) -> list[Any]:
    """The numba functions defined with ``cache=True`` in a module."""
    import importlib

    from numba.core.caching import FunctionCache
    from numba.core.registry import CPUDispatcher

    module = importlib.import_module(module_name)
    return [value for value in vars(module).values()
            if isinstance(value, CPUDispatcher) and value.py_func.__module__ == module_name
            and isinstance(getattr(value, "_cache", None), FunctionCache)]


def _numba_cached(function: Any) -> bool:
    """Whether numba's cache index of ``function`` is on disk and newer than its source."""
    try:
        index = Path(function._cache._cache_file._index_path)
        source = Path(function.py_func.__code__.co_filename)
        return index.stat().st_mtime >= source.stat().st_mtime
    except FileNotFoundError:
        return False
    except Exception:  # another numba's internals: assume cached rather than guess
        return True


SizeRequest = Mapping[str, int] | Sequence[Mapping[str, int]]


def requested_sizes(dims: SizeRequest | None) -> list[Mapping[str, int]] | None:
    """The sizes a user asked for (one mapping, or a list of them), or None for a preset."""
    if dims is None:
        return None
    sizes = [dims] if isinstance(dims, Mapping) else list(dims)
    if not sizes or not all(isinstance(size, Mapping) for size in sizes):
        raise UsageError("dims: give a size as NAME=VALUE pairs (m=5000,n=3000,k=700)")
    seen: list[Mapping[str, int]] = []
    for size in sizes:
        if dict(size) in seen:  # equal whatever the order of the names
            raise UsageError(f"--dims {dims_text(size)} given twice: each size runs once")
        seen.append(dict(size))
    return sizes


def size_origin(dims: Mapping[str, int], size: str,
                sizes: list[Mapping[str, int]] | None) -> str:
    """Where a planned size came from, for its errors: the preset, the user's ``--dims``
    (CUSTOM_SIZE), or (a roof run beside the user's sizes at its own) the default preset."""
    if sizes is None:
        return size
    return CUSTOM_SIZE if any(dict(one) == dims for one in sizes) else "default"


def case_sizes(case: Case, device: str, size: str, machine: Machine,
               dims: list[Mapping[str, int]] | None, asked: bool) -> list[dict[str, int]]:
    """The sizes ``case`` runs at on ``device``: the preset's, or the user's, each checked;
    none where it has no variant.

    The roof (copy) runs at the user's sizes when they have its dimensions (the fairest roof
    for a matrix case) and fit in memory, else at the default preset's, unless it was asked
    for itself: a roof the user did not ask for never refuses their size (the case they
    asked for does, by its own name, where that does not fit). A case with a ``roof_dims``
    (host-device) runs only there when it was not asked for.
    """
    if not case.variants_on(device):
        return []
    if case.roof_dims is not None and not asked:
        return [dict(case.roof_dims)]
    if dims is None:
        return case.dims(size, device, machine)
    if case.name == ROOF_CASE and not asked:
        fitting = [case.checked_dims(one) for one in dims
                   if set(one) == set(case.dimensions)]
        return [one for one in fitting if memory_shortfall(case, device, one) is None
                ] or case.dims("default", device, machine)
    return [case.checked_dims(one) for one in dims]


def plan(cases: Sequence[str] | None = None, device: str = "all", size: str = "default",
         threads: int | None = None, budget: Budget | None = None, tuned: bool = True,
         tuning_cache: Path | None = None, dims: SizeRequest | None = None,
         link_roof: bool = False) -> Plan:
    """Check a request (raising UsageError with one line on bad input) before anything runs.

    ``tuned``: set tunable variants up with the configuration ``loclab tune`` stored for this
    device and size in ``tuning_cache`` (default: ``loclab.measure.cache.default_path``;
    a file named that does not exist is an error). ``dims``: run at this size (or these
    sizes) instead of the preset's: every case named in ``cases`` must take these dimensions;
    the preset ``size`` then only sets the timing budget. ``link_roof``: measure the link
    between host and device on a GPU (``loclab devices``) even if no case asked needs it.
    """
    choose("size", size, SIZE_PRESETS)
    sizes = requested_sizes(dims)
    if sizes is not None and not cases:
        raise UsageError("--dims needs --case: each case has its own dimensions "
                         "(mmm: m, n, k; transpose: rows, cols)")
    devices = resolve_devices(device)
    selected = resolve_cases(cases, devices, link_roof)
    if threads is not None and "cpu" not in devices:
        raise UsageError("--threads sets CPU threads, but --device gpu runs nothing on the CPU")
    if tuned and tuning_cache is not None and not tuning_cache.is_file():
        raise UsageError(f"--tuning-cache {tuning_cache}: no such file")
    machine = detect_machine(with_gpu=device != "cpu")  # "all" records why there is no GPU
    numba_threads = configure_threads(threads) if "cpu" in devices else None
    asked = set(expand_families(list(cases)) if cases else case_names())
    work = [(case, dev, one) for case in selected for dev in devices
            for one in case_sizes(case, dev, size, machine, sizes, case.name in asked)]
    _check_runnable(cases or [], work, devices, machine)
    # The cases asked for first: a size too large is theirs to refuse, not a roof's.
    for case, dev, one in sorted(work, key=lambda item: item[0].name not in asked):
        check_memory(case, dev, one, size_origin(one, size, sizes))
    return Plan(size=size if sizes is None else CUSTOM_SIZE, devices=devices, machine=machine,
                numba_threads=numba_threads, budget=budget or BUDGETS[size], work=work,
                tuning=load_tuning_cache(tuning_cache) if tuned else None,
                load=load_average(), uncompiled=uncached_numba_functions(cpu_modules(work)))


def _check_runnable(names: Sequence[str], work: list[tuple[Case, str, dict[str, int]]],
                    devices: list[str], machine: Machine) -> None:
    """Refuse a ``--case`` (or family) none of whose variants runs on the devices at hand."""
    running = {case.name for case, _, _ in work}
    for name in names:
        if not running & set(expand_families([name])):
            where = " or ".join(d.upper() for d in devices)
            missing = (f" (no GPU: {machine.gpu_unavailable})"
                       if machine.gpu is None and machine.gpu_unavailable not in
                       (None, "not requested") else "")
            raise UsageError(f"--case {name}: nothing runs on the {where}: its variants need "
                             f"the other device{missing}")


class _Tracker:
    """Where a run is: ``progress(done, total, label)`` before each variant starts (a progress
    bar), ``finished(row)`` once its row is complete (a log line)."""

    def __init__(self, total: int, progress: Progress | None,
                 finished: Callable[[Row], None] | None) -> None:
        self.total = total
        self.started = 0
        self._progress = progress or (lambda done, total, label: None)
        self._finished = finished or (lambda row: None)

    def report(self, label: str) -> None:
        self._progress(self.started, self.total, label)

    def starting(self, label: str) -> None:
        self.report(label)
        self.started += 1

    def finished(self, row: Row) -> Row:
        self._finished(row)
        return row


def execute(request: Plan, progress: Progress | None = None,
            finished: Callable[[Row], None] | None = None) -> dict[str, Any]:
    """Run a plan and return the results document (see ``loclab.bench.results``).

    ``progress(done, total, label)`` is called before each variant and once at the end;
    ``finished(row)`` with each variant's row as soon as it is measured (its comparisons with
    the naive and library rows come at the end).
    """
    tracker = _Tracker(request.variant_count, progress, finished)
    clock = None
    if "cpu" in request.devices:
        from loclab.measure.clock import measure_clock_mhz

        tracker.report("measuring the CPU clock")
        clock = peak_clock(request.machine, measure_clock_mhz(request.machine.cpu.cores))
    rows: list[Row] = []
    backends = {dev: make_backend(dev) for dev in request.devices}
    for case, device, dims in request.work:
        tracker.report(f"{case.name}: inputs and golden output")
        try:
            inputs, golden = inputs_and_golden(case, dims)
        except Exception as err:  # a bug in the case: its rows say so, the run goes on
            rows.extend(_failed_rows(case, dims, backends[device], request.machine, tracker,
                                     f"inputs or golden output failed: {describe(err)}"))
            continue
        rows.extend(_run_on_device(case, dims, inputs, golden, backends[device],
                                   request.machine, request.budget, tracker,
                                   request.tuned(case, device, dims)))
        del inputs, golden  # before the next case allocates its own
    tracker.started = tracker.total
    tracker.report("done")

    references = derive_references(rows, request.machine, clock)
    add_comparisons(rows, references)
    add_ideals(rows, references)
    add_predictions(rows, references, request.machine)
    machine_json = request.machine.to_json()
    machine_json["cpu"]["numba_threads"] = request.numba_threads
    return build_document(machine=machine_json, references=references,
                          cases={case.name: {"lesson": case.lesson,
                                             "description": case.description,
                                             "limit": case.limit,
                                             "sweep": case.sweep,
                                             "sweep_param": case.sweep_param,
                                             "sweep_rate": case.sweep_rate,
                                             "family": family_of(case.name)}
                                 for case, _, _ in request.work},
                          rows=rows, size=request.size, devices=request.devices)


def run(cases: Sequence[str] | None = None, device: str = "all", size: str = "default",
        threads: int | None = None, budget: Budget | None = None,
        progress: Progress | None = None, tuned: bool = True,
        tuning_cache: Path | None = None, dims: SizeRequest | None = None,
        finished: Callable[[Row], None] | None = None) -> dict[str, Any]:
    """Check, then run case studies; return the results document.

    ``dims`` (``{"m": 5000, "n": 3000, "k": 700}``, or a list of such) replaces the preset's
    sizes of the cases named (see :func:`plan`); ``progress`` and ``finished`` as for
    :func:`execute`.
    """
    return execute(plan(cases, device, size, threads, budget, tuned, tuning_cache, dims),
                   progress, finished)


def _failed_rows(case: Case, dims: dict[str, int], backend: Any, machine: Machine,
                 tracker: _Tracker, error: str) -> list[Row]:
    """A row per variant of ``case`` on the backend's device, each failed with ``error``: no
    variant could run (the inputs, the golden output or staging failed)."""
    rows = []
    for variant in case.variants_on(backend.device):
        tracker.starting(f"{case.name} {variant.name}")
        rows.append(tracker.finished({**empty_row(case, variant, dims, backend.clock.name,
                                                  machine), "error": error}))
    return rows


def _run_on_device(case: Case, dims: dict[str, int], inputs: dict[str, np.ndarray],
                   golden: Golden, backend: Any, machine: Machine, budget: Budget,
                   tracker: _Tracker, tuned: dict[str, Entry]) -> list[Row]:
    """Every variant of ``case`` on the backend's device, on inputs staged where each reads
    them (a variant whose staging fails, out of memory, fails alone)."""
    staging = Staging(backend, inputs)
    rows = []
    for variant in case.variants_on(backend.device):
        tracker.starting(f"{case.name} {variant.name}")
        rows.append(tracker.finished(measure_variant(
            case, variant, dims, staging, golden, machine, budget, tuned.get(variant.name))))
    try:
        staging.release()
    except Exception:  # after a sticky CUDA error; every row already says what went wrong
        pass
    return rows
