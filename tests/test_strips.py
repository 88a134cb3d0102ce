"""A parallel loop run in strips, sunk innermost (``loclab.optimize.strips``): symm's column
updates and Gram-Schmidt's, the strip sized for the threads, and drawn look-alikes, each
variant offered checked against the original."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from loclab.errors import UsageError
from loclab.optimize import plan
from loclab.optimize.build import choose, plan_steps
from loclab.optimize.strips import strip_size
from tests.nestgen import strip_nests

KERNELS = Path(__file__).parent / "data" / "kernels"


@pytest.mark.parametrize("extent, threads, size", [
    (1200, 16, 16),  # 19 strips of 64 or 38 of 32: some threads twice or thrice the share
    (600, 2, 64), (1000, 16, 64), (4096, 16, 64), (100, 16, 8), (7, 2, 8)])
def test_the_strip_is_the_longest_the_threads_share_evenly(extent, threads, size) -> None:
    assert strip_size(extent, threads) == size


def test_symm_runs_its_columns_in_strips_sunk_below_its_rows_and_sums() -> None:
    """symm, ``j`` outermost once ``temp2`` is private: in strips, ``j`` below ``i``,
    distributed (``temp2`` a row) and below ``k``, where ``C[k, j]`` and ``B[k, j]`` are
    rows."""
    found = plan((KERNELS / "symm.py").read_text(), "symm", params={"M": 500, "N": 600},
                 threads=2)
    (plans,) = found.plans
    variants = [p for p in plans if p.level == "in strips"]
    reordered = next(p for p in variants if any(d.step is not None
                                                and str(d.step) == "permute(j@5, i@4)"
                                                for d in p.before))
    steps = [str(s) for s in plan_steps(found.code, [], reordered, {})]
    assert steps == ["privatize(temp2)", "permute(j@5, i@4)", "stripmine(j@5, 64, j_strip5)",
                     "permute(i@4, j@5)", "distribute(j@5)", "permute(k@7, j@8)",
                     "parallel(j_strip5)"]
    reasons = {str(d.step): d.reason for d in reordered.before}
    assert reasons["permute(k@7, j@8)"] == ("j innermost below k: B[i, j], B[k, j], C[k, j] "
                                            "unit-stride, in vector lanes")
    assert plans.index(reordered) < next(k for k, p in enumerate(plans)
                                         if p.level == "reordered")
    _, result = choose(found.code, [[reordered]])
    for sizes in ({"M": 5, "N": 70}, {"M": 9, "N": 3}, {"M": 1, "N": 1}):
        assert result.verify(**sizes).ok, sizes


def test_gram_schmidt_runs_its_column_updates_in_strips_inside_k() -> None:
    found = plan((KERNELS / "gramschmidt.py").read_text(), "gramschmidt",
                 params={"M": 500, "N": 600}, threads=2)
    (plans,) = found.plans
    variant = plans[0]
    assert variant.level == "in strips"
    steps = [str(s) for s in plan_steps(found.code, [], variant, {})]
    assert steps[0].startswith("stripmine(j@14, ") and steps[1:] == [
        "distribute(j@14)", "permute(i@16, j@17)", "permute(i@18, j@19)",
        "parallel(j_strip14)"]
    _, result = choose(found.code, [[variant]])
    assert result.verify(M=7, N=9).ok


def test_lu_runs_its_row_update_in_strips_below_its_sum() -> None:
    """lu's ``for j in range(i, N): for k in range(i): A[i, j] -= A[i, k] * A[k, j]`` under
    its sequential ``i``: no loop chain below ``k``, so ``j`` sinks below ``k`` itself, its
    strips in parallel, ``A[k, j]`` read along rows (41 -> 33 ms at N = 600, 2 cores)."""
    found = plan((KERNELS / "lu.py").read_text(), "lu", params={"N": 600}, threads=2)
    (plans,) = found.plans
    variant = next(p for p in plans if p.level == "in strips")
    steps = [str(s) for s in plan_steps(found.code, [], variant, {})]
    assert steps == ["stripmine(j@12, 64, j_strip12)", "permute(k@13, j@12)",
                     "parallel(j_strip12)"]
    _, result = choose(found.code, [[variant]])
    assert result.verify(N=70).ok and result.verify(N=3).ok


def test_a_scan_down_columns_written_row_by_row_runs_its_columns_in_strips() -> None:
    """``for i: for j: out[i, j] = out[i - 1, j] * a[i, j]``: ``i`` carries the scan, so
    the reordered plan runs ``j`` outermost in parallel and walks ``out`` down its columns.
    In strips, ``j`` goes back below ``i``: each thread scans its strip of columns a row at a
    time. (The statements were looked for in the body of ``i`` as written, which holds
    ``j``: the variant was never offered.)"""
    source = ("def f(a, out, n, m):\n    for i in range(1, n):\n        for j in range(m):\n"
              "            out[i, j] = out[i - 1, j] * a[i, j]\n")
    found = plan(source, "f", params={"n": 300, "m": 400}, threads=2)
    (plans,) = found.plans
    variant = next(p for p in plans if p.level == "in strips")
    steps = [str(s) for s in plan_steps(found.code, [], variant, {})]
    assert steps == ["permute(j@3, i@2)", "stripmine(j@3, 32, j_strip3)", "permute(i@2, j@3)",
                     "parallel(j_strip3)"]
    _, result = choose(found.code, [[variant]])
    for sizes in ({"n": 70, "m": 130}, {"n": 3, "m": 1}, {"n": 1, "m": 65}):
        assert result.verify(**sizes).ok, sizes


def test_a_scalar_expanded_by_distribution_follows_the_loops_as_nested_now() -> None:
    """Back substitution's ``total``, private to each iteration of the band ``r, i``: in
    strips, ``r`` sinks inside ``i`` and is distributed, so ``total`` gets an element per
    ``(r, i)``. Its array's dimensions follow the loops as nested then, ``total[i, r]``, so
    that the vector loop ``r`` walks it along a row (``total[r, i]`` strode by ``N``: 3x
    slower on 2 cores)."""
    from loclab.transform import transform

    source = (Path(__file__).parent.parent / "benchmarks" / "kernels"
              / "back_substitution.py").read_text()
    result = transform(source, "privatize(total); stripmine(r@10, 32, r_strip10); "
                       "permute(i@11, r@10); distribute(r@10); permute(j@13, r@14); "
                       "parallel(r_strip10)", function="back_substitution", emit="numba",
                       assume_distinct=True)
    assert "total[uintp(i), uintp(r)] -= U[uintp(i), uintp(j)] * X[uintp(j), uintp(r)]" \
        in result.source
    for sizes in ({"N": 9, "R": 70}, {"N": 40, "R": 3}, {"N": 1, "R": 1}):
        assert result.verify(**sizes).ok, sizes


def test_a_loop_whose_body_gains_nothing_from_its_strips_keeps_its_plans() -> None:
    """Rows already along the innermost loop: no strips."""
    source = ("def f(A, B, N, M):\n    for i in range(N):\n        for j in range(M):\n"
              "            A[i, j] = B[i, j] * 2.0\n")
    (plans,) = plan(source, "f", params={"N": 50, "M": 60}, threads=2).plans
    assert not any(p.level == "in strips" for p in plans)


@settings(max_examples=25, deadline=None, derandomize=True, database=None,
          phases=(Phase.explicit, Phase.generate), suppress_health_check=list(HealthCheck))
@given(st.data())
def test_drawn_nests_in_strips_compute_what_the_original_does(data) -> None:
    """Every plan in strips, emitted for Numba, agrees with the original at sizes that are
    and are not multiples of the strip, and at one iteration."""
    source = data.draw(strip_nests())
    try:
        found = plan(source, "f", params={"N": 300, "M": 400}, threads=2)
    except UsageError:
        return
    (plans,) = found.plans
    for variant in (p for p in plans if p.level == "in strips"):
        try:
            _, result = choose(found.code, [[variant]])
        except UsageError:
            continue
        assert result.steps, f"{source}\nrefused in full after its probe"
        for sizes in ({"N": 3, "M": 7}, {"N": 5, "M": 70}, {"N": 1, "M": 1}):
            verdict = result.verify(**sizes)
            assert verdict.ok, f"{source}\n{result.source}\n{verdict}"
