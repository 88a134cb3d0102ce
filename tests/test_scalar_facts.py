"""Locals set once before the loops are known values, in both languages: the dependences
that cannot happen are gone, and ``exact`` means the same in Python and C (never true where
a local's value is lost)."""

from __future__ import annotations

import pytest

import loclab

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
