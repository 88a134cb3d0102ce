"""The kernels a GPU variant launched, each with its occupancy: predicted by
:mod:`loclab.model.occupancy` from the compiled kernel's real attributes (registers, static and
dynamic shared memory, block size) and, beside it, CUDA's own answer, so that every run checks
the model; for the main accesses its case declares, the sectors per request and bank
conflicts :mod:`loclab.model.coalescing` and :mod:`loclab.model.banks` predict, and how often
each runs (the time model adds up their bytes)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from loclab.cases.base import Variant
from loclab.hw.gpu import GpuInfo


@dataclass
class RunCounter:
    """How many times a variant's ``run`` was called (validation, warm-up, timing)."""

    runs: int = 0


def counting_runs(variant: Variant) -> tuple[Variant, RunCounter]:
    """``variant`` whose bound runs are counted, whole or step by step (a run timed phase by
    phase starts at its first step): launches a run = launches / runs."""
    counter = RunCounter()

    def counted(run: Callable[[], Any]) -> Callable[[], Any]:
        def call() -> Any:
            counter.runs += 1
            return run()

        return call

    def setup(*args: Any, **kwargs: Any) -> Any:
        bound = variant.setup(*args, **kwargs)
        steps = tuple(replace(step, run=counted(step.run)) if index == 0 else step
                      for index, step in enumerate(bound.steps))
        return replace(bound, run=counted(bound.run), steps=steps)

    return replace(variant, setup=setup), counter


def kernel_rows(launches: Iterable[Any], gpu: GpuInfo, dims: dict[str, int],
                runs: int = 1) -> list[dict[str, Any]]:
    """One entry per distinct launch (``loclab.gpu.kernels.Launch``: kernel, block, dynamic
    shared memory): resources, occupancy, the limiting resource, ``cuda_blocks_per_sm``, the
    declared accesses' predictions and ``launches_per_run``; a launch whose attributes cannot
    be read says why in ``error`` (the row's timing stands)."""
    from loclab.model.occupancy import occupancy

    groups: dict[tuple[Any, ...], list[Any]] = {}
    for launch in launches:
        groups.setdefault(launch.key, []).append(launch)
    rows = []
    for same in groups.values():
        launch = same[0]
        per_run = sum(one.calls for one in same) / max(runs, 1)
        try:
            resources = launch.resources()
            predicted = occupancy(gpu.compute_capability, resources["threads"],
                                  resources["registers"], resources["static_shared"],
                                  resources["dynamic_shared"])
            rows.append({**resources, "blocks_per_sm": predicted.blocks_per_sm,
                         "warps_per_sm": predicted.warps_per_sm,
                         "occupancy": predicted.occupancy, "limited_by": predicted.limited_by,
                         "cuda_blocks_per_sm": launch.cuda_blocks_per_sm(),
                         "launches_per_run": per_run,
                         "accesses": predicted_accesses(launch, dims), "error": None})
        except Exception as err:  # a GPU the table lacks, a driver without the call
            rows.append({"kernel": launch.name, "block": list(launch.block),
                         "launches_per_run": per_run,
                         "error": f"{type(err).__name__}: {err}"})
    return rows


def predicted_accesses(launch: Any, dims: dict[str, int]) -> list[dict[str, Any]]:
    """The declared main accesses of ``launch``'s kernel with what the models predict at this
    launch's block and the row's size; an access the models cannot read says why."""
    declared = launch.declared_accesses()
    if declared is None:
        return []
    params = declared.parameters(launch.name, dims)
    out = []
    for access in declared.accesses:
        entry: dict[str, Any] = {"access": access.text, "space": access.space,
                                 "write": access.write, "elem_bytes": access.elem_bytes,
                                 "note": access.note}
        try:
            predicted = access.predict(launch.block, params)
            entry.update(executions=access.executions(params),
                         count_per_run=access.count_per_run,
                         footprint_bytes=access.footprint_bytes(params))
        except Exception as err:  # a declaration that does not fit this launch
            entry["error"] = f"{type(err).__name__}: {err}"
        else:
            document = predicted.to_json()
            keys = (("sectors_per_request", "mean_sectors_per_request", "efficiency")
                    if access.space == "global" else
                    ("conflict_degree", "wavefronts_per_request", "bank_conflicts"))
            entry.update({key: document[key] for key in keys}, error=None)
        out.append(entry)
    return out
