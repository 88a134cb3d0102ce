"""Names CUDA C would misread (``cuda.names``): C++ keywords and the names the kernel writer
declares are renamed before a function's nests become kernels, lines kept; the module then
compiles (nvcc, where installed), ``--param`` and an inputs function still speak the user's
names, and, on a GPU, the result agrees with the original."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from loclab.optimize import optimize
from loclab.optimize.cuda.names import c_safe_names
from tests.test_optimize_gpu import QUICK, nvcc_compiled

STENCIL = """
def jacobi(old, new, long, T):
    for t in range(T):
        for i in range(1, long - 1):
            tid = old[i - 1] + old[i + 1]
            new[i] = 0.5 * tid + float(int(2)) * old[i]
        for i in range(1, long - 1):
            old[i] = new[i]
"""


def test_keywords_and_the_writers_names_are_renamed_in_place():
    source, renamed = c_safe_names(STENCIL, "jacobi")
    assert {(r.name, r.new) for r in renamed} == {("new", "new_u"), ("long", "long_u"),
                                                  ("tid", "tid_u")}
    assert "def jacobi(old, new_u, long_u, T):" in source
    assert "float(int(2))" in source  # builtins the function only reads stay
    assert len(source.splitlines()) == len(STENCIL.splitlines())
    assert "tid is called tid_u" in next(r for r in renamed if r.name == "tid").text()


@pytest.mark.parametrize("name,renamed", [
    ("k0", True), ("t_i", True), ("first_i", True), ("A_n0", True), ("alpha_in", True),
    ("A_copy", True), ("i_1", True), ("j_mma0", True), ("h3", True), ("ok_1", True),
    ("y_1", False), ("s_z", False), ("temp2", False), ("kernel", False)])
def test_a_name_is_renamed_where_the_writer_could_make_it_from_anothers(name, renamed):
    source = f"""
def f(A, alpha, N):
    {name} = 1.0
    for i in range(N):
        for j in range(N):
            for k in range(N):
                A[i, j] += alpha * {name}
"""
    _, found = c_safe_names(source, "f")
    assert bool(found) is renamed


def test_a_function_with_no_such_name_is_left_as_it_is():
    source = "def f(A, N):\n    for i in range(N):\n        A[i] = 0.0\n"
    assert c_safe_names(source, "f") == (source, ())


def test_a_renamed_function_compiles_and_speaks_the_users_names(tmp_path):
    asked = []

    def inputs(long, T):
        asked.append((long, T))
        rng = np.random.default_rng(0)
        return {"old": rng.random(long), "new": np.zeros(long), "long": long, "T": T}

    result = optimize(STENCIL, "jacobi", target="gpu", params={"long": 300, "T": 4},
                      inputs=inputs, timing=QUICK)
    assert any("new is called new_u" in note for note in result.notes)
    assert asked and all(size == 300 for size, _ in asked)
    if shutil.which("nvcc"):
        run = nvcc_compiled(result.transformed, tmp_path)  # the CudaFunction
        assert run.returncode == 0, run.stderr


@pytest.mark.gpu
def test_a_renamed_function_agrees_with_the_original_on_the_gpu():
    result = optimize(STENCIL, "jacobi", target="gpu", params={"long": 3000, "T": 5},
                      timing=QUICK)
    assert result.verification.ok and result.check.valid, result.notes


# a size whose name ends in ``_`` (the kernel's signature once dropped it: ``len``), and a
# loop variable named like a scalar an earlier nest assigned (it binds its own value)
WINDOW_AND_CLASSES = """
def f(X, labels, sums, means, W, I, len_, k):
    for i in range(I):
        c = labels[i]
        sums[c] += X[i, 0]
    for c in range(k):
        means[c] = sums[c] / len_
    for i in range(I):
        for j in range(1, len_):
            W[i, j] = max(X[i, j], X[i, j - 1])
"""


def test_a_trailing_underscore_and_a_reused_loop_name_reach_the_kernels(tmp_path):
    def inputs(I, len_, k):
        rng = np.random.default_rng(0)
        return {"X": rng.random((I, len_)), "labels": rng.integers(0, k, I),
                "sums": np.zeros(k), "means": np.zeros(k), "W": np.zeros((I, len_)),
                "I": I, "len_": len_, "k": k}

    result = optimize(WINDOW_AND_CLASSES, "f", target="gpu",
                      params={"I": 300, "len_": 40, "k": 5}, inputs=inputs, timing=QUICK)
    assert "const I_ len_" in result.transformed.source or \
        "const I len_" in result.transformed.source
    if shutil.which("nvcc"):
        run = nvcc_compiled(result.transformed, tmp_path)
        assert run.returncode == 0, run.stderr
    if result.verification is not None:  # on a GPU: run against the original
        assert result.verification.ok and result.check.valid, result.notes
