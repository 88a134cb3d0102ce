"""The mmm case's CPU variants beyond the generic per-variant tests: each numba kernel on
hypothesis-generated shapes (sides of one, primes, one either side of tile and register-block
multiples), every configuration the tuning spaces allow at awkward shapes, the setups'
defaults, what the restrictions reject, and that the register block lives in vector
registers."""

import platform
import re
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loclab.bench.validate import compare, poison
from loclab.cases import get_case
from loclab.cases.mmm import cpu
from tests.spaces import allowed

CASE = get_case("mmm")
# Sides around every tile (32 ... 128), register-block width (16, 32, 64) and height (2 ... 8).
EDGES = (1, 2, 3, 5, 7, 13, 15, 16, 17, 31, 32, 33, 63, 64, 65, 97, 127, 128, 129)
SIDES = st.one_of(st.sampled_from(EDGES), st.integers(1, 140))
# Awkward for every configuration: one row, one column, no side a multiple of anything.
SPACE_SHAPES = ({"m": 67, "n": 131, "k": 129}, {"m": 1, "n": 97, "k": 70},
                {"m": 45, "n": 1, "k": 200})


def product_inputs(m, n, k, seed=0):
    """Read-only inputs, as the harness stages them."""
    inputs = CASE.make_inputs({"m": m, "n": n, "k": k}, np.random.default_rng(seed))
    for array in inputs.values():
        array.setflags(write=False)
    return inputs


def poisoned(m, n):
    out = np.empty((m, n), np.float32)
    poison(out)
    return out


def assert_matches_golden(result, inputs):
    check = compare(result, CASE.golden(inputs), CASE.tolerance_for(inputs))
    assert check.valid, check.problem


def with_cpu(machine, **changes):
    return replace(machine, cpu=replace(machine.cpu, **changes))


# --- each kernel on any shape -------------------------------------------------------------------

@settings(max_examples=30, deadline=None)
@given(m=SIDES, n=SIDES, k=SIDES)
def test_untiled_kernels_any_shape(m, n, k):
    inputs = product_inputs(m, n, k)
    assert_matches_golden(cpu.mmm_naive(inputs["a"], inputs["b"], poisoned(m, n)), inputs)
    bt = np.ascontiguousarray(inputs["b"].T)
    assert_matches_golden(cpu.mmm_transposed(inputs["a"], bt, poisoned(m, n)), inputs)


@settings(max_examples=40, deadline=None)
@given(m=SIDES, n=SIDES, k=SIDES, tiles=st.tuples(*[st.integers(1, 70)] * 3))
def test_blocked_kernel_any_shape_any_tiles(m, n, k, tiles):
    inputs = product_inputs(m, n, k)
    assert_matches_golden(cpu.mmm_blocked(inputs["a"], inputs["b"], poisoned(m, n), *tiles),
                          inputs)


@settings(max_examples=40, deadline=None)
@given(rows=st.integers(1, 40), cols=st.integers(1, 40), width=st.integers(1, 9),
       transposed=st.booleans())
