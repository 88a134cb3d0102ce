"""Loop versioning: code from ``transform`` and ``optimize`` computes what the original
computes when arguments share memory (the same array twice, overlapping views), and says
so; C without ``restrict`` is refused with the remedy; ``--assume-distinct`` drops it."""

from __future__ import annotations

import ctypes
import functools
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import loclab
from loclab.cli import main
from loclab.errors import UsageError
from loclab.transform import transform, transform_file

SHIFT = """\
def shift(a, b, n):
    for i in range(1, n):
        a[i] = b[i - 1] + 1
"""
STENCIL = """\
def smooth(out, inp, n, m):
    for i in range(1, n - 1):
        for j in range(1, m - 1):
            out[i][j] = inp[i - 1][j] + inp[i + 1][j] + inp[i][j - 1] + inp[i][j + 1]
"""
MATMUL = """\
def matmul(A, B, C, n):
    for i in range(n):
        for j in range(n):
            for k in range(n):
                C[i][j] += A[i][k] * B[k][j]
"""

# ways a caller can pass one buffer as two arguments: (first, second) views of x
ALIASINGS_1D: dict[str, Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]] = {
    "same array": lambda x: (x, x),
    "views one apart": lambda x: (x[1:], x[:-1]),
    "views the other way": lambda x: (x[:-1], x[1:]),
    "interleaved": lambda x: (x[::2], x[1::2]),
    "reversed": lambda x: (x, x[::-1]),
    "distinct": lambda x: (x.copy(), x),
}


def original(source: str) -> Callable[..., None]:
    namespace: dict[str, object] = {}
    exec(source, namespace)  # noqa: S102
    return namespace[source.split("(")[0].removeprefix("def ")]  # type: ignore[return-value]


@functools.cache
def shifted(emit: str) -> Callable[..., None]:
    """The versioned shift, compiled once per emitter (Numba takes a second or two)."""
    result = transform(SHIFT, "stripmine(i, 4); parallel(ii)", emit=emit)
    assert result.overlaps == [("b", "a")] and any("share memory" in n for n in result.notes)
    return result.compile()


@pytest.mark.parametrize("emit", ["python", "numba"])
@pytest.mark.parametrize("how", list(ALIASINGS_1D))
def test_an_aliased_call_computes_what_the_original_computes(emit: str, how: str) -> None:
    fast, slow = shifted(emit), original(SHIFT)
    x, y = np.arange(17.0), np.arange(17.0)
    a1, b1 = ALIASINGS_1D[how](x)
    a2, b2 = ALIASINGS_1D[how](y)
    n = min(len(a1), len(b1))
    slow(a1, b1, n)
    fast(a2, b2, n)
    np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("emit", ["python", "numba"])
def test_two_dimensional_views_run_as_written(emit: str) -> None:
    result = transform(STENCIL, "tile(i=2, j=2); parallel(ii)", emit=emit)
    fast, slow = result.compile(), original(STENCIL)
    for first, second in [(slice(1, None), slice(None, -1)), (slice(None), slice(None))]:
        x = np.random.default_rng(1).random((9, 8))
        y = x.copy()
        slow(x[first], x[second], 8, 8) if first.start else slow(x, x, 9, 8)
        fast(y[first], y[second], 8, 8) if first.start else fast(y, y, 9, 8)
        np.testing.assert_array_equal(x, y)


def test_distinct_arrays_take_the_transformed_loops() -> None:
    """On distinct arrays the check is false and the transformed branch runs: a parallel
    matmul over C with A and B apart equals NumPy's product."""
    fast = transform(MATMUL, "interchange(i, k); parallel(j)", emit="numba").compile()
    rng = np.random.default_rng(2)
    a, b = rng.random((6, 6)), rng.random((6, 6))
    c = np.zeros((6, 6))
    fast(a, b, c, 6)
    np.testing.assert_allclose(c, a @ b)


def test_assume_distinct_leaves_the_check_out() -> None:
    checked = transform(SHIFT, "parallel(i)", emit="numba")
    trusted = transform(SHIFT, "parallel(i)", emit="numba", assume_distinct=True)
    assert "_loclab_overlap(b, a)" in checked.source and "_loclab_overlap" not in trusted.source
    assert "np.may_share_memory(b, a)" in transform(SHIFT, "parallel(i)").source
    assert not trusted.overlaps
    # the analysis of the result is that of the transformed loops, for distinct arrays
    assert transform(SHIFT, "parallel(i)").analyze().loops[0].parallel


def test_no_step_no_check() -> None:
    assert "may_share_memory" not in transform(SHIFT, "", empty=True).source


C_SHIFT = "void shift(float *a, float *b, int n) {\n  for (int i = 1; i < n; i++)\n" \
          "    a[i] = b[i-1] + 1;\n}\n"
C_MATMUL = """\
void mm(int n, int m, float A[n][m], float B[m][n], float C[n][n]) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      for (int k = 0; k < m; k++)
        C[i][j] += A[i][k] * B[k][j];
}
"""
compiler = pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None,
                              reason="no C compiler")


