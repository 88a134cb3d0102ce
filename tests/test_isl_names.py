"""Any name a user can write reaches isl as a name of ours, and every output shows the user's.

isl reads ASCII identifiers and has keywords of its own (``and``, ``mod``, ``floor``, ``min``,
``exists``, ``true``, ``infty``, ...), and loclab's model names things itself (``S1``, ``p0``,
``x0``, ``M0``). A nest whose arrays, scalars, sizes and loop variables are renamed to any of
these, or to any Python identifier (Unicode included) or C identifier, must get the analysis of
the same nest with plain names, the new names in place of the old ones.
"""

from __future__ import annotations

import keyword
import re
import unicodedata
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import loclab
from tests.nestgen import INDEX_ARRAY, nests
from tests.reorder import privatizing_nests

PROPERTY = settings(deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow])

ISL_WORDS = ("and", "or", "not", "implies", "exists", "mod", "floor", "ceil", "floord",
             "ceild", "min", "max", "infty", "NaN", "true", "false", "rat", "domain")
OUR_NAMES = ("p0", "p1", "S0", "S1", "S2", "i0", "x0", "x1", "y0", "M0", "M1", "a0", "d0",
             "e_x0", "e_y0")
# names the nests themselves use for something else (a call, the function)
TAKEN = {"f", "range", "prange", "min", "max", "abs", "math", "np", "numpy", "numba"}
C_KEYWORDS = {"auto", "break", "case", "char", "const", "continue", "default", "do", "double",
              "else", "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long",
              "register", "restrict", "return", "short", "signed", "sizeof", "static", "struct",
              "switch", "typedef", "union", "unsigned", "void", "volatile", "while", "_Bool",
              "_Complex", "_Imaginary", "asm", "typeof", "__attribute__"}

PLAIN = ("A", "B", "C", "N", "M", "i", "j", "k", "s", "t")  # the nests' names


def _python_name(name: str) -> bool:
    """Usable as written: an identifier Python keeps as is (NFKC), no keyword, not taken."""
    return (name.isidentifier() and not keyword.iskeyword(name) and name not in TAKEN
            and unicodedata.normalize("NFKC", name) == name)


UNICODE_NAMES = st.builds(
    str.__add__,
    st.characters(categories=["Lu", "Ll", "Lt", "Lm", "Lo", "Nl"], include_characters="_"),
    st.text(st.characters(categories=["Lu", "Ll", "Lo", "Nl", "Mn", "Mc", "Nd", "Pc"]),
            max_size=4))
ASCII_NAMES = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,5}", fullmatch=True)
PYTHON_NAMES = st.one_of(st.sampled_from(ISL_WORDS + OUR_NAMES), UNICODE_NAMES,
                         ASCII_NAMES).filter(_python_name)
C_NAMES = st.one_of(st.sampled_from(ISL_WORDS + OUR_NAMES), ASCII_NAMES).filter(
    lambda name: name not in C_KEYWORDS and name not in TAKEN and not name.startswith("__"))


def renamings(names: st.SearchStrategy[str], plain: tuple[str, ...] = PLAIN
              ) -> st.SearchStrategy[dict[str, str]]:
    """A new name for each plain one, all distinct."""
    return st.lists(names, min_size=len(plain), max_size=len(plain), unique=True).map(
        lambda new: dict(zip(plain, new)))


def rename(text: str, names: Mapping[str, str]) -> str:
    """Every whole identifier in ``names`` replaced at once (a swap ``A``<->``i`` works)."""
    pattern = re.compile(r"(?<!\w)(" + "|".join(map(re.escape, names)) + r")(?!\w)")
    return pattern.sub(lambda m: names[m.group(1)], text)


def renamed(document: Any, names: Mapping[str, str]) -> Any:
    """The JSON of an analysis with the names replaced in every string (keys too: fixed
    sizes are keyed by name; no key of the contract is one of the plain names)."""
    if isinstance(document, str):
        return rename(document, names)
    if isinstance(document, list):
        return [renamed(item, names) for item in document]
    if isinstance(document, dict):
        return {rename(key, names): renamed(value, names) for key, value in document.items()}
    return document


