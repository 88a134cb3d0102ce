"""``loclab optimize`` and ``loclab transform --verify`` on loop nests from outside the project
(issue 31): arrays sized from what the accesses really touch, bounds-checked runs, failures
blamed where they belong, the user's own inputs, sizes checked before anything is allocated
or run, JSON that serializes, and a corpus of third-party-like kernels (tests/data/kernels/)
each optimized or refused in one line."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from loclab.cli import main
from loclab.cpu.vector_width import COMMAND, features_in_use, vector_bits
from loclab.errors import UsageError
from loclab.measure import timing
from loclab.measure.timing import Budget
from loclab.optimize import optimize_file
from loclab.transform import transform, transform_file
from loclab.transform.inputs import choose_sizes, make_inputs, supplied_inputs
from loclab.transform.verify import (OriginalFailed, VerificationError, bounds_checked,
                                     compare_runs, verify)

KERNELS = Path(__file__).parent / "data" / "kernels"
QUICK = Budget(seconds=0.01, min_runs=2, max_runs=3)

SQUARES = KERNELS / "squares.py"
SCALED_INDEX = '''
def scaled_gather(A, B, idx, N):
    for i in range(N):
        A[i] = B[2 * idx[i]]
'''
TOTAL = '''
def total(A, N):
    s = 0.0
    for i in range(N):
        s += A[i]
    return s
'''


@pytest.fixture
def quick_timing(monkeypatch):
    """The command line times with ``loclab run``'s default budget: a hundredth of it."""
    monkeypatch.setitem(timing.BUDGETS, "default", QUICK)


def one_line(capsys) -> str:
    return error_line(capsys.readouterr().err)


