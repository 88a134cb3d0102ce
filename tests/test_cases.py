"""Every CPU variant of every case, at awkward sizes, against its golden output."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loclab.bench.auto import AUTO_VARIANTS, get_case
from loclab.cases import case_names
from tests.case_runs import run_variant

CPU_VARIANTS = [(name, variant.name) for name in case_names()
                for variant in get_case(name).variants_on("cpu")]


def sizes_for(case, variant) -> list:
    """Every test size; for an auto row, which plans and compiles anew at each size (two to
    ten seconds each), the first (degenerate) and the last (CI's 15 minutes)."""
    dims = list(case.test_dims)
    if variant.name not in AUTO_VARIANTS:
        return dims
    return [dims[k] for k in sorted({0, len(dims) - 1})]


@pytest.mark.parametrize("case_name, variant_name", CPU_VARIANTS)
def test_cpu_variant_matches_golden_at_every_test_size(case_name, variant_name, machine):
    case = get_case(case_name)
    variant = next(v for v in case.variants if v.name == variant_name)
    assert case.test_dims, f"{case_name} declares no test sizes"
    for dims in sizes_for(case, variant):
        if variant.skip_reason(dims, machine):  # does not apply there (and says so in a run)
            continue
        check = run_variant(case, variant, dims, machine)
        assert check.valid, f"{variant_name} at {dims}: {check.problem}"


@settings(max_examples=40, deadline=None)
@given(rows=st.integers(1, 200), cols=st.integers(1, 200),
       outer_log=st.integers(0, 6), inner_log=st.integers(0, 6))
def test_blocked_transpose_any_shape_any_tiles(rows, cols, outer_log, inner_log):
    from loclab.cases.transpose.cpu import transpose_blocked

    a = np.random.default_rng(rows * cols).random((rows, cols), dtype=np.float32)
    out = np.full((cols, rows), np.nan, np.float32)
    inner = 1 << inner_log
    outer = max(1 << outer_log, inner)
    transpose_blocked(a, out, outer, inner)
    np.testing.assert_array_equal(out, a.T)


def test_blocked_tiles_are_the_space_default(machine):
    """Other cases transpose with the tiles the transposition uses untuned (the rules:
    tests/test_transpose_cpu.py)."""
    from loclab.cases.transpose.cpu import blocked_space, blocked_tiles

    default = blocked_space(machine).default
    assert blocked_tiles(machine) == (default["outer_tile"], default["inner_tile"])



def test_every_lazy_setup_space_and_skip_names_a_function_that_exists():
    """A GPU variant's setup is only called on a GPU: its name is checked here, on any
    machine (the modules import without CuPy)."""
    import importlib

    for name in case_names():
        for variant in get_case(name).variants:
            for rule in (variant.setup, variant.space, variant.skip, variant.traffic):
                target = getattr(rule, "target", None)
                if target:
                    module, function = target
                    assert callable(getattr(importlib.import_module(module), function, None)), (
                        name, variant.name, target)
