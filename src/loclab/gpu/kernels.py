"""Compile a case's ``kernels.cu`` through NVRTC once, and launch its kernels with checks.

Kernels are templates; each case lists the instantiations it launches as name expressions
(``"transpose_staged<32,8,1>"``), which serve both NVRTC here and the nvcc check in CI.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loclab.errors import LaunchError
from loclab.gpu.limits import SHARED_WITHOUT_OPT_IN

NVRTC_OPTIONS = ("-std=c++17",)


@dataclass(frozen=True)
class KernelSource:
    """A ``.cu`` file and the template instantiations launched from it."""

    path: Path
    name_expressions: tuple[str, ...]


def source_for(defaults: KernelSource, name: str) -> KernelSource:
    """Where instantiation ``name`` compiles: the module of the listed defaults, or (a tuned
    configuration, a size that needs its own template arguments) a module of its own, compiled
    on first use."""
    if name in defaults.name_expressions:
        return defaults
    return KernelSource(defaults.path, (name,))


@functools.cache
def _module(source: KernelSource) -> Any:
    """The compiled module (CuPy also caches the binary on disk, keyed by source and options)."""
    import cupy

    module = cupy.RawModule(code=source.path.read_text(), options=NVRTC_OPTIONS,
                            name_expressions=list(source.name_expressions))
    try:
        module.compile()
    except cupy.cuda.compiler.CompileException as err:
        first = next((line for line in str(err).splitlines() if "error" in line), str(err))
        raise LaunchError(f"{source.path.name} failed to compile: {first.strip()}") from None
    return module


class Launch:
    """One kernel with its launch shape and arguments; calling it launches and returns ``result``.

    CuPy raises when ``cuLaunchKernel`` refuses a launch (bad shape, too much shared memory);
    that becomes a LaunchError naming the kernel and shape. Errors raised while the kernel runs
    surface at the next synchronisation, where the harness reports them for the variant.
    """

    def __init__(self, source: KernelSource, name: str, grid: Sequence[int], block: Sequence[int],
                 args: tuple[Any, ...], result: Any, shared_mem: int = 0) -> None:
        if name not in source.name_expressions:
            raise LaunchError(f"{name} is not listed in {source.path.name}'s name expressions")
        self.name = name
        self.grid = tuple(int(g) for g in grid)
        self.block = tuple(int(b) for b in block)
        self.args = args
        self.result = result
        self.shared_mem = shared_mem
        self._kernel = _module(source).get_function(name)
        if shared_mem > SHARED_WITHOUT_OPT_IN:
            self._opt_in(shared_mem)

    def _opt_in(self, shared_mem: int) -> None:
        """Beyond 48 KiB a kernel must opt in to dynamic shared memory; the attribute belongs
        to the kernel, so it only ever grows (another launch of it may need more)."""
        if shared_mem <= self._kernel.max_dynamic_shared_size_bytes:
            return
        try:
            self._kernel.max_dynamic_shared_size_bytes = shared_mem
        except Exception as err:  # CUDADriverError: more than the device allows
            raise LaunchError(f"kernel {self.name} cannot have {shared_mem} bytes of dynamic "
                              f"shared memory: {err}") from None

    @property
    def shape(self) -> str:
        return f"grid={self.grid} block={self.block} shared={self.shared_mem}B"

    def __call__(self) -> Any:
        try:
            self._kernel(self.grid, self.block, self.args, shared_mem=self.shared_mem)
        except Exception as err:  # CUDADriverError and kin; anything here is a failed launch
            raise LaunchError(f"kernel {self.name} failed to launch with {self.shape}: "
                              f"{err}") from None
        return self.result


def blocks(extent: int, per_block: int) -> int:
    """Blocks needed to cover ``extent`` items, ``per_block`` at a time."""
    return max(1, -(-extent // per_block))
