"""Producer/consumer fusion (``loclab.optimize.fusion``): offered where the second nest reads
element for element what the first writes, not where it reads a neighbour or nothing of it;
what it offers, applied and emitted for Numba, computes what the original does."""

from __future__ import annotations

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from loclab.optimize import plan
from loclab.optimize.build import choose, tiers

PRODUCER_CONSUMER = """def f(x, tmp, y, N, M):
    for i in range(N):
        for j in range(M):
            tmp[i, j] = x[i, j] * 2.0 + 1.0
    for i in range(N):
        for j in range(M):
            y[i, j] = tmp[i, j] * tmp[i, j] - x[i, j]
"""


def _fused(source: str) -> list:
    found = plan(source, "f", params={"N": 300, "M": 200}, threads=2)
    return [p for nest in found.plans for p in nest if p.absorbs is not None]


def test_a_consumer_of_what_the_nest_before_writes_is_fused_into_it() -> None:
    """The plan fuses the second nest into the first and runs it in parallel; the second
    nest keeps no step of its own; the result computes what the original does. The
    reason names the array and the bytes a pass over it costs."""
    found = plan(PRODUCER_CONSUMER, "f", params={"N": 300, "M": 200}, threads=2)
    fused = found.plans[0][0]
    assert fused.level == "fused" and fused.absorbs is found.plans[1][0].top
    assert "reads tmp element for element" in fused.before[0].reason
    assert "468.8 KiB" in fused.before[0].reason  # 300 x 200 float64
    chosen, result = choose(found.code, found.plans)
    assert [str(s) for s in chosen[0].steps] == ["fuse(i@2, i@5)", "parallel(i@2)"]
    assert chosen[1].plan.level == "fused into line 2" and chosen[1].steps == ()
    for sizes in ({"N": 7, "M": 5}, {"N": 1, "M": 3}):
        assert result.verify(**sizes).ok
    # the tiers measure the nests apart too, each from its own first plan
    levels = [[c.plan.level for c in kept] for kept, _ in tiers(found.code, found.plans)]
    assert levels[0] == ["fused", "fused into line 2"]
    assert ["fused into line 2"] not in [level[1:] for level in levels[1:]]


def test_neighbours_and_unrelated_nests_are_not_fused() -> None:
    """A consumer reading ``tmp[i + 1, j]`` would need a shift, and the shifted loop would
    carry the dependence; a second nest that reads nothing the first writes saves no pass;
    a producer that is not parallel cannot become a parallel fused loop."""
    assert _fused(PRODUCER_CONSUMER.replace("tmp[i, j] * tmp", "tmp[i + 1, j] * tmp")) == []
    assert _fused(PRODUCER_CONSUMER.replace("tmp[i, j] * tmp[i, j]", "x[i, j]")) == []
    assert _fused(PRODUCER_CONSUMER.replace("x[i, j] * 2.0", "tmp[i - 1, j] * 2.0")) == []


@st.composite
def producer_consumer_nests(draw) -> str:
    """Two nests over ``i`` (and ``j``), the second reading what the first writes at offsets
    of -1 to 1, or its own input, each sometimes a sum over ``j`` into a row."""
    def offset(var: str) -> str:
        d = draw(st.integers(-1, 1))
        return f"{var} + {d}" if d else var

    first = draw(st.sampled_from(["tmp[i, j] = x[i, j] + 1.0", "tmp[i, 0] += x[i, j]"]))
    read = draw(st.sampled_from(["tmp", "x", "tmp"]))
    second = f"y[i, j] = {read}[{offset('i')}, {offset('j')}] * 2.0"
    return ("def f(x, tmp, y, N, M):\n    for i in range(1, N - 1):\n"
            f"        for j in range(1, M - 1):\n            {first}\n"
            "    for i in range(1, N - 1):\n        for j in range(1, M - 1):\n"
            f"            {second}\n")


@settings(max_examples=25, deadline=None, derandomize=True, database=None,
          phases=(Phase.explicit, Phase.generate), suppress_health_check=list(HealthCheck))
@given(producer_consumer_nests())
def test_drawn_producer_consumer_pairs_fused_compute_what_the_original_does(source) -> None:
    """Where a fused plan is offered, it holds and verifies; it is offered only where the
    consumer reads the producer's array at the producer's own row."""
    found = plan(source, "f", params={"N": 300, "M": 200}, threads=2)
    fused = [p for nest in found.plans for p in nest if p.absorbs is not None]
    consumer = source.splitlines()[-1]
    if fused:
        assert "tmp[i," in consumer
        _, result = choose(found.code, [fused, found.plans[1]])
        for sizes in ({"N": 6, "M": 5}, {"N": 3, "M": 9}):
            assert result.verify(**sizes).ok, (source, sizes)
    elif "tmp[i, j]" in consumer and "tmp[i, j] =" in source:
        raise AssertionError(f"an element-for-element consumer was not fused:\n{source}")
