"""Compile a case's ``kernels.cu`` through NVRTC once, and launch its kernels with checks.

Kernels are templates; each case lists the instantiations it launches as name expressions
(``"transpose_staged<32,8,1>"``), which serve both NVRTC here and the nvcc check in CI.
"""

from __future__ import annotations

import contextlib
import functools
import math
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loclab.errors import LaunchError
from loclab.gpu.limits import SHARED_WITHOUT_OPT_IN

if TYPE_CHECKING:
    from loclab.model.access import DeclaredAccess

NVRTC_OPTIONS = ("-std=c++17",)
# cuFuncGetAttribute's attributes (CUfunction_attribute) read for the occupancy model.
ATTRIBUTE_MAX_THREADS_PER_BLOCK, ATTRIBUTE_SHARED_SIZE_BYTES = 0, 1
ATTRIBUTE_LOCAL_SIZE_BYTES, ATTRIBUTE_NUM_REGS = 3, 4
# Template arguments that are not numbers, as the access texts see them: a bool is 1 or 0, a
# type its size in bytes (``scan_lookback<float,...>``: T = 4).
TEMPLATE_VALUES = {"true": 1, "false": 0, "float": 4, "int": 4, "unsigned": 4, "double": 8}
# Where the launches set up while a variant runs are collected (see ``recording_launches``).
_RECORDERS: list[list["Launch"]] = []


@dataclass(frozen=True)
class KernelAccesses:
    """A kernel template's main accesses, declared so that a run shows the sectors per request
    and bank conflicts the models predict for them. The access texts name the template's
    arguments (``template``, in order), the case's dimensions, thread and block indices, and
    the loop variables ``at`` fixes (a typical iteration)."""

    kernel: str  # the template's name: "transpose_staged"
    template: tuple[str, ...]  # its arguments' names: ("TILE", "BLOCK_ROWS", "PAD")
    accesses: tuple["DeclaredAccess", ...]
    at: tuple[tuple[str, int], ...] = ()
    # The block it is launched with, in the same names (a launch's own block is used when
    # there is one; the tests check every declaration with this one).
    block: tuple[int | str, ...] = (32,)

    def parameters(self, name: str, dims: dict[str, int]) -> dict[str, int]:
        """The values the access texts need at instantiation ``name`` and size ``dims``
        (a bool template argument is 1 or 0, a type its size)."""
        arguments = name.partition("<")[2].rstrip(">")
        values = [int(TEMPLATE_VALUES.get(v.strip(), v)) for v in arguments.split(",")
                  ] if arguments else []
        return {**dims, **dict(self.at), **dict(zip(self.template, values))}


@dataclass(frozen=True)
class KernelSource:
    """A ``.cu`` file, the template instantiations launched from it, and the main accesses of
    its kernels (not part of the compiled module's identity)."""

    path: Path
    name_expressions: tuple[str, ...]
    accesses: tuple[KernelAccesses, ...] = field(default=(), compare=False)

    def accesses_of(self, name: str) -> KernelAccesses | None:
        return next((a for a in self.accesses if a.kernel == name.partition("<")[0]), None)


def source_for(defaults: KernelSource, name: str) -> KernelSource:
    """Where instantiation ``name`` compiles: the module of the listed defaults, or (a tuned
    configuration, a size that needs its own template arguments) a module of its own, compiled
    on first use."""
    if name in defaults.name_expressions:
        return defaults
    return KernelSource(defaults.path, (name,), defaults.accesses)


_QUOTED_INCLUDE = re.compile(r'^#include "([^"]+)"[ \t]*$', re.MULTILINE)


def kernel_text(path: Path, seen: frozenset[Path] = frozenset()) -> str:
    """A ``.cu`` file with its quoted includes (shared headers such as ``gpu/block_scan.cuh``,
    relative to the including file) inlined, recursively (a header that includes itself is
    cut; include guards do the rest): NVRTC compiles a string with no directory to search, and
    CuPy keys its binary cache on that string, so an edited header must be part of it. nvcc
    (the CI check) resolves the same includes itself."""
    def inline(match: re.Match[str]) -> str:
        header = (path.parent / match.group(1)).resolve()
        if header in seen:
            return ""
        return kernel_text(header, seen | {header})

    return _QUOTED_INCLUDE.sub(inline, path.read_text())


