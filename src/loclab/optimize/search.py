"""Choices made by measurement: which plan, then which tiles.

The planner's plans are ordered by ambition, not by speed: tiling or atomic updates can lose
on a machine (two cores updating one histogram through atomics run slower than one). So the
acceptable recipes, from the most ambitious plan of every nest down to the function as
written, are each built, compiled, checked against the original and timed, and the fastest is
kept (``fastest_recipe``). Then its tiles: the cache model's tile of each band is the default
configuration; the local search of ``loclab tune`` steps one band's tile one size up or down
the list while that is faster (``tune_tiles``). A configuration whose output differs is never
kept, and one whose verification past its tiles would run the original as Python too long
(``measure.unverifiable_tiles``) is never tried. The best tiles are stored in the tuning
cache under this CPU, ``optimize/FILE::FUNCTION#RECIPE`` (a digest of the recipe) and the
sizes, where the next ``loclab optimize`` of the same function with the same recipe at the
same sizes finds them.
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loclab.measure import cache
from loclab.measure.attempt import Attempt, describe
from loclab.measure.search import TUNE_TIMING, Search, Trial, search
from loclab.measure.space import Config, Space
from loclab.measure.timing import Budget
from loclab.optimize.ahead import CompiledAhead
from loclab.optimize.build import (Chosen, Source, built_function, choose, loop_tiles,
                                  tier_plans, tiers)
from loclab.optimize.measure import check, time_function, unverifiable_tiles
from loclab.optimize.planner import NestPlan, TiledBand
from loclab.optimize.tiles import TILE_SIZES

CACHE_CASE = "optimize"
MOST_CONFIGURATIONS = 12  # builds a search may make (each compiles: about a second)
# The seconds an optimize call's search (the recipes, then the tiles) should end within: no
# batch of tile configurations starts where the slowest build seen would end it later
# (those built already are measured), and none where no batch fits. A function of two
# products builds a configuration in 15-20 s on one core, each step of the tile search a
# batch of them, and the call should end within a minute on 16 cores.
SEARCH_SECONDS = 40.0
# A candidate one call of which takes this many times the fastest median measured so far is
# timed no more: timing noise is far below it (cholesky's sums in parallel: 30 times the
# sequential one's, a second a call on 2 cores)
GIVE_UP_FACTOR = 4.0
# A recipe with tiles to tune, measured at the cache model's tiles within this fraction of a
# faster one that has none, gets its tiles tuned and is measured again against it: the
# model's tiles are where the search starts (trmm, half of LARGE on 2 cores: its tiled
# product 5.2 ms at the model's tiles against its rows in strips' 4.9 ms; at LARGE on the
# 16-core host the strips, kept, ran 23.6 ms where the tiled product, tuned, had run 15-17)
TIE_MARGIN = 0.10


@dataclass(frozen=True)
class Tuned:
    """The tile of each band (by key) the search, the cache or the cache model chose, and
    how."""

    tiles: dict[str, int]
    search: Search | None  # None where the cache answered, or no search had the time
    cached: str | None  # the date of the cached entry used, if one was
    unsearched: str | None = None  # why no search ran where none had the time

    def to_json(self) -> dict[str, Any]:
        return {"tiles": dict(self.tiles), "cached": self.cached,
                "unsearched": self.unsearched,
                "trials": [t.to_json() for t in self.search.trials] if self.search else [],
                "speedup_over_model": self.search.speedup if self.search else None}


@dataclass(frozen=True)
class Candidate:
    """One acceptable recipe of the whole function, and how it measured."""

    chosen: list[Chosen]
    recipe: str
    attempt: Attempt

    def to_json(self) -> dict[str, Any]:
        summary, check = self.attempt.summary, self.attempt.check
        return {"recipe": self.recipe, "levels": [c.plan.level for c in self.chosen],
                "median_s": summary.median if summary else None,
                "valid": self.attempt.valid,
                "error": self.attempt.error or (check.problem if check else None)}


class Fastest:
    """The fastest median measured so far, and past what time a candidate's timing gives up
    (``GIVE_UP_FACTOR`` times it: one call that slow is enough to lose)."""

    def __init__(self) -> None:
        self.median: float | None = None

    def heard(self, attempt: Attempt) -> Attempt:
        if attempt.valid and attempt.summary is not None:
            self.median = min(self.median or math.inf, attempt.summary.median)
        return attempt

    @property
    def give_up_past(self) -> float | None:
        return None if self.median is None else GIVE_UP_FACTOR * self.median


def measured(build: Callable[[], Any], original: Any,
             inputs: Mapping[str, Any], sizes: Mapping[str, int], params: dict[str, Any],
             timing: Budget = TUNE_TIMING, ahead: CompiledAhead | None = None,
             fastest: Fastest | None = None) -> Attempt:
    """Build a transformed function, compile it (or load it from ``ahead``, where it was
    compiled before), check it against the original on the same inputs and, where it
    agrees, time it (given up after one call slower than ``fastest`` allows); whatever
    fails is this attempt's error."""
    fastest = fastest or Fastest()
    try:
        result = build()
        function = ahead.function(result) if ahead else result.compile()
        verdict = check(original, function, result.program, inputs, sizes)
        if not verdict.valid:
            return Attempt(params, verdict)
        timed = time_function(function, result.program, inputs, timing,
                              give_up_past=fastest.give_up_past)
    except Exception as err:  # a build or a compile that fails: this attempt only
        return Attempt(params, None, describe(err))
    return fastest.heard(Attempt(params, verdict, None, timed.summary, timed.batch))