def same_analysis(plain: str, names: Mapping[str, str], language: str = "python",
                  params: Mapping[str, int] | None = None) -> None:
    """The analysis of ``plain`` with every name renamed is the analysis of the renamed
    source, and its text shows the new names."""
    expected = loclab.analyze(plain, language=language, params=params)
    odd_params = {names.get(k, k): v for k, v in (params or {}).items()}
    got = loclab.analyze(rename(plain, names), language=language, params=odd_params or None)
    assert got.to_json() == renamed(expected.to_json(), names), rename(plain, names)
    text = got.explain()
    assert all(names[d.array] in text for d in expected.dependences if d.array in names)


def test_a_non_ascii_array_name() -> None:
    analysis = loclab.analyze("def f(Ä, N):\n    for i in range(1, N):\n"
                              "        Ä[i] = Ä[i - 1] + 1\n")
    [dependence] = analysis.dependences
    assert (dependence.array, dependence.kind, dependence.direction) == ("Ä", "RAW", ("<",))
    assert "RAW on Ä" in analysis.explain()


@pytest.mark.parametrize("names", [
    {"A": "mod", "B": "floor", "N": "exists", "M": "infty", "i": "true", "j": "p0",
     "s": "S1", "t": "x0"},
    {"A": "p0", "B": "M0", "N": "p1", "M": "i0", "i": "x1", "j": "y0", "s": "min", "t": "max"},
    {"A": "Ä", "B": "ñ", "N": "Ω", "M": "変数", "i": "α", "j": "β", "s": "σ", "t": "λ"},
])
def test_isl_words_and_our_own_names(names: dict[str, str]) -> None:
    source = ("def f(A, B, N, M):\n"
              "    for i in range(1, N):\n"
              "        for j in range(M):\n"
              "            s = A[i - 1][j] + B[j]\n"
              "            A[i][j] = s\n"
              "            t = t + s\n")
    same_analysis(source, names)
    same_analysis(source, names, params={"N": 5})


C_SOURCE = """\
void f(int N, int M, float A[N][M], float B[M], float C[N]) {
  float s = 0;
  for (int i = 1; i < N; i++)
    for (int j = 0; j < M; j++) {
      float t = A[i - 1][j];
      A[i][j] = t + B[j];
      s += t;
      C[i] = s;
    }
}
"""


@pytest.mark.parametrize("names", [
    {"A": "and", "B": "or", "C": "not", "N": "mod", "M": "floor", "i": "exists", "j": "infty",
     "s": "true", "t": "min"},
    {"A": "S0", "B": "p0", "C": "M1", "N": "p1", "M": "x0", "i": "y0", "j": "i0", "s": "e_x0",
     "t": "a0"},
])
def test_c_names_that_are_isl_words(names: dict[str, str]) -> None:
    same_analysis(C_SOURCE, names, language="c")


@settings(PROPERTY, max_examples=150)
@given(source=st.one_of(nests(), privatizing_nests()), names=renamings(PYTHON_NAMES))
def test_any_python_names(source: str, names: dict[str, str]) -> None:
    """Arrays, scalars, sizes and loop variables of generated nests renamed to any Python
    identifiers (Unicode letters, isl keywords, names the model generates); nothing, not even
    the numbering of dependences or the order of a list, depends on the names."""
    same_analysis(source, names)


@settings(PROPERTY, max_examples=40)
@given(source=nests(nonaffine=True),
       names=renamings(PYTHON_NAMES, PLAIN + (INDEX_ARRAY,)))
def test_any_python_names_in_nonaffine_nests(source: str, names: dict[str, str]) -> None:
    same_analysis(source, names)


@settings(PROPERTY, max_examples=60)
@given(names=renamings(C_NAMES, ("A", "B", "C", "N", "M", "i", "j", "s", "t")))
def test_any_c_names(names: dict[str, str]) -> None:
    same_analysis(C_SOURCE, names, language="c")
