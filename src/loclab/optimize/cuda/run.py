"""The GPU function beside the original: called like it on host arrays for the checks (copied
to the device, run, every array copied back in place), and timed on arrays already on the
device with CUDA events (``loclab run``'s clock for GPU rows)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from loclab.measure.stats import Summary, summarize
from loclab.measure.timing import Budget, CudaEventClock, measure


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


def time_on_device(function: Callable[..., Any], names: list[str],
                   inputs: Mapping[str, Any], budget: Budget) -> Summary:
    """The median time of ``function`` on device copies of ``inputs`` (made once)."""
    import cupy as cp

    args = [cp.asarray(inputs[n]) if isinstance(inputs[n], np.ndarray) else inputs[n]
            for n in names]
    samples, _ = measure(lambda: function(*args), CudaEventClock(), budget)
    return summarize(samples)
