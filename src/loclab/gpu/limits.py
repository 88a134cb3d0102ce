"""What a kernel's launch configuration must respect on a GPU, for the restrictions of the
tuning spaces and the setups that refuse what their space would reject: a reason in words, or
None. Kept apart from the kernels so that a restriction is checked without CuPy."""

from __future__ import annotations

from loclab.errors import LaunchError
from loclab.hw.gpu import GpuInfo

# Shared memory a kernel may have without opting in: all of its static __shared__ arrays (a
# hard limit), or its dynamic shared memory until it opts in to more.
SHARED_WITHOUT_OPT_IN = 48 * 1024
MAX_REGISTERS_PER_THREAD = 255


def threads_fit(threads: int, gpu: GpuInfo) -> str | None:
    if threads > gpu.max_threads_per_block:
        return f"{threads} threads per block exceed {gpu.max_threads_per_block}"
    return None


def registers_fit(registers: int, threads: int, gpu: GpuInfo) -> str | None:
    """``registers`` per thread (a floor estimated from the code) for a block of ``threads``."""
    if registers > MAX_REGISTERS_PER_THREAD or registers * threads > gpu.registers_per_sm:
        return f"{threads} threads x {registers}+ registers do not fit an SM"
    return None


def refuse(reason: str | None) -> None:
    """A setup called with a configuration its space rejects fails as a launch would."""
    if reason:
        raise LaunchError(reason)
