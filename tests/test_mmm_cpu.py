"""The mmm case's CPU variants beyond the generic per-variant tests: each numba kernel on
hypothesis-generated shapes (sides of one, primes, one either side of tile and register-block
multiples), every configuration the tuning spaces allow at awkward shapes, the setups'
defaults (the vector width and the blocking from a detected CPU, faked), what the restrictions
reject, and that the register block lives in vector registers of the ISA's full width.

The kernels are cached by numba (``cache=True``): a test that reads generated code compiles
its own uncached function, and a change to a kernel's source recompiles it."""

import platform
import re
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loclab.bench.auto import get_case
from loclab.cases.mmm import cpu
from loclab.cpu.vectors import fma_block
from loclab.measure.validate import compare, poison
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
       depth=st.integers(1, 17), transposed=st.booleans(), workers=st.integers(1, 3))
def test_packed_blocks_are_the_columns_padded_with_zeros(rows, cols, width, depth, transposed,
                                                         workers):
    x = np.random.default_rng(rows).random((rows, cols), dtype=np.float32)
    source = x.T if transposed else x  # A is packed through its transposed view
    height, columns = source.shape
    panels = -(-columns // width)
    padded = np.zeros((height, panels * width), np.float32)
    padded[:, :columns] = source
    expected = np.concatenate([  # depth blocks one after the other, panels within each
        padded[k0:k0 + depth].reshape(-1, panels, width).transpose(1, 0, 2).ravel()
        for k0 in range(0, height, depth)])
    packed = cpu.pack_blocks(source, np.full(expected.size, np.nan, np.float32), width, depth,
                             workers)
    np.testing.assert_array_equal(packed, expected)


@settings(max_examples=40, deadline=None)
@given(m=SIDES, n=SIDES, k=SIDES, block=st.sampled_from([(2, 4), (6, 2), (14, 2), (8, 1)]),
       per=st.tuples(st.integers(1, 5), st.integers(1, 5)), kc=st.integers(1, 70),
       workers=st.integers(1, 3))
def test_register_tiled_kernel_any_shape_any_blocks(m, n, k, block, per, kc, workers, machine):
    r, vectors = block
    lanes, _ = cpu.vector_registers(machine.cpu)
    width = vectors * lanes
    inputs = product_inputs(m, n, k)
    panels_a, panels_b = -(-m // r), -(-n // width)
    pa = cpu.pack_blocks(inputs["a"].T, cpu.aligned_float32(panels_a * r * k), r, kc, workers)
    pb = cpu.pack_blocks(inputs["b"], cpu.aligned_float32(panels_b * width * k), width, kc,
                         workers)
    rows, cols = cpu.block_bounds(panels_a, panels_b, *per, workers)
    kernel = cpu.register_tiled_kernel(r, vectors, lanes)
    assert_matches_golden(kernel(pa, pb, poisoned(m, n), k, kc, rows, cols, workers), inputs)


def test_register_tiled_sums_along_k_in_order(machine):
    """Each depth block goes on from C's partial sums: cutting k into blocks of one gives the
    same bits as one block (a reassociated sum would differ in its last bits somewhere)."""
    m, n, k = 29, 45, 300
    inputs = product_inputs(m, n, k)
    results = [cpu.register_tiled(inputs, poisoned(m, n), machine, kc=kc).run()
               for kc in (cpu.DEPTHS[0], 1024)]
    np.testing.assert_array_equal(*results)


@settings(max_examples=60, deadline=None)
@given(panels_a=st.integers(1, 300), panels_b=st.integers(1, 100), per_a=st.integers(1, 400),
       per_b=st.integers(1, 40), workers=st.integers(1, 32))
def test_block_bounds_cover_the_panels_evenly(panels_a, panels_b, per_a, per_b, workers):
    rows, cols = cpu.block_bounds(panels_a, panels_b, per_a, per_b, workers)
    for bounds, panels in ((rows, panels_a), (cols, panels_b)):
        sizes = np.diff(bounds)
        assert bounds[0] == 0 and bounds[-1] == panels and sizes.min() >= 1
        assert sizes.max() - sizes.min() <= 1
    assert np.diff(cols).max() <= per_b and np.diff(rows).max() <= per_a
    blocks = (rows.size - 1) * (cols.size - 1)
    assert blocks >= cpu.BLOCKS_PER_THREAD * workers or rows.size - 1 == panels_a


# --- every configuration the spaces allow ------------------------------------------------------

def register_tiled_configs(space, machine, dims):
    """Every register block the restriction allows with the default blocking, and every
    blocking with the default register block: the product of the two is thousands of runs of
    the same code paths."""
    default = space.default
    configs = allowed(space, machine, dims)
    blocks = sorted({(c["r"], c["width"]) for c in configs})
    blockings = sorted({(c["mc"], c["kc"], c["nc"]) for c in configs
                        if (c["r"], c["width"]) == (default["r"], default["width"])})
    candidates = ([{**default, "r": r, "width": width} for r, width in blocks]
                  + [{**default, "mc": mc, "kc": kc, "nc": nc} for mc, kc, nc in blockings])
    return [c for c in candidates if space.restriction(c, dims, machine) is None]


@pytest.mark.parametrize("variant", ["cpu-blocked", "cpu-register-tiled"])
def test_every_allowed_configuration_matches_golden(variant, machine):
    variant = next(v for v in CASE.variants if v.name == variant)
    space = variant.space(machine)
    for dims in SPACE_SHAPES:
        inputs = product_inputs(dims["m"], dims["n"], dims["k"])
        golden, tolerance = CASE.golden(inputs), CASE.tolerance_for(inputs)
        configs = (register_tiled_configs(space, machine, dims)
                   if variant.name == "cpu-register-tiled" else allowed(space, machine, dims))
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
    ("AVX-512", 8, 64, "vector registers of 32"),  # 32 accumulators + 4 + a broadcast
    ("AVX-512", 12, 48, "vector registers of 32"),  # 36 + 3 + 1
    ("AVX2", 6, 32, "vector registers of 16"),  # 24 + 4 + 1
    ("AVX2", 6, 20, "not whole 8-lane vectors"),
    ("AVX-512", 14, 32, None),  # 28 + 2 + 1 = 31
    ("AVX-512", 6, 64, None),
    ("AVX2", 6, 16, None),  # 12 + 2 + 1 = 15
])
def test_register_tiled_restriction_guards_the_register_file(isa, r, width, reason, machine):
    here = with_cpu(machine, isa=isa, l1d_bytes=48 * 1024, l2_bytes=1 << 20)
    config = {"r": r, "width": width, "mc": 256, "kc": 256, "nc": 256}
    got = cpu.register_tiled_restriction(config, {}, here)
    assert (got is None) if reason is None else (reason in got)


