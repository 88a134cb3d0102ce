"""The frontends: what they accept, how they model it, and one-line errors for the rest."""

from __future__ import annotations

import ast
import re

import numpy as np
import pytest

import loclab
from loclab.errors import UsageError
from loclab.nest import load_source
from loclab.nest.c import strip_preprocessor
from loclab.nest.expr import Poly


def deps(analysis) -> set[tuple[str, str, str, str, tuple[str, ...]]]:
    return {(d.source, d.sink, d.kind, d.array, d.direction) for d in analysis.dependences}


def test_python_statements_loops_and_accesses() -> None:
    nest = load_source("def f(A, B, N):\n"
                       "    for i in range(1, N, 2):\n"
                       "        for j in range(max(0, i - 3), min(N, i + 4)):\n"
                       "            A[i, j] += B[j][i - 1] * 2\n")[0]
    (outer, inner), (statement,) = nest.loops, nest.statements
    assert (outer.var, str(outer.start), str(outer.stop), outer.step) == ("i", "1", "N", 2)
    assert str(inner.start) == "max(0, i - 3)" and str(inner.stop) == "min(N, i + 4)"
    assert statement.update is not None and statement.update.op == "+"
    assert [(a.variable.name, a.write, [str(s) for s in a.subscripts])
            for a in statement.accesses] == [("A", False, ["i", "j"]),
                                             ("B", False, ["j", "i - 1"]),
                                             ("A", True, ["i", "j"])]
    assert nest.parameters == ["N"]


def test_lines_follow_the_file_for_a_live_function() -> None:
    def kernel(A, N):
        for i in range(1, N):
            A[i] = A[i - 1]

    analysis = loclab.analyze(kernel)
    first = kernel.__code__.co_firstlineno
    assert analysis.loops[0].line == first + 1
    assert analysis.statements[0].line == first + 2
    assert analysis.loops[0].parallel is False


@pytest.mark.parametrize("body, message", [
    ("    i = 0\n    while i < N:\n        i += 1\n", ":3:5: a while loop is not supported"),
    ("    for i in range(N):\n        break\n", ":3:9: break is not supported"),
    ("    for i in range(N):\n        if i > 2:\n            if i > 3:\n                continue\n"
     "        A[i] = 0\n", ":5:17: continue is not supported"),
    ("    for i in range(N):\n        print(A[i])\n", ":3:9: call print(A[i]) as a statement"),
    ("    for i in range(N):\n        A[i] = foo(i)\n", ":3:16: call to foo may write"),
    ("    for i in range(N):\n        a, b = A[i]\n", ":3:9: tuple assignment"),
    ("    for i in range(N):\n        A[i, :] = 0\n", ":3:14: slice in A[i, :]"),
    ("    for i in range(0, N, A[0]):\n        A[i] = 0\n", ":2:26: the loop step must be"),
    ("    for i in range(0, N, 0):\n        A[i] = 0\n", ":2:26: the loop step must be"),
    ("    for i in A:\n        A[i] = 0\n", ":2:14: only 'for v in range(...)'"),
    ("    for i in range(N):\n        i = 2\n", ":3:9: assignment to loop variable i"),
    ("    for i in range(N):\n        for i in range(N):\n            A[i] = 0\n",
     ":3:9: loop variable i is already"),
])
def test_python_unsupported_constructs_are_one_line_errors(body: str, message: str) -> None:
    with pytest.raises(UsageError) as info:
        loclab.analyze(f"def f(A, N):\n{body}", filename="k.py")
    text = str(info.value)
    assert text.startswith("k.py:") and message in text and "\n" not in text


def test_tuple_assignments_of_independent_values_are_one_statement_a_name() -> None:
    source = ("def f(A, B):\n    n, m = A.shape\n    for i in range(n):\n"
              "        for j in range(m):\n            a, b = A[i, j], B[i, j]\n"
              "            A[i, j] = a + b\n")
    analysis = loclab.analyze(source, filename="k.py")
    assert [(s.line, s.source) for s in analysis.statements] == [
        (2, "n = A.shape[0]"), (2, "m = A.shape[1]"), (5, "a = A[i, j]"), (5, "b = B[i, j]"),
        (6, "A[i, j] = a + b")]


