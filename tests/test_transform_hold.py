"""``hold(q)``: the elements a strip updates kept in vector lanes for a run of ``q``
(``transform.steps.hold``, ``transform.lanes_code``, ``cpu.lanes``), checked by running the
emitted Numba code beside the original on random inputs: bit-identical wherever the step
is accepted, on generated nests as well as the product."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numba import njit

from loclab.cpu.lanes import lanes_like, lanes_load, lanes_store
from loclab.errors import UsageError
from loclab.transform import transform
from loclab.transform.steps import IllegalStep

PRODUCT = """\
def mm(a, b, c, m, n, k):
    for i in range(m):
        for q in range(k):
            for j in range(n):
                c[i, j] += a[i, q] * b[q, j]
"""
HELD = ("tile(i=16, q=8, j=64); stripmine(j, 16, jv); interchange(q, jv); "
        "unroll(i, 4, jam=True); hold(q); parallel(ii)")


def test_a_product_holds_its_block_in_lanes_and_computes_the_same_bits() -> None:
    result = transform(PRODUCT, HELD, emit="numba")
    assert "stay in 16 vector lanes" in result.steps[-2].reason
    source = result.source
    assert "from loclab.cpu.lanes import lanes_like, lanes_load, lanes_store" in source
    # the whole strip's run in lanes, four rows held, one load and store each
    assert "if min(n, jv + 16) - (jv) == 16 and qq < min(k, qq + 8):" in source
    assert source.count("_lanes0 = lanes_load(c, (uintp(i), uintp(jv)), 16)") == 1
    assert "lanes_store(c, (uintp(i + 3), uintp(jv)), _lanes3)" in source
    assert "_lanes1 = lanes_like(_lanes1 + a[uintp(i + 1), uintp(q)] * " \
           "lanes_load(b, (uintp(q), uintp(jv)), 16), _lanes1)" in source
    # n = 41: two whole strips and a partial one; m = 19: rows past the jammed four
    verification = result.verify(m=19, n=41, k=11)
    assert verification.ok and all(c.tolerance == 0 for c in verification.compared)
    # Python and C see the loops as they are
    assert "lanes" not in transform(PRODUCT, HELD).source


@pytest.mark.parametrize("body, why", [
    ("c[i, j] += a[i, q] * b[q, j]\n                b[i, j] += c[i, j]",
     r"c\[i, j\] reads an array the loop holds elements of, in the same row"),
    ("c[q, j] += a[i, q] * b[q, j]", r"must take j in its last subscript alone and not move"),
    ("c[i, j] += a[i, q] * b[j, q]", r"b\[j, q\] must take j in its last subscript alone"),
    ("c[i, j] += abs(b[q, j])", r"is not \+ - \* of numbers"),
    ("c[i, j] += b[q, j] / a[i, q]", r"is not \+ - \*"),
    ("c[i, j] += b[q, j] * j", "j is used as a value"),
])
def test_hold_refuses_what_lanes_would_get_wrong(body: str, why: str) -> None:
    source = PRODUCT.replace("c[i, j] += a[i, q] * b[q, j]", body)
    with pytest.raises(UsageError, match=why):
        transform(source, "stripmine(j, 8, jv); interchange(q, jv); hold(q)", emit="numba")


def test_hold_needs_a_strip_inside_the_loop() -> None:
    with pytest.raises(UsageError, match="must be a strip of 2 to 64 iterations"):
        transform(PRODUCT, "hold(q)", emit="numba")
    with pytest.raises(UsageError, match="must hold exactly one loop"):
        transform(PRODUCT, "stripmine(j, 8, jv); hold(i)", emit="numba")


# -- generated nests: whatever the step accepts computes the same bits ---------------------

TARGETS = ("A[i, j]", "A[i, j + 1]", "A[i + 1, j]", "A[i + 2, j]", "A[q, j]", "A[i, q]")
READS = ("B[q, j]", "C[i, q]", "D[q, j + 1]", "B[j, q]", "2.0", "s", "D[i, q]", "A[i, j]",
         "A[q, j]", "A[i + 1, j]", "A[q + 1, j + 1]")
# a triangle's rows (trmm's ``k`` from ``i + 1``, syrk's ``j`` to ``i``): jammed, guarded
Q_RANGES = ("range(K)", "range(i + 1, K)", "range(i)", "range(i, i + K)")
J_RANGES = ("range(M)", "range(i + 1)", "range(i, M)")


@st.composite
def held_nests(draw: st.DrawFn) -> str:
    """``for i: for q: for j:`` (rectangular or triangular) around 1-3 updates drawn from
    shapes the step must hold (a row of each target along ``j``, a read of another row of
    a held array, checked where the loops run) and shapes it must not (a target moving
    with ``q``, a read of a held row at other lanes, a read down a column)."""
    lines = []
    for _ in range(draw(st.integers(1, 3))):
        target = draw(st.sampled_from(TARGETS))
        value = draw(st.sampled_from(READS))
        for _ in range(draw(st.integers(0, 2))):
            value = f"{value} {draw(st.sampled_from('+-*'))} {draw(st.sampled_from(READS))}"
        op = draw(st.sampled_from(("+=", "-=", "*=", "=")))
        lines.append(f"                {target} {op} {value}")
    q_range, j_range = draw(st.sampled_from(Q_RANGES)), draw(st.sampled_from(J_RANGES))
    return (f"def f(A, B, C, D, s, N, M, K):\n    for i in range(N):\n"
            f"        for q in {q_range}:\n            for j in {j_range}:\n"
            + "\n".join(lines) + "\n")


ROW_TARGETS = ("A[i, j]", "A[i, j + 1]", "E[i, j]")
ROW_READS = ("A[q, j]", "A[q + 1, j]", "A[q + 2, j + 1]", "E[q, j]", "B[q, j]", "C[i, q]",
             "A[i, j]")


@st.composite
def row_nests(draw: st.DrawFn) -> str:
    """Triangles and rectangles whose updates read other rows of the arrays they update
    (trmm's ``B[i, j] += A[k, i] * B[k, j]``, ``k > i``): held where the loops' run
    checks that a read never meets a held row."""
    lines = []
    for _ in range(draw(st.integers(1, 2))):
        value = " * ".join(draw(st.lists(st.sampled_from(ROW_READS), min_size=1, max_size=3)))
        lines.append(f"                {draw(st.sampled_from(ROW_TARGETS))} += {value}")
    q_range, j_range = draw(st.sampled_from(Q_RANGES)), draw(st.sampled_from(J_RANGES))
    return (f"def f(A, B, C, E, N, M, K):\n    for i in range(N):\n"
            f"        for q in {q_range}:\n            for j in {j_range}:\n"
            + "\n".join(lines) + "\n")


@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(st.one_of(held_nests(), row_nests()), st.sampled_from([1, 2, 3]))
def test_held_updates_compute_the_same_bits_as_the_loops(source: str, rows: int) -> None:
    jam = f"unroll(i, {rows}, jam=True); " if rows > 1 else ""
    recipe = f"stripmine(j, 4, jv); interchange(q, jv); {jam}hold(q)"
    try:
        result = transform(source, recipe, emit="numba")
    except (UsageError, IllegalStep):
        return  # refused: the loops stay as they are
    # whole strips of 4 and a partial one; rows past the jammed ones; runs of a triangle
    for sizes in ({"N": 5, "M": 7, "K": 3}, {"N": 11, "M": 9, "K": 12}):
        verification = result.verify(**sizes)
        assert verification.ok, f"{recipe} accepted but wrong:\n{source}\n{result.source}"
        assert all(c.tolerance == 0 for c in verification.compared), source


# -- the lanes themselves ------------------------------------------------------------------

@njit
def _axpy_loop(x, y, alpha, start):
    for j in range(start, start + 8):
        y[0, j] += alpha * x[0, j]


@njit
def _axpy_rows(x, y, alpha, start):
    held = lanes_load(y, (0, start), 8)
    held = lanes_like(held + alpha * lanes_load(x, (0, start), 8), held)
    lanes_store(y, (0, start), held)


def test_lanes_round_as_the_scalar_code_does() -> None:
    """A float64 product added into float32 lanes is rounded at the store, as Numba's
    scalar update ``y[0, j] += alpha * x[0, j]`` rounds it (not as NumPy's scalars, which
    keep float32); a strided view goes element by element."""
    rng = np.random.default_rng(1)
    x = rng.random((1, 20)).astype(np.float32)
    y = rng.random((1, 20)).astype(np.float32)
    expected = y.copy()
    _axpy_loop(x, expected, 1.1, 3)
    _axpy_rows(x, y, 1.1, 3)
    assert np.array_equal(y, expected) and not np.array_equal(y[0, :3], x[0, :3])
    in_float32 = y.copy()
    in_float32[0, 3:11] += np.float32(1.1) * x[0, 3:11]
    assert not np.array_equal(in_float32, expected)  # the rounding the test tells apart
    wide = np.zeros((1, 40), np.float64)
    view = wide[:, ::2]
    _axpy_rows(np.ones((1, 20)), view, 2.0, 0)
    assert np.array_equal(wide[0, :16:2], np.full(8, 2.0)) and not wide[0, 1::2].any()
