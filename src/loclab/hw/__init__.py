"""What the machine is: CPU and GPU detection, nothing measured here.

Measured references (copy bandwidth) come from running the ``copy`` case through the harness,
so that ``loclab devices`` and ``loclab run`` measure the roof the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loclab.hw.cpu import CpuInfo, detect_cpu
from loclab.hw.gpu import GpuInfo, detect_gpu


@dataclass(frozen=True)
class Machine:
    """The CPU, and the GPU when one is usable (else ``gpu_unavailable`` says why)."""

    cpu: CpuInfo
    gpu: GpuInfo | None
    gpu_unavailable: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "cpu": self.cpu.to_json(),
            "gpu": self.gpu.to_json() if self.gpu else None,
            "gpu_unavailable": self.gpu_unavailable,
        }


def detect_machine(with_gpu: bool = True) -> Machine:
    """Detect the CPU and, if ``with_gpu``, the GPU (importing CuPy only then)."""
    cpu = detect_cpu()
    if not with_gpu:
        return Machine(cpu=cpu, gpu=None, gpu_unavailable="not requested")
    gpu, reason = detect_gpu()
    return Machine(cpu=cpu, gpu=gpu, gpu_unavailable=reason)


__all__ = ["CpuInfo", "GpuInfo", "Machine", "detect_cpu", "detect_gpu", "detect_machine"]
