"""GPU detection through CuPy, imported only here and only when asked.

No GPU is a normal state: ``detect_gpu`` then returns ``(None, reason)`` and nothing fails.
"""

from __future__ import annotations

import functools
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


@functools.cache
def gpu_unavailable_reason() -> str | None:
    """None when CuPy sees a CUDA device, else one line saying what is missing."""
    try:
        import cupy
    except ImportError:
        return "CuPy is not installed (pip install 'loclab[gpu]')"
    except Exception as err:  # a broken CUDA install can fail CuPy's import in many ways
        return f"CuPy failed to import: {err}"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as err:  # CUDARuntimeError: no driver, no device
        return f"CuPy found no usable CUDA device ({err})"
    return None if count > 0 else "CuPy found no CUDA device"


# fp32 lanes (CUDA cores) per SM by compute capability major.minor; later parts default to 128.
FP32_LANES_PER_SM = {(6, 0): 64, (7, 0): 64, (7, 2): 64, (7, 5): 64, (8, 0): 64}
SYSFS_PCI = Path("/sys/bus/pci/devices")
# PCIe generation by transfer rate (GT/s a lane), and the share of the bits that carry data:
# 8b/10b up to 5 GT/s, 128b/130b from 8 GT/s, FLIT mode (242 of 256 bytes) at 64 GT/s.
PCIE_GENERATIONS = {2.5: (1, 0.8), 5.0: (2, 0.8), 8.0: (3, 128 / 130), 16.0: (4, 128 / 130),
                    32.0: (5, 128 / 130), 64.0: (6, 242 / 256)}


@dataclass(frozen=True)
class PcieLink:
    """The PCIe link between host and GPU, as the bus reports it (a VM may not)."""

    generation: int
    lanes: int
    gigatransfers: float
    encoding: float

    @property
    def gbps(self) -> float:
        """Data bandwidth each way, before the protocol's packet overhead: what the link's
        rate allows in theory (copies reach 80 to 90% of it)."""
        return self.gigatransfers * self.lanes * self.encoding / 8

    def text(self) -> str:
        return f"PCIe {self.generation}.0 x{self.lanes}"


def read_pcie_link(bus_id: str, devices: Path = SYSFS_PCI) -> PcieLink | None:
    """The link of the PCI device ``bus_id`` ('0000:01:00.0') from sysfs, None where it is
    not there or not readable (a virtual machine's bus, an NVLink-C2C part)."""
    folder = devices / bus_id.lower()
    try:
        speed = (folder / "current_link_speed").read_text()
        lanes = int((folder / "current_link_width").read_text())
    except (OSError, ValueError):
        return None
    match = re.match(r"\s*([\d.]+)\s*GT/s", speed)
    known = PCIE_GENERATIONS.get(float(match.group(1))) if match else None
    if not known or lanes <= 0:
        return None
    generation, encoding = known
    return PcieLink(generation, lanes, float(match.group(1)), encoding)


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
    pcie: PcieLink | None = None

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
                "peak_gflops_fp32": self.peak_gflops_fp32,
                "link": self.pcie.text() if self.pcie else None,
                "link_theoretical_gbps": self.pcie.gbps if self.pcie else None}


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
        pcie=read_pcie_link(cupy.cuda.runtime.deviceGetPCIBusId(device)),
    ), None
