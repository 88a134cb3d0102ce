"""Copies between host and device memory: one call, cudaMemcpyAsync, whatever the host
memory; only where the bytes live differs (the variant's placement). From pinned memory the
copy engine moves them while the host goes on; from pageable memory the driver copies them
through its own pinned buffer and the host waits."""

from __future__ import annotations

from typing import Any

import numpy as np

from loclab.cases.base import COPY_IN, COPY_OUT, Bound, Step, stepped
from loclab.gpu import transfers
from loclab.hw import Machine

# The round trip both ways at once: chunk i comes back while i + 1 goes in. Chunks of 8 MiB
# (the overlap case's best on an H100) keep both copy engines busy with few hand-overs (each
# costs an event between the streams); smaller copies are cut in four, none below 4 KiB.
CHUNK_BYTES = 8 * 2**20
MIN_CHUNKS = 4
MIN_CHUNK_BYTES = 4 * 2**10


def one_way(inputs: dict, out: Any, machine: Machine) -> Bound:
    """``a`` to ``out``: to the device from host memory, or back to host memory."""
    a = inputs["a"]
    copy = transfers.to_device if isinstance(a, np.ndarray) else transfers.to_host

    def run() -> Any:
        copy(out, a)
        return out

    return Bound(run)


def round_trip(inputs: dict, out: Any, machine: Machine) -> Bound:
    """To the device, then back: its phases are the two directions, one at a time."""
    import cupy

    a = inputs["a"]
    on_device = cupy.empty(a.shape, a.dtype)
    return stepped([Step(COPY_IN, lambda: transfers.to_device(on_device, a)),
                    Step(COPY_OUT, lambda: transfers.to_host(out, on_device))],
                   out)


def both_ways(inputs: dict, out: Any, machine: Machine) -> Bound:
    """The round trip in chunks on two streams: stream 0 copies chunk i in and records that
    it arrived, stream 1 waits for it and copies it back, so both directions are in flight."""
    import cupy

    a = inputs["a"]
    on_device = cupy.empty(a.shape, a.dtype)
    inbound, outbound = transfers.streams(2)
    chunk = max(min(CHUNK_BYTES, -(-a.size // MIN_CHUNKS)), MIN_CHUNK_BYTES)
    pieces = transfers.chunks(a.size, chunk // a.itemsize)
    arrived = [cupy.cuda.Event(disable_timing=True) for _ in pieces]

    def run() -> Any:
        transfers.after_current((inbound, outbound))
        for (start, stop), event in zip(pieces, arrived):
            transfers.to_device(on_device, a, start, stop, inbound, at=start)
            event.record(inbound)
            outbound.wait_event(event)
            transfers.to_host(out, on_device, start, stop, outbound, at=start)
        transfers.join((inbound, outbound))
        return out

    return Bound(run, {"chunks": len(pieces), "streams": 2})