def fastest_recipe(source: Source, plans: Sequence[Sequence[NestPlan]],
                   original: Any, inputs: Mapping[str, Any],
                   sizes: Mapping[str, int], ahead: CompiledAhead | None = None
                   ) -> tuple[int, list[Candidate]]:
    """Every acceptable recipe, from each nest's most ambitious plan (tier 0) to its last
    (sequential), each measured (compiled first all at once by ``ahead``, where given): the
    index of the fastest valid one, and all of them."""
    if ahead:  # each tier transformed and compiled in a worker, then built here at once
        builds = [functools.partial(built_function, source, tier)
                  for tier in tier_plans(plans)]
        ahead.build(builds, likely_proved=builds[:1])  # the most ambitious, usually kept
    built: dict[str, tuple[int, list[Chosen], Any]] = {}
    for tier, (chosen, result) in enumerate(tiers(source, plans)):
        recipe = "; ".join(str(step) for c in chosen for step in c.steps)
        built.setdefault(recipe, (tier, chosen, result))
    if ahead:
        ahead.prepare([result for _, _, result in built.values()])
    fastest = Fastest()
    attempts = {recipe: measured(lambda: result, original, inputs, sizes, {"tier": tier},
                                 ahead=ahead, fastest=fastest)
                for recipe, (tier, _, result) in reversed(built.items())}  # the least first
    candidates = [Candidate(chosen, recipe, attempts[recipe])
                  for recipe, (_, chosen, _) in built.items()]
    valid = [k for k, c in enumerate(candidates) if c.attempt.valid]
    if not valid:
        return len(candidates) - 1, candidates
    return min(valid, key=lambda k: candidates[k].attempt.summary.median), candidates


def tunable_rival(candidates: Sequence[Candidate], kept: int) -> int | None:
    """Where the fastest recipe (``kept``) has no tile to tune: the most ambitious valid one
    that has, measured at the cache model's tiles within ``TIE_MARGIN`` of it, whose tiles are
    then tuned and both measured again (``remeasured``); None where there is none."""
    def tunable(candidate: Candidate) -> bool:
        return any(chosen.plan.band is not None for chosen in candidate.chosen)

    if tunable(candidates[kept]) or not candidates[kept].attempt.valid:
        return None
    bound = candidates[kept].attempt.summary.median * (1 + TIE_MARGIN)
    return next((k for k, c in enumerate(candidates) if c.attempt.valid and tunable(c)
                 and c.attempt.summary.median <= bound), None)


def remeasured(source: Source, plans: Sequence[NestPlan], tiles: Mapping[str, int],
               original: Any, inputs: Mapping[str, Any], sizes: Mapping[str, int],
               ahead: CompiledAhead | None = None) -> float | None:
    """The median of ``plans`` at ``tiles``, measured once more (built and compiled before:
    a lookup), None where it is not valid: a rival and the recipe it is compared with are
    timed alike, not the best of a search's trials against one earlier timing."""
    attempt = measured(lambda: _build(source, plans, tiles), original, inputs, sizes,
                       dict(tiles), ahead=ahead)
    return attempt.summary.median if attempt.valid else None


