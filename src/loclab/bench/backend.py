"""Where a variant's arrays live: NumPy on the CPU, CuPy on the GPU, and host memory (pinned
or pageable) for the GPU variants whose lesson is the link between them (``Placement``).

The harness stays the same for both; only staging, allocation, synchronisation and the clock
differ. Staged inputs in host memory are read-only (the golden output was computed from the
same arrays), and a variant's result must be a C-contiguous array of its own, not an input or
a view of one.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from loclab.cases.base import Memory, Variant
from loclab.errors import LoclabError
from loclab.measure.timing import Clock, CudaEventClock, PerfCounterClock


def read_only(array: np.ndarray) -> np.ndarray:
    """A view of a host array that a variant cannot write through."""
    view = array.view()
    view.setflags(write=False)
    return view


class CpuBackend:
    device = "cpu"
    xp = np

    def __init__(self) -> None:
        self.clock: Clock = PerfCounterClock()

    def stage(self, array: np.ndarray, memory: Memory = "pageable") -> np.ndarray:
        """A read-only view: on the CPU every variant's data is in (pageable) host memory."""
        return read_only(array)

    def empty(self, shape: tuple[int, ...], dtype: Any, memory: Memory = "pageable"
              ) -> np.ndarray:
        return np.empty(shape, dtype)

    def to_host(self, array: Any) -> np.ndarray:
        return np.asarray(array)

    def synchronize(self) -> None:
        """CPU variants return when done."""

    def release(self) -> None:
        """NumPy frees arrays when their last reference goes."""


class GpuBackend:
    device = "gpu"

    def __init__(self) -> None:
        import cupy

        self._cupy = self.xp = cupy
        self.clock = CudaEventClock()

    def stage(self, array: np.ndarray, memory: Memory = "device") -> Any:
        """``array`` in device memory, or in host memory of the kind asked for (read-only):
        a pinned copy, or a view of the array itself (pageable, as NumPy allocates it)."""
        if memory == "device":
            return self._cupy.asarray(array)
        if memory == "pageable":
            return read_only(array)
        pinned = self.empty(array.shape, array.dtype, "pinned")
        pinned[...] = array
        return read_only(pinned)

    def empty(self, shape: tuple[int, ...], dtype: Any, memory: Memory = "device") -> Any:
        if memory == "device":
            return self._cupy.empty(shape, dtype)
        if memory == "pageable":
            return np.empty(shape, dtype)
        import cupyx

        return cupyx.empty_pinned(shape, dtype)

    def to_host(self, array: Any) -> np.ndarray:
        return array if isinstance(array, np.ndarray) else self._cupy.asnumpy(array)

    def synchronize(self) -> None:
        self._cupy.cuda.Device().synchronize()

    def release(self) -> None:
        """Give pooled blocks back, device and pinned, so the next case can allocate its
        full size."""
        self._cupy.get_default_memory_pool().free_all_blocks()
        self._cupy.get_default_pinned_memory_pool().free_all_blocks()


class Staging:
    """One size's inputs staged where each variant wants them (``Variant.placement``), each
    kind of memory once: the variants that read pinned host memory share one pinned copy."""

    def __init__(self, backend: CpuBackend | GpuBackend, inputs: dict[str, np.ndarray]) -> None:
        self.backend = backend
        self.inputs = inputs
        self._staged: dict[Memory, dict[str, Any]] = {}

    def memory(self, variant: Variant) -> Memory:
        """Where ``variant`` reads its inputs on this backend."""
        return variant.placement.inputs if self.backend.device == "gpu" else "pageable"

    def inputs_for(self, variant: Variant) -> dict[str, Any]:
        """The inputs staged for ``variant`` (staged on first use; staging may raise, e.g.
        out of device memory: the variant then fails, the others go on)."""
        memory = self.memory(variant)
        if memory not in self._staged:
            try:
                self._staged[memory] = {name: self.backend.stage(array, memory)
                                        for name, array in self.inputs.items()}
            except Exception as err:  # out of device or pinned memory: this variant fails
                raise LoclabError(f"staging the inputs in {memory} memory failed: "
                                  f"{type(err).__name__}: {err}") from None
        return self._staged[memory]

    def output_for(self, variant: Variant, shape: tuple[int, ...], dtype: Any) -> Any:
        """A new output buffer where ``variant`` writes it."""
        if self.backend.device == "gpu":
            return self.backend.empty(shape, dtype, variant.placement.output)
        return self.backend.empty(shape, dtype)

    def release(self) -> None:
        """Drop every staged copy and give the pools' blocks back."""
        self._staged.clear()
        self.backend.release()


def _module_of(array: Any) -> Any:
    """NumPy for a host array, CuPy for a device one."""
    if isinstance(array, np.ndarray):
        return np
    import cupy

    return cupy


def output_problem(result: Any, staged: dict[str, Any]) -> str | None:
    """Why ``result`` cannot be a variant's output, or None (inputs and output may live in
    host or device memory; arrays in different memories share nothing)."""
    if not hasattr(result, "flags") or not result.flags.c_contiguous:
        return "the output is not a C-contiguous (row-major) array"
    xp = _module_of(result)
    for name, array in staged.items():
        if _module_of(array) is xp and xp.may_share_memory(result, array):
            return f"the output shares memory with input {name!r}: it is not a new result"
    return None


def make_backend(device: str) -> CpuBackend | GpuBackend:
    return CpuBackend() if device == "cpu" else GpuBackend()
