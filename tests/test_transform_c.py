"""``loclab transform`` on C: C out (OpenMP pragmas, the file around the function kept),
verified by compiling both versions with the system's compiler."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from loclab.cli import main
from loclab.errors import UsageError
from loclab.transform import transform, transform_file
from loclab.transform.steps import IllegalStep

EXAMPLES = Path(__file__).parent.parent / "examples"
HEAT = Path(__file__).parent / "data" / "c" / "heat" / "heat.c"
UTILITIES = Path(__file__).parent / "data" / "c" / "utilities"
compiler = pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None,
                              reason="no C compiler to verify with")


def function_text(source: str, signature: str) -> str:
    start = source.index(signature)
    end = source.index("\n}\n", start)
    return source[start:end + 3]


@compiler
@pytest.mark.parametrize("file, function, recipe", [
    ("case_studies.c", "matmul", "tile(i=8, j=8); unroll(j, 2, jam=True); parallel(ii)"),
    ("case_studies.c", "transposition", "tile(i=16, j=16); interchange(i, j); parallel(ii)"),
    ("case_studies.c", "loop_distribution", "distribute(i); parallel(i)"),
    ("case_studies.c", "histogram", "parallel(i)"),
    ("case_studies.c", "nearest_neighbor", "parallel(i)"),
    ("case_studies.c", "putting_everything_together",
     "privatize(A); parallel(i); interchange(t, j@134)"),
    ("loops.c", "array_expansion", "distribute(i); parallel(i)"),
    ("loops.c", "three_loops_2", "interchange(i, j); parallel(i)"),
    ("privatization.c", "eliminating_war", "copy(A, i); parallel(i)"),
    ("privatization.c", "eliminating_waw", "privatize(A); parallel(i)"),
    ("reductions.c", "reduction", "parallel(i)"),
    ("case_studies.c", "matmul", "tile(i=8, j=8); stripmine(k, 4, kk); "
                                 "stage(A, kk, transpose=True); stage(B, kk)"),
])
def test_c_recipes_compile_and_compute_the_same(file: str, function: str, recipe: str) -> None:
    """With the check for shared memory (the versioned code compiles and, on distinct
    inputs, runs the transformed loops), except where a subscript depends on data
    (hist[ind]): there loclab cannot bound the span, and the test vouches instead."""
    result = transform_file(EXAMPLES / file, function, recipe,
                            assume_distinct=function == "histogram")
    assert result.emit == "c"
    check = result.verify()
    assert check.ok, str(check)


TRISOLV_C = """
void trisolv(int n, double L[n][n], double x[n], double b[n]) {
  for (int i = 0; i < n; i++) {
    x[i] = b[i];
    for (int j = 0; j < i; j++)
      x[i] -= L[i][j] * x[j];
    x[i] = x[i] / L[i][i];
  }
}
"""


@compiler
def test_c_holds_a_sum_into_an_element_in_a_scalar_its_simd_reduces() -> None:
    """``x[i]`` summed along ``j``: declared as a scalar of its type before the loop (which
    may not run: guarded), reduced by ``simd``, stored after it; compiled and compared."""
    result = transform(TRISOLV_C, "vectorize(j)", language="c")
    assert "__typeof__(x[i]) x_sum = x[i];" in result.source
    assert "#pragma omp simd reduction(+: x_sum)" in result.source
    assert "x_sum -= L[i][j] * x[j];" in result.source and "x[i] = x_sum;" in result.source
    assert "if (0 < i) {" in result.source
    assert result.verify(n=37).ok


SYRK_C = """
void syrk(int N, int M, double alpha, double A[N][M], double C[N][N]) {
    for (int i = 0; i < N; i++)
        for (int k = 0; k < M; k++)
            for (int j = 0; j <= i; j++)
                C[i][j] += alpha * A[i][k] * A[j][k];
}
"""


def test_c_packs_only_the_reads_staging_names_by_a_loop() -> None:
    """``using=j`` in C: the buffer holds ``A[j][k]``'s panel, transposed; ``A[i][k]`` is
    still read from ``A``."""
    result = transform(SYRK_C, "tile(i=8, k=8, j=8); stage(A, jj, transpose=True, using=j); "
                               "parallel(ii)", "syrk", language="c")
    assert "A_jj[(k) - A_jj_lo1][(j) - A_jj_lo0]" in result.source
    assert "alpha * A[i][k]" in result.source
    for sizes in ({"N": 21, "M": 13}, {"N": 3, "M": 9}):
        check = result.verify(**sizes)
        assert check.ok, str(check)


JACOBI_C = """
void jacobi(int T, int N, double A[N], double B[N]) {
    for (int t = 0; t < T; t++) {
        for (int i = 1; i < N - 1; i++)
            B[i] = (A[i - 1] + A[i] + A[i + 1]) / 3.0;
        for (int i = 1; i < N - 1; i++)
            A[i] = B[i];
    }
}
"""


def test_c_time_tiled_jacobi_runs_its_waves_of_tiles_in_parallel() -> None:
    """fuse and skew in C: the copy-back one row behind, the rows skewed by twice the step,
    square tiles in waves, the tiles of a wave under OpenMP; compiled and run at sizes the
    tiles cut in the middle."""
    result = transform(JACOBI_C, "fuse(i@4, i@6, 1); skew(i@4, t, 2); tile(t=4, i@4=4); "
                                 "skew(ii@4, tt); interchange(tt, ii@4); parallel(tt)",
                       "jacobi", language="c")
    assert "#pragma omp parallel for" in result.source
    for sizes in ({"T": 9, "N": 13}, {"T": 2, "N": 30}, {"T": 5, "N": 3}):
        check = result.verify(**sizes)
        assert check.ok, str(check)


def test_c_out_keeps_the_file_and_marks_parallel_loops() -> None:
    result = transform_file(EXAMPLES / "reductions.c", "reduction", "parallel(i)")
    original = (EXAMPLES / "reductions.c").read_text()
    assert result.source.startswith("/* loclab transform: reductions.c::reduction with "
                                    "parallel(i) */\n#ifndef loclab_min")
    assert function_text(result.source, "void scan_sum") == \
        function_text(original, "void scan_sum")
    text = function_text(result.source, "float reduction")
    assert "  #pragma omp parallel for reduction(+: x)\n  for (long i = 1; i < N; i++) {" in text
    assert text.count("#pragma omp") == 1  # the original's pragma is left out, and said
    assert "line 8: #pragma omp parallel for reduction(+:x) left out: the new loops carry " \
           "their own" in result.notes


def test_c_generalized_reductions_are_atomic_and_privates_declared_inside() -> None:
    text = function_text(transform_file(EXAMPLES / "case_studies.c", "histogram",
                                        "parallel(i)", assume_distinct=True).source,
                         "void histogram")
    assert "#pragma omp atomic\n" in text
    jammed = function_text(transform_file(EXAMPLES / "case_studies.c", "matmul",
                                          "unroll(j, 2, jam=True)",
                                          assume_distinct=True).source, "void matmul")
    assert "float tmp_0;\n" in jammed and "float tmp_1;\n" in jammed
    assert "tmp_1 += A[i][k] * B[k][(j + 1)];" in jammed


@compiler
def test_a_scop_region_is_the_nest_and_the_rest_stays() -> None:
    result = transform_file(HEAT, "kernel_heat", "parallel(i@32); interchange(i@35, j@36)",
                            assume_distinct=True,
                            include_dirs=[UTILITIES], defines={"TINY": "1"})
    text = result.source
    assert 'printf("not analyzed: outside the scop\\n");' in text
    assert "#pragma omp parallel for\n    for (long i = 1; i < n - 1; i++) {" in text
    assert result.verify().ok


def test_c_errors() -> None:
    with pytest.raises(IllegalStep, match=r"^interchange\(i, j\) is illegal: D1 S1->S1 RAW on "
                                          r"A \[<,>\] would become \[>,<\]$"):
        transform_file(EXAMPLES / "loops.c", "three_loops_3", "interchange(i, j)")
    with pytest.raises(UsageError, match="a c function is emitted as c"):
        transform_file(EXAMPLES / "loops.c", "three_loops_3", "parallel(j)", emit="numba")


def test_c_cli(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["transform", f"{EXAMPLES / 'loops.c'}::three_loops_3", "--apply",
                 "parallel(j)"]) == 0
    out = capsys.readouterr().out
    assert "#pragma omp parallel for\n    for (long j = 1; j < N + 1; j++) {" in out