CONTINUES = ["""
def f(A, B, n):
    for i in range(n):
        for j in range(n):
            if i == j:
                continue
            B[i, j] = A[i, j] * 2.0
""", """
def f(A, B, n):
    for i in range(n):
        if A[i, 0] > 0.5:
            B[i, 0] = 1.0
            continue
        B[i, 1] = A[i, 1]
        B[i, 2] = B[i, 1] + 1.0
""", """
def f(A, B, n):
    for i in range(n):
        if A[i, 0] > 0.5:
            B[i, 0] = 1.0
            continue
        else:
            B[i, 2] = 3.0
        for j in range(n):
            if j > i:
                continue
            B[i, j] += A[j, i]
        continue
"""]


# tuple assignments (a swap of elements, of names, a shape) and enumerate, as Python runs them
TUPLES = ["""
def f(A, B, n):
    for i in range(n):
        for j in range(n):
            A[i, j], B[i, j] = B[i, j], A[i, j] + 1.0
""", """
def f(A, B, n):
    a, b = 1.0, 2.0
    for i in range(n):
        a, b = b, a + A[i, 0]
        B[i, 0] = a * b
""", """
def f(A, B, n):
    rows, cols = A.shape
    for i in range(rows):
        for j in range(cols):
            B[i, j] += A[i, j]
"""]


@pytest.mark.parametrize("source", CONTINUES + TUPLES)
def test_rewritten_syntax_computes_what_the_original_does(source: str) -> None:
    """Continues folded into ifs, tuple assignments and enumerate loops as assignments a
    target: the function the frontend reads runs as the one written."""
    from loclab.nest.python import python_function

    rewritten = ast.unparse(python_function(source, "k.py", "f"))
    assert "continue" not in rewritten and "enumerate" not in rewritten
    assert not re.search(r"^ *\w+(\[[^]]*\])?, ", rewritten, re.M)  # no tuple target
    rng = np.random.default_rng(0)
    A = rng.random((6, 6))
    results = []
    for text in (source, rewritten):
        namespace: dict = {}
        exec(text, namespace)
        A_copy, B = A.copy(), np.zeros((6, 6))
        namespace["f"](A_copy, B, 6)
        results += [A_copy, B]
    assert np.array_equal(results[0], results[2]) and np.array_equal(results[1], results[3])
    loclab.analyze(source, "f", filename="k.py")


def test_an_enumerate_loop_is_a_range_loop_reading_its_element_first() -> None:
    source = "def f(x, y):\n    for i, v in enumerate(x):\n        y[i] = v * float(i)\n"
    analysis = loclab.analyze(source, "f", filename="k.py")
    assert [s.statement.source for s in analysis.statements] == ["v = x[i]",
                                                                 "y[i] = v * float(i)"]
    assert analysis.loops[0].loop.header == "for i in range(len(x))"


def test_a_local_compared_with_data_is_no_size_and_an_argument_is() -> None:
    source = ("def f(x, y, N, H):\n    eps = 0.1\n    for i in range(N):\n"
              "        if x[i] <= eps:\n            y[i] = 1.0\n        if x[i] < H:\n"
              "            y[i] += x[i]\n")
    assert loclab.analyze(source, "f", filename="k.py").nest.parameters == ["N", "H"]


def test_a_returned_array_is_read_whole_after_the_loops() -> None:
    source = ("import numpy as np\n\n\ndef f(A, n):\n    C = np.zeros((n, n))\n"
              "    for i in range(n):\n        for j in range(n):\n"
              "            C[i, j] = A[j, i]\n    return C, A\n")
    analysis = loclab.analyze(source, "f", filename="k.py")
    returned = analysis.statements[-1].statement
    assert (returned.line, returned.source) == (9, "return C, A")
    assert [(a.variable.name, a.write, a.subscripts) for a in returned.accesses] == [
        ("C", False, (None, None)), ("A", False, (None,))]
    assert [(d.source, d.sink, d.kind) for d in analysis.dependences] == [("S1", "S2", "RAW")]


def test_c_frontend_strips_comments_and_pragmas_keeping_lines() -> None:
    source = ("#include <math.h>\n/* a\n comment */\nvoid f(float* A, int N) {\n"
              "  #pragma omp parallel for\n  for (int i = 1; i <= N; i++) { // x\n"
              "    A[i] = A[i - 1] + sqrtf(2.0f);\n  }\n}\n")
    assert strip_preprocessor(source).count("\n") == source.count("\n")
    analysis = loclab.analyze(source, language="c", filename="k.c")
    assert analysis.loops[0].line == 6 and analysis.statements[0].line == 7
    assert analysis.statements[0].source == "A[i] = A[i - 1] + sqrtf(2.0f)"
    assert deps(analysis) == {("S1", "S1", "RAW", "A", ("<",))}


