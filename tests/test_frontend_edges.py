"""Rough edges of the frontends: linear time in the file's size, directories, methods,
non-integer ranges, chained assignments."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

import loclab
import loclab.nest.preprocess
import loclab.nest.source
from loclab.cli import main
from loclab.errors import UsageError
from loclab.nest import load_function, load_source
from loclab.nest.source import SourceLines


def functions(count: int, language: str) -> str:
    if language == "python":
        return "".join(f"def f{k}(A, N):\n    for i in range(1, N):\n"
                       f"        A[i] = A[i - 1] + {k}\n\n" for k in range(count))
    return "".join(f"void f{k}(float *A, int N) {{\n  for (int i = 1; i < N; i++)\n"
                   f"    A[i] = A[i - 1] + {k};\n}}\n" for k in range(count))


def test_a_python_file_is_split_once_whatever_its_number_of_functions(
        monkeypatch: pytest.MonkeyPatch) -> None:
    splits = []
    original = SourceLines.__init__

    def counting(self: SourceLines, source: str) -> None:
        splits.append(len(source))
        original(self, source)

    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("ast.get_source_segment splits the whole file on every call")

    monkeypatch.setattr(SourceLines, "__init__", counting)
    monkeypatch.setattr(ast, "get_source_segment", forbidden)
    nests = load_source(functions(50, "python"))
    assert len(nests) == 50 and len(splits) == 1
    assert nests[49].statements[0].source == "A[i] = A[i - 1] + 49"


def test_a_c_file_is_preprocessed_and_cut_into_lines_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    calls = {"preprocess": 0, "strip": 0}
    preprocess = loclab.nest.preprocess.preprocess
    strip = loclab.nest.preprocess.strip_preprocessor

    def count(name: str, function: object) -> object:
        def wrapper(*args: object, **kwargs: object) -> object:
            calls[name] += 1
            return function(*args, **kwargs)  # type: ignore[operator]
        return wrapper

    monkeypatch.setattr("loclab.nest.cunit.preprocess", count("preprocess", preprocess))
    monkeypatch.setattr(loclab.nest.preprocess, "strip_preprocessor", count("strip", strip))
    nests = load_source(functions(50, "c"), language="c")
    assert len(nests) == 50 and calls == {"preprocess": 1, "strip": 1}
    assert nests[49].statements[0].source == "A[i] = A[i - 1] + 49"


@pytest.mark.parametrize("source", [
    "def f(A, N):\n    for i in range(N):\n        A[i] = 'é' + A[i]  # ü\n",
    "def f(A, N):\r\n    x = (1 +\r\n         2)\r\n    A[0] = x\r\n",
    "def f(A):\n    A[0] = '\f'\n    A[1] = 'x'\n",
])
def test_source_lines_slice_as_ast_does(source: str) -> None:
    lines = SourceLines(source)
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.stmt, ast.expr)):
            assert lines.segment(node) == ast.get_source_segment(source, node)


def test_a_directory_is_named_as_one(tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path}: is a directory" in err and err.count("\n") == 1


class Grid:
    def relax(self, A, N):
        for i in range(1, N):
            A[i] = A[i - 1]


def test_methods_are_functions_named_class_dot_method(tmp_path: Path) -> None:
    path = tmp_path / "k.py"
    path.write_text("class Solver:\n    def step(self, A, N):\n        for i in range(N):\n"
                    "            A[i] = self.scale\n\n    class Inner:\n"
                    "        def go(self, B, N):\n            for i in range(1, N):\n"
                    "                B[i] = B[i - 1]\n\ndef top(A, N):\n    pass\n")
    analyses = loclab.analyze_file(path)
    assert [a.name for a in analyses] == ["Solver.step", "Solver.Inner.go", "top"]
    assert analyses[0].loops[0].parallel and not analyses[1].loops[0].parallel
    (inner,) = loclab.analyze_file(path, "Solver.Inner.go")
    assert inner.nest.line == 7 and inner.statements[0].line == 9
    with pytest.raises(UsageError, match=r"no function named 'go' \(functions: Solver.step, "
                                         r"Solver.Inner.go, top\)"):
        loclab.analyze_file(path, "go")
    nest = load_function(Grid.relax)
    assert nest.name == "Grid.relax" and nest.line == Grid.relax.__code__.co_firstlineno


@pytest.mark.parametrize("header, message", [
    ("range(2.5)", ":2:20: range() argument 2.5 is not an integer"),
    ("range(0, N, 0.5)", ":2:26: range() step 0.5 is not an integer"),
    ("range(N / 2)", ":2:20: range() argument N / 2 is not an integer"),
    ("range(-1.0, N)", ":2:20: range() argument -1.0 is not an integer"),
])
def test_a_non_integer_range_is_a_one_line_error(header: str, message: str) -> None:
    with pytest.raises(UsageError) as info:
        loclab.analyze(f"def f(A, N):\n    for i in {header}:\n        A[i] = 0\n",
                       filename="k.py")
    assert str(info.value) == "k.py" + message


def test_python_chained_assignment_assigns_left_to_right() -> None:
    analysis = loclab.analyze("def f(A, B, N):\n    s = t = 0.0\n    for i in range(N):\n"
                              "        s = A[i] = B[i] + t\n")
    first, second = analysis.nest.statements
    assert [(a.text, a.write) for a in first.accesses] == [("s", True), ("t", True)]
    assert [(a.text, a.write) for a in second.accesses] == [
        ("B[i]", False), ("t", False), ("s", True), ("A[i]", True)]
    assert second.source == "s = A[i] = B[i] + t"
    assert {(d.source, d.sink, d.kind, d.array, d.direction) for d in analysis.dependences} \
        == {("S1", "S2", "RAW", "t", ()), ("S1", "S2", "WAW", "s", ()),
            ("S2", "S2", "WAW", "s", ("<",))}
    assert analysis.loops[0].parallel_after == ["privatize s"]


@pytest.mark.parametrize("body, message", [
    ("    k = A[k] = 0.0\n", ":2:9: A[k] reads k, which k = ... assigns first in this chained "
                            "assignment; write two statements"),
    ("    A = B = np.empty(N)\n", ":2:5: a chained assignment of a new array gives it two "
                                 "names"),
    ("    for i in range(N):\n        i = j = 0\n", ":3:9: assignment to loop variable i"),
])
def test_chained_assignments_the_model_cannot_order_are_errors(body: str, message: str) -> None:
    with pytest.raises(UsageError) as info:
        loclab.analyze(f"def f(A, k, N):\n{body}", filename="k.py")
    assert str(info.value).startswith("k.py" + message)


WHOLE_FILE = ("def first(A, N):\n    for i in range(1, N):\n        A[i] = A[i - 1]\n\n"
              "def unreadable(A, N):\n    i = 0\n    while i < N:\n        A[i] = 0\n\n"
              "def last(B, N):\n    for j in range(N):\n        B[j] = 2 * B[j]\n")


def test_a_function_that_cannot_be_read_is_skipped_and_named(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "k.py"
    path.write_text(WHOLE_FILE)
    analyses = loclab.analyze_file(path)
    assert [a.name for a in analyses] == ["first", "last"]
    (skipped,) = analyses.skipped
    assert skipped.name == "unreadable" and str(skipped.error).startswith(f"{path}:7:")
    assert main(["analyze", str(path), "--json"]) == 0
    captured = capsys.readouterr()
    assert [d["function"] for d in json.loads(captured.out)] == ["first", "last"]
    assert captured.err == f"loclab analyze: warning: skipped unreadable: {skipped.error}\n"
    with pytest.raises(UsageError, match=r"^.*k.py:7:\d+: "):  # named alone: an error
        loclab.analyze_file(path, "unreadable")


def test_a_file_of_which_no_function_can_be_read_is_an_error_naming_each(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "k.py"
    path.write_text("def f(A, N):\n    while N:\n        N -= 1\n\n"
                    "def g(A, N):\n    for i in range(N):\n        break\n")
    assert main(["analyze", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"loclab analyze: error: {path}: none of its 2 functions can be "
                          "read:\n  f: ")
    assert "\n  g: " in err and f"{path}:7:" in err
    path.write_text("def f(A, N):\n    while N:\n        N -= 1\n")
    assert main(["analyze", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"loclab analyze: error: {path}:2:") and err.count("\n") == 1


def test_code_from_a_header_is_placed_in_the_header(tmp_path: Path) -> None:
    (tmp_path / "body.h").write_text("for (int j = 0; j < N; j++)\n  A[i][j] = A[i][j] + 1;\n")
    path = tmp_path / "k.c"
    path.write_text("void f(int N, float A[N][N]) {\n  for (int i = 0; i < N; i++) {\n"
                    "#include \"body.h\"\n  }\n}\n")
    document = loclab.analyze_file(path)[0].to_json()
    assert [(loop["var"], loop["file"], loop["line"]) for loop in document["loops"]] == \
        [("i", str(path), 2), ("j", str(tmp_path / "body.h"), 1)]
    (statement,) = document["statements"]
    assert (statement["file"], statement["line"]) == (str(tmp_path / "body.h"), 2)