def error_line(err: str) -> str:
    """The one error line on stderr (after optimize's progress lines, if any)."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines and ": error: " in lines[-1], err
    assert all(line.startswith("loclab optimize: ") and ": error: " not in line
               for line in lines[:-1]), err
    assert "Traceback" not in err
    return lines[-1]


def program_of(source: str, function: str, steps: str = "unroll(i, 2)"):
    return transform(source, steps, function).program


# --- 1. sizes from what the accesses touch; bounds-checked runs ----------------------------

def test_a_non_affine_subscript_sizes_the_array_from_its_values():
    program = transform_file(SQUARES, "scatter_squares", "unroll(i, 2)").program
    inputs = make_inputs(program, {"N": 30})
    assert inputs["A"].shape == (29 * 29 + 1,) and inputs["B"].shape == (30,)


@pytest.mark.parametrize("subscript, extent", [
    ("i ** 2", 81 + 1), ("i << 1", 18 + 1), ("abs(i - 7)", 7 + 1), ("int(i / 2)", 4 + 1),
    ("(i - 3) * (i - 3) + i // 4", 36 + 2 + 1), ("min(i * i, 40)", 40 + 1)])
def test_subscripts_isl_cannot_bound_are_evaluated(subscript, extent):
    source = f"def f(A, B, N):\n    for i in range(N):\n        A[{subscript}] = B[i]\n"
    assert make_inputs(program_of(source, "f"), {"N": 10})["A"].shape == (extent,)


def test_an_index_array_holds_values_within_the_extent_it_indexes():
    source = ("def gather(A, idx, out):\n    for i in range(len(idx)):\n"
              "        out[i] = A[idx[i]]\n    for j in range(len(A)):\n"
              "        A[j] = 2.0 * A[j]\n")
    program = program_of(source, "gather")
    inputs = make_inputs(program, choose_sizes(program, {"len(A)": 3}))
    assert inputs["A"].shape == (3,) and inputs["idx"].max() < 3 < len(inputs["idx"])
    assert transform(source, "unroll(i, 2)", "gather").verify(**{"len(A)": 3}).ok


def test_a_c_index_array_holds_values_within_the_declared_extent(tmp_path):
    from loclab.transform.verify_c import _arguments, _parameters

    path = tmp_path / "gather.c"
    path.write_text("void gather(int n, int m, double a[m], int idx[n], double out[n]) {\n"
                    "    for (int i = 0; i < n; i++)\n        out[i] = a[idx[i]];\n}\n")
    program = transform_file(path, "gather", "unroll(i, 2)", assume_distinct=True).program
    arguments = _arguments(program, _parameters(program.syntax.function), {"n": 40, "m": 3})
    assert arguments["a"].shape == (3,) and arguments["idx"].max() < 3


def test_numba_runs_that_verify_are_bounds_checked():
    import numba

    @numba.njit
    def past_the_end(A, N):
        for i in range(N + 1):
            A[i] = 1.0

    with pytest.raises(IndexError):
        bounds_checked(past_the_end)(np.zeros(4), 4)


def test_parallel_loops_that_verify_are_bounds_checked_too():
    """Numba checks no index inside a loop it runs in parallel (numba#9380): the checked
    function runs it in order."""
    import numba

    @numba.njit(parallel=True)
    def past_the_end(A, N):
        for i in numba.prange(N + 1):
            A[i] = 1.0

    with pytest.raises(IndexError):
        bounds_checked(past_the_end)(np.zeros(4), 4)


def test_the_transformed_function_failing_where_the_original_does_not_is_a_bug():
    program = program_of(TOTAL, "total")

    def broken(A, N):
        return A[N]

    def original(A, N):
        return float(A.sum())

    with pytest.raises(VerificationError, match="a bug in loclab"):
        compare_runs(original, broken, program, {"A": np.ones(5), "N": 5}, {"N": 5})


def test_optimize_runs_a_non_affine_subscript_instead_of_crashing(tmp_path):
    result = optimize_file(SQUARES, "scatter_squares", params={"N": 40}, tune=False,
                           timing=QUICK, tuning_cache=tmp_path / "t.json")
    assert result.verification.ok and result.check.valid
    assert result.verification.compared[0].shape == (36 * 36 + 1,)


# --- 2. the original failing on loclab's inputs is loclab's sizing, said so -----------------

def test_transform_verify_of_a_non_affine_subscript_verifies(capsys):
    assert main(["transform", f"{SQUARES}::scatter_squares", "--apply", "unroll(i, 2)",
                 "--verify", "--param", "N=20"]) == 0
    assert "verified at N=20: A (362): equal" in capsys.readouterr().err


def test_a_subscript_that_depends_on_data_is_named_when_the_sizing_fails(tmp_path, capsys):
    path = tmp_path / "scaled.py"
    path.write_text(SCALED_INDEX)
    assert main(["transform", f"{path}::scaled_gather", "--apply", "unroll(i, 2)",
                 "--verify"]) == 2
    line = one_line(capsys)
    assert "the original fails on loclab's random inputs at N=37: IndexError" in line
    assert "loclab could not size B[2 * idx[i]] (scaled.py:4)" in line
    assert "--param" in line and "--inputs" in line


# --- 3. JSON of real runs --------------------------------------------------------------------

def test_optimize_json_serializes_a_run_compared_within_a_tolerance(tmp_path, capsys,
                                                                     quick_timing):
    path = tmp_path / "total.py"
    path.write_text(TOTAL)
    # Without tuning the most ambitious recipe is kept: the parallel sum, compared within a
    # tolerance (a tuned run may keep the sequential one where it measures faster).
    assert main(["optimize", f"{path}::total", "--param", "N=5000", "--json", "--no-tune",
                 "--tuning-cache", str(tmp_path / "tuning.json")]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["verification"]["ok"]
    returned = document["verification"]["compared"][-1]
    assert returned["name"] == "return value" and returned["tolerance"] > 0
    assert document["timing"]["restored"] is False
    # the vectors it was timed with, said in the notes and the code where loclab widened them
    bits = vector_bits(features_in_use())
    assert document["timing"]["vector_bits"] == bits
    assert document["source"].splitlines()[1].startswith(
        "# compiled and timed with 512-bit vectors") == (bits == 512)
    assert any(COMMAND in note for note in document["notes"]) == (bits == 512)


AXPY_ROWS = '''
def axpy_rows(Y, A, x, N, M):
    for i in range(N):
        for j in range(M):
            Y[i, j] += A[i, j] * x[j]
'''


def test_fast_math_ends_every_recipe_in_fastmath_and_says_so(tmp_path, capsys, quick_timing):
    path = tmp_path / "axpy_rows.py"
    path.write_text(AXPY_ROWS)
    command = ["optimize", f"{path}::axpy_rows", "--param", "N=64", "--param", "M=512",
               "--no-tune", "--json", "--tuning-cache", str(tmp_path / "tuning.json")]
    assert main([*command, "--fast-math"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["fast_math"] and document["recipe"].endswith("; fastmath()")
    assert 'fastmath={"contract", "reassoc"}' in document["source"]
    assert document["verification"]["ok"]
    assert main(command) == 0  # without it: no fastmath, and the explanation says which
    document = json.loads(capsys.readouterr().out)
    assert not document["fast_math"] and "fastmath" not in document["recipe"]
    assert "contract" not in document["source"]
    assert main([word for word in command if word != "--json"]) == 0
    explained = capsys.readouterr().err
    assert "arithmetic: no fused multiply-adds" in " ".join(
        line.strip() for line in explained.splitlines())


RECURRENCE = '''
def recurrence(A, N):
    for i in range(1, N):
        A[i] = A[i - 1] * 0.5 + A[i]
'''


def test_fast_math_on_a_function_returned_as_written_says_it_rounds_as_written(
        tmp_path, capsys, quick_timing):
    path = tmp_path / "recurrence.py"
    path.write_text(RECURRENCE)
    assert main(["optimize", f"{path}::recurrence", "--param", "N=1000", "--no-tune",
                 "--json", "--fast-math", "--tuning-cache", str(tmp_path / "t.json")]) == 0
    document = json.loads(capsys.readouterr().out)
    assert not document["fast_math"] and "fastmath" not in document["source"]
    assert "--fast-math: the function is returned as written, so it rounds as written" in \
        document["notes"]


def test_fast_math_is_for_the_cpu(tmp_path, capsys):
    path = tmp_path / "axpy_rows.py"
    path.write_text(AXPY_ROWS)
    assert main(["optimize", f"{path}::axpy_rows", "--target", "gpu", "--fast-math"]) == 2
    assert "--fast-math: for --target cpu" in one_line(capsys)


def test_transform_json_serializes_a_verification_within_a_tolerance(tmp_path, capsys):
    path = tmp_path / "total.py"
    path.write_text(TOTAL)
    assert main(["transform", f"{path}::total", "--apply", "parallel(i)", "--emit", "numba",
                 "--verify", "--json"]) == 0
    verification = json.loads(capsys.readouterr().out)["verification"]
    assert verification["ok"] and verification["compared"][0]["tolerance"] > 0
    assert verification["compared"][0]["exact"] in (True, False)


# --- 4. inputs the function needs ------------------------------------------------------------

def test_a_kernel_that_needs_valid_inputs_points_to_inputs(capsys, quick_timing):
    assert main(["optimize", f"{KERNELS / 'cholesky.py'}::cholesky", "--no-tune",
                 "--param", "N=20"]) == 2
    line = one_line(capsys)
    assert "the original fails on loclab's random inputs" in line
    assert "ValueError: math domain error" in line and "--inputs MODULE.py::FUNC" in line


def test_the_users_inputs_are_used_to_verify(capsys):
    cholesky = KERNELS / "cholesky.py"
    assert main(["transform", f"{cholesky}::cholesky", "--apply", "unroll(k@12, 2)",
                 "--verify", "--param", "N=9", "--inputs", f"{cholesky}::inputs"]) == 0
    assert "verified at N=9" in capsys.readouterr().err


def test_inputs_in_the_api_as_a_tuple_in_parameter_order(tmp_path):
    def positive_definite(N):
        b = np.random.default_rng(0).uniform(0, 1, (N, N))
        return b @ b.T + N * np.eye(N), N

    result = optimize_file(KERNELS / "cholesky.py", "cholesky", params={"N": 24},
                           tune=False, timing=QUICK, tuning_cache=tmp_path / "t.json",
                           inputs=positive_definite)
    assert result.verification.ok and result.check.valid


def short_arrays(N):
    """One element short of what the loop reads."""
    return {"A": np.ones(N - 1)}


def test_the_original_failing_on_the_users_inputs_is_their_error():
    result = transform(TOTAL, "unroll(i, 2)", "total")
    with pytest.raises(OriginalFailed, match=r"the original fails on the inputs from --inputs "
                                             r"test_optimize_hardening.py::short_arrays at "
                                             r"N=37: IndexError"):
        verify(result, {}, inputs=short_arrays)


@pytest.mark.parametrize("returned, message", [
    ([1.0], "returned list: called with each size as a keyword argument"),
    ({"A": np.ones(5), "B": 1}, "returned B, which is no parameter of total (A, N)"),
    ({"N": 5}, "returned no A"),
    ({"A": np.ones(5), "N": 4}, "returned N=4 at N=5"),
    ({"A": [1.0] * 5}, "returned A as list: arrays are NumPy arrays")])
def test_the_inputs_contract_is_checked(returned, message):
    program = program_of(TOTAL, "total")
    with pytest.raises(UsageError, match=re.escape(message)):
        supplied_inputs(program, lambda N: returned, {"N": 5})


def test_the_users_inputs_function_failing_is_one_line():
    def broken(N):
        raise RuntimeError("no data")

    with pytest.raises(UsageError, match="--inputs .*broken failed at N=5: RuntimeError: "
                                         "no data"):
        supplied_inputs(program_of(TOTAL, "total"), broken, {"N": 5})


@pytest.mark.parametrize("spec, message", [
    ("nope.py::f", "no such file: nope.py"), ("inputs.py", "expected MODULE.py::FUNCTION"),
    ("{kernels}/lu.py::nothing", "defines no function nothing")])
def test_a_bad_inputs_option_is_one_line_and_exit_2(spec, message, capsys):
    assert main(["optimize", f"{KERNELS / 'lu.py'}::lu", "--inputs",
                 spec.format(kernels=KERNELS)]) == 2
    assert message in one_line(capsys)


def test_c_is_verified_on_loclabs_inputs_only(capsys):
    assert main(["transform", "examples/loops.c::three_loops_1", "--apply", "unroll(i, 2)",
                 "--verify", "--inputs", f"{KERNELS / 'lu.py'}::inputs"]) == 2
    assert "--inputs: C functions are verified on loclab's inputs only" in one_line(capsys)


def test_transform_inputs_needs_verify(capsys):
    assert main(["transform", f"{KERNELS / 'lu.py'}::lu", "--apply", "unroll(k@10, 2)",
                 "--inputs", f"{KERNELS / 'lu.py'}::inputs"]) == 2
    assert "--inputs gives the inputs of --verify: add --verify" in one_line(capsys)


def test_a_function_that_fails_run_again_on_its_output_is_timed_on_fresh_inputs():
    from loclab.optimize.measure import time_function

    source = ("def drain(A, N):\n    for i in range(N):\n"
              "        A[i] = float(A[i]) / float(A[i]) - 1.0\n")  # then 0 / 0
    program = program_of(source, "drain")
    namespace: dict = {}
    exec(source, namespace)
    timed = time_function(namespace["drain"], program, {"A": np.ones(8), "N": 8}, QUICK)
    assert timed.restored and timed.summary.median > 0


# --- 5. sizes checked up front ---------------------------------------------------------------

@pytest.mark.parametrize("sizes, message", [
    ({"N": 0}, "--param N=0: a size is a whole number of at least 1"),
    ({"N": -1}, "--param N=-1: a size is a whole number of at least 1"),
    ({"N": 10**12}, "at N=1000000000000 the function runs about 1e+12 statement instances"),
])
def test_optimize_refuses_sizes_it_cannot_run(sizes, message):
    with pytest.raises(UsageError, match=message.replace("+", r"\+")):
        optimize_file(KERNELS / "gather.py", "gather_add", params=sizes, tune=False)


def test_planning_alone_takes_any_size_the_caller_can_run():
    """A case's auto row plans at the case's own size, which the harness has checked (bmmm's
    default runs 8.4e9 statement instances); only optimize's own timing is bounded."""
    from loclab.optimize import plan

    planned = plan(TOTAL, "total", params={"N": 2**34})
    assert planned.sizes == {"N": 2**34}


def test_optimize_grows_no_size_without_end(tmp_path):
    from loclab.optimize.measure import timing_sizes

    source = "def f(A, W):\n    for i in range(10):\n        A[i * W] = 1.0\n"
    sizes = timing_sizes(program_of(source, "f"), {})
    assert sizes["W"] <= 2**24


@pytest.mark.parametrize("sizes, message", [
    ({"N": 0}, "--param N=0: a size is a whole number of at least 1"),
    ({"N": 10**9}, "at N=1000000000 the function runs about 1e+09 statement instances as "
                   "Python"),
])
def test_transform_verify_refuses_sizes_it_cannot_run(sizes, message):
    result = transform(TOTAL, "unroll(i, 2)", "total")
    with pytest.raises(UsageError, match=message.replace("+", r"\+")):
        result.verify(**sizes)


def test_arrays_that_cannot_fit_in_memory_are_refused_before_they_are_allocated():
    source = "def spread(A, N):\n    for i in range(3):\n        A[i * N] = 1.0\n"
    result = transform(source, "unroll(i, 3)", "spread")
    with pytest.raises(UsageError, match=r"at N=1000000000000 the function's arrays take "
                                         r"1.49e\+04 GiB"):
        result.verify(N=10**12)


# --- 6. what is said, once, and when it takes a while ----------------------------------------

def test_plans_refused_at_the_same_step_are_said_once():
    from dataclasses import replace

    from loclab.optimize import _nest_result, plan
    from loclab.optimize.build import choose

    recipes = Path(__file__).parent.parent / "examples" / "recipes.py"
    found = plan(recipes.read_text(), "eliminating_war", filename=str(recipes),
                 params={"N": 50})
    chosen, _ = choose(found.code, found.plans)
    refused = ((found.plans[0][-1], "permute(i, j) is illegal: D1"),) * 3
    nest = _nest_result(replace(chosen[0], refused=refused), {}, False)
    assert nest.refused == (("sequential", "permute(i, j) is illegal: D1"),)


def test_why_numba_refuses_the_original_is_said_once():
    from types import SimpleNamespace

    from loclab.measure.stats import summarize
    from loclab.optimize.explain import explain
    from loclab.optimize.measure import Timing
    from loclab.transform.verify import Compared, Verification

    why = "TypingError: Numba cannot type this"
    result = SimpleNamespace(
        file="f.py", function="f", target="cpu", nests=[], parallel=True, candidates=[],
        tuning=None, recipe="parallel(i)", fast_math=False,
        verification=Verification({"N": 7}, (Compared("A", (7,), True, 0.0, 0.0, True),)),
        timing=Timing({"N": 64}, 2, summarize([1e-3] * 3), None, why),
        notes=[f"the original does not run under Numba as written ({why}): nothing measured "
               "to choose; verified against it as Python only"])
    assert explain(result).count(why) == 1


def test_a_long_verification_says_what_it_runs_first(monkeypatch, capsys):
    from loclab.transform import verify as verifying

    monkeypatch.setattr(verifying, "PYTHON_INSTANCES_PER_SECOND", 100)
    assert main(["transform", f"{SQUARES}::scatter_squares", "--apply", "unroll(i, 2)",
                 "--verify", "--param", "N=60"]) == 0
    err = capsys.readouterr().err
    assert ("loclab transform: verifying at N=60: about 60 statement instances as Python "
            "(the original runs as written), about 1 s") in err


# --- 7. a corpus of third-party-like kernels -------------------------------------------------

FAST = "fast"
# (gemm, the slowest to build, has its plan and result checked in test_optimize's
# test_a_band_whose_body_is_nests_is_distributed_to_tile_the_deepest; 2mm is two of it; mvt's
# two matrix-vector products are atax's and bicg's shapes; jacobi-2d's time steps are the
# GPU planner's test_a_time_loop_stays_on_the_host_and_launches_the_nests_inside: the CI's
# 15 minutes)
CORPUS = [  # (file::function, sizes, inputs function or None, speed)
    ("gather.py::gather_add", ["N=30"], None, FAST),
    ("cholesky.py::cholesky", ["N=12"], "inputs", FAST),
    ("squares.py::scatter_squares", ["N=30"], None, "slow"),
    ("seidel_2d.py::seidel_2d", ["TSTEPS=2", "N=12"], None, "slow"),
    ("atax.py::atax", ["M=20", "N=24"], None, "slow"),
    ("bicg.py::bicg", ["M=20", "N=24"], None, "slow"),
    ("gesummv.py::gesummv", ["N=24"], None, "slow"),
    ("covariance.py::covariance", ["M=12", "N=16"], None, "slow"),
    ("doitgen.py::doitgen", ["NR=6", "NQ=7", "NP=8"], None, "slow"),
    ("lu.py::lu", ["N=20"], "inputs", "slow"),
    ("lu.py::lu", ["N=20"], None, "slow"),
    ("trmm.py::trmm", ["M=16", "N=20"], None, "slow"),
]


@pytest.mark.parametrize("target, sizes, inputs", [
    pytest.param(target, sizes, inputs, id=f"{target}{'+inputs' if inputs else ''}",
                 marks=[] if speed == FAST else [pytest.mark.slow])
    for target, sizes, inputs, speed in CORPUS])
def test_every_kernel_of_the_corpus_is_optimized_or_refused_in_one_line(
        target, sizes, inputs, capsys, quick_timing):
    file, _, function = target.partition("::")
    argv = ["optimize", f"{KERNELS / file}::{function}", "--target", "cpu", "--no-tune",
            "--json", *[word for size in sizes for word in ("--param", size)]]
    if inputs:
        argv += ["--inputs", f"{KERNELS / file}::{inputs}"]
    code = main(argv)
    captured = capsys.readouterr()
    if code == 2:
        assert "--inputs" in error_line(captured.err)
        return
    assert code == 0, captured.err
    document = json.loads(captured.out)
    assert document["verification"]["ok"] and document["check"]["valid"]
    assert document["timing"]["optimized_s"] > 0


# two loops one after the other in a thread, both reading A (staged in shared memory through
# registers a strip ahead: each loop declares its own)
SIBLING_STAGES = """
def f(A, x, tmp, z, M, N):
    for i in range(M):
        tmp[i] = 0.0
        for j in range(N):
            tmp[i] = tmp[i] + A[i, j] * x[j]
        for j in range(N):
            z[i, j] = A[i, j] * tmp[i]
"""


# trmm with the rows before i (which iteration i reads after they are final): i carries
# those reads (no copy removes them), j is the grid
ROWS_BEFORE = """
def f(A, B, alpha, M, N):
    for i in range(M):
        for j in range(N):
            for k in range(i):
                B[i, j] += A[k, i] * B[k, j]
            B[i, j] = alpha * B[i, j]
"""


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
@pytest.mark.parametrize("source, function, sizes, written", [
    (SIBLING_STAGES, "f", {"M": 200, "N": 240}, ("double p_A_0 =",)),
    # atax's second nest: threads over i would update y[j] together (atomically); it is
    # distributed instead, the row sum split across a block (200 rows), the column sum
    # across rows
    (KERNELS / "atax.py", "atax", {"M": 200, "N": 240},
     ("r_tmp_0 = loclab_block_add(r_tmp_0);", "r_y_0 = loclab_rows_add(r_y_0);")),
    # the grid loop j is inside i as written: the thread runs i, and no loop over j
    (ROWS_BEFORE, "f", {"M": 50, "N": 60},
     ("for (i = 0; i < M; i += 1) {\n        for (k =",))])
def test_kernels_of_reordered_and_staged_nests_compile_for_the_gpu(source, function, sizes,
                                                                    written, tmp_path):
    from loclab.optimize import plan
    from loclab.optimize.cuda import argument_types, gpu_plan
    from tests.test_optimize_gpu import nvcc_compiled

    text = source.read_text() if isinstance(source, Path) else source
    found = plan(text, function, filename=str(source)[:40], params=sizes)
    inputs = make_inputs(found.as_written.program, found.sizes)
    cuda = gpu_plan(found).emit(*argument_types(inputs, list(sizes)))
    assert all(fragment in cuda.source for fragment in written)
    run = nvcc_compiled(cuda, tmp_path)
    assert run.returncode == 0, run.stderr


@pytest.mark.gpu
@pytest.mark.parametrize("target, sizes, inputs", [
    ("squares.py::scatter_squares", ["N=300"], None),
    ("gather.py::gather_add", ["N=3000"], None),
    ("cholesky.py::cholesky", ["N=24"], "inputs"),
    ("atax.py::atax", ["M=200", "N=240"], None), ("bicg.py::bicg", ["M=200", "N=240"], None),
    ("trmm.py::trmm", ["M=50", "N=60"], None)])
def test_kernels_of_the_corpus_are_optimized_for_the_gpu(target, sizes, inputs, capsys,
                                                         quick_timing):
    file, _, function = target.partition("::")
    argv = ["optimize", f"{KERNELS / file}::{function}", "--target", "gpu", "--no-tune",
            "--json", *[word for size in sizes for word in ("--param", size)]]
    if inputs:
        argv += ["--inputs", f"{KERNELS / file}::{inputs}"]
    assert main(argv) == 0, capsys.readouterr().err
    document = json.loads(capsys.readouterr().out)
    assert document["verification"]["ok"] and document["check"]["valid"]


def test_arrays_the_gpu_cannot_hold_are_refused_before_they_are_copied():
    from loclab.optimize.gpu import check_device_memory

    inputs = {"A": np.zeros((1024, 1024)), "N": 1024}
    check_device_memory(inputs, {"N": 1024}, free=2**23)
    with pytest.raises(UsageError, match=r"at N=1024 the function's arrays take 0.00781 GiB "
                                         r"and 0.00391 GiB of GPU memory is free"):
        check_device_memory(inputs, {"N": 1024}, free=2**22)


ARG_MIN = '''
def nearest(points, centers, labels, n, k):
    for i in range(n):
        best = 1e30
        arg = 0
        for c in range(k):
            dist = (points[i] - centers[c]) * (points[i] - centers[c])
            if dist < best:
                best = dist
                arg = c
        labels[i] = arg
'''


def test_a_scalar_named_like_numbas_argument_prefix_has_its_own_type():
    """Numba names the arguments ``arg.NAME`` in its typemap: a scalar called ``arg`` is
    typed by its own versions, not by every argument (an internal error once)."""
    import numba

    from loclab.optimize import plan
    from loclab.optimize.measure import scalar_types

    found = plan(ARG_MIN, "nearest", params={"n": 5, "k": 3})
    namespace: dict = {}
    exec(ARG_MIN, namespace)
    original = numba.njit(namespace["nearest"])
    original(np.arange(5.0), np.arange(3.0), np.zeros(5, dtype=np.int64), 5, 3)
    assert dict(scalar_types(original, found.as_written.program)) == {
        "arg": "int64", "best": "float64", "dist": "float64"}


# --- the original under Numba, and a final timing that does not hold ----------------------

BLACK_SCHOLES = '''
import math
import numpy as np


def price(S, K, T, call, n):
    r = np.float32(0.02)
    v = np.float32(0.3)
    for i in range(n):
        sq = math.sqrt(T[i])
        d1 = (math.log(S[i] / K[i]) + (r + 0.5 * v * v) * T[i]) / (v * sq)
        d2 = d1 - v * sq
        n1 = 0.5 * (1.0 + math.erf(d1 / math.sqrt(2.0)))
        n2 = 0.5 * (1.0 + math.erf(d2 / math.sqrt(2.0)))
        call[i] = S[i] * n1 - K[i] * math.exp(-r * T[i]) * n2
'''


def float32_prices(n):
    rng = np.random.default_rng(1)
    return {"S": rng.uniform(10, 50, n).astype(np.float32),
            "K": rng.uniform(10, 50, n).astype(np.float32),
            "T": rng.uniform(0.1, 2, n).astype(np.float32),
            "call": np.zeros(n, np.float32), "n": n}


def test_an_original_numba_computes_otherwise_than_python_is_compared_under_numba(tmp_path):
    # float32 scalars times Python floats: float32 in NumPy, float64 in Numba. The optimized
    # code runs under Numba, so the original under Numba is its reference, and the output
    # says why; a function that computes something else still fails against it.
    path = tmp_path / "price.py"
    path.write_text(BLACK_SCHOLES)
    result = optimize_file(path, "price", params={"n": 4096}, tune=False, timing=QUICK,
                           inputs=float32_prices)
    assert result.verification.ok
    assert "run as Python the original itself computes otherwise (call" \
        in result.verification.original
    transformed = transform_file(path, "price", "stripmine(i, 8)", emit="numba")

    def wrong(S, K, T, call, n):
        call[:] = S - K

    verification = verify(transformed, {"n": 37}, inputs=float32_prices, compiled=wrong,
                          checked=wrong)
    assert not verification.ok and "compiled with Numba" in verification.original


def test_a_recipe_the_final_timing_finds_slower_is_not_kept(tmp_path, monkeypatch):
    import loclab.optimize as optimize_module
    from loclab.measure.stats import summarize
    from loclab.optimize import measure
    from loclab.optimize.build import choose

    real = measure.compare_times
    calls = []

    def slower_first(*args, **kwargs):
        timed = real(*args, **kwargs)
        calls.append(timed)
        if len(calls) > 1:
            return timed
        return replace(timed, optimized=summarize([10.0, 11.0, 12.0]),
                       original=summarize([1.0, 1.1, 1.2]))

    def first_recipe(code, planned, *args):  # the search, as if it measured the first best
        return choose(code, planned.plans)[0], [], None, None, None

    monkeypatch.setattr(measure, "compare_times", slower_first)
    monkeypatch.setattr(optimize_module, "_searched", first_recipe)
    path = tmp_path / "axpy_rows.py"
    path.write_text(AXPY_ROWS)
    result = optimize_file(path, "axpy_rows", params={"N": 256, "M": 512}, timing=QUICK,
                           tuning_cache=tmp_path / "tuning.json")
    assert len(calls) == 2 and result.recipe == "" and result.verification.ok
    assert calls[0].sizes == calls[1].sizes
    assert any("measured 0.10x the original in the final timing: the function is returned "
               "as written" in note for note in result.notes)


def test_a_result_that_runs_nothing_in_parallel_is_timed_on_one_thread_and_says_so():
    # a forward substitution: only its dot products go into vector lanes; the speed-up line
    # said "(2 threads, ...)" beside "nothing runs in parallel"
    from loclab.optimize import optimize
    from loclab.optimize.explain import explain

    source = ("def solve(L, b, x, N):\n    for i in range(N):\n        s = 0.0\n"
              "        for j in range(i):\n            s += L[i, j] * x[j]\n"
              "        x[i] = (b[i] - s) / (L[i, i] + 4.0)\n")
    result = optimize(source, "solve", params={"N": 300}, tune=False, timing=QUICK)
    assert result.recipe and not result.parallel
    text = " ".join(explain(result).split())
    assert "nothing runs in parallel" in text and "x (one thread" in text
    assert f"{result.timing.threads} threads" not in text
