"""The CI kernel check: every listed instantiation is compiled, failures and spills are seen."""

import shutil

import pytest

from loclab.gpu.kernels import KernelSource
from loclab.tools.nvcc_check import compile_source, kernel_sources, resource_lines, translation_unit

PTXAS = """ptxas info    : Compiling entry function '_Z4copyPKfPf' for 'sm_90'
ptxas info    : Function properties for _Z4copyPKfPf
    0 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 4224 bytes smem
ptxas info    : Compiling entry function '_Z5naivePKfPf' for 'sm_90'
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 12 registers, used 0 barriers
"""


def test_every_case_kernel_file_is_checked():
    paths = {source.path.parent.name for source in kernel_sources()}
    assert {"copy", "transpose"} <= paths
    for source in kernel_sources():
        assert source.path.exists() and source.name_expressions


def test_translation_unit_takes_the_address_of_every_instantiation(tmp_path):
    source = KernelSource(tmp_path / "k.cu", ("f<1>", "g<2,3>"))
    unit = translation_unit(source)
    assert f'#include "{tmp_path / "k.cu"}"' in unit
    assert "(void*)&f<1>" in unit and "(void*)&g<2,3>" in unit


def test_resource_report_lines():
    assert resource_lines(PTXAS) == [
        "  _Z4copyPKfPf: 40 registers, spill stores/loads 8/4 bytes, 4224 bytes shared",
        "  _Z5naivePKfPf: 12 registers, spill stores/loads 0/0 bytes, 0 bytes shared"]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on the PATH")
def test_a_kernel_that_does_not_compile_fails(tmp_path):
    broken = tmp_path / "broken.cu"
    broken.write_text("template <int N> __global__ void k(float* x) { x[0] = undefined_name; }\n")
    ok, output = compile_source(KernelSource(broken, ("k<1>",)), "sm_90", tmp_path)
    assert not ok and "undefined_name" in output


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on the PATH")
def test_cub_wrapper_builds_and_exports_every_entry(tmp_path):
    import ctypes

    from loclab.gpu import cub

    target = tmp_path / "libloclab_cub.so"
    cub.build("sm_90", target)
    library = ctypes.CDLL(str(target))
    for entry in ("inclusive_sum_float", "exclusive_sum_int", "select_flagged_float",
                  "sort_keys_uint", "sort_pairs_uint", "inclusive_sum_by_key_float"):
        assert getattr(library, f"loclab_cub_{entry}")
