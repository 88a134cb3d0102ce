"""``loclab tune``: search every tunable variant of a case at each size, store the best.

The inputs and golden output at a size are those ``loclab run`` uses (same seed), made once
and shared by the variants tuned there; each search's best valid configuration goes into the
tuning cache under the device's name, the variant and the exact size, where ``loclab run``
finds it. A search with no valid configuration stores nothing and counts as a failure.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from loclab.bench.attempt import Golden, attempt, inputs_and_golden
from loclab.bench.auto import get_case
from loclab.bench.backend import Staging, make_backend
from loclab.bench.runner import (CUSTOM_SIZE, Progress, SizeRequest, case_sizes,
                                 check_memory, choose, requested_sizes, resolve_devices)
from loclab.cases import case_names
from loclab.cases.base import SIZE_PRESETS, Case, Dims, Variant, dims_text
from loclab.cpu.threads import configure_threads
from loclab.errors import LoclabError, UsageError
from loclab.hw import Machine, detect_machine
from loclab.measure import cache
from loclab.measure.attempt import describe
from loclab.measure.search import STRATEGIES, TUNE_TIMING, Search, Trial, search
from loclab.measure.space import text
from loclab.measure.timing import Budget


@dataclass(frozen=True)
class TunePlan:
    """A checked ``loclab tune`` request: names resolved, sizes fixed, memory sufficient."""

    case: Case
    variants: list[Variant]
    size: str
    machine: Machine
    numba_threads: int | None
    work: list[tuple[str, dict[str, int]]]  # (device, dims) in tuning order
    strategy: str
    limit: int | None
    seconds: float | None
    seed: int
    cache_path: Path
    timing: Budget  # of each configuration

    @property
    def search_count(self) -> int:
        return sum(1 for device, _ in self.work for v in self.variants if v.device == device)


def _tunable(case: Case, names: Sequence[str] | None, devices: list[str]) -> list[Variant]:
    """The variants to tune: those named (each must exist and have a space), else every
    variant with a space on the devices."""
    tunable = [v.name for v in case.variants if v.space]
    by_name = {v.name: v for v in case.variants}
    for name in names or ():
        choose(f"variant of {case.name}", name, list(by_name))
        if not by_name[name].space:
            raise UsageError(f"variant {name!r} of {case.name} has no parameter space to tune; "
                             f"tunable: {', '.join(tunable) or 'none'}")
        if by_name[name].device not in devices:
            raise UsageError(f"variant {name!r} runs on the {by_name[name].device}; this tune "
                             f"runs on the {' and '.join(devices)}")
    chosen = ([by_name[name] for name in dict.fromkeys(names)] if names else
              [v for v in case.variants if v.space and v.device in devices])
    if not chosen:
        raise UsageError(f"{case.name} has no tunable variant on the {' or '.join(devices)}")
    return chosen


def plan_tuning(case: str, variants: Sequence[str] | None = None, device: str = "all",
                size: str = "default", strategy: str = "local", limit: int | None = None,
                seconds: float | None = None, seed: int = 0, threads: int | None = None,
                cache_path: Path | None = None, timing: Budget | None = None,
                dims: SizeRequest | None = None) -> TunePlan:
    """Check a request (UsageError, one line, on bad input) before anything is built.

    ``dims``: tune at this size (or these sizes) instead of the preset's."""
    chosen_case = get_case(choose("case", case, case_names()))
    choose("size", size, SIZE_PRESETS)
    choose("strategy", strategy, list(STRATEGIES))
    if limit is not None and limit < 1:
        raise UsageError(f"--budget {limit}: must be at least 1 configuration")
    if seconds is not None and seconds <= 0:
        raise UsageError(f"--seconds {seconds:g}: must be more than 0")
    devices = resolve_devices(device)
    chosen = _tunable(chosen_case, variants, devices)
    devices = [dev for dev in devices if any(v.device == dev for v in chosen)]
    if threads is not None and "cpu" not in devices:
        raise UsageError("--threads sets CPU threads, but no variant tuned runs on the CPU")
    machine = detect_machine(with_gpu="gpu" in devices)
    numba_threads = configure_threads(threads) if "cpu" in devices else None
    cache_path = cache_path or cache.default_path()
    cache.check_is_cache(cache_path)
    sizes = requested_sizes(dims)
    work = [(dev, one) for dev in devices
            for one in case_sizes(chosen_case, dev, size, machine, sizes, asked=True)]
    size = size if sizes is None else CUSTOM_SIZE
    for dev, one in work:
        check_memory(chosen_case, dev, one, size)
    return TunePlan(case=chosen_case, variants=chosen, size=size, machine=machine,
                    numba_threads=numba_threads, work=work, strategy=strategy, limit=limit,
                    seconds=seconds, seed=seed, cache_path=cache_path,
                    timing=timing or TUNE_TIMING)


