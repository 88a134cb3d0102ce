"""GPU copies: our vectorized kernel and the driver's cudaMemcpy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from loclab.cases.base import Bound
from loclab.errors import LaunchError
from loclab.gpu.kernels import KernelAccesses, KernelSource, Launch, blocks
from loclab.hw import Machine
from loclab.model.access import DeclaredAccess

THREADS = 256
# Vector i of the first grid-stride step, in float4s; the n % 4 floats after the last whole
# vector (at most 3, copied as floats) are counted as one more vector.
_VECTOR = "blockIdx.x*blockDim.x + threadIdx.x"
ACCESSES = (
    KernelAccesses("copy_vectorized", (), (
        DeclaredAccess(f"in4[{_VECTOR}]", "global", 16, note="read, float4",
                       count="(rows*cols + 3)/4"),
        DeclaredAccess(f"out4[{_VECTOR}]", "global", 16, note="write, float4", write=True,
                       count="(rows*cols + 3)/4")),
        block=(THREADS,)),
)
KERNELS = KernelSource(Path(__file__).with_name("kernels.cu"), ("copy_vectorized",), ACCESSES)
MAX_BLOCKS = 2**31 - 1


def vectorized(inputs: dict, out: Any, machine: Machine) -> Bound:
    a = inputs["a"]
    if a.data.ptr % 16 or out.data.ptr % 16:
        raise LaunchError("copy_vectorized needs 16-byte aligned arrays")
    grid = min(blocks(max(a.size // 4, 1), THREADS), MAX_BLOCKS)
    launch = Launch(KERNELS, "copy_vectorized", grid=(grid,), block=(THREADS,),
                    args=(a, out, np.int64(a.size)), result=out)
    return Bound(launch, {"block": [THREADS], "vector": 4})


def memcpy(inputs: dict, out: Any, machine: Machine) -> Bound:
    a = inputs["a"]

    def run() -> Any:
        out.data.copy_from_device_async(a.data, a.nbytes)
        return out

    return Bound(run)
