"""Shared fixtures. Tests marked ``gpu`` skip cleanly where CuPy or a CUDA device is missing."""

from __future__ import annotations

import pytest

from loclab.bench.timing import Budget
from loclab.hw import Machine, detect_machine

# Enough samples to exercise the statistics, short enough for CI.
QUICK = Budget(seconds=0.01, min_runs=2, max_runs=4)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from loclab.gpu import gpu_unavailable_reason

    reason = gpu_unavailable_reason()
    if reason:
        skip = pytest.mark.skip(reason=f"no GPU: {reason}")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)


@pytest.fixture(scope="session")
def machine() -> Machine:
    from loclab.gpu import gpu_unavailable_reason

    return detect_machine(with_gpu=gpu_unavailable_reason() is None)
