"""``vectorize`` of a loop that sums into one array element: the element held in a scalar for
the loop's run (scalar replacement), judged by running the emitted code.

A dot product written into a matrix (cholesky's ``A[i, j] -= A[i, k] * A[j, k]`` along
``k``), a triangular solve's ``x[i] -= L[i, j] * x[j]``: the element is loaded before the
loop, summed in a scalar the compiler can keep in lanes, stored after it. Generated nests put
such an update beside look-alikes that must be refused (the element moves with the loop,
another access of the array meets it, a second statement reads or writes it, an operator that
does not reassociate). Every accepted recipe's emitted code must compute what the original
does with the loop's iterations in order and backwards (lanes may combine them in any order);
every refusal must name a dependence the brute-force oracle finds carried by the loop.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loclab.errors import UsageError
from loclab.transform import transform
from loclab.transform.steps import IllegalStep
from loclab.transform.verify import OriginalFailed
from tests.test_transform_oracle import check_carried

SIZES = ({"N": 6, "M": 4}, {"N": 9, "M": 11})

CHOLESKY = '''
import math


def cholesky(A, N):
    for i in range(N):
        for j in range(i):
            for k in range(j):
                A[i, j] -= A[i, k] * A[j, k]
            A[i, j] /= A[j, j]
        for k in range(i):
            A[i, i] -= A[i, k] * A[i, k]
        A[i, i] = math.sqrt(A[i, i])
'''

TRISOLV = '''
def trisolv(L, x, b, N):
    for i in range(N):
        x[i] = b[i]
        for j in range(i):
            x[i] = x[i] - L[i, j] * x[j]
        x[i] = x[i] / L[i, i]
'''


def spd(n: int) -> dict[str, object]:
    b = np.random.default_rng(n).uniform(0.0, 1.0, (n, n))
    return {"A": b @ b.T + n * np.eye(n), "N": n}


@pytest.mark.parametrize("emit", ["python", "numba"])
def test_a_dot_product_into_a_matrix_is_held_in_a_scalar(emit: str) -> None:
    result = transform(CHOLESKY, "vectorize(k@9); vectorize(k@12)", emit=emit)
    assert "held in A_sum for the loop's run" in result.steps[0].reason
    source = result.source
    assert re.search(r"A_sum = A\[.*i.*j.*\]\n\s+for k in range\(j\):\n\s+A_sum -= ", source)
    assert "A_sum2 -= " in source and "A[i, i] -=" not in source.replace("uintp(i)", "i")
    original = {name: value for name, value in spd(40).items()}
    expected = {"A": original["A"].copy()}
    namespace: dict[str, object] = {}
    exec(compile(CHOLESKY, "cholesky", "exec"), namespace)
    namespace["cholesky"](expected["A"], 40)
    got = original["A"].copy()
    result.compile()(got, 40)
    assert np.allclose(np.tril(got), np.tril(expected["A"]), rtol=1e-12, atol=1e-12)


def test_a_triangular_solve_is_held_and_verified() -> None:
    result = transform(TRISOLV, "vectorize(j)", emit="numba")
    assert "x_sum = x[" in result.source and "x_sum = x_sum - " in result.source
    assert result.verify(N=37).ok


def test_an_element_whose_loop_may_not_run_is_not_loaded() -> None:
    """``y[i - 1]`` is no element at ``i = 0``, where the loop does not run: the load before
    the loop must be skipped there (Numba's unsigned subscripts read anywhere)."""
    source = ("def f(y, A, N):\n    for i in range(N):\n        for k in range(i):\n"
              "            y[i - 1] += A[i, k]\n")
    result = transform(source, "vectorize(k)", emit="numba")
    assert re.search(r"if 0 < i:\n\s+y_sum = y\[", result.source)
    assert result.verify(N=20).ok


@pytest.mark.parametrize(("source", "message"), [
    ("def f(X, Y, N):\n    for i in range(N):\n        for k in range(N):\n"
     "            X[i] += Y[k] * X[k]\n", r"a dependence that is not a reduction on X"),
    ("def f(X, Y, N):\n    for i in range(N):\n        for k in range(N):\n"
     "            X[k] += Y[i]\n", r"carries no dependence"),
    ("def f(X, Y, Z, N):\n    for i in range(N):\n        for k in range(N):\n"
     "            X[i] += Y[k]\n            Z[k] = X[i]\n", r"not a reduction on X"),
    ("def f(X, Y, N):\n    for i in range(N):\n        for k in range(N):\n"
     "            X[i] += Y[k]\n            X[i] += 2 * Y[k]\n",
     r"generalized reduction on X \(2 pieces of the loop's body update it\)"),
    ("def f(X, Y, K, N):\n    for i in range(N):\n        for k in range(N):\n"
     "            X[K[i]] += Y[k]\n", r"generalized reduction on X \(X\[K\[i\]\] is not affine\)"),
])
def test_look_alikes_are_refused_or_left_alone(source: str, message: str) -> None:
    try:
        result = transform(source, "vectorize(k)")
    except IllegalStep as refusal:
        assert re.search(message, str(refusal)), str(refusal)
        return
    assert re.search(message, result.steps[0].reason), result.steps[0].reason
    assert "_sum" not in result.source


def test_a_parallel_loop_that_sums_into_the_array_keeps_it_in_memory() -> None:
    """Its threads update the array (atomically, or in copies): a scalar per thread stored
    back after the loop would lose the others' sums."""
    source = ("def f(X, Y, N, M):\n    for i in range(N):\n        for k in range(M):\n"
              "            X[0] += Y[i, k]\n")
    result = transform(source, "vectorize(k); parallel(i)", emit="numba")
    assert "X_sum" not in result.source.split("def f")[1]
    assert result.verify(N=30, M=20).ok
    with pytest.raises(IllegalStep, match=r"the threads of i@\d+ update it"):
        transform(source, "parallel(i); vectorize(k)")


# -- generated nests ------------------------------------------------------------------------
@st.composite
def held_nests(draw) -> str:
    """An inner loop ``k`` updating one element of ``X`` (or one that moves with ``k``),
    beside another statement that may read or write ``X``."""
    bound = draw(st.sampled_from(["N", "M", "i", "i + 1"]))
    target = draw(st.sampled_from(["X[i]", "X[i + 1]", "X[0]", "X[N - i]", "X[k]",
                                   "X[k + 1]"]))
    operand = draw(st.sampled_from(["Y[k]", "Y[i + k]", "X[k]", "X[k + 2]", "X[i - 1]",
                                    "X[N + k]", "Y[i]"]))
    form = draw(st.sampled_from(["+=", "-=", "*=", "assign", "reversed", "max"]))
    if form == "assign":
        update = f"{target} = {target} + {operand} * 0.5"
    elif form == "reversed":
        update = f"{target} = {operand} - {target}"
    elif form == "max":
        update = f"{target} = max({target}, {operand})"
    else:
        factor = "0.5 + 0.25 * " if form == "*=" else "2.0 * "
        update = f"{target} {form} {factor}{operand}"
    beside = draw(st.sampled_from(["", "Z[k] = {t}", "X[k + 1] = Y[k]", "Z[k] = Y[k] + 1.0",
                                   "{t} += 1.0", "X[N + k] = Z[k]"]))
    lines = [update] + ([beside.format(t=target)] if beside else [])
    if draw(st.booleans()):
        lines.reverse()
    body = "".join(f"            {line}\n" for line in lines)
    return (f"def f(X, Y, Z, N, M):\n    for i in range(1, N):\n"
            f"        for k in range({bound}):\n{body}")


def backwards(source: str) -> str:
    """The emitted code with every loop whose element is held running backwards."""
    changed = re.sub(r"(\w+_sum\d* = .*\n\s*)for (\w+) in (range\(.*\)):",
                     r"\1for \2 in \3[::-1]:", source)
    assert changed != source
    return changed


@settings(max_examples=90, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(held_nests())
def test_held_sums_compute_what_the_original_does_in_any_order(source: str) -> None:
    try:
        result = transform(source, "vectorize(k)")
    except UsageError:
        return
    except IllegalStep as refusal:
        if refusal.carried is not None:
            check_carried(source, "vectorize(k)", refusal)
        return
    runs = [result]
    if "_sum" in result.source.split("def f")[1]:
        from dataclasses import replace

        runs.append(replace(result, source=backwards(result.source)))
    for run in runs:
        for sizes in SIZES:
            try:
                verdict = run.verify(**sizes)
            except OriginalFailed:
                return  # the original indexes past its arrays at these sizes
            assert verdict.ok, f"accepted but wrong at {sizes}:\n{source}\n{run.source}\n" \
                               f"{verdict}"
