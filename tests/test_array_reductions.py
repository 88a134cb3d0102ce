"""Reductions into arrays with a copy per thread: ``parallel(i, copies=True)``.

A loop that carries only ``y[f(j)] op= e`` runs in parallel either with atomic updates of
``y`` or with a copy of ``y`` per thread, the copies combined after the loop. Every test runs
the emitted code against the original on random inputs (Numba with its threads: two or more
chunks), including the edges a hand-made chunking gets wrong (fewer iterations than threads,
loops counting down or by steps) and the reads of other elements of the array that must see
the array, not the thread's copy.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from loclab.errors import UsageError
from loclab.measure.timing import Budget
from loclab.optimize import optimize_file, plan
from loclab.transform import transform, transform_file
from loclab.transform.steps import IllegalStep
from tests.nestgen import array_reduction_nests

COLUMN_SUMS = """
def column_update(A, tmp, y, M, N):
    for i in range(M):
        for j in range(N):
            y[j] += A[i, j] * tmp[i]
"""


def test_a_column_update_runs_over_rows_with_a_copy_of_y_per_thread() -> None:
    result = transform(COLUMN_SUMS, "parallel(i, copies=True)", emit="numba")
    assert result.steps[0].reason == ("i carries only reductions: + on y in a copy per "
                                      "thread, the copies combined after the loop")
    source = result.source
    assert "y_copies = np.zeros((i_chunks, y.shape[0]), y.dtype)" in source
    assert "for i_index in range(i_chunk * M // i_chunks, (i_chunk + 1) * M // i_chunks):" \
        in source
    assert "y_copies[i_chunk, uintp(j)] += A[uintp(i), uintp(j)] * tmp[uintp(i)]" in source
    assert "y[i_e0] += y_copies[i_chunk, i_e0]" in source
    assert "atomic_add" not in source
    for sizes in ({"M": 1, "N": 5}, {"M": 3, "N": 1}, {"M": 301, "N": 7}):
        assert result.verify(**sizes).ok, (sizes, source)


@pytest.mark.parametrize("header", ["range(M - 1, -1, -1)", "range(M - 1, 0, -3)",
                                    "range(2, M, 5)"])
def test_every_iteration_of_a_loop_counting_down_or_by_steps_lands_in_one_chunk(header):
    source = COLUMN_SUMS.replace("range(M)", header)
    result = transform(source, "parallel(i, copies=True)", emit="numba")
    for rows in (1, 3, 40):
        assert result.verify(M=rows, N=4).ok, (rows, result.source)


@pytest.mark.parametrize("update, start, own", [
    ("m[j] = max(m[j], A[i, j])", "m_copies[i_chunk] = m", "m_copies[i_chunk, uintp(j)]"),
    ("m[j] = min(A[i, j], m[j])", "m_copies[i_chunk] = m", "m_copies[i_chunk, uintp(j)]"),
    ("m[j] *= A[i, j]", "m_copies = np.ones(", "m_copies[i_chunk, uintp(j)] *="),
    ("m[j] = m[j] - A[i, j]", "m_copies = np.zeros(", "m_copies[i_chunk, uintp(j)] - A"),
    ("m[k[i], j] += A[i, j]", "m_copies = np.zeros(", "m_copies[i_chunk, k[uintp(i)], j]")])
def test_each_operator_starts_its_copies_from_what_it_leaves_unchanged(update, start, own):
    """Zeros for a sum, ones for a product, the array itself for max and min (the copies
    are combined into it: x max x is x); a two-dimensional histogram's rows."""
    source = (f"def f(A, k, m, M, N):\n    for i in range(M):\n        for j in range(N):\n"
              f"            {update}\n")
    result = transform(source, "parallel(i, copies=True)", emit="numba")
    assert start in result.source and own in result.source, result.source
    for sizes in ({"M": 1, "N": 3}, {"M": 57, "N": 9}):
        assert result.verify(**sizes).ok, (sizes, result.source)


def test_reads_of_elements_the_loop_never_updates_see_the_array_not_the_copy() -> None:
    """A triangular solve's inner loop reduces into x[i] and reads x[j], j < i: the reads
    must see the solved values, which the copies (zeros) do not hold."""
    solve = ("def f(L, x, b, N):\n    for i in range(N):\n        x[i] = b[i]\n"
             "        for j in range(i):\n            x[i] -= L[i, j] * x[j]\n"
             "        x[i] = x[i] / L[i, i]\n")
    result = transform(solve, "parallel(j, copies=True)", emit="numba")
    assert "x_copies[j_chunk, uintp(i)] -= L[uintp(i), uintp(j)] * x[uintp(j)]" in \
        result.source
    for n in (1, 2, 30):
        assert result.verify(N=n).ok, (n, result.source)


