"""The tuner: strategies, budgets, restrictions, and that a failing configuration is never kept.

A fake case decides, per configuration, how fast it is (a fake clock reads the cost off the
run, so the searches are exact and fast), whether its output is right, whether its setup
raises, and whether the restriction rejects it; the searches go through the real steps
(``loclab.bench.attempt.attempt``: setup, poisoned output, golden comparison, timing).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loclab.bench.attempt import inputs_and_golden
from loclab.bench.backend import CpuBackend, Staging
from loclab.bench.tune import tune_variant
from loclab.cases.base import Bound, Case, Variant, Work
from loclab.errors import LaunchError
from loclab.measure import search as search_module
from loclab.measure.search import Search
from loclab.measure.space import config_at, every, key, neighbours, size
from loclab.measure.space import Space
from loclab.measure.timing import Budget

TIMING = Budget(seconds=0.0, min_runs=2, max_runs=2)
FATES = ("ok", "ok", "ok", "wrong", "raises", "restricted")


class Costed:
    """A run that costs ``cost`` seconds on the fake clock."""

    def __init__(self, run, cost: float) -> None:
        self.run, self.cost = run, cost

    def __call__(self):
        return self.run()


class CostClock:
    name = "fake"

    def per_call(self, run, calls: int) -> float:
        for _ in range(calls):
            run()
        return run.cost


class FakeClockBackend(CpuBackend):
    def __init__(self) -> None:
        self.clock = CostClock()


@dataclass
class World:
    """A space and, per configuration, its cost and fate (ok, wrong, raises, restricted)."""

    space: Space
    cost: dict
    fate: dict
    built: list

    def case(self) -> Case:
        def setup(inputs, out, machine, **config):
            self.built.append(key(config))
            if self.fate[key(config)] == "raises":
                raise LaunchError(f"kernel<{config}> failed to compile")
            factor = 3 if self.fate[key(config)] == "wrong" else 2

            def run():
                np.multiply(inputs["a"], factor, out=out)
                return out
            return Bound(Costed(run, self.cost[key(config)]), dict(config))

        variant = Variant("tiled", "cpu", "optimized", "fake", setup,
                          space=lambda machine: self.space)
        return Case(name="fake", lesson="tuning", description="out = 2 a",
                    sizes={"small": {"cpu": {"n": 5}}},
                    make_inputs=lambda dims, rng: {"a": rng.random(dims["n"],
                                                                   dtype=np.float32)},
                    golden=lambda inputs: inputs["a"] * 2,
                    output=lambda dims: ((dims["n"],), np.float32),
                    work=lambda dims: Work(bytes=8 * dims["n"], flops=dims["n"]),
                    tolerance=1e-6, variants=(variant,))

    def valid(self) -> list:
        return [k for k, fate in self.fate.items() if fate == "ok"]

    def tune(self, machine, strategy: str, **options) -> Search:
        self.built.clear()
        case = self.case()
        dims = {"n": 5}
        inputs, golden = inputs_and_golden(case, dims)
        staging = Staging(FakeClockBackend(), inputs)
        return tune_variant(case, case.variants[0], dims, staging, golden, machine, strategy,
                            timing=TIMING, **options)


@st.composite
def worlds(draw, fates=FATES) -> World:
    names = ["t", "r", "w"][:draw(st.integers(1, 3))]
    values = {name: sorted(draw(st.sets(st.sampled_from([1, 2, 4, 8, 16, 32, 64]),
                                        min_size=1, max_size=5)))
              for name in names}
    configs = [dict(zip(names, combo)) for combo in itertools.product(*values.values())]
    ranks = draw(st.permutations(range(len(configs))))
    fate = {key(c): draw(st.sampled_from(fates)) for c in configs}
    default = configs[draw(st.integers(0, len(configs) - 1))]
    space = Space(values=values, default=default,
                  restriction=lambda config, dims, machine: (
                      "too many threads" if fate[key(config)] == "restricted" else None))
    return World(space, {key(c): (rank + 1) * 1e-3 for c, rank in zip(configs, ranks)}, fate,
                 [])


SETTINGS = settings(max_examples=60, deadline=None)


def check_never_kept_failing(world: World, found: Search) -> None:
    """Restricted configurations were never built, nothing was built twice, failures are
    never the best, and each trial's status is its configuration's fate."""
    assert len(world.built) == len(set(world.built)) == found.evaluated
    assert not any(world.fate[k] == "restricted" for k in world.built)
    expected = {"ok": "valid", "wrong": "invalid", "raises": "error", "restricted": "rejected"}
    for trial in found.trials:
        assert trial.status == expected[world.fate[key(trial.config)]]
        assert (trial.median_s is not None) == trial.valid
        assert trial.valid or trial.reason
    if found.best is not None:
        assert found.best.valid and world.fate[key(found.best.config)] == "ok"


@SETTINGS
@given(world=worlds())
def test_exhaustive_finds_the_fastest_valid_configuration(machine, world):
    found = world.tune(machine, "exhaustive")
    check_never_kept_failing(world, found)
    assert len(found.trials) == size(world.space)
    valid = world.valid()
    if valid:
        assert key(found.best.config) == min(valid, key=world.cost.get)
        assert found.best.median_s == pytest.approx(world.cost[key(found.best.config)])
    else:
        assert found.best is None
    assert found.default is not None and found.default.config == dict(world.space.default)


@SETTINGS
@given(world=worlds())
def test_local_search_stops_at_a_local_optimum_without_repeating(machine, world):
    found = world.tune(machine, "local", seed=3)
    check_never_kept_failing(world, found)
    if found.best is None:
        assert not world.valid()
        return
    seen = {key(trial.config): trial for trial in found.trials}
    for neighbour in neighbours(world.space, found.best.config):
        trial = seen[key(neighbour)]  # every neighbour was looked at
        assert not trial.valid or trial.median_s >= found.best.median_s


@SETTINGS
@given(world=worlds(), seed=st.integers(0, 2**32), limit=st.integers(1, 8))
def test_random_search_is_seeded_distinct_and_within_budget(machine, world, seed, limit):
    first = world.tune(machine, "random", seed=seed, limit=limit)
    check_never_kept_failing(world, first)
    again = world.tune(machine, "random", seed=seed, limit=limit)
    assert [t.config for t in first.trials] == [t.config for t in again.trials]
    buildable = sum(1 for fate in world.fate.values() if fate != "restricted")
    assert first.evaluated == min(limit, buildable)


@SETTINGS
@given(world=worlds(), limit=st.integers(1, 4), strategy=st.sampled_from(["exhaustive",
                                                                          "local"]))
def test_a_budget_caps_the_configurations_built(machine, world, limit, strategy):
    found = world.tune(machine, strategy, limit=limit)
    check_never_kept_failing(world, found)
    assert found.evaluated <= limit


@SETTINGS
@given(world=worlds(fates=("wrong", "raises", "restricted")))
def test_no_valid_configuration_means_no_best(machine, world):
    for strategy in ("exhaustive", "random", "local"):
        found = world.tune(machine, strategy)
        check_never_kept_failing(world, found)
        assert found.best is None and found.speedup is None


def test_a_fast_wrong_configuration_is_never_the_best(machine):
    configs = [{"t": t} for t in (1, 2, 3, 4)]
    world = World(Space(values={"t": [1, 2, 3, 4]}, default={"t": 1}),
                  cost={key(c): cost for c, cost in zip(configs, (4e-3, 3e-3, 1e-3, 2e-3))},
                  fate={key(c): fate for c, fate in zip(configs, ("ok", "ok", "wrong", "ok"))},
                  built=[])
    for strategy in ("exhaustive", "random", "local"):
        found = world.tune(machine, strategy)
        assert found.best.config == {"t": 4}
        assert found.speedup == pytest.approx(4e-3 / 2e-3)
        wrong = next(t for t in found.trials if t.config == {"t": 3})
        assert wrong.status == "invalid" and "relative error" in wrong.reason
        assert wrong.median_s is None  # not timed: it cannot be kept


def test_local_search_climbs_from_the_default(machine, monkeypatch):
    """A valley along one parameter: from the default the search walks down to the bottom."""
    monkeypatch.setattr(search_module, "LOCAL_STARTS", 0)
    values = list(range(10))
    world = World(Space(values={"t": values}, default={"t": 0}),
                  cost={(("t", v),): (abs(v - 6) + 1) * 1e-3 for v in values},
                  fate={(("t", v),): "ok" for v in values}, built=[])
    found = world.tune(machine, "local")
    assert found.best.config == {"t": 6}
    assert [t.config["t"] for t in found.trials] == [0, 1, 2, 3, 4, 5, 6, 7]


def test_seconds_budget_stops_after_the_default(machine):
    world = World(Space(values={"t": [1, 2, 3]}, default={"t": 2}),
                  cost={(("t", v),): 1e-3 for v in (1, 2, 3)},
                  fate={(("t", v),): "ok" for v in (1, 2, 3)}, built=[])
    found = world.tune(machine, "exhaustive", seconds=1e-9)
    assert [t.config for t in found.trials] == [{"t": 2}]


@given(values=st.dictionaries(st.sampled_from("abcd"), st.lists(st.integers(), min_size=1,
                                                                    max_size=4, unique=True),
                              min_size=1))
def test_configurations_are_numbered_as_the_product(values):
    space = Space(values=values, default={})
    product = [dict(zip(values, combo)) for combo in itertools.product(*values.values())]
    assert list(every(space)) == product and size(space) == len(product)
    assert [config_at(space, i) for i in range(len(product))] == product


def test_neighbours_step_one_parameter_to_an_adjacent_value():
    space = Space(values={"t": [8, 16, 32], "r": [1, 2]}, default={"t": 16, "r": 1})
    assert neighbours(space, {"t": 16, "r": 1}) == [{"t": 8, "r": 1}, {"t": 32, "r": 1},
                                                    {"t": 16, "r": 2}]
    assert neighbours(space, {"t": 12, "r": 2}) == [{"t": 12, "r": 1}]