def _tune_and_store(request: TunePlan, variant: Variant, device: str, dims: dict[str, int],
                     staging: Staging, golden: Golden,
                     on_trial: Callable[[Trial], None]) -> dict[str, Any]:
    """Search one variant at one size, store its best; the record ``loclab tune`` prints."""
    case, machine = request.case, request.machine
    work = case.work(dims)
    record: dict[str, Any] = {
        "case": case.name, "variant": variant.name, "device": device,
        "device_name": cache.device_name(device, machine, request.numba_threads),
        "size": dict(dims), "bytes": work.bytes, "flops": work.flops,
        "unit": case.unit, "items": work.items,
        "strategy": request.strategy, "seed": request.seed, "skipped": None, "error": None,
        "evaluated": 0, "trials": [], "default": None, "best": None, "speedup": None,
        "stored": False}
    try:
        record["skipped"] = variant.skip_reason(dims, machine)
        if record["skipped"]:
            return record
        found = tune_variant(case, variant, dims, staging, golden, machine, request.strategy,
                             request.limit, request.seconds, request.seed, request.timing,
                             on_trial)
    except Exception as err:  # a bug in the case's rules: this search fails, the rest go on
        record["error"] = describe(err)
        return record
    record.update(evaluated=found.evaluated, speedup=found.speedup,
                  trials=[trial.to_json() for trial in found.trials],
                  default=found.default.to_json() if found.default else None,
                  best=found.best.to_json() if found.best else None)
    if found.best is None:
        record["error"] = "no valid configuration: nothing stored"
        return record
    cache.store(request.cache_path, record["device_name"], case.name, variant.name,
                cache.make_entry(dims, found.best.config, found.best.median_s,
                                 request.strategy, found.evaluated))
    record["stored"] = True
    return record


def execute_tuning(request: TunePlan, progress: Progress | None = None) -> dict[str, Any]:
    """Run every search of a plan; return the document ``loclab tune --json`` writes.

    ``progress(done, total, label)`` is called after each configuration evaluated.
    """
    from loclab.version import __version__

    report = progress or (lambda done, total, label: None)
    records: list[dict[str, Any]] = []
    backends = {device: make_backend(device) for device, _ in request.work}
    for device, dims in request.work:
        backend = backends[device]
        try:
            inputs, golden = inputs_and_golden(request.case, dims)
        except Exception as err:  # a bug in the case: nothing to tune against
            raise LoclabError(f"{request.case.name} at {dims_text(dims)}: inputs or golden "
                              f"output failed: {describe(err)}") from None
        staging = Staging(backend, inputs)
        for variant in request.variants:
            if variant.device != device:
                continue
            label = f"{variant.name} {dims_text(dims)}"
            report(len(records), request.search_count, label)
            records.append(_tune_and_store(
                request, variant, device, dims, staging, golden,
                lambda trial, label=label: report(len(records), request.search_count,
                                                  f"{label}: {text(trial.config)}")))
        del inputs, golden
        staging.release()
    report(len(records), request.search_count, "done")
    machine = request.machine.to_json()
    machine["cpu"]["numba_threads"] = request.numba_threads
    return {"loclab": __version__,
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "size": request.size, "cache": str(request.cache_path), "machine": machine,
            "tunings": records,
            "failures": sum(1 for record in records if record["error"])}


def tune(case: str, variants: Sequence[str] | None = None, device: str = "all",
         size: str = "default", strategy: str = "local", limit: int | None = None,
         seconds: float | None = None, seed: int = 0, threads: int | None = None,
         cache_path: Path | None = None, progress: Progress | None = None,
         dims: SizeRequest | None = None) -> dict[str, Any]:
    """Check, then tune; return the tuning document (see ``execute_tuning``); ``dims`` as for
    :func:`loclab.bench.runner.run`."""
    return execute_tuning(plan_tuning(case, variants, device, size, strategy, limit, seconds,
                                      seed, threads, cache_path, dims=dims), progress)


def tune_variant(case: Case, variant: Variant, dims: Dims, staging: Staging,
                 golden: Golden, machine: Machine, strategy: str = "local",
                 limit: int | None = None, seconds: float | None = None, seed: int = 0,
                 timing: Budget = TUNE_TIMING,
                 on_trial: Callable[[Trial], None] | None = None) -> Search:
    """Search ``variant``'s space at ``dims`` on ``staging``'s inputs: each configuration checked
    against the restriction, built, validated against ``golden`` and timed with ``timing``
    exactly as ``loclab run`` would (but a wrong one is not timed)."""
    space = variant.space(machine)
    return search(space,
                  lambda config: attempt(case, variant, dims, staging, golden, machine, timing,
                                         config, time_invalid=False),
                  lambda config: space.restriction(config, dims, machine),
                  strategy, limit, seconds, seed, on_trial)
