"""The pipeline on a GPU: copy in, kernel, copy out, one after the other (``serial``) or in
chunks on k streams (``streams-k``), from host memory where the variant's placement puts x and
out (pinned or pageable)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from loclab.cases.base import COMPUTE, COPY_IN, COPY_OUT, Bound, Dims, Step, stepped
from loclab.cases.overlap import SCALE, SHIFT
from loclab.gpu import transfers
from loclab.gpu.kernels import KernelAccesses, KernelSource, Launch, blocks
from loclab.hw import Machine
from loclab.measure.space import Config, Space
from loclab.model.access import DeclaredAccess

THREADS = 256
MAX_BLOCKS = 2**31 - 1
KIB = 2**10
# Each element is read and written once a run, in one launch or in one launch a chunk.
_ELEMENT = "blockIdx.x*blockDim.x + threadIdx.x"
ACCESSES = (
    KernelAccesses("scaled_add_rounds", (), (
        DeclaredAccess(f"in[{_ELEMENT}]", "global", 4, note="read once", count="n",
                       count_per_run=True),
        DeclaredAccess(f"out[{_ELEMENT}]", "global", 4, note="write once", write=True,
                       count="n", count_per_run=True)),
        block=(THREADS,)),
)
KERNELS = KernelSource(Path(__file__).with_name("kernels.cu"), ("scaled_add_rounds",), ACCESSES)
# Streams and chunk sizes (KiB of x a chunk) the tuner walks. 4 streams of 8 MiB chunks were
# the fastest on an H100's PCIe 5.0 link at 256 MiB (3% ahead of 4 MiB; 1 stream is serial).
STREAMS = (1, 2, 3, 4, 6, 8, 16)
CHUNK_KIB = tuple(2**k for k in range(6, 17))  # 64 KiB ... 64 MiB
DEFAULT = {"streams": 4, "chunk_kib": 8192}


def _kernel(source: Any, target: Any, count: int, rounds: int) -> Launch:
    """The rounds on ``count`` elements of device arrays ``source`` -> ``target``."""
    grid = min(blocks(count, THREADS), MAX_BLOCKS)
    return Launch(KERNELS, "scaled_add_rounds", grid=(grid,), block=(THREADS,),
                  args=(source, target, np.int64(count), np.float32(SCALE),
                        np.float32(SHIFT), np.int32(rounds)), result=target)


def serial(inputs: dict, out: np.ndarray, machine: Machine) -> Bound:
    """The whole of x to the device, the kernel, the whole result back: on one stream, so
    nothing overlaps. Its phases (copy in, compute, copy out) are the three terms of the
    ideal; its compute alone is the kernel on data already on the device."""
    import cupy

    x = inputs["x"]
    on_device, result = cupy.empty(x.size, np.float32), cupy.empty(x.size, np.float32)
    kernel = _kernel(on_device, result, x.size, int(inputs["rounds"][0]))
    return stepped([Step(COPY_IN, lambda: transfers.to_device(on_device, x)),
                    Step(COMPUTE, kernel),
                    Step(COPY_OUT, lambda: transfers.to_host(out, result))],
                   out)


def in_streams(inputs: dict, out: np.ndarray, machine: Machine,
               streams: int = DEFAULT["streams"], chunk_kib: int = DEFAULT["chunk_kib"]
               ) -> Bound:
    """Chunk i goes to stream i mod k: its copy in, kernel and copy out queue there in order,
    into the stream's own pair of device buffers (a chunk waits only for the chunk k before
    it, which used them last). The copy engines and the SMs work on different streams' chunks
    at once."""
    import cupy

    x = inputs["x"]
    rounds = int(inputs["rounds"][0])
    size = max(chunk_kib * KIB // x.itemsize, 1)
    pieces = transfers.chunks(x.size, size)
    queues = transfers.streams(min(streams, len(pieces)))
    width = min(size, x.size)
    slots = [(cupy.empty(width, np.float32), cupy.empty(width, np.float32)) for _ in queues]
    plan = [(queues[i % len(queues)], *slots[i % len(queues)], start, stop,
             _kernel(*slots[i % len(queues)], stop - start, rounds))
            for i, (start, stop) in enumerate(pieces)]

    def run() -> np.ndarray:
        transfers.after_current(queues)
        for stream, source, target, start, stop, kernel in plan:
            transfers.to_device(source, x, start, stop, stream)
            with stream:
                kernel()
            transfers.to_host(out, target, start, stop, stream)
        transfers.join(queues)
        return out

    return Bound(run, {"streams": len(queues), "chunk_kib": chunk_kib,
                       "chunks": len(pieces)})


def _restriction(config: Config, dims: Dims, machine: Machine) -> str | None:
    """A configuration whose device buffers would not fit (two a stream) is refused."""
    buffers = 2 * config["streams"] * config["chunk_kib"] * KIB
    memory = machine.gpu.memory_bytes if machine.gpu else None
    if memory is not None and buffers > memory // 4:
        return f"{buffers / 2**30:.1f} GiB of chunk buffers is more than a quarter of the GPU"
    return None


def space(machine: Machine) -> Space:
    return Space(values={"streams": STREAMS, "chunk_kib": CHUNK_KIB}, default=DEFAULT,
                 restriction=_restriction)
