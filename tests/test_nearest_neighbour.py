"""The nearest-neighbour case beyond the generic per-variant tests: the golden against the
lectures' loop on inputs full of ties (also ties that rounding makes), each numba kernel at
any size and tiling, every CPU variant on tied inputs, sizes (bad ones refused in one line)
and work; the GPU tuning spaces (no GPU needed); then every GPU kernel on tied inputs and a
sample of every space's configurations at awkward sizes (marked gpu).

The tied inputs put their ties everywhere in the points, not only in the first tile: a kernel
that mishandles a later tile, the last partial one or a tie across two tiles fails."""

import inspect
import itertools
import random
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loclab.bench.auto import get_case
from loclab.cases import nearest_neighbour as nn
from loclab.cases.nearest_neighbour import cpu, gpu
from loclab.errors import UsageError
from loclab.measure.validate import compare, poison
from tests.gpus import H200
from tests.spaces import allowed

CASE = get_case("nearest-neighbour")  # with the harness's auto rows

# Values that repeat, sit halfway between others, carry both zeros, or differ from 1 by less
# than half its ulp (so that several distances round to the same float32).
TRICKY = (0.0, -0.0, 0.25, 0.5, 0.75, 1.0, 1.5, -1.0, 1e-8, 2e-8, 2.5e-8, 1e20, -1e20)
VALUES = st.one_of(st.sampled_from(TRICKY), st.floats(-2.0**100, 2.0**100, width=32))
SIDES = st.one_of(st.sampled_from((1, 2, 3, 15, 16, 17, 63, 64, 65, 255, 256, 257)),
                  st.integers(1, 300))
POWERS = st.sampled_from((1, 2, 4, 8, 16, 32, 64, 128, 256))
LEVELS = st.integers(1, 400)  # few: answers in the first points; about n/2: anywhere


def loop(queries, points):
    """The lectures' loop nest, literally, in float32."""
    nns = []
    for q in queries:
        best, nearest = np.float32(np.inf), -1
        for j, p in enumerate(points):
            d = abs(np.float32(q) - np.float32(p))
            if d < best:
                best, nearest = d, j
        nns.append(nearest)
    return np.array(nns, np.int32)


def brute_force(queries, points):
    """Every distance, then the first minimum of each row: the loop's answer, fast."""
    return np.abs(queries[:, None] - points[None, :]).argmin(axis=1).astype(np.int32)


