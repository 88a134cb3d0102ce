"""``auto-cpu`` and ``auto-gpu``: a case's golden loop nest as ``loclab optimize`` makes it on
its own, run beside the hand-written variants and the library; and the cases as the harness
runs them (``get_case``: a case's own variants, then these rows where it has a nest).

A case whose golden version is a loop nest keeps it in ``cases/<case>/nest.py``: the function
(the lectures' sequential code, on the case's arrays), named by ``NEST``, and
``arguments(inputs, out)``, which lays the case's inputs and output out as its arguments. The
case itself declares nothing more: the harness adds the rows, so that the case studies never
import the optimizer. The rows use what ``optimize`` decides without measuring (the first
recipe the transformer proves, the cache model's tiles; the GPU mapping with the model's
launch), so a run costs one plan per size; the harness validates each row against the golden
result like every variant, on poisoned outputs. The GPU rows' kernels, which the written
module compiles and launches itself, are launched through
``loclab.gpu.kernels.CompiledLaunches``, so that their rows record them like any variant's.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import types
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from loclab import cases
from loclab.cases.base import Bound, Case, Variant, lazy


@dataclass(frozen=True)
class Nest:
    """Where a case's golden loop nest is: ``cases/<case>/nest.py``, function ``function``."""

    package: str  # the case's package, e.g. "loclab.cases.transpose"
    function: str

    @property
    def module(self) -> Any:
        return importlib.import_module(f"{self.package}.nest")

    @property
    def path(self) -> Path:
        return Path(self.module.__file__)

    def arguments(self, inputs: dict[str, Any], out: Any) -> list[Any]:
        return list(self.module.arguments(inputs, out))

    @property
    def fast_math(self) -> bool:
        """Whether the auto CPU row may round as ``--fast-math`` lets it: where the case's
        hand-written CPU variants fuse multiply-adds or reorder sums (``FAST_MATH`` in
        ``nest.py``), so that the row is compared with them on the same terms."""
        return bool(getattr(self.module, "FAST_MATH", False))


# The rows the harness adds to a case with a nest (the runner expects them to take longer:
# they plan).
AUTO_VARIANTS = ("auto-cpu", "auto-gpu")


def get_case(name: str) -> Case:
    """Case ``name`` as the harness runs it: its own variants, then the auto rows where its
    golden version is a loop nest (``nest.py``)."""
    case = cases.get_case(name)
    nest = golden_nest(name)
    return case if nest is None else replace(case, variants=case.variants + auto_variants(nest))


def golden_nest(name: str) -> Nest | None:
    """Where case ``name`` keeps its golden loop nest, or None if it has none."""
    package = cases.CASE_MODULES[name]
    if (not hasattr(importlib.import_module(package), "__path__")
            or importlib.util.find_spec(f"{package}.nest") is None):
        return None
    return Nest(package, importlib.import_module(f"{package}.nest").NEST.__name__)


@functools.cache
def auto_variants(nest: Nest) -> tuple[Variant, Variant]:
    """The two rows of a case whose golden nest is ``nest`` (the same objects at every call:
    a case asked for twice has equal variants)."""
    function = nest.function
    cpu_name, gpu_name = AUTO_VARIANTS
    leave = "; --fast-math, as the hand-written variants" if nest.fast_math else ""
    return (
        Variant(cpu_name, "cpu", "optimized",
                f"loclab optimize --target cpu of nest.py::{function} (Numba prange; the "
                f"first legal recipe, the cache model's tiles{leave})",
                functools.partial(lazy(__name__, "cpu"), nest)),
        Variant(gpu_name, "gpu", "optimized",
                f"loclab optimize --target gpu of nest.py::{function} (CUDA C from the "
                "nest: threads, staging, register tiles by the model)",
                functools.partial(lazy(__name__, "gpu"), nest)),
    )


def _sizes(arguments: list[Any], names: list[str]) -> dict[str, int]:
    return {name: int(value) for name, value in zip(names, arguments)
            if isinstance(value, (int, np.integer))}


@functools.cache
def _planned(nest: Nest, sizes: tuple[tuple[str, int], ...]) -> Any:
    from loclab.nest import read_source
    from loclab.optimize import plan

    # the harness allocates every input and output apart: no check for shared memory
    return plan(read_source(nest.path), nest.function, filename=str(nest.path),
                params=dict(sizes), element_bytes=4, assume_distinct=True,
                fast_math=nest.fast_math)


