"""Copies between host and device memory through the CUDA runtime (CuPy), and streams.

A copy from or to pageable host memory is synchronous: the driver moves it through a pinned
staging buffer of its own, in pieces, and the host waits. A copy from or to pinned
(page-locked) memory is a DMA the copy engines do on their own: asynchronous on a stream, so
that it can overlap a kernel in another stream and a copy in the other direction. Kernels and
copies in one stream run in order; in different streams, concurrently where the hardware has
the engines (the lecture's streams slide).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

# cudaMemcpyKind
HOST_TO_DEVICE, DEVICE_TO_HOST = 1, 2


def _copy(destination: int, source: int, nbytes: int, kind: int, stream: Any | None) -> None:
    """cudaMemcpyAsync on ``stream``, or on CuPy's current one (a DMA where the host side is
    pinned; staged through the driver, the host waiting, where it is pageable)."""
    import cupy

    if nbytes:
        stream = stream or cupy.cuda.get_current_stream()
        cupy.cuda.runtime.memcpyAsync(destination, source, nbytes, kind, stream.ptr)


def to_device(destination: Any, source: np.ndarray, start: int = 0, stop: int | None = None,
              stream: Any | None = None, at: int = 0) -> None:
    """Elements ``start:stop`` of the flat host array ``source`` into the device array
    ``destination`` from its element ``at``, on ``stream`` (default: the current one)."""
    stop = source.size if stop is None else stop
    size = source.itemsize
    _copy(destination.data.ptr + at * size, source.ctypes.data + start * size,
          (stop - start) * size, HOST_TO_DEVICE, stream)


def to_host(destination: np.ndarray, source: Any, start: int = 0, stop: int | None = None,
            stream: Any | None = None, at: int = 0) -> None:
    """Elements ``at:at + stop - start`` of the device array ``source`` into elements
    ``start:stop`` of the flat host array ``destination``; as :func:`to_device`."""
    stop = destination.size if stop is None else stop
    size = destination.itemsize
    _copy(destination.ctypes.data + start * size, source.data.ptr + at * size,
          (stop - start) * size, DEVICE_TO_HOST, stream)


def streams(count: int) -> list[Any]:
    """``count`` new streams that synchronise with the legacy default stream (the harness
    times on it: its events then bracket their work)."""
    import cupy

    return [cupy.cuda.Stream(non_blocking=False) for _ in range(count)]


def after_current(others: Sequence[Any]) -> None:
    """Make ``others`` wait for what the current stream has queued (its start event)."""
    import cupy

    event = cupy.cuda.Event(disable_timing=True)
    event.record(cupy.cuda.get_current_stream())
    for stream in others:
        stream.wait_event(event)


def join(others: Sequence[Any]) -> None:
    """Make the current stream wait for everything queued on ``others`` (so that an event
    recorded on it next marks the end of their work too)."""
    import cupy

    current = cupy.cuda.get_current_stream()
    for stream in others:
        event = cupy.cuda.Event(disable_timing=True)
        event.record(stream)
        current.wait_event(event)


def chunks(count: int, size: int) -> list[tuple[int, int]]:
    """``[start, stop)`` of consecutive chunks of ``size`` elements covering ``count``."""
    return [(start, min(start + size, count)) for start in range(0, count, max(size, 1))]


def on_host_arrays(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` (which takes CuPy arrays) called on NumPy arrays: each array goes to the
    device, and comes back into the caller's array after the call (as the original writes
    its arguments in place)."""
    import cupy as cp

    def call(*args: Any) -> Any:
        device = [cp.asarray(a) if isinstance(a, np.ndarray) else a for a in args]
        result = function(*device)
        cp.cuda.runtime.deviceSynchronize()
        for host, moved in zip(args, device):
            if isinstance(host, np.ndarray):
                host[...] = cp.asnumpy(moved)
        return cp.asnumpy(result) if isinstance(result, cp.ndarray) else result

    return call