def test_register_tiled_restriction_rejects_small_and_oversized_blocks(machine):
    here = with_cpu(machine, isa="AVX-512", l1d_bytes=32 * 1024, l2_bytes=1 << 20)
    config = {"r": 14, "width": 32, "mc": 256, "kc": 256, "nc": 256}
    reject = cpu.register_tiled_restriction
    assert reject(config, {}, here) is None
    assert "smaller than one 14x32" in reject({**config, "nc": 16}, {}, here)
    assert "smaller than one 14x32" in reject({**config, "mc": 8}, {}, here)
    assert "panel of A exceeds L1d" in reject({**config, "kc": 1024}, {}, here)  # 56 KiB
    assert "block of B exceeds L2" in reject({**config, "kc": 512, "nc": 1024}, {}, here)


@pytest.mark.parametrize("isa, block, bits", [
    ("AVX-512", (14, 32), 512), ("AVX2", (4, 24), 256), ("AVX", (4, 24), 256),
    ("NEON", (14, 8), 128), ("SSE2", (4, 12), 128), (None, (4, 12), 128)])
def test_register_block_fills_the_detected_vector_registers(isa, block, bits, machine):
    """The ISA's full width, whatever LLVM would prefer: 16 lanes on AVX-512, in the most
    accumulators that leave a register for each vector of B and one for a broadcast, with
    fewer loads than FMAs (14 x 1 vectors, 14 accumulators in 16 registers, would not)."""
    here = with_cpu(machine, isa=isa)
    default = cpu.register_tiled_space(here).default
    assert (default["r"], default["width"]) == block
    params = cpu.register_tiled(product_inputs(5, 7, 3), poisoned(5, 7), here).params
    assert (params["isa"], params["vector_bits"]) == (isa, bits)


@pytest.mark.parametrize("caches", CACHES)
def test_register_tiled_blocking_follows_the_caches(caches, machine):
    """kc: the deepest r-row panel of A in half of L1d; nc: the widest kc x nc block of B in
    half of L2; mc: the tallest mc x kc block of A in half a core's share of the LLC. The next
    candidate up would overflow each."""
    here = with_cpu(machine, isa="AVX-512", **caches)
    info = here.cpu
    default = cpu.register_tiled_space(here).default
    kc = default["kc"]
    for value, candidates, budget, unit in (
            (kc, cpu.DEPTHS, info.l1d_bytes / 2, default["r"] * 4),
            (default["nc"], cpu.BLOCK_COLUMNS, info.l2_bytes / 2, kc * 4),
            (default["mc"], cpu.BLOCK_ROWS, info.llc_share_bytes / (2 * info.cores), kc * 4)):
        assert value * unit <= budget or value == candidates[0]
        bigger = [c for c in candidates if c > value]
        assert not bigger or bigger[0] * unit > budget


# --- code generation ----------------------------------------------------------------------------

@pytest.mark.skipif(platform.machine() != "x86_64", reason="reads x86 assembly")
def test_register_block_accumulates_in_full_width_vector_registers(machine):
    """The lesson of the variant: the block lives in vector registers of the ISA's full width
    (zmm on AVX-512, where LLVM's own vectorizer would pick ymm), so the loop over k has one
    packed FMA per accumulator vector, on registers of that width only, and no gathers."""
    from numba import njit

    lanes, _ = cpu.vector_registers(machine.cpu)
    register = {16: "zmm", 8: "ymm"}.get(lanes)
    if machine.cpu.isa not in ("AVX-512", "AVX2") or register is None:
        pytest.skip(f"no FMA vectors to look for ({machine.cpu.isa})")
    r, vectors = cpu.register_block(lanes, cpu.vector_registers(machine.cpu)[1])

    @njit  # not cached: inspectable
    def one_block(pa, pb, out, depth):
        fma_block(pa, 0, pb, 0, depth, out, 0, 0, False, r, vectors, lanes)

    width = vectors * lanes
    depth = 3
    out = poisoned(r, width)
    one_block(np.ones(depth * r, np.float32), np.ones(depth * width, np.float32), out, depth)
    np.testing.assert_array_equal(out, np.full((r, width), depth, np.float32))
    asm = one_block.inspect_asm(one_block.signatures[0])
    fmas = re.findall(r"vfmadd\w*ps\s+[^\n]*", asm)
    assert len([f for f in fmas if register in f]) >= r * vectors
    assert all(register in f for f in fmas), fmas
    assert not re.search(r"gather|scatter", asm)
