"""GPU copies: our vectorized kernel and the driver's cudaMemcpy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from loclab.cases.base import Bound
from loclab.errors import LaunchError
from loclab.gpu.kernels import KernelSource, Launch, blocks
from loclab.hw import Machine

KERNELS = KernelSource(Path(__file__).with_name("kernels.cu"), ("copy_vectorized",))
THREADS = 256
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
