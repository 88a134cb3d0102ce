"""What a case study declares (ARCHITECTURE.md, "Case study"), and what a variant returns.

A case knows its sizes, inputs, golden reference, the golden algorithm's work and its
variants; the harness (``loclab.bench``) does everything else the same way for every case.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import numpy as np

    from loclab.hw import Machine

Device = Literal["cpu", "gpu"]
Role = Literal["golden", "naive", "optimized", "library"]
SIZE_PRESETS = ("small", "default", "large")
DEVICE_CHOICES = ("cpu", "gpu", "all")
Dims = Mapping[str, int]
# A size preset for one device: fixed dimensions, or a rule that reads the machine (``large``
# must be at least four times the last-level cache of the machine it runs on).
SizeRule = Dims | Callable[["Machine"], Dims]


@dataclass(frozen=True)
class Work:
    """Bytes and flops of the golden algorithm: every rate is computed from these."""

    bytes: int
    flops: int


@dataclass(frozen=True)
class Bound:
    """A variant ready to run on staged inputs.

    ``run()`` executes the variant once and returns its output array (the preallocated,
    poisoned buffer it wrote, or a fresh array for a library call that allocates).
    """

    run: Callable[[], Any]
    params: dict[str, Any] = field(default_factory=dict)


# setup(staged inputs, preallocated output, machine) -> Bound
Setup = Callable[[dict[str, Any], Any, "Machine"], Bound]


@dataclass(frozen=True)
class Variant:
    name: str
    device: Device
    role: Role
    description: str
    setup: Setup


@dataclass(frozen=True)
class Case:
    name: str
    lesson: str
    description: str
    sizes: Mapping[str, Mapping[Device, SizeRule]]
    make_inputs: Callable[[Dims, np.random.Generator], dict[str, np.ndarray]]
    golden: Callable[[dict[str, np.ndarray]], np.ndarray]
    output: Callable[[Dims], tuple[tuple[int, ...], Any]]
    work: Callable[[Dims], Work]
    tolerance: float
    variants: tuple[Variant, ...]
    # Small awkward sizes (edges of tiles, vector widths, one row) every variant is tested at.
    test_dims: tuple[Dims, ...] = ()

    def dims(self, preset: str, device: Device, machine: Machine) -> dict[str, int]:
        rule = self.sizes[preset][device]
        return dict(rule(machine) if callable(rule) else rule)

    def variants_on(self, device: Device) -> tuple[Variant, ...]:
        return tuple(v for v in self.variants if v.device == device)


def dims_text(dims: Dims) -> str:
    """'16384x16384': a size as tables and messages show it."""
    return "x".join(str(v) for v in dims.values())


def lazy(module: str, name: str) -> Setup:
    """A setup function imported on first call, so that listing cases imports no numba/CuPy."""

    def setup(inputs: dict[str, Any], out: Any, machine: Machine) -> Bound:
        return getattr(importlib.import_module(module), name)(inputs, out, machine)

    setup.__qualname__ = f"lazy({module}.{name})"
    return setup
