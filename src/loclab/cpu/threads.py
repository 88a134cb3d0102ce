"""How many threads Numba's parallel loops use: what the harness, the tuner and the
optimizer all set before they time CPU code."""

from __future__ import annotations

from loclab.errors import UsageError


def configure_threads(threads: int | None) -> int:
    """Set numba's thread count (default: all it has) and return it."""
    import numba

    most = numba.config.NUMBA_NUM_THREADS
    if threads is not None and not 1 <= threads <= most:
        raise UsageError(f"--threads {threads}: must be between 1 and {most}")
    numba.set_num_threads(threads or most)
    return numba.get_num_threads()
