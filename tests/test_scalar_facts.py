"""Locals set once before the loops are known values, in both languages: the dependences
that cannot happen are gone, and ``exact`` means the same in Python and C (never true where
a local's value is lost)."""

from __future__ import annotations

import pytest

import loclab
from loclab.errors import UsageError
from loclab.measure.timing import Budget

ROWS_PY = """\
def f(aa, b, LEN):
    j = 0
    k = 1
    for i in range(1, LEN):
        aa[j][i] = aa[k][i - 1] + b[i]
"""
ROWS_C = """\
#define LEN 256
void f(float aa[LEN][LEN], float *b) {
    int j, k;
    j = 0;
    k = 1;
    for (int i = 1; i < LEN; i++)
        aa[j][i] = aa[k][i-1] + b[i];
}
"""
HALVES_PY = """\
def g(a, b, LEN):
    k = LEN // 2
    for i in range(LEN // 2):
        a[i + k] = a[i] + b[i]
"""
HALVES_C = """\
#define LEN 256
void g(float *a, float *b) {
    int k = LEN/2;
    for (int i = 0; i < LEN/2; i++)
        a[i+k] = a[i] + b[i];
}
"""
CHAIN_PY = """\
def h(a, b, k2, n):
    k1 = k2
    k = 2 * k1 - k2
    for i in range(n):
        a[i] = a[i + k - k2 + 1] + b[i]
"""
CHAIN_C = """\
void h(float *a, float *b, int k2, int n) {
    int k1 = k2;
    int k = 2 * k1 - k2;
    for (int i = 0; i < n; i++)
        a[i] = a[i + k - k2 + 1] + b[i];
}
"""


def both(python: str, c: str) -> list:
    return [loclab.analyze(python, assume_distinct=True),
            loclab.analyze(c, language="c", assume_distinct=True)]


@pytest.mark.parametrize("python, c", [(ROWS_PY, ROWS_C), (HALVES_PY, HALVES_C)])
def test_known_values_remove_what_cannot_happen(python: str, c: str) -> None:
    for analysis in both(python, c):
        assert [d for d in analysis.dependences if not d.on_scalar] == []
        assert all(loop.parallel for loop in analysis.loops)
        assert "k" not in analysis.nest.parameters


def test_values_built_from_other_values_are_followed() -> None:
    for analysis in both(CHAIN_PY, CHAIN_C):
        (d,) = [d for d in analysis.dependences if not d.on_scalar]
        assert (d.kind, d.direction, d.distance, d.exact) == ("WAR", ("<",), (1,), True)
        assert not analysis.loops[0].parallel_if_distinct


def test_a_value_loclab_cannot_express_is_never_exact() -> None:
    python = loclab.analyze("def o(a, n, x):\n    k = x >> 1\n    for i in range(n):\n"
                            "        a[i + k] = a[i]\n")
    c = loclab.analyze("void o(float *a, int n, int x) {\n  int k = x >> 1;\n"
                       "  for (int i = 0; i < n; i++)\n    a[i + k] = a[i];\n}\n",
                       language="c")
    for analysis in (python, c):
        on_a = [d for d in analysis.dependences if d.array == "a"]
        assert on_a and not any(d.exact for d in on_a)
        assert not analysis.loops[0].parallel_if_distinct
    assert any("k is treated as an unknown size" in note for note in python.notes)


def test_a_local_assigned_twice_or_in_a_branch_stays_unknown() -> None:
    twice = loclab.analyze("def t(a, n):\n    k = 0\n    k = 1\n    for i in range(1, n):\n"
                           "        a[k] = a[i]\n")
    branch = loclab.analyze("def t(a, n, c):\n    if c > 0:\n        k = 0\n    else:\n"
                            "        k = 1\n    for i in range(1, n):\n        a[k] = a[i]\n")
    for analysis in (twice, branch):
        assert not analysis.loops[0].parallel_if_distinct
        assert not any(d.exact for d in analysis.dependences if d.array == "a")


def test_c_division_of_constants_is_folded_as_c_does() -> None:
    analysis = loclab.analyze("void d(float *a) {\n  int k = -7 / 2;\n"
                              "  for (int i = 4; i < 10; i++)\n    a[i + k] = a[i];\n}\n",
                              language="c", assume_distinct=True)
    (d,) = [d for d in analysis.dependences if not d.on_scalar]
    assert d.distance == (3,)  # k = -3 in C (truncation), not -4


