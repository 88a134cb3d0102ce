"""The GPU side of mmm beyond the generic per-variant tests: the tuning spaces and their
restrictions (no GPU needed), and a sample of every space's configurations at odd shapes."""

import inspect
import random
from dataclasses import replace

import numpy as np
import pytest

from loclab.cases.mmm import CASE, gpu
from loclab.errors import LaunchError
from loclab.measure.validate import compare
from tests.gpus import H200
from tests.spaces import allowed

SPACES = {"block_tiled": gpu.block_tiled_space, "register_tiled": gpu.register_tiled_space,
          "optimized": gpu.optimized_space}


@pytest.fixture
def h200(machine):
    return replace(machine, gpu=H200)


@pytest.mark.parametrize("name", SPACES)
def test_space_defaults_are_the_setup_defaults_and_allowed(name, h200):
    space = SPACES[name](h200)
    defaults = {key: parameter.default
                for key, parameter in inspect.signature(getattr(gpu, name)).parameters.items()
                if parameter.default is not inspect.Parameter.empty}
    assert defaults == dict(space.default)
    assert space.restriction(space.default, {}, h200) is None
    assert all(space.default[key] in values for key, values in space.values.items())


def test_restrictions_say_why(h200):
    optimized = dict(gpu.OPTIMIZED_DEFAULT)
    assert "warp" in gpu.optimized_restriction({**optimized, "lanes_m": 3}, {}, h200)
    assert "divide" in gpu.optimized_restriction({**optimized, "bm": 64}, {}, h200)
    assert "bytes" in gpu.optimized_restriction({**optimized, "bk": 32, "stages": 5}, {}, h200)
    assert "in flight" in gpu.optimized_restriction({**optimized, "stages": 1}, {}, h200)
    assert "registers" in gpu.optimized_restriction({**optimized, "blocks_per_sm": 2}, {}, h200)
    assert "threads" in gpu.register_tiled_restriction({"tile": 64, "r": 1}, {}, h200)
    assert "shared" in gpu.register_tiled_restriction({"tile": 32, "r": 8}, {}, h200)
    assert "registers" in gpu.register_tiled_restriction({"tile": 16, "r": 16}, {}, h200)


def test_the_default_kernel_is_the_one_ci_compiles():
    name = gpu.optimized_kernel(gpu.OPTIMIZED_DEFAULT, True)
    assert name == "mmm_optimized<128,256,16,128,32,16,8,3,true,8,1>"  # warp tile 128 x 32
    assert name in gpu.KERNELS.name_expressions


def test_every_space_offers_configurations_beyond_the_default(h200):
    sizes = {name: len(allowed(space(h200), h200)) for name, space in SPACES.items()}
    assert sizes["block_tiled"] == 3 and sizes["register_tiled"] > 8
    assert sizes["optimized"] > 100


def test_setup_refuses_a_configuration_its_space_rejects(machine):
    inputs = {"a": np.ones((4, 4), np.float32), "b": np.ones((4, 4), np.float32)}
    with pytest.raises(LaunchError, match="warp"):
        gpu.optimized(inputs, None, replace(machine, gpu=H200), lanes_m=3)


def test_the_default_tile_turns_where_that_takes_fewer_waves(h200):
    default = gpu.OPTIMIZED_DEFAULT
    assert h200.gpu.sms == 132
    assert gpu.waves(default, 4096, 4096, h200) == 4  # 512 tiles of 128 x 256
    assert gpu.waves(default, 4096, 4097, h200) == 5  # a 17th column of tiles: 544
    turned = gpu.fitted_to_waves(default, 4096, 4097, h200)
    assert (turned["bm"], turned["bn"]) == (256, 128) and gpu.waves(turned, 4096, 4097, h200) == 4
    assert gpu.fitted_to_waves(default, 4096, 4096, h200) == default  # no fewer: kept
    assert gpu.fitted_to_waves(default, 4097, 4096, h200) == default  # turning adds waves


def test_untiled_loops_are_skipped_beyond_the_default_sizes(machine):
    cpu_naive, gpu_naive = (next(v for v in CASE.variants if v.name == name)
                            for name in ("cpu-naive", "gpu-naive"))
    cube = {side: {"m": side, "n": side, "k": side} for side in (2048, 4096, 8192)}
    assert cpu_naive.skip_reason(cube[2048], machine) is None
    assert "untiled loops" in cpu_naive.skip_reason(cube[4096], machine)
    assert gpu_naive.skip_reason(cube[4096], machine) is None
    assert "1,100 GFlop" in gpu_naive.skip_reason(cube[8192], machine)


# --- on a GPU -------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("dims", [{"m": 127, "n": 129, "k": 131}, {"m": 256, "n": 260, "k": 264}])
@pytest.mark.parametrize("name", SPACES)
def test_sampled_configurations_of_every_space_at_odd_shapes(name, dims, machine):
    import cupy

    configs = allowed(SPACES[name](machine), machine)
    sample = random.Random(len(configs)).sample(configs, min(6, len(configs)))
    inputs = CASE.make_inputs(dims, np.random.default_rng(5))
    staged = {key: cupy.asarray(array) for key, array in inputs.items()}
    for config in sample:
        out = cupy.full((dims["m"], dims["n"]), cupy.nan, cupy.float32)
        result = getattr(gpu, name)(staged, out, machine, **config).run()
        check = compare(cupy.asnumpy(result), CASE.golden(inputs), CASE.tolerance_for(inputs))
        assert check.valid, (config, check.problem)


@pytest.mark.gpu
@pytest.mark.parametrize("m, n, aligned, padded", [
    (64, 64, True, []), (63, 64, True, ["a"]), (64, 65, True, ["b"]), (61, 67, True, ["a", "b"]),
    (64, 64, False, ["b"])])
def test_optimized_pads_rows_that_are_not_whole_16_byte_groups(m, n, aligned, padded, machine):
    """A^T's and B's rows are copied 16 bytes at a time: A (B) goes through a padded buffer
    where m (n) is not a multiple of 4 or B does not start on a 16-byte boundary."""
    import cupy

    inputs = CASE.make_inputs({"m": m, "n": n, "k": 37}, np.random.default_rng(m + n))
    a = cupy.asarray(inputs["a"])
    b = cupy.empty(inputs["b"].size + (not aligned), cupy.float32)[(not aligned):].reshape(37, n)
    b[...] = cupy.asarray(inputs["b"])
    out = cupy.full((m, n), cupy.nan, cupy.float32)
    bound = gpu.optimized({"a": a, "b": b}, out, machine)
    assert bound.params["padded"] == padded
    check = compare(cupy.asnumpy(bound.run()), CASE.golden(inputs), CASE.tolerance_for(inputs))
    assert check.valid, check.problem


@pytest.mark.gpu
def test_cublas_refuses_tf32(machine, monkeypatch):
    monkeypatch.setenv("CUPY_TF32", "1")
    with pytest.raises(LaunchError, match="TF32"):
        gpu.cublas({"a": None, "b": None}, None, machine)