def c_function(source: str, name: str, scratch: Path, label: str) -> Callable[..., None]:
    from loclab.transform.verify_c import _library

    address = _library(source, f"{label}.c", name, str(scratch), label, [])
    return ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int)(address)


@compiler
@pytest.mark.parametrize("offsets", [(0, 0), (1, 0), (0, 1), (3, 0), (0, 40)])
def test_c_versioned_code_computes_what_the_original_computes(tmp_path: Path,
                                                              offsets: tuple[int, int]) -> None:
    """Pointers into one buffer at offsets: the spans checked at run time decide."""
    result = transform_file(_write(tmp_path, "shift.c", C_SHIFT), "shift",
                            "stripmine(i, 4); parallel(ii)")
    assert "if their spans meet, run as written" in result.source
    slow = c_function(C_SHIFT, "shift", tmp_path, "original")
    fast = c_function(result.source, "shift", tmp_path, "versioned")
    expected = np.arange(64, dtype=np.float32)
    got = expected.copy()
    slow(expected.ctypes.data + 4 * offsets[0], expected.ctypes.data + 4 * offsets[1], 20)
    fast(got.ctypes.data + 4 * offsets[0], got.ctypes.data + 4 * offsets[1], 20)
    np.testing.assert_array_equal(got, expected)


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text)
    return path


def test_c_versioning_and_its_refusals(tmp_path: Path) -> None:
    shift = _write(tmp_path, "shift.c", C_SHIFT)
    assert "sizeof(*b)" in transform_file(shift, "shift", "parallel(i)").source
    assert "spans meet" not in transform_file(shift, "shift", "parallel(i)",
                                              assume_distinct=True).source
    restrict = _write(tmp_path, "restrict.c", C_SHIFT.replace("float *a", "float *restrict a"))
    assert "spans meet" not in transform_file(restrict, "shift", "parallel(i)").source
    matmul = transform_file(_write(tmp_path, "mm.c", C_MATMUL), "mm", "interchange(j, k)")
    assert "(const char *)A + 0 * sizeof(**A) < (const char *)C + ((n - 1) * (n) + n)" \
        in matmul.source
    gather = _write(tmp_path, "gather.c", "void g(float *a, float *b, int *x, int n) {\n"
                    "  for (int i = 0; i < n; i++)\n    a[x[i]] = b[i];\n}\n")
    with pytest.raises(UsageError, match=r"gather.c:1: a\[x\[i\]\] depends on data: loclab "
                       r"cannot bound the memory of a .* or pass --assume-distinct$"):
        transform_file(gather, "g", "stripmine(i, 4)")


def test_the_cli_says_it_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, "g.c", "void g(float *a, float *b, int *x, int n) {\n"
                  "  for (int i = 0; i < n; i++)\n    a[x[i]] = b[i];\n}\n")
    assert main(["transform", f"{path}::g", "--apply", "stripmine(i, 4)"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--assume-distinct" in err
    assert main(["transform", f"{path}::g", "--apply", "stripmine(i, 4)",
                 "--assume-distinct"]) == 0
    py = tmp_path / "shift.py"
    py.write_text(SHIFT)
    assert main(["analyze", f"{py}::shift"]) == 0
    out = capsys.readouterr().out
    assert "PARALLEL if b and a do not overlap" in out and "O1 RAW a[i] -> b[i - 1]" in out


def gpu_module(assume_distinct: bool = False) -> str:
    from loclab.optimize import plan
    from loclab.optimize.cuda import gpu_plan

    planned = plan(SHIFT, "shift", assume_distinct=assume_distinct)
    return gpu_plan(planned).emit({"a": (np.dtype("float64"), 1),
                                   "b": (np.dtype("float64"), 1)}, {}).module


def test_the_gpu_module_runs_shared_memory_as_written_on_the_host() -> None:
    module = gpu_module()
    assert "if _shared(b, a):" in module and "return _on_host(_as_written, (a, b, n,))" in module
    assert "def _as_written(a, b, n):\n    for i in range(1, n):" in module
    compile(module, "<module>", "exec")
    assert "_shared(" not in gpu_module(assume_distinct=True)


@pytest.mark.gpu
def test_an_aliased_call_of_the_gpu_module_computes_what_the_original_computes() -> None:
    import cupy as cp

    namespace: dict[str, object] = {}
    exec(gpu_module(), namespace)  # noqa: S102
    fast, slow = namespace["shift"], original(SHIFT)
    for how in ("same array", "views one apart", "views the other way", "distinct"):
        expected = np.arange(300.0)
        got = cp.asarray(expected)
        a1, b1 = ALIASINGS_1D[how](expected)
        a2, b2 = ALIASINGS_1D[how](got)
        n = min(len(a1), len(b1))
        slow(a1, b1, n)
        fast(a2, b2, n)  # type: ignore[operator]
        np.testing.assert_array_equal(cp.asnumpy(got), expected, err_msg=how)