@pytest.mark.parametrize("header, start, stop, step", [
    ("for (int i = 0; i < N; i++)", "0", "N", 1),
    ("for (i = 2; i <= N; i += 3)", "2", "N + 1", 3),
    ("for (int i = N; i > 0; i--)", "N", "0", -1),
    ("for (int i = N - 1; i >= 1; i -= 2)", "N - 1", "0", -2),
    ("for (int i = 0; N > i; ++i)", "0", "N", 1),
])
def test_c_loop_spellings(header: str, start: str, stop: str, step: int) -> None:
    nest = load_source(f"void f(float* A, int N) {{ int i; {header} A[i] = 0; }}",
                       language="c")[0]
    loop = nest.loops[0]
    assert (str(loop.start), str(loop.stop), loop.step) == (start, stop, step)


@pytest.mark.parametrize("body, message", [
    ("while (N) { A[0] = 1; }", "a while loop is not supported"),
    ("for (int i = 0; i < N; i++) { if (i) break; }", "break is not supported"),
    ("for (int i = 0; i < N; i++) { foo(A); }", "call foo(A) as a statement"),
    ("for (int i = 0; i < N; i++) { A[i] = bar(i); }", "call to bar may write"),
    ("for (int i = 0; i < N; i = i * 2) { A[i] = 0; }", "must step i by a non-zero"),
    ("for (int i = 0; i < N; i++) { A[i, 0] = 0; }", "comma in subscript"),
    ("float* p = A;", "pointer p initialized here would alias"),
])
def test_c_unsupported_constructs(body: str, message: str) -> None:
    with pytest.raises(UsageError) as info:
        loclab.analyze(f"void f(float* A, int N) {{\n  {body}\n}}\n", language="c",
                       filename="k.c")
    assert str(info.value).startswith("k.c:2:") and message in str(info.value)


def test_c_locals_are_private_python_scalars_are_not() -> None:
    python = loclab.analyze("def f(A, B, N):\n    for i in range(N):\n        t = A[i]\n"
                            "        B[i] = t\n")
    c = loclab.analyze("void f(float* A, float* B, int N) {\n  for (int i = 0; i < N; i++) "
                       "{\n    float t = A[i];\n    B[i] = t;\n  }\n}\n", language="c")
    assert not python.loops[0].parallel_if_distinct
    assert python.loops[0].parallel_after == ["privatize t"]
    assert c.loops[0].parallel_if_distinct and not c.loops[0].parallel  # A and B may overlap
    assert deps(c) == {("S1", "S2", "RAW", "t", ("=",))}


def test_numpy_allocation_inside_a_loop_is_fresh_per_iteration() -> None:
    analysis = loclab.analyze("import numpy as np\n"
                              "def f(X, N, M):\n    for i in range(N):\n"
                              "        T = np.empty(M)\n        for j in range(M):\n"
                              "            T[j] = X[i][j]\n        for j in range(M):\n"
                              "            X[i][j] = T[M - 1 - j]\n")
    assert analysis.loop("L1").parallel


def test_flattened_subscripts_are_delinearized_when_provable() -> None:
    source = ("def f(A, B, W, H):\n    for i in range(H):\n        for j in range(W):\n"
              "            B[j * H + i] = A[i * W + j] + B[j * H + i]\n")
    analysis = loclab.analyze(source, assume_distinct=True)
    assert all(r.parallel for r in analysis.loops)
    assert any("delinearized" in n for n in analysis.notes)
    # j - 1 can be -1: not provably within [0, W), so the subscript is unknown (safe)
    risky = loclab.analyze("def f(A, W, H):\n    for i in range(H):\n"
                           "        for j in range(W):\n            A[i * W + j] = "
                           "A[i * W + j - 1]\n")
    assert any("could not" in n for n in risky.notes)
    assert not risky.loops[0].parallel and not risky.loops[1].parallel


