"""GPU variants on a real device (marked ``gpu``: skipped without CuPy and a CUDA GPU)."""

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loclab.bench.auto import get_case
from loclab.cases import case_names
from loclab.cases.base import Bound, Variant
from loclab.errors import LaunchError
from tests.case_runs import run_on_gpu

pytestmark = pytest.mark.gpu

GPU_VARIANTS = [(name, variant.name) for name in case_names()
                for variant in get_case(name).variants_on("gpu")]


@pytest.mark.parametrize("case_name, variant_name", GPU_VARIANTS)
def test_gpu_variant_matches_golden_at_every_test_size(case_name, variant_name, machine):
    case = get_case(case_name)
    variant = next(v for v in case.variants if v.name == variant_name)
    for dims in case.test_dims:
        if variant.skip_reason(dims, machine):  # does not apply there (and says so in a run)
            continue
        check, _ = run_on_gpu(case, variant, dims, machine)
        assert check.valid, f"{variant_name} at {dims}: {check.problem}"


@pytest.mark.parametrize("rows, cols, writes", [
    (16388, 12, "rows aligned"), (64, 64, "rows aligned"), (16387, 13, "whole sectors a block"),
    (100, 258, "whole sectors a block"), (1, 1, "whole sectors a block")])
def test_optimized_transpose_keeps_16_byte_stores_at_any_shape(rows, cols, writes, machine):
    case = get_case("transpose")
    variant = next(v for v in case.variants if v.name == "gpu-optimized")
    check, bound = run_on_gpu(case, variant, {"rows": rows, "cols": cols}, machine)
    assert check.valid, check.problem
    assert bound.params["vector"] == 4 and bound.params["writes"] == writes


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.integers(1, 300), cols=st.integers(1, 300))
def test_any_shape_transposition_against_numpy(rows, cols, machine):
    """Every offset of a row against the 16-byte grid and of a window against the 32-byte
    sectors, tiles cut by both edges, both kernels: poisoned output, fresh input, exact."""
    case = get_case("transpose")
    variant = next(v for v in case.variants if v.name == "gpu-optimized")
    check, _ = run_on_gpu(case, variant, {"rows": rows, "cols": cols}, machine,
                          seed=rows * 1000 + cols)
    assert check.valid, f"{rows}x{cols}: {check.problem}"


@pytest.mark.parametrize("cols", [3, 4])
def test_matrices_taller_than_the_grid_y_limit(cols, machine):
    from loclab.cases.transpose.gpu import MAX_GRID_Y

    case = get_case("transpose")
    rows = MAX_GRID_Y * 32 + 4  # the 32-row tiles of the naive and staged kernels need a loop
    for variant in case.variants_on("gpu"):
        check, _ = run_on_gpu(case, variant, {"rows": rows, "cols": cols}, machine)
        assert check.valid, f"{variant.name} at {rows}x{cols}: {check.problem}"


def test_a_refused_launch_names_kernel_and_shape():
    import cupy

    from loclab.cases.transpose.gpu import KERNELS
    from loclab.gpu.kernels import Launch

    a = cupy.zeros((64, 64), cupy.float32)
    launch = Launch(KERNELS, "transpose_naive<32>", grid=(2, 2), block=(64, 32),
                    args=(a, a, np.int32(64), np.int32(64)), result=a)
    with pytest.raises(LaunchError, match=r"kernel transpose_naive<32> failed to launch with "
                                          r"grid=\(2, 2\) block=\(64, 32\)"):
        launch()


def test_kernel_not_listed_is_refused():
    from loclab.cases.transpose.gpu import KERNELS
    from loclab.gpu.kernels import Launch

    with pytest.raises(LaunchError, match="not listed"):
        Launch(KERNELS, "transpose_naive<16>", (1,), (1,), (), None)


def _oversized_block(inputs, out, machine):
    from loclab.cases.transpose.gpu import KERNELS
    from loclab.gpu.kernels import Launch

    rows, cols = inputs["a"].shape
    return Bound(Launch(KERNELS, "transpose_naive<32>", grid=(1, 1), block=(2048, 1),
                        args=(inputs["a"], out, np.int32(rows), np.int32(cols)), result=out))


def test_run_goes_on_after_a_launch_failure(machine, monkeypatch):
    import loclab.cases.transpose as transpose
    from loclab.bench.runner import run

    bad = Variant("gpu-bad-shape", "gpu", "optimized", "block too large", _oversized_block)
    monkeypatch.setattr(transpose, "CASE",
                        replace(transpose.CASE, variants=transpose.CASE.variants + (bad,)))
    document = run(cases=["transpose"], device="gpu", size="small")
    rows = {r["variant"]: r for r in document["results"]}
    assert "transpose_naive<32>" in rows["gpu-bad-shape"]["error"]
    assert "block=(2048, 1)" in rows["gpu-bad-shape"]["error"]
    assert document["failures"] == 1
    assert all(r["valid"] for name, r in rows.items() if name != "gpu-bad-shape")
    assert document["references"]["gpu_copy_gbps"] > 0
    assert all(r["timer"] == "cuda-events" for r in rows.values())


def test_gpu_detection(machine):
    gpu = machine.gpu
    assert gpu.sms > 0 and gpu.l2_bytes > 0 and gpu.shared_mem_per_block >= 48 * 1024
    assert gpu.theoretical_gbps > 100 and gpu.peak_gflops_fp32 > 1000
