"""The GPU side of mmm beyond the generic per-variant tests: the tuning spaces and their
restrictions (no GPU needed), and a sample of every space's configurations at odd shapes."""

import inspect
import random
from dataclasses import replace

import numpy as np
import pytest

from loclab.bench.validate import compare
from loclab.cases.mmm import CASE, gpu
from loclab.errors import LaunchError
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
    assert "bytes" in gpu.optimized_restriction({**optimized, "bk": 32}, {}, h200)
    assert "registers" in gpu.optimized_restriction({**optimized, "blocks_per_sm": 2}, {}, h200)
    assert "threads" in gpu.register_tiled_restriction({"tile": 64, "r": 1}, {}, h200)
    assert "shared" in gpu.register_tiled_restriction({"tile": 32, "r": 8}, {}, h200)
    assert "registers" in gpu.register_tiled_restriction({"tile": 16, "r": 16}, {}, h200)


def test_the_default_kernel_is_the_one_ci_compiles():
    name = gpu.optimized_kernel(gpu.OPTIMIZED_DEFAULT, True)
    assert name == "mmm_optimized<128,256,8,128,32,16,8,true,1>"  # warp tile 128 x 32
    assert name in gpu.KERNELS.name_expressions


def test_every_space_offers_configurations_beyond_the_default(h200):
    sizes = {name: len(allowed(space(h200), h200)) for name, space in SPACES.items()}
    assert sizes["block_tiled"] == 3 and sizes["register_tiled"] > 8
    assert sizes["optimized"] > 100


def test_setup_refuses_a_configuration_its_space_rejects(machine):
    inputs = {"a": np.ones((4, 4), np.float32), "b": np.ones((4, 4), np.float32)}
    with pytest.raises(LaunchError, match="warp"):
        gpu.optimized(inputs, None, replace(machine, gpu=H200), lanes_m=3)


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
def test_cublas_refuses_tf32(machine, monkeypatch):
    monkeypatch.setenv("CUPY_TF32", "1")
    with pytest.raises(LaunchError, match="TF32"):
        gpu.cublas({"a": None, "b": None}, None, machine)