# --- sizes the function computes from its arguments ------------------------------------------

STRIDED = ("def halves(x, y, N, S):\n    M = N // S\n    for i in range(M):\n"
           "        t = x[i * S] * 2.0\n        y[i] = t\n")
WINDOWS = ("def windows(img, out, H, W, K):\n    OH = H - K + 1\n    OW = W - K + 1\n"
           "    for i in range(OH):\n        for j in range(OW):\n            s = 0.0\n"
           "            for a in range(K):\n                for b in range(K):\n"
           "                    s += img[i + a, j + b]\n            out[i, j] = s\n")
BOXES = ("def boxes(img, out, H, W, R):\n    for i in range(H):\n        for j in range(W):\n"
         "            s = 0.0\n            for a in range(max(0, i - R), min(H, i + R + 1)):\n"
         "                for b in range(max(0, j - R), min(W, j + R + 1)):\n"
         "                    s += img[a, b]\n            out[i, j] = s\n")


def test_an_unknown_size_in_a_loop_bound_leaves_the_loop_body_exact() -> None:
    # M = N // S is no index expression; each value it may have runs range(M) exactly, so
    # t is written before it is read in every iteration: private, as with a size argument
    analysis = loclab.analyze(STRIDED, assume_distinct=True)
    (loop,) = analysis.loops
    assert "M is treated as an unknown size" in " ".join(analysis.nest.notes)
    assert not loop.parallel and any("privatize t" in r for r in loop.parallel_after)
    assert analysis.nest.derived == {"M": "N // S"}


def test_sizes_the_function_computes_are_computed_not_chosen(tmp_path) -> None:
    from loclab.optimize import optimize_file
    from loclab.transform import transform
    from loclab.transform.inputs import choose_sizes

    program = transform(STRIDED, [], "halves").program
    sizes = choose_sizes(program, {"N": 100, "S": 3})
    assert sizes["M"] == 33
    with pytest.raises(UsageError, match=r"--param M: halves computes M = N // S"):
        choose_sizes(program, {"M": 5, "N": 100, "S": 3})
    with pytest.raises(UsageError, match=r"computes M = N // S = 0: its loops would not run"):
        choose_sizes(program, {"N": 2, "S": 3})
    path = tmp_path / "halves.py"
    path.write_text(STRIDED)
    result = optimize_file(path, "halves", params={"N": 60000, "S": 2}, tune=False,
                           timing=Budget(seconds=0.01, min_runs=2, max_runs=3))
    assert result.timing.sizes["M"] == 30000 and result.verification.ok
    assert "privatize(t)" in result.recipe


def test_sizes_chosen_to_verify_run_every_statement() -> None:
    from loclab.transform import transform
    from loclab.transform.inputs import choose_sizes, every_statement_runs

    program = transform(WINDOWS, [], "windows").program
    sizes = choose_sizes(program, {})
    assert every_statement_runs(program, sizes) and sizes["K"] <= sizes["H"]


def test_a_window_loop_counts_its_window_not_the_whole_range() -> None:
    from loclab.transform import transform
    from loclab.transform.inputs import instances

    program = transform(BOXES, [], "boxes").program
    # per point: s = 0, the 5 x 5 window, the store; the box around the domain is 512^4
    assert instances(program, {"H": 512, "W": 512, "R": 2}) <= 512 * 512 * (25 + 2) * 1.1


def test_sizes_grown_to_time_at_grow_apart_where_the_function_computes_one() -> None:
    # all alike, N and S doubled together, M = N // S stayed 1: a loop of one iteration timed
    from loclab.optimize.measure import TARGET_INSTANCES, timing_sizes
    from loclab.transform import transform
    from loclab.transform.inputs import instances

    program = transform(STRIDED, [], "halves").program
    sizes = timing_sizes(program, {})
    assert sizes["S"] == 16 and sizes["M"] == sizes["N"] // 16
    assert TARGET_INSTANCES // 4 < instances(program, sizes) <= TARGET_INSTANCES