def test_packed_panels_are_the_columns_padded_with_zeros(rows, cols, width, transposed):
    x = np.random.default_rng(rows).random((rows, cols), dtype=np.float32)
    source = x.T if transposed else x  # A is packed through its transposed view
    depth, columns = source.shape
    panels = -(-columns // width)
    packed = cpu.pack_panels(source, np.full((panels, depth, width), np.nan, np.float32))
    padded = np.zeros((depth, panels * width), np.float32)
    padded[:, :columns] = source
    np.testing.assert_array_equal(packed, padded.reshape(depth, panels, width).transpose(1, 0, 2))


@settings(max_examples=40, deadline=None)
@given(m=SIDES, n=SIDES, k=SIDES, block=st.sampled_from([(2, 64), (6, 32), (8, 16)]),
       tiles=st.tuples(st.integers(1, 70), st.integers(1, 140), st.integers(1, 70)))
def test_register_tiled_kernel_any_shape_any_tiles(m, n, k, block, tiles):
    r, width = block
    inputs = product_inputs(m, n, k)
    pa = cpu.pack_panels(inputs["a"].T, np.empty((-(-m // r), k, r), np.float32))
    pb = cpu.pack_panels(inputs["b"], np.empty((-(-n // width), k, width), np.float32))
    kernel = cpu.register_tiled_kernel(r, width)
    assert_matches_golden(kernel(pa, pb, poisoned(m, n), *tiles), inputs)


# --- every configuration the spaces allow ------------------------------------------------------

@pytest.mark.parametrize("variant", ["cpu-blocked", "cpu-register-tiled"])
def test_every_allowed_configuration_matches_golden(variant, machine):
    variant = next(v for v in CASE.variants if v.name == variant)
    space = variant.space(machine)
    for dims in SPACE_SHAPES:
        inputs = product_inputs(dims["m"], dims["n"], dims["k"])
        golden, tolerance = CASE.golden(inputs), CASE.tolerance_for(inputs)
        configs = allowed(space, machine, dims)
        assert space.default in configs
        for config in configs:
            result = variant.setup(inputs, poisoned(dims["m"], dims["n"]), machine,
                                   **config).run()
            check = compare(result, golden, tolerance)
            assert check.valid, f"{config} at {dims}: {check.problem}"


# --- defaults and restrictions ------------------------------------------------------------------

@pytest.mark.parametrize("setup, space", [(cpu.blocked, cpu.blocked_space),
                                          (cpu.register_tiled, cpu.register_tiled_space)])
def test_setup_defaults_are_the_space_defaults(setup, space, machine):
    inputs = product_inputs(5, 7, 3)
    params = setup(inputs, poisoned(5, 7), machine).params
    assert {key: params[key] for key in space(machine).default} == space(machine).default
    with pytest.raises(TypeError, match="unknown parameters"):
        setup(inputs, poisoned(5, 7), machine, tile=32)


CACHES = [dict(l1d_bytes=l1d * 1024, l2_bytes=l2 * 1024)
          for l1d, l2 in ((32, 256), (48, 1024), (48, 2048), (64, 4096))]


@pytest.mark.parametrize("isa", ["AVX-512", "AVX2", "NEON", None])
@pytest.mark.parametrize("caches", CACHES)
def test_defaults_are_candidates_and_never_rejected(isa, caches, machine):
    here = with_cpu(machine, isa=isa, **caches)
    for space in (cpu.blocked_space(here), cpu.register_tiled_space(here)):
        assert all(space.default[key] in values for key, values in space.values.items())
        assert space.restriction(space.default, {"m": 2048, "n": 2048, "k": 2048}, here) is None


def test_blocked_restriction_rejects_tiles_beyond_the_caches(machine):
    here = with_cpu(machine, l1d_bytes=16 * 1024, l2_bytes=1 << 20)
    reject = cpu.blocked_restriction
    assert "exceeds L2" in reject({"tile_i": 64, "tile_j": 1024, "tile_k": 512}, {}, here)
    assert "exceed L1d" in reject({"tile_i": 64, "tile_j": 4096, "tile_k": 32}, {}, here)
    assert reject({"tile_i": 64, "tile_j": 1024, "tile_k": 256}, {}, here) is None


@pytest.mark.parametrize("isa, r, width, reason", [
    ("AVX-512", 2, 16, "cannot hide the FMA latency"),  # 2 accumulators
    ("AVX-512", 8, 64, "vector registers of 32"),  # 32 accumulators + 4
    ("AVX2", 6, 32, "vector registers of 16"),  # 24 accumulators + 4
    ("AVX-512", 6, 32, None),
    ("AVX2", 6, 16, None),
])
def test_register_tiled_restriction_guards_the_register_file(isa, r, width, reason, machine):
    here = with_cpu(machine, isa=isa, l2_bytes=1 << 20)
    config = {"r": r, "width": width, "tile_i": 256, "tile_j": 256, "tile_k": 256}
    got = cpu.register_tiled_restriction(config, {}, here)
    assert (got is None) if reason is None else (reason in got)


def test_register_tiled_restriction_rejects_small_and_oversized_blocks(machine):
    here = with_cpu(machine, isa="AVX-512", l2_bytes=1 << 20)
    config = {"r": 4, "width": 64, "tile_i": 256, "tile_j": 256, "tile_k": 256}
    reject = cpu.register_tiled_restriction
    assert "smaller than one 4x64" in reject({**config, "tile_j": 32}, {}, here)
    assert "exceeds L2" in reject({**config, "tile_j": 1024, "tile_k": 512}, {}, here)


# --- code generation ----------------------------------------------------------------------------

@pytest.mark.skipif(platform.machine() != "x86_64", reason="reads x86 assembly")
def test_register_block_accumulates_in_vector_registers(machine):
    """The lesson of the variant: LLVM vectorizes the block along j and keeps it in registers,
    so its loop has at least one packed FMA per accumulator vector and no gathers."""
    from numba import njit

    lanes, _ = cpu.vector_registers(machine.cpu)
    if machine.cpu.isa not in ("AVX-512", "AVX2"):
        pytest.skip(f"no FMA vectors to look for ({machine.cpu.isa})")
    r, width = 6, 2 * lanes
    block = njit(fastmath=cpu.CONTRACT)(cpu.register_block.py_func)  # uncached: inspectable

    @njit
    def one_block(pa, pb, out):
        block(pa, pb, out, 0, 0, True, r, width)

    pa, pb = np.ones((3, r), np.float32), np.ones((3, width), np.float32)
    out = poisoned(r, width)
    one_block(pa, pb, out)
    np.testing.assert_array_equal(out, np.full((r, width), 3, np.float32))
    asm = block.inspect_asm(block.signatures[0])
    assert len(re.findall(r"vfmadd\w*ps\s+[^\n]*[yz]mm", asm)) >= r * width // lanes
    assert not re.search(r"gather|scatter", asm)
