"""A toy case with deliberately broken variants, to test that the harness catches them; and
a tunable one whose configurations differ in speed, correctness and whether they build."""

from __future__ import annotations

import math
import time
from dataclasses import replace

import numpy as np

from loclab.bench.runner import Plan
from loclab.cases.base import SIZE_PRESETS, Bound, Case, Variant, Work
from loclab.errors import LaunchError
from loclab.measure.space import Space
from loclab.measure.timing import Budget


def _doubled(inputs, out, machine):
    def run():
        np.multiply(inputs["a"], 2, out=out)
        return out
    return Bound(run, {"kind": "correct"})


def _off_by_one(inputs, out, machine):
    def run():
        np.add(inputs["a"], 1, out=out)
        return out
    return Bound(run)


def _half_written(inputs, out, machine):
    def run():
        half = out.shape[0] // 2
        np.multiply(inputs["a"][:half], 2, out=out[:half])
        return out
    return Bound(run)


def _returns_its_input(inputs, out, machine):
    return Bound(lambda: inputs["a"])


def _returns_a_view(inputs, out, machine):
    return Bound(lambda: inputs["a"][::-1])


def _writes_its_input(inputs, out, machine):
    def run():
        inputs["a"][:] = 0
        return out
    return Bound(run)


def _launch_fails(inputs, out, machine):
    def run():
        raise LaunchError("kernel toy<32> failed to launch with grid=(1,) block=(2048,)")
    return Bound(run)


def _setup_crashes(inputs, out, machine):
    raise ZeroDivisionError("division by zero")


def toy_case(*variants: Variant, name: str = "toy") -> Case:
    return Case(
        name=name, lesson="testing", description="out = 2 a",
        sizes={"small": {"cpu": {"n": 1001}}},
        make_inputs=lambda dims, rng: {"a": rng.random(dims["n"], dtype=np.float32)},
        golden=lambda inputs: inputs["a"] * 2,
        output=lambda dims: ((dims["n"],), np.float32),
        work=lambda dims: Work(bytes=8 * dims["n"], flops=dims["n"]),
        tolerance=1e-6,
        variants=variants,
    )


GOOD = Variant("good", "cpu", "naive", "correct", _doubled)
LIBRARY = Variant("lib", "cpu", "library", "correct too", _doubled)
WRONG = Variant("off-by-one", "cpu", "optimized", "adds instead", _off_by_one)
UNWRITTEN = Variant("half", "cpu", "optimized", "forgets half", _half_written)
LAUNCH = Variant("no-launch", "cpu", "optimized", "launch fails", _launch_fails)
CRASH = Variant("crash", "cpu", "optimized", "setup raises", _setup_crashes)
ALIAS = Variant("alias", "cpu", "optimized", "returns its input", _returns_its_input)
VIEW = Variant("view", "cpu", "optimized", "returns a view of its input", _returns_a_view)
SCRIBBLE = Variant("scribble", "cpu", "optimized", "writes its input", _writes_its_input)


def toy_plan(case: Case, machine) -> Plan:
    from loclab.bench.auto import get_case

    copy = get_case("copy")
    return Plan(size="small", devices=["cpu"], machine=machine, numba_threads=None,
                budget=Budget(seconds=0.01, min_runs=2, max_runs=4),
                work=[(copy, "cpu", copy.dims("small", "cpu", machine)[0]),
                      (case, "cpu", {"n": 1001})])


# The tunable toy: every step of tile away from 8 or of unroll away from 2 costs this much.
TILE_STEP_S = 1e-3
TILES = Space(values={"tile": [1, 2, 4, 8, 16], "unroll": [1, 2, 4]},
              default={"tile": 2, "unroll": 1},
              restriction=lambda config, dims, machine: (
                  f"{config['tile'] * config['unroll']} threads per block > 32"
                  if config["tile"] * config["unroll"] > 32 else None))


def tiles_case(built: list[dict[str, int]] | None = None) -> Case:
    """``toy`` with a variant ``tiled`` to tune: fastest (and correct) at tile 8, unroll 2;
    tile 16 is faster still but wrong, tile 1 with unroll 4 fails to compile, tile x unroll
    beyond 32 is rejected by the restriction. ``built`` records every configuration set up."""

    def setup(inputs, out, machine, tile=2, unroll=1):
        if built is not None:
            built.append({"tile": tile, "unroll": unroll})
        if tile == 1 and unroll == 4:
            raise LaunchError("tiled<1, 4>: compilation failed: too many registers")
        wrong = tile == 16
        delay = 0.0 if wrong else TILE_STEP_S * (
            1 + abs(math.log2(tile) - 3) + abs(math.log2(unroll) - 1))

        def run():
            time.sleep(delay)
            np.multiply(inputs["a"], 3 if wrong else 2, out=out)
            return out
        return Bound(run, {"tile": tile, "unroll": unroll})

    tiled = Variant("tiled", "cpu", "optimized", "tiles to tune", setup,
                    space=lambda machine: TILES)
    return replace(toy_case(GOOD, tiled, name="tiles"),
                   sizes={preset: {"cpu": {"n": 1001}} for preset in SIZE_PRESETS})
