"""C as a compiler sees it: preprocessing (pcpp), -I / -D, system headers, scops, positions.

The fixture ``tests/data/c/heat/heat.c`` is written in PolyBench's style: arrays declared
through macros from ``<kbench.h>`` (found through ``-I tests/data/c/utilities``), sizes from
the quoted ``"heat.h"`` next to it, ``<stdio.h>`` left to the system, a ``#pragma scop``
region, ``__restrict__`` and ``__attribute__``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import loclab
from loclab.cli import main
from loclab.errors import UsageError
from loclab.nest import load_file, load_source

DATA = Path(__file__).parent / "data" / "c"
HEAT = DATA / "heat" / "heat.c"
UTILITIES = DATA / "utilities"


def heat(**defines: str) -> loclab.deps.Analysis:
    (analysis,) = loclab.analyze_file(HEAT, include_dirs=[UTILITIES], defines=defines)
    return analysis


def lines_of(path: Path, text: str) -> list[int]:
    """The 1-based lines of ``path`` holding ``text`` (fixtures name lines by content)."""
    return [n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line]


def line_of(path: Path, text: str) -> int:
    return lines_of(path, text)[0]


def one_line_error(capsys: pytest.CaptureFixture[str], args: list[str]) -> str:
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    return err


def test_a_polybench_style_kernel_reads_as_a_compiler_reads_it() -> None:
    analysis = heat()
    assert analysis.name == "kernel_heat"
    _, definition = lines_of(HEAT, "kernel_heat(int steps, int n,")  # not the prototype
    assert analysis.nest.line == definition
    # lines and texts are the user's, macros as written
    sources = {s.line: s.source for s in analysis.nest.statements}
    stencil = line_of(HEAT, "B[i][j] = lo *")
    assert sources[stencil].startswith("B[i][j] = lo * (A[i - 1][j] + A[i + 1][j])")
    assert sources[line_of(HEAT, "lo = hi = CONST(0.25)")] == "lo = hi = CONST(0.25)"
    loops = {loop.id: loop for loop in analysis.nest.loops}
    assert loops["L1"].line == line_of(HEAT, "for (t = 0; t < _B_STEPS; t++)")
    assert loops["L1"].header == "for (t = 0; t < _B_STEPS; t++)"
    # the arrays' sizes come from the headers; the bounds are the runtime sizes (KB_BOUND)
    extents = {v.name: v.extents for v in analysis.nest.variables if v.is_array}
    assert [str(e) for e in extents["A"]] == ["1000", "1000"]
    assert analysis.nest.parameters == ["steps", "n"]
    # the verdicts of a Jacobi-style stencil and of a recurrence
    verdicts = {r.id: r.parallel_if_distinct for r in analysis.loops}
    assert verdicts == {"L1": False, "L2": True, "L3": True, "L4": True, "L5": True,
                        "L6": False}
    assert analysis.loop("L6").parallel_after == ["scan + on edge (parallel as a prefix scan)"]


def test_the_functions_with_a_scop_are_analyzed_and_only_their_scop() -> None:
    analysis = heat()
    first, last = line_of(HEAT, "#pragma scop"), line_of(HEAT, "#pragma endscop")
    assert all(first < s.line < last for s in analysis.nest.statements)  # not the printf
    assert any("analyzed the functions that hold one (kernel_heat)" in n
               for n in analysis.notes)
    assert f"line {first}: only the #pragma scop region (lines {first}-{last}) is analyzed" \
        in analysis.notes
    # the scalars declared before the region are the function's: written in the region,
    # read in the loops, they are not private to any iteration
    assert {d.array for d in analysis.dependences if d.source == "S1"} == {"lo", "hi"}


def test_naming_a_function_without_a_scop_analyzes_all_of_it() -> None:
    (init,) = loclab.analyze_file(HEAT, "init", include_dirs=[UTILITIES])
    assert [r.parallel_if_distinct for r in init.loops] == [True, True]
    assert not any("scop" in n for n in init.notes)
    line = line_of(HEAT, "KB_ALLOC_2D(A, REAL, SIZE, SIZE);")
    with pytest.raises(UsageError, match=rf"heat.c:{line}:3: pointer A initialized here would "
                                         r"alias .*\(in the expansion of macro KB_ALLOC_2D\)$"):
        loclab.analyze_file(HEAT, "main", include_dirs=[UTILITIES])


def test_defines_change_sizes_bounds_and_verdicts() -> None:
    tiny = heat(TINY="1", KBENCH_FIXED_BOUNDS="1")
    extents = {v.name: v.extents for v in tiny.nest.variables if v.is_array}
    assert [str(e) for e in extents["A"]] == ["16", "16"]
    assert [str(loop.stop) for loop in tiny.nest.loops[:2]] == ["4", "15"]
    assert tiny.nest.parameters == []
    # SHIFT 0 makes edge[i] = edge[i - 0] + ...: no recurrence any more
    assert heat(SHIFT="0").loop("L6").parallel_if_distinct


def test_cli_passes_include_dirs_and_defines(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", f"{HEAT}::kernel_heat", "-I", str(UTILITIES), "-D", "TINY",
                 "-D", "KBENCH_FIXED_BOUNDS", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["function"] == "kernel_heat" and document["parameters"] == []
    assert document["loops"][0]["line"] == line_of(HEAT, "for (t = 0; t < _B_STEPS; t++)")


def test_without_the_include_directory_the_macro_and_header_are_named(
        capsys: pytest.CaptureFixture[str]) -> None:
    err = one_line_error(capsys, ["analyze", str(HEAT)])
    line = line_of(HEAT, "static void init(int n, REAL KB_2D")
    assert f"heat.c:{line}:" in err
    assert "KB_2D: not defined in the files loclab read; headers not found: <kbench.h>" in err
    assert "-I DIR" in err and "stdio.h" not in err  # the C library is no hint


def test_a_quoted_include_found_nowhere_is_an_error_and_a_missing_directory_too(
        tmp_path: Path) -> None:
    path = tmp_path / "k.c"
    path.write_text("#include <stdio.h>\n#include \"sizes.h\"\nvoid f(float *A) { }\n")
    with pytest.raises(UsageError, match=r'k.c:2: #include "sizes.h": not found next to the '
                                         r"file nor in an -I directory \(add -I DIR\)"):
        load_file(path)
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "sizes.h").write_text("#define N 8\n")
    assert load_file(path, include_dirs=[tmp_path / "inc"])[0].name == "f"
    with pytest.raises(UsageError, match="-I nowhere: no such directory"):
        load_file(path, include_dirs=["nowhere"])


def test_system_headers_stay_out_and_their_macros_stay_names() -> None:
    source = ("#include <stdio.h>\n#include <limits.h>\n"
              "void f(float *A, int n) {\n  for (int i = 0; i < n; i++)\n"
              "    A[i] = A[i] < FLT_MAX ? A[i] : 0;\n}\n")
    (nest,) = load_source(source, language="c", filename="k.c")
    assert nest.statements[0].line == 5


def test_an_undefined_function_like_macro_is_named_not_called_a_write() -> None:
    source = ("void f(float *A, int n) {\n  for (int i = 0; i < n; i++)\n"
              "    A[IDX(i, 0)] = 1;\n}\n")
    with pytest.raises(UsageError) as info:
        loclab.analyze(source, language="c", filename="k.c")
    text = str(info.value)
    assert text.startswith("k.c:3:7: IDX(i, 0): IDX looks like a macro that loclab could not "
                           "expand") and "-I DIR" in text and "may write" not in text
    defined = "#define IDX(i, j) ((i) * 4 + (j))\n" + source
    assert loclab.analyze(defined, language="c").loops[0].parallel
    with_define = loclab.analyze(source, language="c", defines={"IDX(i, j)": "(i)"})
    assert with_define.loops[0].parallel
    # a declared function is a call, as before
    declared = "void IDX2(int, int);\n" + source.replace("A[IDX(i, 0)] = 1", "IDX2(i, 0)")
    with pytest.raises(UsageError, match="call IDX2"):
        loclab.analyze(declared, language="c")


def test_an_unexpanded_array_macro_in_a_declaration_is_named() -> None:
    source = ("void f(int n, double ARRAY_1D(x, N, n)) {\n  for (int i = 0; i < n; i++)\n"
              "    x[i] = 0;\n}\n")
    with pytest.raises(UsageError, match=r"k.c:1:22: ARRAY_1D\(x, N, n\): ARRAY_1D looks "
                                         "like a macro that loclab could not expand"):
        loclab.analyze(source, language="c", filename="k.c")


def test_columns_are_the_users_after_a_macro_expansion() -> None:
    source = ("#define A_LONG_MACRO_NAME(x) (x)\nvoid f(float *A, int N) {\n"
              "  for (int i = 0; i < N; i++)\n"
              "    A[i] = A_LONG_MACRO_NAME(A[i]) + foo(i);\n}\n")
    with pytest.raises(UsageError, match=r"^k.c:4:38: call to foo may write"):
        loclab.analyze(source, language="c", filename="k.c")
    pushed = "#define PUSH(x) foo(x)\n" + source.replace("A_LONG_MACRO_NAME(A[i]) + foo(i)",
                                                         "PUSH(i)")
    with pytest.raises(UsageError, match=r"^k.c:5:12: call to foo may write .*\(in the "
                                         r"expansion of macro PUSH\)$"):
        loclab.analyze(pushed, language="c", filename="k.c")


def test_a_statement_written_by_a_macro_shows_the_users_text() -> None:
    source = ("#define STEP(i) A[i] = A[i - 1] + 1.0f\nvoid f(float *A, int N) {\n"
              "  for (int i = 1; i < N; i++)\n    STEP(i);\n}\n")
    analysis = loclab.analyze(source, language="c")
    (statement,) = analysis.nest.statements
    assert (statement.line, statement.column, statement.source) == (4, 5, "STEP(i)")
    assert [a.text for a in statement.accesses] == ["A[i - 1]", "A[i]"]
    assert not analysis.loops[0].parallel


def test_code_from_an_included_file_names_that_file(tmp_path: Path) -> None:
    (tmp_path / "body.inc").write_text("  /* the body */\n  A[i] = A[i] + 1;\n")
    path = tmp_path / "k.c"
    path.write_text("void f(float *A, int N) {\n  for (int i = 0; i < N; i++) {\n"
                    "#include \"body.inc\"\n  }\n}\n")
    (nest,) = load_file(path)
    assert (nest.statements[0].line, nest.statements[0].source) == (2, "A[i] = A[i] + 1")
    assert any("body.inc" in n for n in nest.notes)
    (tmp_path / "body.inc").write_text("  A[i] = g(A[i]);\n")
    with pytest.raises(UsageError, match=r"^.*body.inc:1:10: call to g may write"):
        load_file(path)


def test_gnu_extensions_are_accepted() -> None:
    source = ("static inline void f(float * __restrict__ A, const float * __restrict B,\n"
              "                     int N) __attribute__((noinline, hot));\n"
              "void f(float * __restrict__ A, const float * __restrict B, int N) {\n"
              "  float T[64] __attribute__((aligned(64)));\n"
              "  for (int i = 0; i < N; i++) A[i] = B[i];\n}\n")
    analysis = loclab.analyze(source, language="c")
    assert analysis.loops[0].parallel and analysis.nest.line == 3


def test_preprocessor_errors_are_one_line() -> None:
    with pytest.raises(UsageError, match=r"^k.c:2: #error N must be even$"):
        loclab.analyze("#if N % 2\n#error N must be even\n#endif\nvoid f(void) { }\n",
                       language="c", filename="k.c", defines={"N": "3"})
    with pytest.raises(UsageError, match=r"^k.c:\d+: preprocessor: Macro M requires 2"):
        loclab.analyze("#define M(a, b) a\nvoid f(float *A) { A[0] = M(1); }\n",
                       language="c", filename="k.c")


def test_an_include_cycle_is_one_line_not_a_crash(capsys: pytest.CaptureFixture[str],
                                                  tmp_path: Path) -> None:
    (tmp_path / "a.h").write_text('#include "b.h"\n')
    (tmp_path / "b.h").write_text('#include "a.h"\n')
    kernel = tmp_path / "k.c"
    kernel.write_text('#include "a.h"\nvoid f(int n, float *A) { A[0] = 1; }\n')
    err = one_line_error(capsys, ["analyze", str(kernel)])
    assert "included more than 200 times: an #include cycle" in err


def test_c_chained_assignment_stores_right_to_left_in_one_statement() -> None:
    source = ("void f(float *A, float *B, int N) {\n  float x, y;\n"
              "  for (int i = 0; i < N; i++)\n    x = A[i] = y = B[i] * 2;\n}\n")
    analysis = loclab.analyze(source, language="c")
    (statement,) = analysis.nest.statements
    assert [(a.text, a.write) for a in statement.accesses] == [
        ("B[i]", False), ("y", True), ("A[i]", True), ("x", True)]
    assert statement.source == "x = A[i] = y = B[i] * 2"
    loop = analysis.loops[0]
    assert not loop.parallel and loop.parallel_after == ["privatize x", "privatize y"]
    assert {(d.kind, d.array) for d in analysis.dependences} == {("WAW", "x"), ("WAW", "y")}


def test_python_files_take_no_include_dirs_or_defines(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "k.py"
    path.write_text("def f(A, N):\n    for i in range(N):\n        A[i] = 0\n")
    err = one_line_error(capsys, ["analyze", str(path), "-D", "N=3"])
    assert "-I and -D (include_dirs, defines) apply to C files only" in err
    with pytest.raises(UsageError, match="apply to C files only"):
        loclab.analyze("def f(A, N):\n    pass\n", include_dirs=["."])


def test_a_define_that_breaks_the_code_is_named() -> None:
    with pytest.raises(UsageError, match=r"^k.c:1:22: before: 5: not C that loclab can read "
                                         r"\(the text here is the expansion of macro N, "
                                         r"defined with -D N=5\)$"):
        loclab.analyze("void f(float *A, int N) { A[0] = N; }\n", language="c",
                       filename="k.c", defines={"N": "5"})


def test_a_scop_inside_a_loop_fixes_the_loop_variable() -> None:
    source = ("void f(float *A, float *B, int N, int T) {\n  int t;\n"
              "  for (t = 0; t < T; t++) {\n#pragma scop\n"
              "    for (int i = 1; i < N; i++)\n      A[i] = A[i - 1] + B[t];\n"
              "#pragma endscop\n  }\n}\n")
    analysis = loclab.analyze(source, language="c")
    assert [loop.var for loop in analysis.nest.loops] == ["i"]
    assert "t" in analysis.nest.parameters
    assert analysis.notes == [
        "line 3: this loop holds a #pragma scop region but is outside it: its variables are "
        "fixed values in the region",
        "line 4: only the #pragma scop region (lines 4-7) is analyzed"]


@pytest.mark.parametrize("source, defines, hint", [
    ("void f(float *A, int N) {\n  for (int i = 0; i < N; i++) A[i] = Q;\n}\n", {"Q": ""},
     "k.c:2:39: Invalid expression: not C that loclab can read (macro Q expands to nothing "
     "here, as -D Q= defines it)"),
    ("#define Q\nvoid f(float *A, int N) {\n  for (int i = 0; i < N; i++) A[i] = Q;\n}\n", {},
     "k.c:3:39: Invalid expression: not C that loclab can read (macro Q expands to nothing "
     "here)"),
    ("#define PLUS +\nvoid f(float *A, int N) {\n  for (int i = 0; i < N; i++) "
     "A[i] = A[i] PLUS;\n}\n", {},
     "k.c:3:47: Invalid expression: not C that loclab can read (just after the expansion of "
     "macro PLUS)"),
    ("void f(float *A, int N) {\n  mytype x;\n}\n", {},
     "k.c:2:10: before: x: not C that loclab can read (mytype is not a type loclab knows: "
     "declare it with typedef, or give the directory of its header with -I DIR)"),
    ("void f(float *A, int N) {\n  for (int i = 0; i < N; i++) A[i] = (scalar) A[i];\n}\n", {},
     "k.c:2:47: before: A: not C that loclab can read (scalar is not a type loclab knows: "
     "declare it with typedef, or give the directory of its header with -I DIR)"),
])
def test_a_syntax_error_names_the_macro_or_type_behind_it(source: str, defines: dict[str, str],
                                                          hint: str) -> None:
    with pytest.raises(UsageError) as info:
        loclab.analyze(source, language="c", filename="k.c", defines=defines)
    assert str(info.value) == hint


def test_an_include_directory_that_is_a_file_is_named(tmp_path: Path) -> None:
    header = tmp_path / "k.h"
    header.write_text("")
    with pytest.raises(UsageError, match=r"^-I .*k.h: not a directory \(-I takes the "
                                         r"directory that holds the headers\)$"):
        loclab.analyze("void f(void) { }\n", language="c", include_dirs=[header])


@pytest.mark.parametrize("language, source, text", [
    ("c", "void f(float *A, int N) {\n  for (int i = 0; i < N; i++) A[i] = A[i] + \\\n"
          "     1;\n}\n", "A[i] = A[i] + 1"),
    ("c", "void f(float *A, int N) {\n  for (int i = 0; i < N; \\  \n i++) A[i] = 0;\n}\n",
     "for (int i = 0; i < N; i++)"),
    ("python", "def f(A, N):\n    for i in range(N):\n        A[i] = A[i] \\\n            + 1\n",
     "A[i] = A[i] + 1"),
    ("python", "def f(A, N):\n    for i in range(N):\n        A[i] = len('a\\\\') + \\\n"
               "            A[i]  # x \\\n", "A[i] = len('a\\\\') + A[i]"),
])
def test_a_continued_line_reads_as_one_line(language: str, source: str, text: str) -> None:
    nest = loclab.analyze(source, language=language).nest
    shown = [loop.header for loop in nest.loops] + [s.source for s in nest.statements]
    assert text in shown