def test_a_size_that_multiplies_twice_delinearizes_into_two_dimensions() -> None:
    # im2col's row: (c * K + ki) * K + kj, the strides K and K * K; every (c, ki, kj)
    # writes its own row
    source = ("def f(cols, x, C, K, N):\n    for c in range(C):\n        for ki in range(K):\n"
              "            for kj in range(K):\n                for o in range(N):\n"
              "                    cols[(c * K + ki) * K + kj, o] = x[c, ki + o, kj]\n")
    analysis = loclab.analyze(source, assume_distinct=True)
    assert all(r.parallel for r in analysis.loops)
    assert any("as cols[c][ki][kj]" in n for n in analysis.notes), analysis.notes
    clash = loclab.analyze(source.replace("+ kj, o]", "+ kj + 1, o]").replace(
        "range(K):\n                for", "range(K + 1):\n                for"),
        assume_distinct=True)
    assert not all(r.parallel for r in clash.loops)


def test_fixed_sizes_make_flattened_subscripts_affine() -> None:
    source = "def f(A, W):\n    for i in range(W):\n        A[i * W] = A[i * W + W]\n"
    symbolic = loclab.analyze(source)
    fixed = loclab.analyze(source, params={"W": 4})
    assert {d.direction for d in fixed.dependences} == {("<",)}
    assert all(d.exact for d in fixed.dependences)
    assert {d.direction for d in symbolic.dependences} >= {("<",)}


def test_indirect_subscripts_are_conservative_and_reported() -> None:
    analysis = loclab.analyze("def f(hist, ind, N):\n    for i in range(N):\n"
                              "        hist[ind[i]] += 1.0\n")
    loop = analysis.loops[0]
    assert not loop.parallel
    assert any("atomic" in r for r in loop.parallel_after)
    assert not any(d.exact for d in analysis.dependences)


def test_a_variable_indexed_with_two_ranks_is_conservative() -> None:
    analysis = loclab.analyze("def f(A, N):\n    for i in range(N):\n"
                              "        A[i] = A[i][0]\n")
    assert not analysis.loops[0].parallel
    assert any("subscripts" in n for n in analysis.notes)


def test_loop_variable_after_its_loop_is_data() -> None:
    analysis = loclab.analyze("def f(A, N):\n    for j in range(N):\n        A[j] = 0\n"
                              "    for i in range(N):\n        A[j] = A[i]\n")
    # j after the first loop is unknown: S2 may write any element the loop reads
    assert not analysis.loop("i").parallel


def test_poly_arithmetic_and_rendering() -> None:
    i, n = Poly.symbol("i"), Poly.symbol("N")
    assert str(i * n + i - Poly.const(1)) == "i + N*i - 1"
    assert (i + Poly.const(3)).mod(2).render(isl=True) == "((i + 3) mod 2)"
    assert Poly.const(7).floordiv(2) == Poly.const(3)
    assert (i * i).is_affine() is False
    assert (i * n).substitute({"N": Poly.const(4)}) == Poly.of({(i.terms[0][0][0],): 4})


def test_choosing_functions() -> None:
    source = "def f(A, N):\n    pass\n\ndef g(A, N):\n    pass\n"
    with pytest.raises(UsageError, match="defines f, g"):
        loclab.analyze(source)
    assert loclab.analyze(source, "g").name == "g"
    with pytest.raises(UsageError, match="no function named 'h'"):
        loclab.analyze(source, "h")
    with pytest.raises(UsageError, match="invalid Python"):
        loclab.analyze("def f(:\n")


def test_a_reassigned_argument_is_data_not_a_size() -> None:
    # k has two values: A[k] in the first loop and A[k] in the second are different elements
    # for some inputs, the same for others; a size parameter would wrongly make them equal
    python = loclab.analyze("def f(A, k, N):\n    for i in range(N):\n        A[k] = A[i]\n"
                            "    k = N\n    for i in range(N):\n        A[i] = A[k]\n")
    c = loclab.analyze("void f(float* A, int k, int N) {\n  for (int i = 0; i < N; i++)\n"
                       "    A[k] = A[i];\n  k = N;\n}\n", language="c")
    assert python.nest.parameters == ["N"] and c.nest.parameters == ["N"]
    assert not any(d.exact for d in c.dependences if d.array == "A")


def test_strip_preprocessor_keeps_every_column() -> None:
    source = "int x; /* a */ int y; // z\n#define Q 1 \\\n  2\nA[i] = '/*';\n"
    stripped = strip_preprocessor(source)
    assert [len(line) for line in stripped.split("\n")[:1]] == [len(source.split("\n")[0])]
    assert stripped.split("\n") == ["int x;         int y;     ", "", "", "A[i] = '/*';", ""]
