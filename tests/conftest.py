"""Shared fixtures. Tests marked ``gpu`` skip cleanly where CuPy or a CUDA device is missing."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from loclab.hw import Machine, detect_machine
from loclab.measure.timing import Budget

# Enough samples to exercise the statistics, short enough for CI.
QUICK = Budget(seconds=0.01, min_runs=2, max_runs=4)


@pytest.fixture(autouse=True, scope="session")
def no_user_tuning_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Runs in tests never read (or write) the user's tuning cache."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LOCLAB_TUNING_CACHE",
                     str(tmp_path_factory.mktemp("tuning") / "tuning.json"))
        yield


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