def tied(m, n, levels=None, seed=0):
    """Points on ``levels`` levels of 1/levels (inexact: their distances round), queries on
    a grid twice as fine: many duplicates, many queries halfway between two points. With
    about n/2 levels (the default), each value's first point, the answer, lies anywhere."""
    levels = levels or max(1, n // 2)
    rng = np.random.default_rng(seed)
    points = (rng.integers(1, levels + 1, n) / levels).astype(np.float32)
    queries = (rng.integers(0, 2 * levels + 2, m) / (2 * levels)).astype(np.float32)
    return {"queries": queries, "points": points}


def halfway(m, n, seed=0):
    """Distinct whole-number points in random order and queries on every whole and half
    number around them: about half of the queries sit exactly halfway between two points,
    the smaller index on either side, anywhere in the points. The first query is the last
    point, the last query the first (answers n - 1 and 0)."""
    rng = np.random.default_rng(seed)
    points = rng.permutation(n).astype(np.float32)
    queries = (rng.integers(-1, 2 * n, m) / 2).astype(np.float32)
    queries[-1], queries[0] = points[0], points[-1]
    return {"queries": queries, "points": points}


TIED_INPUTS = {"tied": tied, "halfway": halfway}


def as_inputs(queries, points):
    return {"queries": np.array(queries, np.float32), "points": np.array(points, np.float32)}


# --- golden ---------------------------------------------------------------------------------

@pytest.mark.parametrize("queries, points, expected", [
    ([0.5], [0.25, 0.75], [0]),  # halfway: the smaller index
    ([0.5], [0.75, 0.25], [0]),
    ([0.3], [0.3, 0.3, 0.3], [0]),  # duplicates
    ([1.0], [1e-8, 2.5e-8, 2e-8], [0]),  # 1 - p rounds to 1 for all three
    ([1.0], [0.0, -0.0], [0]),
    ([2.0, -2.0], [1.0, -1.0, 5.0], [0, 1]),
])
def test_golden_breaks_ties_as_the_loop(queries, points, expected):
    inputs = as_inputs(queries, points)
    np.testing.assert_array_equal(nn.golden(inputs), expected)
    np.testing.assert_array_equal(loop(inputs["queries"], inputs["points"]), expected)


@settings(max_examples=300, deadline=None)
@given(queries=st.lists(VALUES, min_size=1, max_size=20),
       points=st.lists(VALUES, min_size=1, max_size=40))
def test_golden_is_the_lectures_loop(queries, points):
    inputs = as_inputs(queries, points)
    result = nn.golden(inputs)
    assert result.dtype == np.int32
    np.testing.assert_array_equal(result, loop(inputs["queries"], inputs["points"]))


@settings(max_examples=30, deadline=None)
@given(m=SIDES, n=SIDES, levels=LEVELS, seed=st.integers(0, 2**16))
def test_golden_on_tied_and_random_inputs(m, n, levels, seed):
    random_inputs = CASE.make_inputs({"queries": m, "points": n}, np.random.default_rng(seed))
    for inputs in (tied(m, n, levels, seed), halfway(m, n, seed), random_inputs):
        np.testing.assert_array_equal(nn.golden(inputs),
                                      brute_force(inputs["queries"], inputs["points"]))


def test_range_min_covers_every_range():
    values = np.random.default_rng(1).integers(0, 1000, 37)
    low, high = np.array(list(itertools.combinations(range(38), 2))).T
    expected = [values[a:b].min() for a, b in zip(low, high)]
    np.testing.assert_array_equal(nn._range_min(values, low, high), expected)


@pytest.mark.parametrize("make", TIED_INPUTS.values(), ids=TIED_INPUTS)
def test_tied_inputs_tie_anywhere_in_the_points(make):
    """What the tests below rely on: ties that the smaller index decides (the first and the
    last nearest point differ) for many queries, and answers up to the last points."""
    q, p = make(2000, 4099).values()
    distances = np.abs(q[:, None] - p[None, :])
    first = distances.argmin(axis=1)
    last = p.size - 1 - distances[:, ::-1].argmin(axis=1)
    assert np.mean(first != last) > 0.3
    assert np.any(first >= 0.99 * p.size)


# --- bad sizes ---------------------------------------------------------------------------

@pytest.mark.parametrize("dims, named", [
    ({"queries": 0, "points": 5}, "queries = 0"),
    ({"queries": 5, "points": 0}, "points = 0"),
    ({"queries": -3, "points": 5}, "queries = -3"),
    ({"queries": 5, "points": nn.MAX_EXTENT + 1}, f"points = {nn.MAX_EXTENT + 1}"),
    ({"queries": 2.5, "points": 5}, "queries = 2.5"),
])
def test_bad_sizes_are_refused_in_one_line_naming_the_size(dims, named):
    with pytest.raises(UsageError, match=named) as refused:
        CASE.make_inputs(dims, np.random.default_rng(0))
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize("queries, points", [([0.5], []), ([], [0.5])])
def test_empty_inputs_are_refused_by_the_golden_and_every_variant(queries, points, machine):
    inputs = as_inputs(queries, points)
    h200 = replace(machine, gpu=H200)  # the GPU setups refuse before they need CuPy
    with pytest.raises(UsageError, match="= 0: must be"):
        nn.golden(inputs)
    for variant in CASE.variants:
        with pytest.raises(UsageError, match="= 0: must be"):
            variant.setup(inputs, poisoned(len(queries)), h200)


# --- the numba kernels and the library's chunks, called directly ---------------------------

def poisoned(m):
    out = np.empty(m, np.int32)
    poison(out)
    return out


@settings(max_examples=40, deadline=None)
@given(m=SIDES, n=SIDES, levels=LEVELS, seed=st.integers(0, 2**16),
       query_tile=POWERS, point_tile=POWERS, block=POWERS)
def test_tiled_kernel_any_size_any_tiles(m, n, levels, seed, query_tile, point_tile, block):
    for inputs in (tied(m, n, levels, seed), halfway(m, n, seed)):
        q, p = inputs["queries"], inputs["points"]
        out = cpu.nearest_tiled(q, p, poisoned(m), query_tile, point_tile, block)
        np.testing.assert_array_equal(out, brute_force(q, p))


@settings(max_examples=40, deadline=None)
@given(m=SIDES, n=SIDES, levels=LEVELS, seed=st.integers(0, 2**16),
       query_tile=POWERS, point_tile=POWERS)
def test_min_first_kernel_any_size_any_tiles(m, n, levels, seed, query_tile, point_tile):
    for inputs in (tied(m, n, levels, seed), halfway(m, n, seed)):
        q, p = inputs["queries"], inputs["points"]
        out = cpu.nearest_min_first(q, p, poisoned(m), query_tile, point_tile)
        np.testing.assert_array_equal(out, brute_force(q, p))


@settings(max_examples=100, deadline=None)
@given(queries=st.lists(VALUES, min_size=1, max_size=20),
       points=st.lists(VALUES, min_size=1, max_size=40), tile=POWERS)
def test_kernels_break_rounded_ties_as_the_loop(queries, points, tile):
    inputs = as_inputs(queries, points)
    expected = loop(inputs["queries"], inputs["points"])
    q, p, m = inputs["queries"], inputs["points"], len(queries)
    np.testing.assert_array_equal(cpu.nearest_naive(q, p, poisoned(m)), expected)
    np.testing.assert_array_equal(cpu.nearest_tiled(q, p, poisoned(m), tile, tile, tile),
                                  expected)
    np.testing.assert_array_equal(cpu.nearest_min_first(q, p, poisoned(m), tile, tile),
                                  expected)


@pytest.mark.parametrize("make", TIED_INPUTS.values(), ids=TIED_INPUTS)
@pytest.mark.parametrize("rows", [1, 2, 7, 100])
def test_broadcast_argmin_any_chunk(rows, make):
    inputs = make(99, 31)
    buffer = np.empty((rows, 31), np.float32)
    out = nn.broadcast_argmin(np, inputs["queries"], inputs["points"], poisoned(99), buffer)
    np.testing.assert_array_equal(out, brute_force(inputs["queries"], inputs["points"]))


# --- the CPU variants as the harness sets them up --------------------------------------------

@pytest.mark.parametrize("make", TIED_INPUTS.values(), ids=TIED_INPUTS)
@pytest.mark.parametrize("variant", CASE.variants_on("cpu"), ids=lambda v: v.name)
@pytest.mark.parametrize("m, n", [(1, 1), (1, 5000), (513, 1025), (2000, 9001)])
def test_cpu_variants_give_exactly_the_golden_indices_on_tied_inputs(variant, m, n, make,
                                                                      machine):
    inputs = make(m, n)
    for array in inputs.values():
        array.setflags(write=False)
    result = variant.setup(inputs, poisoned(m), machine).run()
    check = compare(result, nn.golden(inputs), CASE.tolerance_for(inputs))
    assert check.valid and check.max_rel_err == 0, check.problem


@pytest.mark.parametrize("name", ["tiled", "min_first"])
def test_cpu_space_defaults_are_allowed(name, machine):
    space = getattr(cpu, f"{name}_space")(machine)
    assert space.restriction(space.default, {}, machine) is None
    assert all(space.default[key] in values for key, values in space.values.items())
    bound = getattr(cpu, name)(tied(5, 5), poisoned(5), machine)
    assert {key: bound.params[key] for key in space.default} == dict(space.default)


def test_cpu_restrictions_say_why(machine):
    l1_points = machine.cpu.l1d_bytes // 4
    tiled = {"query_tile": 256, "point_tile": 1024, "block": 256}
    assert "exceeds the tile" in cpu.tiled_restriction({**tiled, "block": 512}, {}, machine)
    assert "L1d" in cpu.tiled_restriction({**tiled, "point_tile": l1_points}, {}, machine)
    assert "L1d" in cpu.min_first_restriction({"point_tile": 2 * l1_points}, {}, machine)


# --- sizes and work --------------------------------------------------------------------------

def test_work_counts_pairs_and_two_flops_a_pair():
    work = nn.work({"queries": 3, "points": 5})
    assert work.bytes == 4 * (3 + 5 + 3) and work.flops == 2 * 15 and work.items == 15
    assert nn.output({"queries": 3, "points": 5}) == ((3,), np.int32)


def test_sizes(machine):
    gpu_machine = replace(machine, gpu=H200)
    assert CASE.dims("default", "gpu", gpu_machine) == [{"queries": 2**18, "points": 2**18}]
    (cpu_large,) = CASE.dims("large", "cpu", machine)
    (gpu_large,) = CASE.dims("large", "gpu", gpu_machine)
    assert nn.work(cpu_large).bytes >= 4 * machine.cpu.llc_bytes
    assert nn.work(gpu_large).bytes >= 4 * H200.l2_bytes
    presets = [CASE.dims(size, device, gpu_machine) for size in CASE.sizes
               for device in ("cpu", "gpu")]
    for dims in [*CASE.test_dims, *itertools.chain(*presets)]:
        nn.check_dims(dims)  # every size the case names is one its variants accept


def test_the_kernels_best_update_adds_minus_zero_exactly():
    """nn_shared's best = |d| + -0 (an FADD, to keep the update off the ALU pipe) must be |d|
    bit for bit for every distance, +0, subnormals and infinity included (points past n are
    +inf): -0 is IEEE addition's identity, where +0 would turn a -0 into +0."""
    d = np.array([0.0, -0.0, 1e-45, -1e-45, 1.1754942e-38, 0.5, -3.0, 1e38, np.inf, -np.inf],
                 np.float32)
    d = np.concatenate([d, np.random.default_rng(0).standard_normal(10_000).astype(np.float32)])
    distance = np.abs(d)
    updated = distance + np.float32(-0.0)
    np.testing.assert_array_equal(updated.view(np.int32), distance.view(np.int32))


def test_issue_limit_is_a_pair_per_lane_and_clock_at_four_instructions(machine):
    h200 = replace(machine, gpu=H200)
    assert nn.issue_limit(h200, 4) == pytest.approx(132 * 32 * 1.98e9)
    assert nn.issue_limit(h200, 2) == pytest.approx(2 * nn.issue_limit(h200, 4))


def test_rows_are_rated_against_the_gpu_issue_limit_only(machine):
    roof = CASE.unit_roof("gpu", replace(machine, gpu=H200))
    assert roof.per_s == pytest.approx(132 * 32 * 1.98e9) and "4 instructions" in roof.what
    assert CASE.unit_roof("cpu", replace(machine, gpu=H200)) is None
    assert CASE.unit_roof("gpu", replace(machine, gpu=None)) is None
    assert CASE.unit == "pairs"


# --- the GPU tuning spaces (no GPU needed) ---------------------------------------------------

GPU_SPACES = {"shared": gpu.shared_space, "min_first": gpu.min_first_space}


@pytest.mark.parametrize("name", GPU_SPACES)
def test_gpu_space_defaults_are_the_setup_defaults_and_listed(name, machine):
    h200 = replace(machine, gpu=H200)
    space = GPU_SPACES[name](h200)
    defaults = {key: parameter.default
                for key, parameter in inspect.signature(getattr(gpu, name)).parameters.items()
                if parameter.default is not inspect.Parameter.empty}
    assert defaults == dict(space.default)
    assert space.restriction(space.default, {}, h200) is None
    kernel = getattr(gpu, f"{name}_kernel")(**space.default)
    assert kernel in gpu.KERNELS.name_expressions


def test_gpu_restrictions_say_why(machine):
    h200 = replace(machine, gpu=H200)
    config = {**gpu.MIN_FIRST_DEFAULT}
    assert "threads" in gpu.shared_restriction({**config, "threads": 2048}, {}, h200)
    assert "shared memory" in gpu.shared_restriction({**config, "b": 16384}, {}, h200)
    assert "registers" in gpu.shared_restriction({**config, "q": 64}, {}, h200)
    assert "divide" in gpu.min_first_restriction({**config, "b": 256, "c": 512}, {}, h200)


# --- on a GPU --------------------------------------------------------------------------------

GPU_SIZES = [(1, 1), (1, 3000), (511, 1023), (513, 1025), (4099, 2049), (3001, 5003)]


def run_on_gpu(setup, inputs, machine, **config):
    import cupy

    staged = {name: cupy.asarray(array) for name, array in inputs.items()}
    out = cupy.empty(inputs["queries"].size, np.int32)
    poison(out)
    result = setup(staged, out, machine, **config).run()
    return compare(cupy.asnumpy(result), nn.golden(inputs), 0.0)


@pytest.mark.gpu
@pytest.mark.parametrize("variant", CASE.variants_on("gpu"), ids=lambda v: v.name)
def test_gpu_variants_give_exactly_the_golden_indices_on_tied_inputs(variant, machine):
    for m, n in GPU_SIZES:
        for inputs in (tied(m, n), halfway(m, n), as_inputs([1.0] * m, [1e-8, 2.5e-8, 2e-8] * n)):
            check = run_on_gpu(variant.setup, inputs, machine)
            assert check.valid and check.max_rel_err == 0, f"{m}x{n}: {check.problem}"


@pytest.mark.gpu
@pytest.mark.parametrize("name", GPU_SPACES)
def test_gpu_space_sample_at_awkward_sizes(name, machine):
    space = GPU_SPACES[name](machine)
    sample = random.Random(0).sample(allowed(space, machine), 12)
    for config, (m, n), make in itertools.product(sample, [(1000, 4099), (4099, 1000)],
                                                  TIED_INPUTS.values()):
        check = run_on_gpu(getattr(gpu, name), make(m, n), machine, **config)
        assert check.valid and check.max_rel_err == 0, f"{config} {m}x{n}: {check.problem}"
