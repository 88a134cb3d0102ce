"""loclab: reason about and measure locality of reference on multi-core CPUs and GPUs.

The API mirrors the command line: ``loclab.run(...)`` returns the document that
``loclab run --json`` writes; ``loclab.devices()`` what ``loclab devices --json`` prints.
Heavy modules (numba, CuPy, matplotlib) load only when used.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"


def run(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """Run case studies; see :func:`loclab.bench.runner.run`."""
    from loclab.bench.runner import run as _run

    return _run(*args, **kwargs)


def devices(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """Detect the machine and measure copy bandwidth; see :func:`loclab.bench.devices.devices`."""
    from loclab.bench.devices import devices as _devices

    return _devices(*args, **kwargs)


__all__ = ["__version__", "devices", "run"]
