"""Products of doubles on the tensor cores (``loclab.optimize.cuda.mma``): which loops are
such products, the fragments' layout as a bijection of a block's iterations to its threads,
tile padding free of bank conflicts, the kernels written (and compiled by nvcc where it is
installed), and, on a GPU, every result against the original."""

from __future__ import annotations

import ast
import itertools
import re
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loclab.optimize import optimize, optimize_file, plan
from loclab.optimize.cuda import argument_types, gpu_plan
from loclab.optimize.cuda.mapping import Config
from loclab.optimize.cuda.mma import MmaLayout, layout_for, product, shared_pad
from loclab.optimize.measure import make_inputs
from tests.test_optimize_gpu import QUICK, SPILL_ALLOWANCE, nvcc_compiled

KERNELS = Path(__file__).parent / "data" / "kernels"


def loop_of(source: str) -> ast.For:
    return next(n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.For))


def sides(source: str) -> list[tuple[bool, str, str]] | None:
    found = product(loop_of(source), "i", "j")
    return None if found is None else [(t.negate, ast.unparse(t.rows), ast.unparse(t.columns))
                                       for t in found.terms]


# --- which loops are products ---------------------------------------------------------------

def test_a_product_splits_its_factors_by_the_grid_loop_each_reads():
    assert sides("for k in range(N):\n    C[i, j] += alpha * A[i, k] * B[k, j]") == [
        (False, "alpha * A[i, k]", "B[k, j]")]
    assert sides("for k in range(N):\n    C[i, j] = C[i, j] - B[k, j] * x[k] * A[i, k]") == [
        (True, "x[k] * A[i, k]", "B[k, j]")]
    assert sides("for k in range(N):\n    C[i, j] -= A[i, k] * B[k, j] / (n - 1.0)") == [
        (True, "A[i, k] / (n - 1.0)", "B[k, j]")]


def test_a_dot_product_summed_in_a_scalar_is_a_product_too():
    found = product(loop_of("for k in range(N):\n    total += A[k, i] * B[k, j]"), "i", "j")
    assert found is not None and found.scalar and found.name == "total"


def test_a_sum_of_products_is_one_term_each():
    # syr2k: two products, each its own instruction
    assert sides("for k in range(M):\n    C[i, j] += A[j, k] * alpha * B[i, k] - "
                 "B[j, k] * A[i, k]") == [(False, "alpha * B[i, k]", "A[j, k]"),
                                          (True, "A[i, k]", "B[j, k]")]


@pytest.mark.parametrize("source", [
    "for k in range(N):\n    C[i, j] += A[i, j] * B[k, j]",  # a factor on both loops
    "for k in range(N):\n    C[i, j] += A[i, k] / B[k, j]",  # a divisor on a grid loop
    "for k in range(N):\n    C[i, j] *= A[i, k]",  # not a sum
    "for k in range(N):\n    C[i, j] += A[i, k]\n    D[i, j] += B[k, j]",  # two statements
    "for k in range(N):\n    C[i, j] += A[i, k] * B[k, j] * C[i, j]",  # reads its target
    "for k in range(N):\n    C[i, j] = A[i, k] * B[k, j]"])  # not an update
def test_what_is_not_a_product_of_two_sides_is_refused(source):
    assert sides(source) is None


# --- the layout --------------------------------------------------------------------------------

def evaluate(text: str, **names: int) -> int:
    """The C text of an offset, evaluated as C's integer arithmetic does (all nonnegative)."""
    return eval(text.replace("/", "//"), {}, names)  # noqa: S307 - our own generated text


@pytest.mark.parametrize("block_x,block_y,rows,columns", [
    (32, 8, 4, 4), (16, 16, 4, 4), (16, 16, 2, 4), (4, 8, 2, 2), (64, 8, 4, 2), (8, 32, 8, 2)])
