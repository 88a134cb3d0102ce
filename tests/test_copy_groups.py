"""Copies of an unrolled unit emitted after the copy isl scheduled (``transform.copy_groups``):
the same instances in the same order as with every copy scheduled by isl, judged by the
brute-force replay on random nests unrolled and jammed twice, at sizes that leave partial
groups; and the grouping really taking the copies off isl's hands."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loclab.transform import transform
from loclab.transform.copy_groups import copy_groups
from loclab.transform.schedule import Schedule
from tests.nestgen import nests
from tests.test_transform_cuda import PRODUCT
from tests.test_transform_oracle import check


@st.composite
def jammed_recipes(draw, source: str) -> str:
    """A tile of two loops, both unrolled and jammed (a register tile), or one loop unrolled
    in a tile of its factor (copies each guarded past the edge)."""
    import loclab

    loops = [f"{loop.var}@{loop.line}" for loop in loclab.analyze(source).nest.loops]
    first, second = draw(st.permutations(loops))[:2] if len(loops) >= 2 else loops * 2
    a, b = draw(st.integers(2, 3)), draw(st.integers(2, 3))
    if draw(st.booleans()):
        return f"tile({first}=4, {second}=6); unroll({second}, {b}, jam=True); " \
               f"unroll({first}, {a}, jam=True)"
    return f"tile({first}={a}); unroll({first}, {a}, jam=True)"


@settings(max_examples=8, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(st.data())
def test_grouped_copies_replay_every_instance_once_in_a_legal_order(data):
    source = data.draw(nests())
    check(source, data.draw(jammed_recipes(source)))


def test_a_register_tile_has_isl_schedule_one_copy_a_group():
    result = transform(PRODUCT, "privatize(acc); tile(i=16, j=16); unroll(j, 4, jam=True); "
                                "unroll(i, 4, jam=True)")
    schedule = Schedule(result.program)
    followers = copy_groups(schedule)
    # each statement's 16 copies in the whole tiles: one scheduled, 15 written after it
    assert sum(len(group) for group in followers.values()) == 3 * 15 + 3 * 3 * 2
    # (the remainders of one loop hold the other's copies: 3 statements x 3 copies, twice)
    assert all(f.guard is None and set(f.offsets) <= {0, 1, 2, 3} and any(f.offsets)
               for group in followers.values() for f in group)
    assert result.verify(M=13, N=14, K=5).ok


def test_a_copy_past_the_edge_runs_under_its_guard():
    result = transform(PRODUCT, "privatize(acc); tile(i=2); unroll(i, 2, jam=True)",
                       emit="python")
    followers = [f for group in copy_groups(Schedule(result.program)).values() for f in group]
    assert followers and all(f.offsets[0] == 1 and not any(f.offsets[1:])
                             and f.guard is not None for f in followers)
    assert "if M >= ii + 2:" in result.source
    assert result.verify(M=5, N=3, K=2).ok
