"""Scalar temporaries written into their uses (``loclab.optimize.temporaries``): only where
that is an identity, every line left where it was, and the GPU mapping then free to reorder
the band the temporary broke."""

from __future__ import annotations

import numpy as np
import pytest

from loclab.optimize.temporaries import inline_temporaries

SAXPY = """
def f(A, B, C, alpha, N, M, K):
    for i in range(N):
        for k in range(K):
            a = alpha * A[i, k]
            for j in range(M):
                C[i, j] += a * B[k, j]
"""


def test_a_temporary_of_invariant_values_is_written_into_its_uses_line_for_line():
    text, inlined = inline_temporaries(SAXPY, "f")
    assert [(i.name, i.line, i.value) for i in inlined] == [("a", 5, "alpha * A[i, k]")]
    assert text.splitlines()[4].strip() == "pass"
    assert text.splitlines()[6].strip() == "C[i, j] += (alpha * A[i, k]) * B[k, j]"
    assert len(text.splitlines()) == len(SAXPY.splitlines())


# a temporary read in the loop beside it, then one line that keeps it (below)
READ_IN_ITS_LOOP = """
def f(A, C, N, M):
    for i in range(N):
        a = A[i, 0]
        for j in range(M):
            C[i, j] = a
"""
KEPT = {
    "the array it reads is written": """
def f(A, C, N, M):
    for i in range(N):
        a = A[i, 0]
        for j in range(M):
            A[i, j] = a * 2.0
""",
    "it is read after its loop": READ_IN_ITS_LOOP + "    C[0, 0] = a\n",
    "it is assigned twice": READ_IN_ITS_LOOP + "        a = 1.0\n",
    "it is read before it in the body": """
def f(A, C, N, M):
    a = 0.0
    for i in range(N):
        C[i, 0] = a
        a = A[i, 1]
        for j in range(M):
            C[i, j] += a
""",
    "a loop after it rebinds what it reads": """
def f(A, C, N, M):
    for i in range(N):
        for k in range(M):
            a = A[i, k]
            for k in range(M):
                C[i, k] += a
""",
    "its value calls an unknown function": """
def f(A, C, N, M):
    for i in range(N):
        a = g(A[i, 0])
        for j in range(M):
            C[i, j] = a
""",
    "its value reads a scalar the loops change": """
def f(A, C, N, M):
    s = 0.0
    for i in range(N):
        s += A[i, 0]
        a = 2.0 * s
        for j in range(M):
            C[i, j] = a
""",
    "its value reads an array a call may write": """
def f(A, C, N, M):
    for i in range(N):
        a = A[i, 0]
        np.copyto(A, C)
        for j in range(M):
            C[i, j] = a
""",
}


def test_the_same_temporary_alone_is_written_into_its_use():
    assert inline_temporaries(READ_IN_ITS_LOOP, "f")[1]


@pytest.mark.parametrize("source", KEPT.values(), ids=KEPT.keys())
def test_a_temporary_is_kept_where_writing_it_into_its_uses_could_change_a_value(source):
    assert inline_temporaries(source, "f") == (source, ())


RUNNABLE = [SAXPY, """
def f(A, B, C, alpha, N, M, K):
    for i in range(N):
        for k in range(K):
            a = abs(A[i, k] - alpha) + min(B[k, 0], 0.5)
            b = -a
            for j in range(M):
                C[i, j] += a * B[k, j]
                C[i, j] -= 0.5 * a
        C[i, 0] += 1.0
""", """
def f(A, B, C, alpha, N, M, K):
    for i in range(N):
        t = A[i, 0] * alpha
        for j in range(M):
            if B[0, j] > 0.5:
                C[i, j] = t
            else:
                C[i, j] = -t
""" + "\n"]


@pytest.mark.parametrize("source", RUNNABLE)
def test_the_rewritten_function_computes_exactly_what_the_original_does(source):
    text, inlined = inline_temporaries(source, "f")
    assert inlined
    rng = np.random.default_rng(7)
    A, B, C = rng.random((6, 5)), rng.random((5, 7)), rng.random((6, 7))
    results = []
    for code in (source, text):
        namespace: dict = {}
        exec(compile(code, "<nest>", "exec"), namespace)
        out = C.copy()
        namespace["f"](A, B, out, 0.3, 6, 7, 5)
        results.append(out)
    assert np.array_equal(results[0], results[1])


# an index named before the accesses that use it, as code ported from C writes it
FLAT_INDEX = """
def f(A, B, nx, ny, nz):
    for z in range(nz):
        for y in range(1, ny - 1):
            for x in range(nx):
                c = x + nx * y + nx * ny * z
                n = x + nx * (y - 1) + nx * ny * z
                w = max(x - 1, 0) + nx * y + nx * ny * z
                B[c] = A[c] + A[n] + A[w]
"""


def test_an_index_temporary_is_written_into_its_subscripts_and_the_nest_gets_a_grid():
    from loclab.optimize import plan
    from loclab.optimize.cuda import gpu_plan

    text, inlined = inline_temporaries(FLAT_INDEX, "f")
    assert [(i.name, i.index) for i in inlined] == [("c", True), ("n", True), ("w", True)]
    assert "the subscripts that read it are then affine" in inlined[0].text()
    assert text.splitlines()[8].strip() == (
        "B[(x + nx * y + nx * ny * z)] = A[(x + nx * y + nx * ny * z)] + "
        "A[(x + nx * (y - 1) + nx * ny * z)] + A[(max(x - 1, 0) + nx * y + nx * ny * z)]")
    mapped = gpu_plan(plan(text, "f", params={"nx": 40, "ny": 30, "nz": 20}))
    assert [[g.var for g in m.grid] for m in mapped.mappings] == [["z", "y", "x"]]
    # an index read from an array is left as written (no gain: still data)
    indirect = FLAT_INDEX.replace("c = x + nx * y + nx * ny * z", "c = A[x]")
    assert "c" not in [i.name for i in inline_temporaries(indirect, "f")[1]]


def test_the_gpu_mapping_reorders_the_band_a_temporary_broke():
    from pathlib import Path

    from loclab.optimize import plan
    from loclab.optimize.cuda import gpu_plan

    path = Path(__file__).parent.parent / "benchmarks" / "kernels" / "matmul_ikj.py"
    source, inlined = inline_temporaries(path.read_text(), "matmul_ikj")
    assert [i.name for i in inlined] == ["a"]
    mapped = gpu_plan(plan(source, "matmul_ikj", filename=str(path),
                           params={"N": 70, "M": 60, "K": 50}))
    assert [[g.var for g in m.grid] for m in mapped.mappings] == [["i", "j"], ["i", "j"]]


def test_where_arguments_share_memory_the_gpu_module_runs_the_users_function(monkeypatch):
    # A and C may be one array: then the value of a, read before C[i, k] changes, is not
    # the value of the expression after; the module's fallback is the function as written
    import loclab.gpu
    from loclab.optimize import optimize

    monkeypatch.setattr(loclab.gpu, "gpu_unavailable_reason", lambda: "no GPU (test)")
    result = optimize(SAXPY, "f", target="gpu", tune=False,
                      params={"N": 40, "M": 30, "K": 20})
    module = result.source
    fallback = module[module.index("def _as_written("):]
    assert "a = alpha * A[i, k]" in fallback and "pass" not in fallback.split("\n\n\n")[0]
    assert any(note.startswith("a (line 5) written as (alpha * A[i, k])")
               for note in result.notes)
