"""``analyze`` and ``transform`` on hostile input (issue 31): deep expressions and nests,
unbounded recipes, many functions, functions defined twice, malformed recipes, bad
``--param`` values, files that are not source. Each answer is one line and exit 2, or a
bounded analysis; never a traceback, a RecursionError or a hang."""

from __future__ import annotations

import itertools
import json
import math
import multiprocessing
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import loclab
from loclab.cli import main
from loclab.deps.interchange import Row, count_legal_orders
from loclab.errors import UsageError
from loclab.nest import deep
from loclab.transform import transform_file

MATMUL = ("def mm(A, B, C, N):\n    for i in range(N):\n        for j in range(N):\n"
          "            for k in range(N):\n                C[i][j] += A[i][k] * B[k][j]\n")
EIGHT = "def s(A, N):\n    for i in range(N):\n        for j in range(8):\n" \
        "            A[i][j] = A[i][j] + 1\n"


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    return lines[0]


def sum_of(terms: int, language: str) -> str:
    """``a[i] = b[i] + b[i] + ...``: an expression nested ``terms`` deep."""
    total = " + ".join(["b[i]"] * terms)
    if language == "python":
        return f"def f(a, b, N):\n    for i in range(N):\n        a[i] = {total}\n"
    return (f"void f(float *a, float *b, int N) {{\n  for (int i = 0; i < N; i++)\n"
            f"    a[i] = {total};\n}}\n")


def perfect_nest(depth: int) -> str:
    loops = "".join(f"{'    ' * (k + 1)}for i{k} in range(N):\n" for k in range(depth))
    element = "".join(f"[i{k}]" for k in range(depth))
    return f"def f(A, N):\n{loops}{'    ' * (depth + 1)}A{element} = A{element} + 1\n"


# -- 1. deep recursion ------------------------------------------------------------------------
@pytest.mark.parametrize("language, suffix", [("python", "py"), ("c", "c")])
def test_a_sum_of_thousands_of_terms_is_analyzed(tmp_path: Path, language: str,
                                                  suffix: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, f"k.{suffix}", sum_of(1500, language))
    assert main(["analyze", str(path), "--json"]) == 0
    (analysis,) = json.loads(capsys.readouterr().out)
    assert analysis["loops"][0]["parallel_if_distinct"] and len(analysis["dependences"]) == 0