@functools.cache
def _module(source: KernelSource) -> Any:
    """The compiled module (CuPy also caches the binary on disk, keyed by source and options)."""
    import cupy

    module = cupy.RawModule(code=kernel_text(source.path), options=NVRTC_OPTIONS,
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
    ``compiled``: the kernel where it was compiled elsewhere (``source`` is then None), as the
    module ``loclab optimize --target gpu`` writes compiles its own (``CompiledLaunches``).
    """

    def __init__(self, source: KernelSource | None, name: str, grid: Sequence[int],
                 block: Sequence[int], args: tuple[Any, ...], result: Any, shared_mem: int = 0,
                 compiled: Any = None) -> None:
        if compiled is None:
            if source is None or name not in source.name_expressions:
                where = f"{source.path.name}'s name expressions" if source else "no source"
                raise LaunchError(f"{name} is not listed in {where}")
            compiled = _module(source).get_function(name)
        self.name = name
        self.source = source
        self.grid = tuple(int(g) for g in grid)
        self.block = tuple(int(b) for b in block)
        self.args = args
        self.result = result
        self.shared_mem = shared_mem
        self._kernel = compiled
        if shared_mem > SHARED_WITHOUT_OPT_IN:
            self._opt_in(shared_mem)
        self.calls = 0  # launches made: per run, with the number of runs (the time model)
        for recorder in _RECORDERS:
            recorder.append(self)

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
    def threads(self) -> int:
        return math.prod(self.block)

    def declared_accesses(self) -> KernelAccesses | None:
        """The main accesses its source declares for this kernel; None without a declaration
        (or a source: a kernel compiled elsewhere)."""
        return self.source.accesses_of(self.name) if self.source else None

    def _attribute(self, attribute: int) -> int:
        import cupy

        return int(cupy.cuda.driver.funcGetAttribute(attribute, self._handle))

    def max_threads(self) -> int:
        """The most threads a block of this compiled kernel may have (its launch bounds)."""
        return self._attribute(ATTRIBUTE_MAX_THREADS_PER_BLOCK)

    @property
    def _handle(self) -> int:
        """The CUfunction (CuPy's RawKernel wraps a Function that holds it)."""
        return getattr(self._kernel, "kernel", self._kernel).ptr

    def resources(self) -> dict[str, Any]:
        """What the compiled kernel asks of an SM at this launch: the occupancy model's input.
        ``local_bytes`` is the stack a thread spills registers to."""
        return {"kernel": self.name, "block": list(self.block), "threads": self.threads,
                "registers": self._attribute(ATTRIBUTE_NUM_REGS),
                "static_shared": self._attribute(ATTRIBUTE_SHARED_SIZE_BYTES),
                "dynamic_shared": self.shared_mem,
                "local_bytes": self._attribute(ATTRIBUTE_LOCAL_SIZE_BYTES)}

    def cuda_blocks_per_sm(self, threads: int | None = None,
                           dynamic_shared: int | None = None) -> int:
        """CUDA's own answer (cuOccupancyMaxActiveBlocksPerMultiprocessor), to check ours:
        for this launch, or for this kernel with another block size or shared memory."""
        import cupy

        return int(cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(
            self._handle, threads or self.threads,
            self.shared_mem if dynamic_shared is None else dynamic_shared))

    def filling_the_gpu(self, tiles: int, sms: int) -> "Launch":
        """This launch with the grid of a persistent kernel, whose blocks loop over ``tiles``
        tiles of work: as many blocks as fit ``sms`` SMs at once (CUDA's occupancy for this
        kernel), never more than the tiles."""
        self.grid = (max(1, min(tiles, sms * self.cuda_blocks_per_sm())),)
        return self

    @property
    def shape(self) -> str:
        return f"grid={self.grid} block={self.block} shared={self.shared_mem}B"

    @property
    def key(self) -> tuple[Any, ...]:
        """What makes two launches the same kernel at the same shape for the models."""
        return (self.name, self.block, self.shared_mem)

    def __call__(self) -> Any:
        self.calls += 1
        try:
            self._kernel(self.grid, self.block, self.args, shared_mem=self.shared_mem)
        except Exception as err:  # CUDADriverError and kin; anything here is a failed launch
            raise LaunchError(f"kernel {self.name} failed to launch with {self.shape}: "
                              f"{err}") from None
        return self.result


class CompiledLaunches:
    """Launches of kernels compiled elsewhere, made through here so that a run records and
    counts them like its own ``Launch``es (occupancy, launches a run): the module ``loclab
    optimize --target gpu`` writes compiles and launches its kernels itself. One ``Launch``
    per kernel and shape, set up at its first call (inside the recording of the run that
    makes it)."""

    def __init__(self) -> None:
        self._launches: dict[tuple[Any, ...], Launch] = {}

    def launch(self, compiled: Any, name: str, grid: Sequence[int], block: Sequence[int],
               args: tuple[Any, ...], shared_mem: int = 0) -> None:
        """Launch ``compiled`` (kernel ``name``) with this shape and these arguments."""
        key = (name, tuple(grid), tuple(block), shared_mem)
        if key not in self._launches:
            self._launches[key] = Launch(None, name, grid, block, args, None, shared_mem,
                                         compiled=compiled)
        launch = self._launches[key]
        launch.args = args  # the same shape, this call's arguments
        launch()


@contextlib.contextmanager
def recording_launches() -> Iterator[list[Launch]]:
    """Collect every launch set up inside (the kernels a variant runs, for the occupancy and
    the traffic its row shows; each counts the times it is called)."""
    recorder: list[Launch] = []
    _RECORDERS.append(recorder)
    try:
        yield recorder
    finally:
        _RECORDERS[:] = [r for r in _RECORDERS if r is not recorder]  # by identity


def zeroed(*arrays: Any) -> None:
    """Clear device arrays on the current stream, a memset each (an output accumulated into,
    a look-back's tile counter and states)."""
    for array in arrays:
        array.data.memset_async(0, array.nbytes)


def in_order(*launches: Launch, before: Callable[[], Any] | None = None) -> Callable[[], Any]:
    """One run of a multi-kernel variant: ``before`` (clearing a counter, zeroing an output),
    then each launch in turn (one stream: each sees the last one's output); returns the last
    one's result."""

    def run() -> Any:
        if before is not None:
            before()
        for launch in launches:
            result = launch()
        return result

    return run


def blocks(extent: int, per_block: int) -> int:
    """Blocks needed to cover ``extent`` items, ``per_block`` at a time."""
    return max(1, -(-extent // per_block))
