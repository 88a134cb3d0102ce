"""The GPU function beside the original, timed on arrays already on the device with CUDA
events (``loclab run``'s clock for GPU rows); it is called like the original on host arrays
through ``loclab.gpu.transfers.on_host_arrays``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from loclab.measure.stats import Summary, summarize
from loclab.measure.timing import Budget, CudaEventClock, measure


def time_on_device(function: Callable[..., Any], names: list[str],
                   inputs: Mapping[str, Any], budget: Budget) -> Summary:
    """The median time of ``function`` on device copies of ``inputs`` (made once)."""
    import cupy as cp

    args = [cp.asarray(inputs[n]) if isinstance(inputs[n], np.ndarray) else inputs[n]
            for n in names]
    samples, _ = measure(lambda: function(*args), CudaEventClock(), budget)
    return summarize(samples)
