"""``loclab run``: every selected case and variant, validated, timed and compared.

For each case, inputs come from a seeded RNG and the golden output is computed once per size;
each variant then gets a poisoned output buffer, runs once to be validated, and is timed
until the budget is spent. A failure (wrong output, launch error, anything raised) is recorded
on that variant's row and the run goes on. A variant that ``loclab tune`` tuned for this
device and size runs with the cached configuration (``loclab.bench.tuning.cache``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from loclab.bench.backend import Staging, make_backend
from loclab.bench.interconnect import add_ideals, link_bytes
from loclab.bench.measure import Attempt, Golden, attempt, describe, inputs_and_golden
from loclab.bench.metrics import Row, add_comparisons, derive_references, peak_clock, rates
from loclab.bench.predictions import add_predictions
from loclab.bench.results import build_document
from loclab.bench.timing import BUDGETS, Budget
from loclab.bench.tuning.cache import Entry, TuningCache, device_name
from loclab.bench.tuning.cache import load as load_tuning_cache
from loclab.bench.tuning.space import text as config_text
from loclab.cases import (LINK_ROOF_CASE, ROOF_CASE, case_choices, case_names,
                          expand_families, family_of, get_case)
from loclab.cases.auto import AUTO_VARIANTS
from loclab.cases.base import DEVICE_CHOICES, SIZE_PRESETS, Case, Variant, dims_text
from loclab.errors import GpuUnavailableError, UsageError
from loclab.gpu import gpu_unavailable_reason
from loclab.hw import Machine, detect_machine
from loclab.hw.cpu import read_meminfo

Progress = Callable[[int, int, str], None]
# Memory per byte of golden traffic. Host: inputs, golden output, an output or the copy
# fetched from the GPU. GPU: inputs, an output, a library's temporary.
HOST_BYTES_PER_WORK_BYTE = 2.0
GPU_BYTES_PER_WORK_BYTE = 1.5
CUSTOM_SIZE = "custom"  # the document's size when the user gave dims instead of a preset
# What a run costs besides the timing budget (Plan.expected_seconds): per variant (compile,
# validate, warm up, the runs a slow variant takes beyond its budget); per size (inputs, the
# golden output in float64 on the host, staging) a second and the golden work at these rates.
VARIANT_OVERHEAD_S = 1.0
# An auto row (cases/auto.py) also plans, compiles and times ``loclab optimize``'s candidate
# recipes before its own runs: the 13 auto-cpu rows of the default preset took about 80 s more
# than the other rows' rule gives on a 2-core VM (4 min 47 s in all, 2026-11-27).
AUTO_OVERHEAD_S = 6.0
SIZE_OVERHEAD_S = 1.0
HOST_BYTES_PER_S = 1e9
HOST_FLOPS_PER_S = 20e9


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


def configure_threads(threads: int | None) -> int:
    """Set numba's thread count (default: all it has) and return it."""
    import numba

    most = numba.config.NUMBA_NUM_THREADS
    if threads is not None and not 1 <= threads <= most:
        raise UsageError(f"--threads {threads}: must be between 1 and {most}")
    numba.set_num_threads(threads or most)
    return numba.get_num_threads()


def check_memory(case: Case, device: str, dims: dict[str, int], size: str) -> None:
    """Refuse a size that cannot fit, in one line, before allocating anything."""
    work = case.work(dims).bytes
    needs = [("memory", work * HOST_BYTES_PER_WORK_BYTE, read_meminfo("MemAvailable"))]
    if device == "gpu":
        import cupy

        free = cupy.cuda.runtime.memGetInfo()[0]
        needs.append(("GPU memory", work * GPU_BYTES_PER_WORK_BYTE, free))
    for where, need, free in needs:
        if free is not None and need > free:
            origin = "--dims" if size == CUSTOM_SIZE else f"size {size}"
            raise UsageError(f"{case.name} at {dims_text(dims)} ({origin}) on the {device} "
                             f"needs about {need / 2**30:.1f} GiB of {where}, "
                             f"{free / 2**30:.1f} GiB is free")


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

    @property
    def variant_count(self) -> int:
        return sum(len(case.variants_on(device)) for case, device, _ in self.work)

    @property
    def case_names(self) -> list[str]:
        return list(dict.fromkeys(case.name for case, _, _ in self.work))

    def expected_seconds(self) -> float:
        """A first guess of how long the run takes: each variant's timing budget and what
        building, validating and warming it up cost on top; per size, making the inputs and
        the golden output on the host, which grows with the golden algorithm's bytes and
        flops (the rates below: within 20% of the default preset on a 2-core VM and of the
        GPU's on an H100 host)."""
        sizes = sum(SIZE_OVERHEAD_S + work.bytes / HOST_BYTES_PER_S
                    + work.flops / HOST_FLOPS_PER_S
                    for work in (case.work(dims) for case, _, dims in self.work))
        autos = sum(variant.name in AUTO_VARIANTS for case, device, _ in self.work
                    for variant in case.variants_on(device))
        return (self.variant_count * (self.budget.seconds + VARIANT_OVERHEAD_S)
                + autos * AUTO_OVERHEAD_S + sizes)

    def tuned(self, case: Case, device: str, dims: dict[str, int]) -> dict[str, Entry]:
        """The cached configurations of the tunable variants at this size, by variant name."""
        if self.tuning is None:
            return {}
        key = device_name(device, self.machine, self.numba_threads)
        found = {variant.name: self.tuning.lookup(key, case.name, variant.name, dims)
                 for variant in case.variants_on(device) if variant.space}
        return {name: entry for name, entry in found.items() if entry}


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


def case_sizes(case: Case, device: str, size: str, machine: Machine,
               dims: list[Mapping[str, int]] | None, asked: bool) -> list[dict[str, int]]:
    """The sizes ``case`` runs at on ``device``: the preset's, or the user's, each checked;
    none where it has no variant.

    The roof (copy) runs at the user's size when it has the same dimensions (the fairest
    roof for a matrix case), else at the default preset's, unless it was asked for itself; a
    case with a ``roof_dims`` (host-device) runs only there when it was not asked for.
    """
    if not case.variants_on(device):
        return []
    if case.roof_dims is not None and not asked:
        return [dict(case.roof_dims)]
    if dims is None:
        return case.dims(size, device, machine)
    if case.name == ROOF_CASE and not asked and set(dims[0]) != set(case.dimensions):
        return case.dims("default", device, machine)
    return [case.checked_dims(one) for one in dims]


def plan(cases: Sequence[str] | None = None, device: str = "all", size: str = "default",
         threads: int | None = None, budget: Budget | None = None, tuned: bool = True,
         tuning_cache: Path | None = None, dims: SizeRequest | None = None,
         link_roof: bool = False) -> Plan:
    """Check a request (raising UsageError with one line on bad input) before anything runs.

    ``tuned``: set tunable variants up with the configuration ``loclab tune`` stored for this
    device and size in ``tuning_cache`` (default: ``loclab.bench.tuning.cache.default_path``;
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
    for case, dev, one in work:
        check_memory(case, dev, one, size if sizes is None else CUSTOM_SIZE)
    return Plan(size=size if sizes is None else CUSTOM_SIZE, devices=devices, machine=machine,
                numba_threads=numba_threads, budget=budget or BUDGETS[size], work=work,
                tuning=load_tuning_cache(tuning_cache) if tuned else None)


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
        from loclab.bench.clock import measure_clock_mhz

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