def test_the_fragments_layout_gives_every_iteration_of_a_block_to_one_thread(
        block_x, block_y, rows, columns):
    layout = layout_for(mapping_2d(), Config((block_y, block_x), (rows, columns)))
    assert layout == MmaLayout(rows, columns, block_x // 4)
    owners: dict[tuple[int, int], tuple[int, int, int]] = {}
    for tid in range(block_x * block_y):
        lane = dict(mma_warp=tid >> 5, mma_g=(tid & 31) >> 2, mma_t=tid & 3)
        for r, c in itertools.product(range(rows), range(columns)):
            at = (evaluate(layout.row(r), **lane), evaluate(layout.column(c), **lane))
            assert at not in owners, (at, owners[at], (tid, r, c))
            owners[at] = (tid, r, c)
    assert set(owners) == set(itertools.product(range(block_y * rows),
                                                range(block_x * columns)))
    # the columns of B's fragments are the warp's own columns, each held by 4 lanes
    for warp in range(block_x * block_y // 32):
        held = sorted(evaluate(layout.b_column(n), mma_warp=warp, mma_g=g, mma_t=0)
                      for n in range(columns // 2) for g in range(8))
        own = sorted({owners_column for (_, owners_column), (tid, _, _) in owners.items()
                      if tid >> 5 == warp})
        assert held == own


def mapping_2d():
    _, mapped = planned("def f(A, B, C, N):\n    for i in range(N):\n        for j in range(N):"
                        "\n            for k in range(N):\n                C[i, j] += A[i, k] * "
                        "B[k, j]\n", N=64)
    return mapped.mappings[0]


@pytest.mark.parametrize("config", [
    Config((8, 32), (4, 3)), Config((8, 32), (1, 4)), Config((8, 30), (4, 4)),
    Config((4, 64), (4, 4)), Config((8, 32), (4, 4), stage=False),
    Config((8, 32), (4, 4), mma=False)])
def test_no_layout_where_warps_cannot_tile_the_block(config):
    assert layout_for(mapping_2d(), config) is None


def test_padded_rows_keep_a_fragments_reads_apart_in_the_banks():
    for extent in range(1, 200):
        stride = extent + shared_pad(extent)
        for g0 in (0, 4):  # the two half warps, each one pass of 8-byte reads
            for rows_by_g in (True, False):  # A's fragment (row g, col t), B's (row t, col g)
                words = [2 * ((g if rows_by_g else t) * stride + (t if rows_by_g else g))
                         for g in range(g0, g0 + 4) for t in range(4)]
                assert len({w % 32 for w in words}) == 16, extent


# --- the kernels ------------------------------------------------------------------------------

def planned(source: str, function: str = "f", filename: str = "<nest>", **params: int):
    found = plan(source, function, filename=filename, params=params or None)
    return found, gpu_plan(found)


def emitted(source: str, function: str, dtype=np.float64, configs=None, **params: int):
    found, mapped = planned(source, function, **params)
    inputs = make_inputs(found.as_written.program, found.sizes)
    inputs = {k: v.astype(dtype) if isinstance(v, np.ndarray) else v for k, v in inputs.items()}
    arrays, scalars = argument_types(inputs, list(params))
    return mapped, mapped.emit(arrays, scalars, configs)


def test_gemms_product_runs_on_the_tensor_cores_and_its_scaling_does_not(tmp_path):
    source = (KERNELS / "gemm.py").read_text()
    mapped, cuda = emitted(source, "gemm", NI=100, NJ=110, NK=120)
    scaling, product_kernel = cuda.kernels
    assert not scaling.tensor_cores and product_kernel.tensor_cores
    assert "loclab_dmma(r_C_0_0, r_C_0_1, r_C_1_0, r_C_1_1, " in product_kernel.text
    assert "void loclab_dmma(" in cuda.source
    explained = [step for nest in _nests(mapped, cuda) for step in nest]
    assert any("tensor cores" in decision for decision, _ in explained)
    if shutil.which("nvcc"):
        run = nvcc_compiled(cuda, tmp_path)
        assert run.returncode == 0, run.stderr
        spilled = [int(n) for n in re.findall(r"(\d+) bytes spill stores", run.stderr)]
        assert max(spilled) <= SPILL_ALLOWANCE, run.stderr


def _nests(mapped, cuda):
    from loclab.optimize.gpu import nest_results

    configs = tuple(mapped.default_configs())
    return [nest.steps for nest in nest_results(mapped, cuda, configs)]


def test_floats_and_configs_without_tensor_cores_write_the_kernels_as_before():
    source = (KERNELS / "gemm.py").read_text()
    _, single = emitted(source, "gemm", np.float32, NI=100, NJ=110, NK=120)
    assert not any(k.tensor_cores for k in single.kernels)
    assert "loclab_dmma" not in single.source
    _, mapped = planned(source, "gemm", NI=100, NJ=110, NK=120)
    off = tuple(replace(c, mma=False) for c in mapped.default_configs())
    _, double_off = emitted(source, "gemm", configs=off, NI=100, NJ=110, NK=120)
    assert "loclab_dmma" not in double_off.source and "mma_warp" not in double_off.source


def test_a_dot_product_in_a_scalar_runs_on_the_tensor_cores():
    path = KERNELS.parent.parent.parent / "benchmarks" / "kernels" / "matmul_transposed.py"
    _, cuda = emitted(path.read_text(), "matmul_transposed", M=50, N=300, P=300)
    (kernel,) = cuda.kernels
    assert kernel.tensor_cores and "loclab_dmma(total_0_0, total_0_1, " in kernel.text


def test_a_triangle_from_a_grid_loop_stages_both_reads_and_runs_on_the_tensor_cores():
    # covariance's j from i: j + 0 is never negative, so data[k, j] is staged too
    _, cuda = emitted((KERNELS / "covariance.py").read_text(), "covariance", M=90, N=70)
    product_kernel = next(k for k in cuda.kernels if "cov" in k.arrays and k.staged)
    assert sorted(t.split(" (")[0] for t in product_kernel.staged) == [
        "data[k, i] along k", "data[k, j] along k"]
    assert product_kernel.tensor_cores


# --- on a GPU: every result against the original --------------------------------------------

PRODUCTS = {
    "minus": """
def f(A, B, C, N, M, K):
    for i in range(N):
        for j in range(M):
            for k in range(K):
                C[i, j] -= A[i, k] * B[k, j] / (K + 1.0)
""",
    "backwards": """
def f(A, B, C, N, M, K):
    for i in range(N - 1, -1, -1):
        for j in range(M):
            for k in range(K):
                C[i, j] = C[i, j] + A[k, i] * B[j, k] * 0.5
""",
    "dot": """
def f(A, B, C, N, M, K):
    for i in range(N):
        for j in range(i, M):
            total = 0.0
            for k in range(K):
                total += A[k, i] * B[k, j]
            C[i, j] = total * 2.0
""",
    "batched": """
def f(A, B, C, N, M, K):
    for b in range(3):
        for i in range(N):
            for j in range(M):
                for k in range(K):
                    C[b, i, j] += A[b, i, k] * B[b, k, j]
""",
}
SIZES = [{"N": 70, "M": 90, "K": 37}, {"N": 9, "M": 300, "K": 130}, {"N": 200, "M": 5, "K": 8}]


@pytest.mark.gpu
@pytest.mark.parametrize("sizes", SIZES)
@pytest.mark.parametrize("name", sorted(PRODUCTS))
def test_products_on_the_tensor_cores_agree_with_the_original(name, sizes):
    result = optimize(PRODUCTS[name], "f", target="gpu", tune=False, timing=QUICK,
                      params=sizes)
    assert result.verification.ok and result.check.valid, result.notes


@pytest.mark.gpu
@pytest.mark.parametrize("name,sizes", [("covariance", {"M": 90, "N": 70}),
                                        ("two_mm", {"NI": 70, "NJ": 50, "NK": 90, "NL": 40}),
                                        ("gemm", {"NI": 33, "NJ": 260, "NK": 9})])
def test_products_of_the_corpus_agree_with_the_original_tuned(name, sizes):
    result = optimize_file(KERNELS / f"{name}.py", name, target="gpu", tune=True,
                           timing=QUICK, params=sizes)
    assert result.verification.ok and result.check.valid, result.notes
    assert not [note for note in result.notes if note.startswith("BUG")], result.notes


# --- the split into sides, judged by evaluating it ---------------------------------------------

FACTORS = ["A[i, k]", "B[k, j]", "alpha", "x[k]", "A[j, k]", "C[i, j]", "2.0", "(n - 1.0)",
           "y[i]", "z[j]"]


@st.composite
def sums(draw) -> str:
    """A sum of terms, each a product (with a divisor now and then) of factors above."""
    def term() -> str:
        text = " * ".join(draw(st.lists(st.sampled_from(FACTORS), min_size=1, max_size=4)))
        if draw(st.booleans()):
            text = f"{text} / {draw(st.sampled_from(FACTORS))}"
        return f"-{text}" if draw(st.booleans()) else text
    terms = draw(st.lists(st.builds(term), min_size=1, max_size=3))
    out = terms[0]
    for text in terms[1:]:
        out += f" {draw(st.sampled_from(['+', '-']))} ({text})"
    return out


def evaluate_expr(node: ast.expr, values: dict) -> float:
    return eval(compile(ast.Expression(body=node), "<e>", "eval"), {}, values)  # noqa: S307


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(sums(), st.sampled_from(["+=", "-="]))
def test_an_accepted_split_computes_the_same_value_and_keeps_each_side_to_its_loop(
        value: str, op: str) -> None:
    found = product(loop_of(f"for k in range(N):\n    T[i, j] {op} {value}\n"), "i", "j")
    rng = np.random.default_rng(len(value))
    arrays = {name: rng.random((3, 3)) + 0.5 for name in "ABC"}
    arrays |= {name: rng.random(3) + 0.5 for name in "xyz"}
    for i, j, k in itertools.product(range(3), repeat=3):
        values = {**arrays, "i": i, "j": j, "k": k, "alpha": 1.7, "n": 4.0}
        if found is None:
            continue
        want = evaluate_expr(ast.parse(value, mode="eval").body, values)
        got = sum((-1 if t.negate else 1) * evaluate_expr(t.rows, values)
                  * evaluate_expr(t.columns, values) for t in found.terms)
        assert np.isclose(got, -want if op == "-=" else want, rtol=1e-9), (value, got, want)
    if found is not None:
        for t in found.terms:
            assert "j" not in {n.id for n in ast.walk(t.rows) if isinstance(n, ast.Name)}
            assert "i" not in {n.id for n in ast.walk(t.columns) if isinstance(n, ast.Name)}
