"""Where a variant's arrays live: NumPy on the CPU, CuPy on the GPU.

The harness stays the same for both; only staging, allocation, synchronisation and the clock
differ. Staged inputs are read-only on the CPU (the golden output was computed from the same
arrays), and a variant's result must be a C-contiguous array of its own, not an input or a
view of one.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from loclab.bench.timing import Clock, CudaEventClock, PerfCounterClock


class CpuBackend:
    device = "cpu"
    xp = np

    def __init__(self) -> None:
        self.clock: Clock = PerfCounterClock()

    def stage(self, array: np.ndarray) -> np.ndarray:
        view = array.view()
        view.setflags(write=False)
        return view

    def empty(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
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

    def stage(self, array: np.ndarray) -> Any:
        return self._cupy.asarray(array)

    def empty(self, shape: tuple[int, ...], dtype: Any) -> Any:
        return self._cupy.empty(shape, dtype)

    def to_host(self, array: Any) -> np.ndarray:
        return self._cupy.asnumpy(array)

    def synchronize(self) -> None:
        self._cupy.cuda.Device().synchronize()

    def release(self) -> None:
        """Give pooled blocks back, so the next case can allocate its full size."""
        self._cupy.get_default_memory_pool().free_all_blocks()


def output_problem(result: Any, staged: dict[str, Any], xp: Any = np) -> str | None:
    """Why ``result`` cannot be a variant's output, or None; ``xp`` is NumPy or CuPy."""
    if not hasattr(result, "flags") or not result.flags.c_contiguous:
        return "the output is not a C-contiguous (row-major) array"
    for name, array in staged.items():
        if xp.may_share_memory(result, array):
            return f"the output shares memory with input {name!r}: it is not a new result"
    return None


def make_backend(device: str) -> CpuBackend | GpuBackend:
    return CpuBackend() if device == "cpu" else GpuBackend()
