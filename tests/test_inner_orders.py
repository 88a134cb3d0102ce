"""Inner nests put in order under a parallel loop (``loclab.optimize.inner``): doitgen's
product inside each parallel iteration distributed, interchanged and register-tiled, and
drawn look-alikes, each variant offered checked against the original."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from loclab.errors import UsageError
from loclab.optimize import plan
from loclab.optimize.build import choose, plan_steps
from tests.nestgen import inner_order_nests

KERNELS = Path(__file__).parent / "data" / "kernels"


def test_doitgen_reorders_its_product_inside_the_parallel_loop() -> None:
    """``for p: total[p] = 0; for s: total[p] += A[r, q, s] * C4[s, p]`` inside ``r``
    (parallel, ``total`` private): distributed at ``p``, ``s`` outside ``p`` so that ``p``
    runs over unit strides, ``s`` jammed by 4 (17x on 2 cores, level with NumPy's BLAS)."""
    found = plan((KERNELS / "doitgen.py").read_text(), "doitgen",
                 params={"NR": 150, "NQ": 140, "NP": 160}, threads=2)
    (plans,) = found.plans
    variant = next(p for p in plans if any(str(d.step).startswith("permute(s@8")
                                           for d in p.before))
    steps = [str(s) for s in plan_steps(found.code, [], variant, {})]
    assert steps == ["privatize(total, r@3)", "distribute(p@5)", "permute(s@8, p@8)",
                     "unroll(s@8, 4, jam=True)", "parallel(r@3)"]
    reasons = {str(d.step): d.reason for d in variant.before}
    assert reasons["permute(s@8, p@8)"].startswith("innermost p: C4[s, p], total[p] "
                                                   "unit-stride (locality score 9 against 3")
    plain = plans[plans.index(variant) + 1]
    assert [str(d.step) for d in plain.before] == ["privatize(total, r@3)"]
    _, result = choose(found.code, [[variant]])
    for sizes in ({"NR": 5, "NQ": 3, "NP": 7}, {"NR": 1, "NQ": 1, "NP": 1}):
        assert result.verify(**sizes).ok, sizes


def test_an_inner_nest_already_in_order_is_left_alone() -> None:
    source = ("def f(A, C, T, N, M):\n    for r in range(N):\n        for s in range(M):\n"
              "            for p in range(M):\n                T[r, p] += A[r, s] * C[s, p]\n")
    (plans,) = plan(source, "f", params={"N": 50, "M": 60}, threads=2).plans
    assert not any(str(d.step).startswith("permute(") for p in plans for d in p.before
                   if p.level == "as written")


@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          phases=(Phase.explicit, Phase.generate), suppress_health_check=list(HealthCheck))
@given(st.data())
def test_drawn_inner_nests_reordered_compute_what_the_original_does(data) -> None:
    """The first plan that reorders an inner nest, emitted for Numba, agrees with the
    original at sizes that are and are not multiples of the unroll factor."""
    source = data.draw(inner_order_nests())
    try:
        found = plan(source, "f", params={"N": 9, "M": 11}, threads=2)
    except UsageError:
        return
    for nest, plans in enumerate(found.plans):
        variants = [p for p in plans if p.level in ("as written", "reordered") and any(
            d.step is not None and d.step.name == "permute" for d in p.before)]
        for variant in variants[:1]:
            others = [ps[-1:] for ps in found.plans]
            others[nest] = [variant]
            try:
                _, result = choose(found.code, others)
            except UsageError:
                continue
            for sizes in ({"N": 3, "M": 7}, {"N": 2, "M": 8}):
                verdict = result.verify(**sizes)
                assert verdict.ok, f"{source}\n{result.source}\n{verdict}"