def test_scalar_reductions_of_the_same_loop_still_combine() -> None:
    source = ("def f(A, y, N, M):\n    s = 0.0\n    for i in range(N):\n"
              "        for j in range(M):\n            y[j] += A[i, j]\n"
              "            s += A[i, j] * A[i, j]\n    return s\n")
    result = transform(source, "parallel(i, copies=True)", emit="numba")
    assert result.steps[0].reason.endswith("; reduction + on s")
    for sizes in ({"N": 1, "M": 2}, {"N": 99, "M": 13}):
        assert result.verify(**sizes).ok, (sizes, result.source)


def test_copies_of_nothing_and_unknown_options_are_usage_errors() -> None:
    with pytest.raises(UsageError, match=r"i updates no array by a reduction: there is "
                                         r"nothing to copy \(drop copies=True\)"):
        transform("def f(A, N):\n    for i in range(N):\n        A[i] = 2.0\n",
                  "parallel(i, copies=True)")
    with pytest.raises(UsageError, match=r"unknown option atomics=True"):
        transform(COLUMN_SUMS, "parallel(i, atomics=True)")
    with pytest.raises(IllegalStep, match=r"parallel\(j, copies=True\) is illegal"):
        transform(COLUMN_SUMS.replace("y[j] +=", "y[j] = y[j - 1] +"),
                  "parallel(j, copies=True)")


def test_c_reduces_a_declared_array_with_an_openmp_section(tmp_path) -> None:
    path = tmp_path / "columns.c"
    path.write_text("void columns(int M, int N, double A[M][N], double tmp[M], double y[N]) {\n"
                    "    for (int i = 0; i < M; i++)\n"
                    "        for (int j = 0; j < N; j++)\n"
                    "            y[j] += A[i][j] * tmp[i];\n}\n")
    result = transform_file(path, "columns", "parallel(i, copies=True)")
    assert "#pragma omp parallel for reduction(+: y[0:N])" in result.source
    assert "omp atomic" not in result.source
    assert result.verify(M=37, N=11).ok
    path.write_text(path.read_text().replace("double y[N]", "double *y"))
    with pytest.raises(UsageError, match=r"--emit c: y has no declared extents \(a pointer\)"):
        transform_file(path, "columns", "parallel(i, copies=True)")


@settings(max_examples=8, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck),
          phases=(Phase.explicit, Phase.generate))  # (shrinking recompiles for minutes)
@given(array_reduction_nests())
def test_drawn_nests_with_copies_compute_what_the_original_does(source: str) -> None:
    """Each loop the transformer makes parallel with copies, run under Numba against the
    original (the transformer's verdicts are the oracle's business; this is the code)."""
    import loclab

    for loop in loclab.analyze(source).nest.loops:
        try:
            result = transform(source, f"parallel({loop.var}@{loop.line}, copies=True)",
                               emit="numba")
        except (IllegalStep, UsageError):
            continue
        for sizes in ({"N": 5, "M": 4}, {"N": 9, "M": 2}):
            verification = result.verify(**{name: size for name, size in sizes.items()
                                            if name in result.program.nest.parameters})
            assert verification.ok, f"{source}\n{result.source}\n{verification}"


# --- what loclab optimize offers -----------------------------------------------------------
KERNELS = Path(__file__).parent / "data" / "kernels"
RECIPES = Path(__file__).parent.parent / "examples" / "recipes.py"


def _plans(path: Path, function: str, nest: int, **params: int) -> list:
    found = plan(path.read_text(), function, filename=str(path), params=params, threads=2)
    return found.plans[nest]


def test_copies_come_first_where_each_fits_the_l2_and_the_combine_is_small() -> None:
    plans = _plans(KERNELS / "atax.py", "atax", 1, M=1900, N=2100)
    copies = next(p for p in plans if p.copies)
    atomics = next(p for p in plans if p.level == "as written" and not p.copies)
    assert plans.index(copies) < plans.index(atomics)
    why = copies.parallel[0][1]
    assert "y in a copy per thread (16.4 KiB each, within the L2's " in why, why
    assert "combined after the loop: 4,200 additions against 3,990,000 updates" in why, why


def test_copies_that_outgrow_the_l2_are_not_offered() -> None:
    plans = _plans(KERNELS / "atax.py", "atax", 1, M=2, N=4_000_000)
    assert not any(p.copies for p in plans)


def test_copies_of_an_array_the_data_indexes_are_offered_after_atomics() -> None:
    plans = _plans(RECIPES, "histogram", 0, N=1000, H=50)
    copies = next(p for p in plans if p.copies)
    atomics = next(p for p in plans if p.level == "as written" and not p.copies)
    assert plans.index(atomics) < plans.index(copies)
    assert "its size depends on the data: measured after atomics" in copies.parallel[0][1]


def test_optimize_measures_the_copies_and_keeps_a_verified_recipe(tmp_path) -> None:
    result = optimize_file(KERNELS / "bicg.py", "bicg", params={"M": 300, "N": 200},
                           timing=Budget(seconds=0.01, min_runs=2, max_runs=3),
                           tuning_cache=tmp_path / "tuning.json")
    assert result.verification.ok and result.check.valid
    candidates = result.to_json()["candidates"]
    assert any("parallel(i@5, copies=True)" in c["recipe"] and c["valid"] for c in candidates)
