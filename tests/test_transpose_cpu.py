"""The transpose case's blocked CPU variant beyond the generic per-variant tests: its tiles
from the caches of a detected CPU (faked), what its tuning space allows and rejects, and that
tuned tiles reach the kernel."""

from dataclasses import replace

import numpy as np
import pytest

from loclab.cases.transpose import cpu
from loclab.measure.validate import poison
from tests.spaces import allowed


def with_caches(machine, l1d_kib, l2_kib):
    return replace(machine, cpu=replace(machine.cpu, l1d_bytes=l1d_kib * 1024,
                                        l2_bytes=l2_kib * 1024))


@pytest.mark.parametrize("l1d_kib, l2_kib, outer, inner", [
    (32, 256, 128, 128),  # 2 x 128 lines of 64 B = 16 KiB, half of L1d; 128^2 x 2 x 4 B = L2/2
    (48, 2048, 256, 128),  # 2 x 192 lines would fit: the power of two below
    (64, 1024, 256, 256),
    (16, 4096, 512, 64),
    (2, 64, 64, 8),  # never below the smallest candidate
])
def test_blocked_tiles_follow_the_caches(l1d_kib, l2_kib, outer, inner, machine):
    """The inner tile: a strip of it (one line per row read, as many written) in half of
    L1d; the outer one: its input and output tiles in half of L2, at least the inner one."""
    space = cpu.blocked_space(with_caches(machine, l1d_kib, l2_kib))
    assert space.default == {"outer_tile": outer, "inner_tile": inner}
    assert all(space.default[key] in values for key, values in space.values.items())


def test_blocked_restriction_keeps_inner_tiles_inside_outer_ones(machine):
    space = cpu.blocked_space(machine)
    configs = allowed(space, machine, {"rows": 100, "cols": 200})
    assert space.default in configs
    assert all(c["inner_tile"] <= c["outer_tile"] for c in configs)
    assert "exceeds its outer tile" in cpu.blocked_restriction(
        {"outer_tile": 32, "inner_tile": 64}, {}, machine)


@pytest.mark.parametrize("outer, inner", [(32, 8), (64, 64), (2048, 256)])
def test_blocked_setup_runs_the_tiles_it_is_given(outer, inner, machine):
    a = np.random.default_rng(0).random((67, 131), dtype=np.float32)
    a.setflags(write=False)
    out = np.empty((131, 67), np.float32)
    poison(out)
    bound = cpu.blocked({"a": a}, out, machine, outer_tile=outer, inner_tile=inner)
    assert bound.params == {"outer_tile": outer, "inner_tile": inner}
    np.testing.assert_array_equal(bound.run(), a.T)
    with pytest.raises(TypeError, match="unknown parameters"):
        cpu.blocked({"a": a}, out, machine, tile=32)