def cache_variant(source: Source, plans: Sequence[NestPlan]) -> str:
    """``<file>::<function>#<digest>``: the digest of the recipe at the cache model's tiles,
    so that tiles tuned for one recipe never serve another (a newer loclab, or a rerun that
    measured another recipe fastest, found syrk's old tile and kept it untuned), nor tiles
    tuned with ``fastmath()`` a recipe without it."""
    _, result = choose(source, [[plan] for plan in plans])
    recipe = "; ".join(step.step for step in result.steps)
    digest = hashlib.sha256(recipe.encode()).hexdigest()[:12]
    return f"{Path(source.filename).name}::{source.function}#{digest}"


def _build(source: Source, plans: Sequence[NestPlan], config: Config) -> Any:
    """``plans`` built at the tiles of ``config``."""
    return built_function(source, [[plan] for plan in plans], config)


def _verifiable(tiles: Space, restriction: Callable[[Config], str | None]) -> Config:
    """The default tiles where no configuration measured valid, each halved along the
    list of sizes while their verification would run too long (the default is the cache
    model's choice, not measured: a four-loop band's may be)."""
    config = dict(tiles.default)
    while restriction(config):
        smaller = {band: max((size for size in TILE_SIZES if size < tile), default=tile)
                   for band, tile in config.items()}
        if smaller == config:
            break
        config = smaller
    return config


def space(bands: Sequence[TiledBand]) -> Space:
    """Every band's tile from the list of sizes, none longer than leaves each thread a tile
    (``TileChoice.most``), and the tiles that deal its parallel loop evenly to the threads
    (``TileChoice.balanced``), the model's choice the default."""
    return Space(values={band.key: tuple(sorted({*band.choice.balanced, *(
                             size for size in TILE_SIZES
                             if size <= max(band.choice.most, band.choice.tile))}))
                         for band in bands},
                 default={band.key: band.choice.tile for band in bands})


def tune_tiles(source: Source, plans: Sequence[NestPlan], original: Any,
               inputs: Mapping[str, Any], sizes: Mapping[str, int], device: str,
               cache_path: Path | None, timing: Budget = TUNE_TIMING,
               on_trial: Callable[[Trial], None] | None = None,
               ahead: CompiledAhead | None = None,
               seconds: float | None = None) -> Tuned:
    """The tiles of ``plans``' bands: from the cache where it has this function with this
    recipe at these sizes on this device, else searched and stored (each set of
    configurations the search tries next compiled at once by ``ahead``, where given; no
    configuration starts building past ``seconds``, and where that is none, the cache
    model's tiles are kept unsearched)."""
    bands = [plan.band for plan in plans if plan.band is not None]
    variant = cache_variant(source, plans)
    path = cache_path or cache.default_path()
    program = _build(source, plans, space(bands).default).program

    def restriction(config: Config) -> str | None:
        return unverifiable_tiles(program, loop_tiles(plans, config), sizes)

    entry = cache.load(path).lookup(device, CACHE_CASE, variant, sizes)
    if entry and set(entry["params"]) == {band.key for band in bands} \
            and not restriction(entry["params"]):
        return Tuned(dict(entry["params"]), None, entry.get("date"))

    if seconds is not None and seconds <= 0:
        return Tuned(_verifiable(space(bands), restriction), None, None,
                     f"no time left to search them (the recipes took most of the "
                     f"{SEARCH_SECONDS:g} s an optimize call searches for)")
    fastest = Fastest()

    def attempt(config: Config) -> Attempt:
        return measured(lambda: _build(source, plans, config), original, inputs, sizes,
                        dict(config), timing, ahead, fastest)

    def prepare(configs: list[Config]) -> None:
        if ahead:  # built there too: each configuration's transform takes seconds
            ahead.build([functools.partial(_build, source, plans, config)
                         for config in configs])

    found = search(space(bands), attempt, restriction, "local", MOST_CONFIGURATIONS,
                   seconds, on_trial=on_trial, prepare=prepare)
    if found.best is None:
        return Tuned(_verifiable(space(bands), restriction), found, None)
    cache.check_is_cache(path)
    cache.store(path, device, CACHE_CASE, variant,
                cache.make_entry(sizes, found.best.config, found.best.median_s, "local",
                                 found.evaluated))
    return Tuned(dict(found.best.config), found, None)
