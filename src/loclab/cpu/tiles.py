"""Small rules the CPU variants share: tile sizes in powers of two, the threads they run on."""

from __future__ import annotations

# Bytes per cache line: 64 on every x86 core and most ARM ones (Apple's M cores: 128, where a
# tile sized for 64 is half as deep as it could be, never too large).
CACHE_LINE = 64


def floor_power_of_two(value: int) -> int:
    """The largest power of two <= value (1 for anything smaller): tile sizes step by two."""
    return 1 << (max(value, 1).bit_length() - 1)


def threads() -> dict[str, int]:
    """The numba threads the parallel loops share (``--threads``, else every core), as a
    row's params."""
    import numba

    return {"threads": numba.get_num_threads()}
