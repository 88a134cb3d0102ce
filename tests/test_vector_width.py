"""loclab's processes compile Numba's loops at the CPU's widest vectors (loclab.cpu.vector_width):
the feature list it sets, that a user's own setting is kept, and what optimize reports."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from loclab.cpu.vector_width import (COMMAND, PREFERENCE_OFF, VARIABLE, vector_bits,
                                     widened_features)

AVX512_HOST = "+sse2,+avx,+avx2,+avx512f,+avx512bw,-avx512fp16"
AVX2_HOST = "+sse2,+avx,+avx2,-avx512f,-avx512bw"


def test_an_avx512_host_gets_the_256_bit_preference_turned_off():
    assert widened_features(AVX512_HOST) == f"{AVX512_HOST},{PREFERENCE_OFF}"
    assert vector_bits(widened_features(AVX512_HOST)) == 512


def test_a_host_without_512_bit_vectors_is_left_alone():
    assert widened_features(AVX2_HOST) is None  # "-avx512f" is not "+avx512f"
    assert vector_bits(AVX2_HOST) == 256
    assert vector_bits("+sse2,-avx") == 128
    assert vector_bits("+neon,+fp-armv8") == 128


def test_avx512_left_to_the_cpus_name_is_not_given_a_width():
    assert vector_bits(AVX512_HOST) is None  # LLVM may prefer 256 bits by the CPU's name


def _imported_setting(environment: dict[str, str], first: str = "") -> tuple[str | None, str]:
    """NUMBA_CPU_FEATURES after ``import loclab`` in a fresh interpreter (after the statements
    ``first``), and the features Numba then compiles with."""
    script = (f"{first}import os, loclab; from loclab.cpu.vector_width import "
              f"features_in_use; print(os.environ.get({VARIABLE!r})); print(features_in_use())")
    out = subprocess.run([sys.executable, "-c", script], env=environment, check=True,
                         capture_output=True, text=True).stdout.splitlines()
    return (None if out[0] == "None" else out[0]), out[1]


@pytest.mark.parametrize("first", ["", "import numba; "])
def test_importing_loclab_sets_numbas_features_before_it_compiles(first):
    """Also where Numba was imported first (it read its variables then), not yet compiling."""
    import llvmlite.binding as llvm

    environment = {k: v for k, v in os.environ.items() if k != VARIABLE}
    setting, used = _imported_setting(environment, first)
    expected = widened_features(llvm.get_host_cpu_features().flatten())
    assert setting == expected
    if expected is not None:
        assert used == expected  # Numba's target was built with it


def test_once_numba_compiled_its_features_are_left_and_read_as_they_are():
    import llvmlite.binding as llvm

    environment = {k: v for k, v in os.environ.items() if k != VARIABLE}
    first = "import numba; numba.njit(lambda: 0); "  # the target is built
    setting, used = _imported_setting(environment, first)
    assert setting is None and used == llvm.get_host_cpu_features().flatten()


def test_a_users_own_setting_is_kept():
    environment = {**os.environ, VARIABLE: "+sse2,+avx"}
    setting, used = _imported_setting(environment)
    assert setting == "+sse2,+avx" and used == "+sse2,+avx"


@pytest.mark.parametrize("name, value", [("NUMBA_CPU_NAME", "generic"),
                                         ("NUMBA_ENABLE_AVX", "0")])
def test_a_users_choice_of_cpu_is_kept(name, value):
    """A portable cache's generic CPU, or AVX turned off: loclab adds no feature."""
    environment = {k: v for k, v in os.environ.items() if k != VARIABLE}
    setting, _ = _imported_setting({**environment, name: value})
    assert setting is None


def test_the_command_a_note_gives_sets_the_variable_the_same_way():
    import llvmlite.binding as llvm

    host = llvm.get_host_cpu_features().flatten()
    environment = {k: v for k, v in os.environ.items() if k != VARIABLE}
    shown = subprocess.run(["bash", "-c", f"{COMMAND.replace('python', sys.executable)}; "
                            f"echo \"${VARIABLE}\""], env=environment, check=True,
                           capture_output=True, text=True).stdout.strip()
    assert shown == f"{host},{PREFERENCE_OFF}"


@pytest.mark.parametrize("bits", [512, 256])
def test_the_explanation_names_the_width(bits):
    from types import SimpleNamespace

    from loclab.optimize.explain import proof_lines
    from loclab.optimize.measure import Timing

    summary = SimpleNamespace(median=0.002)
    timing = Timing({"N": 10}, 4, summary, SimpleNamespace(median=0.004), None, False, bits)
    result = SimpleNamespace(timing=timing, target="cpu", recipe="parallel(i)", parallel=True,
                             check=SimpleNamespace(max_rel_err=0),
                             verification=SimpleNamespace(original="as Python"))
    text = " ".join(line.strip() for line in proof_lines(result))
    assert f"2x (4 threads, {bits}-bit vectors)" in text
