"""The textbook corpus (``benchmarks/kernels/``): kernels written the way numerical textbooks
write them, one a file, read here once for ``scripts/corpus-bench --corpus textbook`` and
``tests/test_textbook_kernels.py``.

A kernel file defines

- the kernel: a function named like the file, plain loops over NumPy arrays, its arrays and
  sizes its arguments (the file's only other functions are ``inputs`` and ``peer``);
- ``SIZES``: the sizes it is benchmarked at (the original, compiled by Numba as written, runs
  for a fraction of a second to a few seconds on one core);
- ``SMALL``: sizes at which it runs as plain Python in milliseconds (the test's);
- ``OUTPUTS``: the arrays it computes (its other arrays are inputs or scratch);
- ``inputs(**sizes)``, only where random arrays would break it (a valid CSR structure, pixels
  that are bins, a diagonally dominant system): its arguments, what ``loclab optimize
  --inputs`` takes (``loclab.transform.inputs.INPUTS_CONTRACT``);
- ``peer(xp, linalg, **arguments)``: a closure of no argument computing the same outputs into
  the same arrays, written the natural vectorized way with ``xp`` (NumPy or CuPy) and
  ``linalg`` (``scipy.linalg`` or ``cupyx.scipy.linalg``).

The peer takes the kernel's own arguments rather than making its own, so that the test checks
it against the kernel on the same arrays and the benchmark times it on the arrays loclab runs
the original on: the file's ``inputs``, else loclab's random ones (shaped by its analysis of
the kernel's accesses, outputs poisoned with NaN).
"""

from __future__ import annotations

import inspect
import runpy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

KERNELS = Path(__file__).resolve().parent / "kernels"
HELPERS = ("inputs", "peer")  # a kernel file's functions that are not the kernel


@dataclass(frozen=True)
class Kernel:
    """One kernel file, run once: the kernel function and the parts of the contract above."""

    name: str  # the file's stem
    path: Path
    function: Callable[..., Any]
    sizes: dict[str, int]
    small: dict[str, int]
    outputs: tuple[str, ...]
    peer: Callable[..., Callable[[], Any]]
    inputs: Callable[..., Any] | None

    @property
    def parameters(self) -> list[str]:
        """The kernel's parameters, in order (arrays, scalars and sizes)."""
        return list(inspect.signature(self.function).parameters)


def names() -> list[str]:
    """The corpus's kernels, by file stem, sorted (files starting with _ are not kernels)."""
    return sorted(path.stem for path in KERNELS.glob("*.py") if not path.stem.startswith("_"))


def load(name: str) -> Kernel:
    """The kernel of ``benchmarks/kernels/NAME.py``, its module run as a script."""
    path = KERNELS / f"{name}.py"
    namespace = runpy.run_path(str(path), run_name=f"textbook_{name}")
    return Kernel(name, path, kernel_function(namespace, name, path), dict(namespace["SIZES"]),
                  dict(namespace["SMALL"]), tuple(namespace["OUTPUTS"]), namespace["peer"],
                  namespace.get("inputs"))


def kernel_function(namespace: Mapping[str, Any], name: str, path: Path) -> Callable[..., Any]:
    """The function named like the file, else the file's only function besides the helpers
    (what ``loclab optimize FILE.py`` picks without ``::FUNC``)."""
    defined = {key: value for key, value in namespace.items()
               if inspect.isfunction(value) and key not in HELPERS
               and value.__code__.co_filename == str(path)}
    if name in defined:
        return defined[name]
    if len(defined) != 1:
        raise ValueError(f"{path}: no function {name} and {len(defined)} others "
                         f"({', '.join(defined) or 'none'}): which is the kernel?")
    return next(iter(defined.values()))


def arguments(kernel: Kernel, sizes: Mapping[str, int]) -> dict[str, Any]:
    """The kernel's arguments at ``sizes`` as NumPy arrays and numbers, by parameter in order:
    what ``loclab optimize`` runs the original on (the file's ``inputs``, else loclab's)."""
    if kernel.inputs is None:
        made = loclab_inputs(kernel, sizes)
    else:
        returned = kernel.inputs(**sizes)
        made = returned if isinstance(returned, Mapping) else \
            dict(zip(kernel.parameters, returned))
    given = {**sizes, **made}
    return {name: given[name] for name in kernel.parameters}


def loclab_inputs(kernel: Kernel, sizes: Mapping[str, int]) -> dict[str, Any]:
    """loclab's own random arguments for the kernel at ``sizes`` (the same arrays, seed and
    NaN-poisoned outputs ``loclab optimize`` verifies and times the original on)."""
    from loclab.transform import transform
    from loclab.transform.inputs import make_inputs

    program = transform(kernel.path.read_text(), [], kernel.function.__name__,
                        filename=str(kernel.path)).program
    return make_inputs(program, dict(sizes))


def peer_run(kernel: Kernel, sizes: Mapping[str, int], xp: ModuleType,
             linalg: ModuleType) -> Callable[[], Any]:
    """The kernel's peer at ``sizes``, on its arguments moved to ``xp`` (a copy onto the GPU
    for CuPy; NumPy's arrays as they are)."""
    moved = {name: xp.asarray(value) if isinstance(value, np.ndarray) else value
             for name, value in arguments(kernel, sizes).items()}
    return kernel.peer(xp, linalg, **moved)
