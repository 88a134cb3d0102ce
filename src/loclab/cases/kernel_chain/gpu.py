"""The chain on a GPU: one launch of ``affine_chain`` per kernel (``device-centric``,
``data-flow``) or one for all of them (``fused``), x and the result in host memory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from loclab.cases.base import COMPUTE, COPY_IN, COPY_OUT, Bound, Step, stepped
from loclab.gpu import transfers
from loclab.gpu.kernels import KernelAccesses, KernelSource, Launch, blocks
from loclab.hw import Machine
from loclab.model.access import DeclaredAccess

THREADS = 256
MAX_BLOCKS = 2**31 - 1
_ELEMENT = "blockIdx.x*blockDim.x + threadIdx.x"
ACCESSES = (
    KernelAccesses("affine_chain", (), (
        DeclaredAccess(f"in[{_ELEMENT}]", "global", 4, note="read once", count="n"),
        DeclaredAccess(f"out[{_ELEMENT}]", "global", 4, note="write once", write=True,
                       count="n")),
        block=(THREADS,)),
)
KERNELS = KernelSource(Path(__file__).with_name("kernels.cu"), ("affine_chain",), ACCESSES)


def _kernels(source: Any, target: Any, first: int, last: int) -> Launch:
    """Kernels ``first..last`` of the chain from device array ``source`` into ``target``."""
    grid = min(blocks(source.size, THREADS), MAX_BLOCKS)
    return Launch(KERNELS, "affine_chain", grid=(grid,), block=(THREADS,),
                  args=(source, target, np.int64(source.size), np.int32(first),
                        np.int32(last)), result=target)


def _buffers(x: np.ndarray) -> tuple[Any, Any]:
    import cupy

    return cupy.empty(x.size, np.float32), cupy.empty(x.size, np.float32)


def _count(inputs: dict) -> int:
    return int(inputs["kernels"][0])


def device_centric(inputs: dict, out: np.ndarray, machine: Machine) -> Bound:
    """Kernel i as a call ``apply(i, host) -> host``: its input in, the kernel, its result
    out to a new host array (the last into ``out``), which the next call sends back in."""
    x, count = inputs["x"], _count(inputs)
    source, target = _buffers(x)
    held: list[np.ndarray] = []  # the last call's result, on the host

    def copy_in(first: bool) -> None:
        transfers.to_device(source, x if first else held.pop())

    def copy_out(last: bool) -> None:
        result = out if last else np.empty_like(out)
        transfers.to_host(result, target)
        if not last:
            held.append(result)

    steps: list[Step] = []
    for kernel in range(1, count + 1):
        steps += [Step(COPY_IN, lambda first=kernel == 1: copy_in(first)),
                  Step(COMPUTE, _kernels(source, target, kernel, kernel)),
                  Step(COPY_OUT, lambda last=kernel == count: copy_out(last))]
    return stepped(steps, out, {"kernels": count, "round_trips": count})


def data_flow(inputs: dict, out: np.ndarray, machine: Machine) -> Bound:
    """x in once; kernel i reads the buffer kernel i - 1 wrote (two buffers in turn); the
    last one's result out once."""
    x, count = inputs["x"], _count(inputs)
    buffers = _buffers(x)
    launches = [_kernels(buffers[(kernel - 1) % 2], buffers[kernel % 2], kernel, kernel)
                for kernel in range(1, count + 1)]
    return stepped([Step(COPY_IN, lambda: transfers.to_device(buffers[0], x)),
                    *(Step(COMPUTE, launch) for launch in launches),
                    Step(COPY_OUT, lambda: transfers.to_host(out, buffers[count % 2]))],
                   out, {"kernels": count, "round_trips": 1})


def fused(inputs: dict, out: np.ndarray, machine: Machine) -> Bound:
    """x in once, one launch of all k kernels, the result out once."""
    x, count = inputs["x"], _count(inputs)
    source, target = _buffers(x)
    return stepped([Step(COPY_IN, lambda: transfers.to_device(source, x)),
                    Step(COMPUTE, _kernels(source, target, 1, count)),
                    Step(COPY_OUT, lambda: transfers.to_host(out, target))],
                   out, {"kernels": count, "round_trips": 1, "launches": 1})