@pytest.mark.parametrize("language, suffix", [("python", "py"), ("c", "c")])
def test_nesting_past_the_limit_is_one_line_naming_the_place(
        tmp_path: Path, language: str, suffix: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(deep, "MAX_NESTING", 40)
    path = write(tmp_path, f"k.{suffix}", sum_of(60, language))
    assert main(["analyze", str(path)]) == 2
    error = one_line_error(capsys)
    assert error.startswith(f"loclab analyze: error: {path}:3:")
    assert "an expression nested more than 40 levels deep" in error


def test_a_recursion_past_the_worker_s_limit_is_a_usage_error() -> None:
    def forever(depth: int) -> int:
        return forever(depth + 1)

    with pytest.raises(UsageError, match=r"^here: nested too deeply for loclab"):
        deep.on_deep_stack("here", lambda: forever(0))


def test_the_deep_stack_gives_back_results_errors_and_the_recursion_limit() -> None:
    import sys

    limit = sys.getrecursionlimit()
    assert deep.on_deep_stack("x", lambda: deep.on_deep_stack("y", lambda: 42)) == 42
    with pytest.raises(KeyError):
        deep.on_deep_stack("x", lambda: {}["missing"])
    assert sys.getrecursionlimit() == limit


def test_a_transformed_sum_of_thousands_of_terms_is_emitted(tmp_path: Path) -> None:
    path = write(tmp_path, "k.py", sum_of(1500, "python"))
    result = transform_file(path, None, "parallel(i)", assume_distinct=True)
    assert result.source.count("b[i]") == 1500


# -- 2. unbounded recipes ---------------------------------------------------------------------
@pytest.mark.parametrize("recipe, message", [
    ("unroll(j, 100000)", "unroll(j, 100000): bad unroll factor 100000: loclab takes at "
                          "most 64"),
    ("unroll(j, 1000)", "unroll(j, 1000): bad unroll factor 1000: loclab takes at most 64"),
    ("unroll(i, 16, jam=True); unroll(j, 16, jam=True)",
     "unroll(j, 16, jam=True): unrolling by 16 would turn 17 statements into 289: loclab "
     "makes at most 128"),
    ("stripmine(i, 4); unroll(i, 8)", "unroll(i, 8): bad unroll factor 8: i@2 runs only 4 "
                                      "iterations"),
    ("tile(i=100000000000000000000)", "tile(i=100000000000000000000): bad tile size "
                                      "100000000000000000000: loclab takes at most "
                                      "2,147,483,647"),
    ("stripmine(j, 4294967296)", "bad tile size 4294967296"),
])
def test_unbounded_unrolling_and_tiling_are_refused_at_once(
        tmp_path: Path, recipe: str, message: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "mm.py", MATMUL)
    assert main(["transform", str(path), "--apply", recipe]) == 2
    assert message in one_line_error(capsys)


def test_unrolling_past_a_constant_trip_count_names_it() -> None:
    with pytest.raises(UsageError, match=r"bad unroll factor 16: j@3 runs only 8 "
                                         r"iterations"):
        loclab.transform(EIGHT, "unroll(j, 16)")
    assert "A[i][7]" in loclab.transform(EIGHT, "unroll(j, 8)").source


# -- 3. many functions ------------------------------------------------------------------------
def many_functions(count: int) -> str:
    return "".join(f"def f{k}(A, N):\n    for i in range(1, N):\n"
                   f"        A[i] = A[i - 1] + {k}\n\n" for k in range(count))


def test_a_file_s_analysis_tells_its_progress(tmp_path: Path) -> None:
    path = write(tmp_path, "k.py", many_functions(3))
    calls: list[tuple[int, int, str]] = []
    analyses = loclab.analyze_file(path, progress=lambda *call: calls.append(call))
    assert len(analyses) == 3
    assert calls == [(1, 3, "reading functions"), (2, 3, "reading functions"),
                     (3, 3, "reading functions"), (1, 3, "analyzing functions"),
                     (2, 3, "analyzing functions"), (3, 3, "analyzing functions")]


def test_a_long_analysis_logs_its_progress_where_stderr_is_not_a_terminal(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    import loclab.cli

    monkeypatch.setattr(loclab.cli, "PROGRESS_SECONDS", 0)
    path = write(tmp_path, "k.py", many_functions(3))
    assert main(["analyze", str(path), "--json"]) == 0
    captured = capsys.readouterr()
    assert len(json.loads(captured.out)) == 3
    assert "loclab analyze: analyzing functions: 2 of 3\n" in captured.err
    assert "3 of 3" not in captured.err  # the end is the output itself


FORKS = pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(),
                           reason="the pool of a large file's analysis forks")


def pooled(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Analyze every file in a pool of two workers, however small, one function a message
    (so that both work); the list gets the number of workers of each pool started."""
    from loclab.deps import parallel

    started: list[int] = []
    in_pool = parallel._in_pool

    def spy(nests: list, params: object, workers: int, assume_distinct: bool) -> object:
        started.append(workers)
        return in_pool(nests, params, workers, assume_distinct)

    monkeypatch.setattr(parallel, "worker_count", lambda functions: 2)
    monkeypatch.setattr(parallel, "CHUNK", 1)
    monkeypatch.setattr(parallel, "_in_pool", spy)
    return started


@FORKS
def test_a_pool_of_processes_analyzes_a_file_as_one_process_does(
        monkeypatch: pytest.MonkeyPatch) -> None:
    path = Path(__file__).resolve().parents[1] / "examples" / "loops.py"

    def analyze() -> tuple[list[object], list[str], list[tuple[int, int, str]]]:
        calls: list[tuple[int, int, str]] = []
        analyses = loclab.analyze_file(path, progress=lambda *call: calls.append(call))
        return [a.to_json() for a in analyses], [a.explain() for a in analyses], calls

    alone = analyze()
    started = pooled(monkeypatch)
    assert analyze() == alone  # the same analyses, in order, with the same progress
    assert started == [2]


@FORKS
def test_a_worker_s_error_is_raised_as_one_process_raises_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from loclab.deps import parallel

    def refuse(nest: object, params: object, assume_distinct: bool) -> None:
        raise UsageError(f"{nest.name}: refused")  # type: ignore[attr-defined]

    monkeypatch.setattr(parallel, "analyze_nest", refuse)
    path = write(tmp_path, "k.py", many_functions(3))
    with pytest.raises(UsageError, match="^f0: refused$"):
        loclab.analyze_file(path)
    started = pooled(monkeypatch)
    with pytest.raises(UsageError, match="^f0: refused$"):
        loclab.analyze_file(path)
    assert started == [2]


def test_a_read_that_never_runs_keeps_no_variable_from_being_privatized() -> None:
    """Privatizing is ruled out without isl's dataflow where a read has no write of its
    iteration before it (no such dependence); the read of t in the empty loop has none,
    and needs none."""
    source = ("def f(A, N):\n    for i in range(2, N):\n        t = 1.0\n"
              "        for j in range(i, i - 2):\n            t += A[j]\n        A[i] = t\n")
    assert loclab.analyze(source).loop("i").parallel_after == ["privatize t"]


def test_a_c_line_of_thousands_of_tokens_is_mapped_back_exactly(tmp_path: Path) -> None:
    path = write(tmp_path, "k.c", sum_of(800, "c"))
    (analysis,) = loclab.analyze_file(path)
    reads = analysis.nest.statements[0].reads
    assert [a.text for a in reads[:2]] == ["b[i]", "b[i]"]
    assert analysis.nest.statements[0].source.endswith("b[i] + b[i]")


# -- 4. a function defined twice --------------------------------------------------------------
TWICE = "def f(A, N):\n    for i in range(N):\n        A[i] = 0\n\n" \
        "def f(A, N):\n    for i in range(1, N):\n        A[i] = A[i - 1]\n"
TWICE_C = "void f(float *A, int N) { for (int i = 0; i < N; i++) A[i] = 0; }\n" \
          "void f(float *A, int N) { for (int i = 1; i < N; i++) A[i] = A[i - 1]; }\n"


ANALYZE, TRANSFORM, OPTIMIZE = ["analyze"], ["transform", "--apply", "parallel(i)"], \
    ["optimize", "--no-tune"]


@pytest.mark.parametrize("name, text, first, second, command", [
    *[("k.py", TWICE, 1, 5, command) for command in (ANALYZE, TRANSFORM, OPTIMIZE)],
    *[("k.c", TWICE_C, 1, 2, command) for command in (ANALYZE, TRANSFORM)]])  # no C optimize
def test_every_command_refuses_a_name_two_functions_share(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, text: str,
        first: int, second: int, command: list[str]) -> None:
    path = write(tmp_path, name, text)
    assert main([command[0], f"{path}::f", *command[1:]]) == 2
    assert one_line_error(capsys).endswith(
        f"{path}: f is defined 2 times ({path}:{first}, {path}:{second}): rename all but one")


def test_a_method_defined_twice_is_refused_as_class_dot_method(tmp_path: Path) -> None:
    body = "    def m(self, A, N):\n        for i in range(N):\n            A[i] = 0\n"
    path = write(tmp_path, "k.py", f"class C:\n{body}{body}")
    with pytest.raises(UsageError, match=r"C\.m is defined 2 times \(.*k\.py:2, .*k\.py:5\)"):
        loclab.analyze_file(path, "C.m")


def test_the_whole_file_analysis_warns_of_a_name_defined_twice(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "k.py", TWICE)
    assert main(["analyze", str(path), "--json"]) == 0
    captured = capsys.readouterr()
    assert [d["line"] for d in json.loads(captured.out)] == [1, 5]
    assert captured.err == (f"loclab analyze: warning: f is defined 2 times ({path}:1, "
                            f"{path}:5): each is analyzed, and FILE::f names none of them\n")


# -- 5. recipe errors -------------------------------------------------------------------------
@pytest.mark.parametrize("recipe, message", [
    ("tile(i=32 j=32)", "tile(i=32 j=32): bad tile size '32 j=32': a whole number, e.g. 8 "
                        "(is a ',' missing?)"),
    ("tile(i=0x20)", "tile(i=0x20): bad tile size '0x20': a whole number, e.g. 8"),
    ("tile(i=32.5, j=4)", "bad tile size '32.5'"),
    ("tile(i=3e2)", "bad tile size '3e2'"),
    ("tile(i=-4)", "tile size -4 must be a positive integer"),
    ("tile(i=32, i=8)", "tile(i=32, i=8): i given twice"),
    ("tile(i=8, i@2=8)", "tile(i=8, i@2=8): names the loop i@2 twice"),
    ("tile(i=32; j=32)", "';' inside the parentheses: steps are separated by ';', arguments "
                         "by ','"),
    ("tile(i=32) parallel(ii)", "'parallel(ii)' after the step's ')': separate steps with "
                                "';'"),
    ("tile(i=32,, j=32)", "an empty argument (a stray ',')"),
    ("tile(i=32", "tile(i=32: a step is name(args), e.g. tile(i=32, j=32) (a ')' is "
                  "missing)"),
    ("tile(=32)", "'=32' needs a name before '=' and a value after"),
    ("tile(3=4)", "'3' before '=' is not a loop or an option"),
    ("stripmine(i 32)", "'i 32' is not one argument (is a ',' missing?); usage stripmine("),
    ("interchange(i j)", "'i j' is not one argument (is a ',' missing?)"),
    ("unroll(j, four)", "bad unroll factor 'four': a whole number"),
    ("unroll(j, 4, jam=True, jam=False)", "jam given twice"),
    ("unroll(j, 4, jam=yes)", "unknown option jam=yes (unroll takes jam=True/False)"),
    ("permute(k, i, j, k)", "names the loop k@4 twice"),
])
def test_a_malformed_recipe_says_what_is_wrong(recipe: str, message: str) -> None:
    with pytest.raises(UsageError) as info:
        loclab.transform(MATMUL, recipe)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_expanding_by_one_loop_twice_is_refused() -> None:
    source = "def f(A, B, N):\n    for i in range(N):\n        t = A[i] * 2\n" \
             "        B[i] = t + 1\n"
    with pytest.raises(UsageError, match=r"^expand\(t, i, i\): names the loop i@2 twice$"):
        loclab.transform(source, "expand(t, i, i)")


def test_numbers_take_a_sign_and_underscores() -> None:
    assert "range(0, N, 32)" in loclab.transform(MATMUL, "tile(i=+3_2)").source


# -- 6. --param -------------------------------------------------------------------------------
@pytest.mark.parametrize("argv, message", [
    (["analyze", "{mm}", "--param", "N=-1"], "argument --param: N=-1: a size must be at "
                                              "least 1"),
    (["transform", "{mm}", "--apply", "parallel(i)", "--param", "N=0"],
     "argument --param: N=0: a size must be at least 1"),
    (["optimize", "{mm}", "--param", "N=-1"], "argument --param: N=-1: a size must be at "
                                              "least 1"),
    (["model", "cache", "{mm}::mm", "--param", "N=-4"], "N=-4: a size must be at least 1"),
    (["analyze", "{mm}", "--param", "N=3", "--param", "N=4"],
     "argument --param: N given twice (N=3, N=4)"),
    (["transform", "{mm}", "--apply", "parallel(i)", "--verify", "--param", "N=3",
      "--param", "N= 4"], "argument --param: N given twice (N=3, N=4)"),
    (["optimize", "{mm}", "--param", "N=3", "--param", "N=3"], "N given twice (N=3, N=3)"),
    (["model", "cache", "{mm}::mm", "--param", "N=4", "--param", "N=5"],
     "N given twice (N=4, N=5)"),
    (["analyze", "{mm}", "--param", "N=x"], "argument --param: N=x: not a whole number"),
])
def test_param_refuses_sizes_below_one_and_repeats_in_every_command(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str],
        message: str) -> None:
    path = write(tmp_path, "mm.py", MATMUL)
    with pytest.raises(SystemExit) as exited:
        main([part.format(mm=path) for part in argv])
    assert exited.value.code == 2
    assert one_line_error(capsys).endswith(message)


def test_param_without_verify_is_a_warning(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "mm.py", MATMUL)
    assert main(["transform", str(path), "--apply", "parallel(i)", "--param", "N=4"]) == 0
    assert capsys.readouterr().err.startswith(
        "loclab transform: warning: --param gives the sizes of --verify: without it, it does "
        "nothing\n")


@pytest.mark.parametrize("value", [-1, 2.5, True, "3"])
def test_the_api_refuses_a_size_that_is_not_a_count(value: object) -> None:
    with pytest.raises(UsageError, match=r"size N=.*: a size is a whole number, 0 or more"):
        loclab.analyze(MATMUL, params={"N": value})


def test_the_api_takes_numpy_sizes() -> None:
    import numpy as np

    assert loclab.analyze(MATMUL, params={"N": np.int64(4)}).params == {"N": 4}


# -- 7. deep perfect nests --------------------------------------------------------------------
@pytest.mark.parametrize("depth", [10, 12])
def test_a_deep_band_lists_a_few_orders_and_says_how_many_there_are(
        depth: int, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = write(tmp_path, "k.py", perfect_nest(depth))
    assert main(["analyze", str(path)]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert f"is a perfect band of {depth} loops with {math.factorial(depth):,} orders, " \
           f"{math.factorial(depth):,} of them legal: listed are only the order as written " \
           f"and the {depth - 1} swaps of adjacent loops" in text
    (analysis,) = loclab.analyze_file(path)
    assert len(analysis.interchanges) == depth
    assert "swaps of adjacent loops" in analysis.to_json()["notes"][-1]


def test_the_count_of_legal_orders_of_a_deep_band_is_exact() -> None:
    source = perfect_nest(6).replace("A[i0][i1][i2][i3][i4][i5] + 1",
                                     "A[i0 - 1][i1 + 1][i2][i3 - 1][i4][i5 + 1] + 1")
    analysis = loclab.analyze(source.replace("range(N)", "range(1, N - 1)"))
    (cut,) = analysis.cut_bands
    assert cut.legal == 360  # i0 or i3 (the '<' of the vector) leads the four non-'='


@settings(max_examples=60, deadline=None)
@given(size=st.integers(1, 6), data=st.data())
def test_counting_legal_orders_agrees_with_listing_them(size: int,
                                                       data: st.DataObject) -> None:
    vectors = data.draw(st.lists(st.lists(st.sampled_from("<=>"), min_size=size,
                                          max_size=size), max_size=4))
    rows = [Row(None, tuple(v)) for v in vectors]  # type: ignore[arg-type]

    def legal(order: tuple[int, ...]) -> bool:
        leads = [next((v[k] for k in order if v[k] != "="), "=") for v in vectors]
        return ">" not in leads

    expected = sum(legal(order) for order in itertools.permutations(range(size)))
    assert count_legal_orders(size, rows) == expected


# -- 8. the holes next to these ---------------------------------------------------------------
def test_a_nest_deeper_than_fifty_loops_is_refused_naming_the_loop(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "k.py", perfect_nest(51))
    assert main(["analyze", f"{path}::f"]) == 2
    assert one_line_error(capsys) == (f"loclab analyze: error: {path}:52:{4 * 51 + 1}: loop "
                                      "i50 is nested 51 loops deep: loclab analyzes nests of "
                                      "at most 50 loops")


def test_a_function_of_too_many_access_pairs_is_refused_up_front(tmp_path: Path) -> None:
    body = "".join(f"        a[i] = b[i] + {k}\n" for k in range(150))
    path = write(tmp_path, "k.py", f"def f(a, b, N):\n    for i in range(N):\n{body}")
    with pytest.raises(UsageError, match=r"k.py:1:1: f has 22,500 pairs of accesses to "
                                         r"check for dependences \(most: 150 writes of a "
                                         r"among its 150 accesses\): loclab checks at most "
                                         r"20,000 a function; split it$"):
        loclab.analyze_file(path)


@pytest.mark.parametrize("make, message", [
    (lambda d: d / "missing.py", "missing.py: no such file"),
    (lambda d: d, "is a directory; give a .py or .c file"),
    (lambda d: Path("/dev/null"), "/dev/null: not a regular file; give a .py or .c file"),
    (lambda d: (d / "latin.py", (d / "latin.py").write_bytes(b"# caf\xe9\n"))[0],
     "latin.py: not UTF-8 text (byte 0xe9 at offset 5): loclab reads source files as UTF-8"),
])
@pytest.mark.parametrize("command", [ANALYZE, TRANSFORM])
def test_what_is_not_a_source_file_is_named(tmp_path: Path, make, message: str,
                                            command: list[str],
                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert main([command[0], str(make(tmp_path)), *command[1:]]) == 2
    assert one_line_error(capsys).endswith(message)


@pytest.mark.parametrize("target, message", [
    ("{mm}::", "'{mm}::': no function name after '::' (FILE::NAME, or FILE alone)"),
    ("::mm", "'::mm': no file before '::' (FILE::NAME)"),
])
@pytest.mark.parametrize("command", [ANALYZE, TRANSFORM])
def test_an_empty_side_of_file_colon_colon_name_is_refused(
        tmp_path: Path, target: str, message: str, command: list[str],
        capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "mm.py", MATMUL)
    with pytest.raises(SystemExit) as exited:
        main([command[0], target.format(mm=path), *command[1:]])
    assert exited.value.code == 2
    assert one_line_error(capsys).endswith(message.format(mm=path))


def test_a_function_without_statements_says_none(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "k.py", "def f(A, N):\n    pass\n")
    assert main(["analyze", str(path)]) == 0
    assert "Loops and statements\n  none\n" in capsys.readouterr().out


def test_transform_takes_the_only_function_of_a_c_file(tmp_path: Path) -> None:
    path = write(tmp_path, "k.c", "void f(float *a, int n) {\n"
                                  "  for (int i = 0; i < n; i++)\n    a[i] = 0;\n}\n")
    assert "#pragma omp parallel for" in transform_file(path, None,
                                                                "parallel(i)").source
    path.write_text(TWICE_C.replace("void f", "void g", 1))
    with pytest.raises(UsageError, match=r"name the function to transform with ::NAME "
                                         r"\(functions: g, f\)"):
        transform_file(path, None, "parallel(i)")