def _names(nest: Nest) -> list[str]:
    import inspect

    return list(inspect.signature(getattr(nest.module, nest.function)).parameters)


def _laid_out(nest: Nest, inputs: dict[str, Any], out: Any
              ) -> tuple[list[Any], dict[str, Any], dict[str, int], Any]:
    """The nest's arguments for these inputs (as a list, and by name), its sizes among them,
    and the function planned at those sizes."""
    arguments = nest.arguments(inputs, out)
    by_name = dict(zip(_names(nest), arguments))
    sizes = _sizes(arguments, list(by_name))
    return arguments, by_name, sizes, _planned(nest, tuple(sorted(sizes.items())))


def cpu(nest: Nest, inputs: dict[str, Any], out: Any, machine: Any) -> Bound:
    """The first recipe the transformer proves for the CPU, compiled with Numba."""
    from loclab.optimize.build import choose

    arguments, _, _, planned = _laid_out(nest, inputs, out)
    code = replace(planned.code, scalar_types=_scalar_types(planned, arguments))
    _, result = choose(code, planned.plans)
    function = _compiled(result.source, result.compile)
    return Bound(_returning(function, arguments, out),
                 {"recipe": "; ".join(r.step for r in result.steps) or "as written"})


def gpu(nest: Nest, inputs: dict[str, Any], out: Any, machine: Any) -> Bound:
    """The nest's kernels as the GPU planner maps them, with the model's launch."""
    from loclab.optimize.cuda import argument_types, gpu_plan

    arguments, by_name, sizes, planned = _laid_out(nest, inputs, out)
    mapped = gpu_plan(planned)
    arrays, scalars = argument_types(by_name, list(sizes))
    configs = mapped.default_configs()
    emitted = mapped.emit(arrays, scalars, configs)
    function = recorded(_compiled(emitted.module, emitted.compile))
    return Bound(_returning(function, arguments, out),
                 {"grid": "; ".join(", ".join(g.var for g in m.grid) or "one thread"
                                    for m in mapped.mappings),
                  "launch": "; ".join(c.text() for c in configs if c.block)})


def recorded(function: types.FunctionType) -> types.FunctionType:
    """``function``, from a module ``loclab optimize --target gpu`` wrote, launching its
    kernels through a ``CompiledLaunches`` of its own, so that the run records them.

    Such a module launches kernel ``name`` as ``_kernel(name, index)(grid, block, args)``
    (``optimize.cuda.module``); the copy returned has that ``_kernel`` replaced, and shares
    every other global with ``function``: the modules compiled once stay compiled."""
    from loclab.gpu.kernels import CompiledLaunches

    launches = CompiledLaunches()
    kernel_of = function.__globals__["_kernel"]

    def through_launches(name: str, index: str) -> Callable[..., None]:
        compiled = kernel_of(name, index)
        return lambda grid, block, args: launches.launch(compiled, f"{name}<{index}>", grid,
                                                         block, args)

    return types.FunctionType(function.__code__,
                              {**function.__globals__, "_kernel": through_launches},
                              function.__name__, function.__defaults__, function.__closure__)


def _scalar_types(planned: Any, arguments: list[Any]) -> tuple[tuple[str, str], ...]:
    """The nest's scalars as Numba types them for the case's arguments (the golden MMM's
    ``np.float32`` sum stays float32 in its expanded array); the original is compiled for
    that once per process and argument types."""
    import numba

    from loclab.optimize import measure

    signature = tuple(numba.typeof(a) for a in arguments)
    key = (planned.code, signature)
    if key not in _SCALAR_TYPES:
        original = measure.compile_original(planned.as_written)
        original.compile(signature)
        _SCALAR_TYPES[key] = measure.scalar_types(original, planned.as_written.program)
    return _SCALAR_TYPES[key]


_SCALAR_TYPES: dict[tuple[Any, ...], tuple[tuple[str, str], ...]] = {}


# Compiled once per process and code, Numba's or CUDA's (the sizes of a run share their
# code, or nearly).
_COMPILED: dict[str, Callable[..., Any]] = {}


def _compiled(code: str, compile_: Callable[[], Callable[..., Any]]) -> Callable[..., Any]:
    if code not in _COMPILED:
        _COMPILED[code] = compile_()
    return _COMPILED[code]


def _returning(function: Callable[..., Any], arguments: list[Any],
               out: Any) -> Callable[[], Any]:
    def run() -> Any:
        function(*arguments)
        return out

    return run
