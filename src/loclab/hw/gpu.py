"""GPU detection through CuPy, imported only here and only when asked.

No GPU is a normal state: ``detect_gpu`` then returns ``(None, reason)`` and nothing fails.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from loclab.gpu import gpu_unavailable_reason

# fp32 lanes (CUDA cores) per SM by compute capability major.minor; later parts default to 128.
FP32_LANES_PER_SM = {(6, 0): 64, (7, 0): 64, (7, 2): 64, (7, 5): 64, (8, 0): 64}


@dataclass(frozen=True)
class GpuInfo:
    name: str
    compute_capability: str
    sms: int
    memory_bytes: int
    l2_bytes: int
    shared_mem_per_block: int
    shared_mem_per_block_optin: int
    shared_mem_per_sm: int
    registers_per_sm: int
    max_threads_per_sm: int
    max_threads_per_block: int
    clock_mhz: float
    memory_clock_mhz: float
    memory_bus_bits: int
    fp32_lanes_per_sm: int

    @property
    def theoretical_gbps(self) -> float:
        """Double data rate x bus width: the datasheet memory bandwidth."""
        return 2 * self.memory_clock_mhz * 1e6 * self.memory_bus_bits / 8 / 1e9

    @property
    def peak_gflops_fp32(self) -> float:
        """SMs x fp32 lanes x 2 (an FMA) x boost clock."""
        return self.sms * self.fp32_lanes_per_sm * 2 * self.clock_mhz * 1e-3

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "theoretical_gbps": self.theoretical_gbps,
                "peak_gflops_fp32": self.peak_gflops_fp32}


def detect_gpu(device: int = 0) -> tuple[GpuInfo | None, str | None]:
    """``(info, None)`` for a usable GPU, else ``(None, why not)``."""
    reason = gpu_unavailable_reason()
    if reason:
        return None, reason
    import cupy

    props = cupy.cuda.runtime.getDeviceProperties(device)
    attrs = cupy.cuda.Device(device).attributes
    major, minor = props["major"], props["minor"]
    return GpuInfo(
        name=props["name"].decode(errors="replace"),
        compute_capability=f"{major}.{minor}",
        sms=props["multiProcessorCount"],
        memory_bytes=props["totalGlobalMem"],
        l2_bytes=props["l2CacheSize"],
        shared_mem_per_block=props["sharedMemPerBlock"],
        shared_mem_per_block_optin=props["sharedMemPerBlockOptin"],
        shared_mem_per_sm=props["sharedMemPerMultiprocessor"],
        registers_per_sm=props["regsPerMultiprocessor"],
        max_threads_per_sm=props["maxThreadsPerMultiProcessor"],
        max_threads_per_block=props["maxThreadsPerBlock"],
        # Attributes rather than properties: CUDA 13 dropped the clock fields of the struct.
        clock_mhz=attrs["ClockRate"] / 1000.0,
        memory_clock_mhz=attrs["MemoryClockRate"] / 1000.0,
        memory_bus_bits=attrs["GlobalMemoryBusWidth"],
        fp32_lanes_per_sm=FP32_LANES_PER_SM.get((major, minor), 128),
    ), None
