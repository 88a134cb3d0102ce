"""``cuda.reorder``: a nest no GPU grid of two loops holds, rewritten by the transformer before
it is mapped (symm). The rewrite is judged by running it: on look-alikes of symm, the code
the kernels map computes what the user's does (Python, random inputs), and no two threads
of its grids conflict (the brute-force check of ``test_optimize_gpu``); on a GPU, symm
agrees with the original."""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path

import numpy as np
import pytest

from loclab.optimize import optimize_file
from tests.test_optimize_gpu import (QUICK, check_grids, gpu_planned, make_inputs,
                                     nvcc_compiled)

KERNELS = Path(__file__).parent / "data" / "kernels"
SYMM = (KERNELS / "symm.py").read_text()
TEMPLATE = """
def f(A, B, C, alpha, beta, M, N):
    for i in range(M):
        for j in range(N):
            t = 0.0
            for k in range({bound}):
                {first}
                {second}
            C[i, j] = beta * C[{row}, j] + alpha * B[i, j] * A[i, i] + alpha * t
"""
UPDATE = "C[k, j] += alpha * B[i, j] * A[i, k]"
SUM = "t += B[k, j] * A[i, k]"
LOOK_ALIKES = [TEMPLATE.format(bound=bound, first=first, second=second, row=row)
               for bound, (first, second), row in itertools.product(
                   ("i", "M"), ((UPDATE, SUM), (SUM, UPDATE)), ("i", "M - 1 - i"))]


def run_python(source: str, inputs: dict) -> dict:
    namespace: dict = {}
    exec(compile(source, "<f>", "exec"), namespace)  # noqa: S102 - our own test sources
    copies = {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in inputs.items()}
    namespace["f" if "def f(" in source else "symm"](**copies)
    return copies


@pytest.mark.parametrize("source", [SYMM, *LOOK_ALIKES])
def test_a_rewrite_computes_what_the_user_wrote_and_no_two_threads_conflict(source):
    function = "symm" if source is SYMM else "f"
    sizes = {"M": 7, "N": 5}
    found, mapped = gpu_planned(source, function, **sizes)
    if mapped.users is not None:
        inputs = make_inputs(found.as_written.program, sizes)
        want, got = run_python(source, inputs), run_python(mapped.planned.code.text, inputs)
        assert all(np.allclose(want[k], got[k]) for k in want if isinstance(want[k],
                                                                             np.ndarray))
    if function == "f":
        check_grids(source, sizes)


def test_symm_is_rewritten_into_nests_of_two_grid_loops_each(tmp_path):
    _, mapped = gpu_planned(SYMM, "symm", M=100, N=120)
    assert mapped.users is not None and len(mapped.mappings) == 4
    assert all(len(m.grid) == 2 for m in mapped.mappings)
    (note,) = mapped.notes
    assert "distribute(i@4)" in note and "permute(" in note
    # the update of earlier rows runs last, over k and j, the sum over later rows i inside
    assert {g.var for g in mapped.mappings[-1].grid} == {"j", "k"}
    if shutil.which("nvcc"):
        inputs = make_inputs(mapped.users.as_written.program, {"M": 100, "N": 120})
        from loclab.optimize.cuda import argument_types

        cuda = mapped.emit(*argument_types(inputs, ["M", "N"]))
        assert nvcc_compiled(cuda, tmp_path).returncode == 0


def test_a_nest_a_grid_holds_is_not_rewritten():
    _, mapped = gpu_planned((KERNELS / "gemm.py").read_text(), "gemm", NI=50, NJ=40, NK=30)
    assert mapped.users is None and not mapped.notes


@pytest.mark.gpu
@pytest.mark.parametrize("sizes", [{"M": 60, "N": 70}, {"M": 300, "N": 9}, {"M": 5, "N": 400}])
def test_symm_rewritten_agrees_with_the_original_on_the_gpu(sizes):
    result = optimize_file(KERNELS / "symm.py", "symm", target="gpu", tune=False,
                           timing=QUICK, params=sizes)
    assert result.verification.ok and result.check.valid, result.notes
    assert any("rewritten first" in note for note in result.notes)


# each row's position computed once, then its pixels gathered through data-made subscripts:
# threads over i alone walk rows (nothing unit-stride along i); rewritten, the scalars
# expanded per row and the pixels' loop distributed from them, the grid reaches j
RESAMPLE = """
def f(image, out, H, W, OH, OW):
    for i in range(OH):
        y = i * (H - 1) / (OH - 1)
        y0 = min(int(y), H - 2)
        fy = y - y0
        for j in range(OW):
            x0 = min(int(j * (W - 1) / (OW - 1)), W - 2)
            out[i, j] = (1.0 - fy) * image[y0, x0] + fy * image[y0 + 1, x0 + 1]
"""


def test_a_grid_that_coalesces_nothing_is_rewritten_to_reach_the_loop_inside():
    from loclab.optimize.gpu import verification_sizes

    sizes = {"H": 40, "W": 50, "OH": 90, "OW": 70}
    found, mapped = gpu_planned(RESAMPLE, **sizes)
    assert mapped.users is not None and any("rewritten first" in n for n in mapped.notes)
    assert [[g.var for g in m.grid] for m in mapped.mappings][-1] == ["i", "j"]
    assert all(m.coalesced for m in mapped.mappings)
    inputs = make_inputs(found.as_written.program, sizes)
    inputs["image"] = np.random.default_rng(0).random((40, 50))
    want, got = run_python(RESAMPLE, inputs), run_python(mapped.planned.code.text, inputs)
    assert np.allclose(want["out"], got["out"])
    # the user's sizes that bound no loop still reach the inputs (an inputs function's H, W)
    assert set(verification_sizes(mapped, 37, 5)) == {"H", "W", "OH", "OW"}


@pytest.mark.gpu
def test_a_rewritten_resampling_agrees_with_the_original_on_the_gpu():
    result = optimize_file(Path(__file__).parents[1] / "benchmarks" / "kernels"
                           / "bilinear_resize.py", "bilinear_resize", target="gpu", tune=False,
                           timing=QUICK, params={"H": 40, "W": 50, "OH": 300, "OW": 270})
    assert result.verification.ok and result.check.valid, result.notes
