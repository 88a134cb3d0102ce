"""``loclab optimize --target gpu``: a function's nests as CUDA kernels launched through CuPy.

``plan`` maps each top-level nest's loops to threads (proved legal by the transformer),
``mapping`` holds what was decided and the launch knobs, ``kernel`` writes one nest's kernel
(thread mapping, register tiling, shared-memory staging, scalar replacement), ``syntax``
translates the user's statements to C, ``module`` assembles the kernels and the launching
Python function, ``run`` validates and times the result on a GPU.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from loclab.optimize.cuda.mapping import (Config, NestMapping, default_config,
                                          fit_to_extents)
from loclab.optimize.cuda.module import CudaFunction, emit_function, loops_by_id


@dataclass(frozen=True)
class GpuPlan:
    """The function's nests mapped to threads, and what the emitter needs to write them."""

    planned: Any  # loclab.optimize.Planned
    mappings: tuple[NestMapping, ...]
    refused: tuple[tuple[tuple[str, str], ...], ...]  # per nest: (grid, why refused)
    loops: dict[int, Any]  # ast.For by id(Loop)
    # what the module runs where arguments share memory, where the function planned is not
    # the user's as written (its temporaries written into their uses, ``temporaries``):
    # the user's, as ``_as_written`` writes it; "": the planned function's
    original: str = ""
    # where ``planned`` is a rewrite of the user's function (``reorder``): the user's plan
    # (its original is what is verified against and timed) and what the output says of it
    users: Any = None
    notes: tuple[str, ...] = ()

    @property
    def users_planned(self) -> Any:
        """The plan of the function as the user wrote it."""
        return self.users or self.planned

    def default_configs(self) -> list[Config]:
        context = self.planned.context
        return [fit_to_extents(m, default_config(m, _reuse(context, m), _accumulators(m),
                                                 max(1, context.element_bytes // 4)),
                               context.extents) for m in self.mappings]

    def emit(self, arrays: Mapping[str, tuple[np.dtype, int]],
             scalars: Mapping[str, np.dtype],
             configs: Sequence[Config] | None = None) -> CudaFunction:
        program = self.planned.as_written.program
        syntax = program.syntax
        overlaps = self.overlaps()
        return emit_function(syntax.function, syntax.filename, syntax.offset, self.mappings,
                             list(configs or self.default_configs()), self.loops,
                             list(program.nest.parameters), arrays, scalars, overlaps,
                             (self.original or as_written_text(syntax)) if overlaps else "")

    def overlaps(self) -> list[tuple[str, str]]:
        """Pairs of arguments that may share memory, for which the module runs the original
        on the host when they do (none where the user vouched they never do)."""
        from loclab.deps.overlap import may_overlap

        if self.planned.code.assume_distinct:
            return []
        return [(a.name, b.name) for a, b in may_overlap(self.planned.as_written.program.nest)]


def as_written_text(syntax: Any) -> str:
    """The original function as ``_as_written``, after the imports of its module: what
    the GPU module runs when arguments share memory."""
    import ast
    import copy

    imports = syntax.imports()
    function = copy.copy(syntax.function)
    function.name, function.decorator_list = "_as_written", []
    return "\n".join(imports + ["", "", ast.unparse(function)] if imports
                     else [ast.unparse(function)])


def gpu_plan(planned: Any) -> GpuPlan:
    """Map every top-level nest of a planned function (``loclab.optimize.plan``); where the
    band of some nest gets fewer than two grid loops, the nests of the function the
    transformer rewrites (``reorder``) instead, if fewer such nests are left there."""
    from loclab.optimize import plan
    from loclab.optimize.cuda import reorder

    first = _mapped(planned)
    weak = reorder.weak_nests(planned.context.analysis, first.mappings)
    rewrite = reorder.rewrite(planned, weak) if weak else None
    if rewrite is None:
        return first
    code = planned.code
    again = plan(rewrite.text, code.function,
                 filename=reorder.REWRITTEN.format(name=code.filename), params=planned.sizes,
                 element_bytes=planned.context.element_bytes,
                 assume_distinct=code.assume_distinct)
    second = _mapped(again)
    if len(reorder.weak_nests(again.context.analysis, second.mappings)) >= len(weak):
        return first
    return replace(second, original=as_written_text(planned.as_written.program.syntax),
                   users=planned, notes=(rewrite.note(),))


def _mapped(planned: Any) -> GpuPlan:
    from loclab.optimize.cuda.plan import gpu_mappings

    program = planned.as_written.program
    loops = loops_by_id(program.syntax.function, planned.context.analysis.nest.loops,
                        program.syntax.offset)
    mappings, refused = gpu_mappings(planned.code, planned.context, loops)
    return GpuPlan(planned, tuple(mappings), tuple(tuple(r) for r in refused), loops)


def argument_types(inputs: Mapping[str, Any], sizes: Sequence[str]
                   ) -> tuple[dict[str, tuple[np.dtype, int]], dict[str, np.dtype]]:
    """(arrays: dtype and rank, scalars: dtype) of a function's arguments by value."""
    arrays = {n: (v.dtype, v.ndim) for n, v in inputs.items() if hasattr(v, "dtype")
              and getattr(v, "ndim", 0) > 0}
    scalars = {n: np.dtype(np.int64) if isinstance(v, (int, np.integer)) else np.dtype(
        np.float64) for n, v in inputs.items() if n not in arrays and n not in sizes}
    return arrays, scalars


def _accumulators(mapping: NestMapping) -> int:
    """Scalars the nest assigns: each is a register per iteration of a register tile (the
    sums across the loop inside, and the temporaries the unrolled strips keep in flight)."""
    return len({a.variable.key for s in mapping.top.statements() for a in s.accesses
                if a.write and not a.variable.is_array})


def _reuse(context: Any, mapping: NestMapping) -> bool:
    """Whether threads of a block would share what they read along a loop inside the grid:
    an access invariant along a grid loop and moving along a loop inside it."""
    from loclab.optimize.locality import array_accesses, stride

    if len(mapping.grid) < 2:
        return False
    inner = [loop for loop in context.analysis.nest.loops
             if (loop is mapping.top or mapping.top in loop.enclosing)
             and loop not in mapping.grid]  # (a distributed nest's top is not in its grid)
    for access in array_accesses(context.model, mapping.top.statements()):
        if access.access.write:
            continue
        along_grid = [stride(access.subscripts, g.var) for g in mapping.grid]
        along_inner = [stride(access.subscripts, loop.var) for loop in inner]
        if "invariant" in along_grid and any(s != "invariant" for s in along_inner):
            return True
    return False


__all__ = ["Config", "CudaFunction", "GpuPlan", "NestMapping", "argument_types", "gpu_plan"]
