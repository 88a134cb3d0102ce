"""Search strategies over a parameter space, and the evaluation of each configuration.

Every configuration goes through the same steps: the space's restriction (a rejected one is
recorded with the reason and never built), then the variant's setup, a run into a poisoned
output compared with golden, and only then timing (``loclab.bench.attempt.attempt``). A
configuration is evaluated at most once per search, and only a valid one can be the best:
a fast wrong answer is never kept.

The budget counts configurations built (the restrictions cost nothing), the default included:
every strategy evaluates the default first, as the baseline the best is compared with, and the
first configuration built always is, whatever the time budget.
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from loclab.measure import STRATEGY_NAMES
from loclab.measure.attempt import Attempt
from loclab.measure.space import Config, Space, config_at, every, key, neighbours, size
from loclab.measure.timing import Budget

Status = Literal["valid", "invalid", "error", "rejected"]
# Timing of one configuration: enough runs for a stable median, short enough to try many.
TUNE_TIMING = Budget(seconds=0.2, min_runs=3, max_runs=200)
RANDOM_SAMPLES = 20  # configurations a random search builds unless a budget says otherwise
LOCAL_STARTS = 3  # random samples a local search compares with the default to pick its start


@dataclass(frozen=True)
class Trial:
    """One configuration and what became of it.

    ``status``: ``valid`` (timed), ``invalid`` (wrong output), ``error`` (setup, compilation
    or launch raised) or ``rejected`` (the restriction refused it: never built); ``reason``
    says why for all but ``valid``. ``params`` are what the setup reports.
    """

    config: dict[str, int]
    status: Status
    reason: str | None = None
    median_s: float | None = None
    params: dict[str, Any] = field(default_factory=dict)
    max_rel_err: float | None = None

    @property
    def valid(self) -> bool:
        return self.status == "valid"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def trial_of(config: Config, result: Attempt) -> Trial:
    check = result.check
    status: Status = ("error" if result.error else "valid" if result.valid else "invalid")
    return Trial(config=dict(config), status=status,
                 reason=result.error or (check.problem if check else None),
                 median_s=result.summary.median if result.summary else None,
                 params=result.params, max_rel_err=check.max_rel_err if check else None)


class BudgetSpent(Exception):
    """A strategy asked for a configuration to be built after the budget was spent."""


class Evaluator:
    """Evaluates each configuration once, in the order the strategy asks, within the budget.

    ``measure(config)`` builds, validates and times one configuration; ``restriction(config)``
    says why it cannot run, or None. ``limit`` caps the configurations built, ``seconds``
    the time after which no new one is started. ``prepare(configs)``, where given, hears
    the configurations a strategy is about to evaluate together, before the first is
    measured (to compile them all at once: ``loclab.optimize.ahead``).
    """

    def __init__(self, measure: Callable[[Config], Attempt],
                 restriction: Callable[[Config], str | None], limit: int | None = None,
                 seconds: float | None = None,
                 on_trial: Callable[[Trial], None] | None = None,
                 prepare: Callable[[list[Config]], None] | None = None) -> None:
        self.trials: dict[Any, Trial] = {}
        self.built = 0
        self._measure, self._restriction = measure, restriction
        self._limit, self._seconds = limit, seconds
        self._started = time.perf_counter()
        self._on_trial = on_trial or (lambda trial: None)
        self._prepare = prepare
        self._prepared: set[Any] = set()

    def prepare(self, configs: Iterable[Config]) -> None:
        """Pass the configurations of ``configs`` that would be built next (not evaluated
        or prepared yet, not rejected, within the count budget) to ``prepare``."""
        if self._prepare is None or self.spent():  # no build starts past the budget
            return
        room = None if self._limit is None else max(0, self._limit - self.built)
        fresh: dict[Any, Config] = {}
        for config in configs:
            done = key(config) in self.trials or key(config) in self._prepared
            if not done and not self._restriction(config):
                fresh.setdefault(key(config), config)
        batch = list(fresh.values())[:room]
        if batch:
            self._prepared.update(key(config) for config in batch)
            self._prepare(batch)

    def spent(self) -> bool:
        """Whether the budget allows no more builds; the first (the default: the baseline)
        always gets built."""
        return self.built > 0 and self.why_spent() is not None

    def why_spent(self) -> str | None:
        """The budget spent, in words ("after 12 configurations", "after 15 s"), or None."""
        if self._limit is not None and self.built >= self._limit:
            return f"after {self._limit} configurations"
        if self._seconds is not None \
                and time.perf_counter() - self._started >= self._seconds:
            return f"after {self._seconds:g} s"
        return None

    def __call__(self, config: Config) -> Trial:
        """The trial of ``config``: its earlier one, a rejection, or a new evaluation
        (BudgetSpent when the budget allows no more)."""
        if key(config) in self.trials:
            return self.trials[key(config)]
        reason = self._restriction(config)
        if reason:
            trial = Trial(config=dict(config), status="rejected", reason=reason)
        elif self.spent() and key(config) not in self._prepared:  # prepared: built
            raise BudgetSpent
        else:
            self.built += 1
            trial = trial_of(config, self._measure(config))
        self.trials[key(config)] = trial
        self._on_trial(trial)
        return trial


def fastest(trials: Iterable[Trial]) -> Trial | None:
    """The valid trial with the shortest median (the first of equals), or None."""
    return min((trial for trial in trials if trial.valid), default=None,
               key=lambda trial: trial.median_s)


def _distinct(rng: random.Random, total: int) -> Iterator[int]:
    """Distinct random numbers below ``total``, until there are none left."""
    seen: set[int] = set()
    while len(seen) < total:
        index = rng.randrange(total)
        if index not in seen:
            seen.add(index)
            yield index


def exhaustive(space: Space, evaluate: Evaluator, rng: random.Random) -> None:
    """Every configuration, in the order of the product of the value lists."""
    for config in every(space):
        evaluate(config)


def random_sample(space: Space, evaluate: Evaluator, rng: random.Random) -> None:
    """Distinct configurations drawn from the seeded ``rng``, until the budget is spent."""
    for index in _distinct(rng, size(space)):
        evaluate(config_at(space, index))


def local(space: Space, evaluate: Evaluator, rng: random.Random) -> None:
    """Steepest descent over neighbours (one parameter, one step along its list).

    Start from the fastest valid of the default and a few random samples (more samples while
    none is valid); then move to the fastest neighbour while it beats the current
    configuration: a local optimum is where none does.
    """
    starts, samples = _local_starts(space, rng)  # prepared with the default by ``search``
    current = fastest([evaluate(space.default)] + [evaluate(config) for config in starts])
    while current is None:
        index = next(samples, None)
        if index is None:
            return
        current = fastest([evaluate(config_at(space, index))])
    while True:
        nearby = list(neighbours(space, current.config))
        evaluate.prepare(nearby)
        step = fastest(evaluate(config) for config in nearby)
        if step is None or step.median_s >= current.median_s:
            return
        current = step


def _local_starts(space: Space, rng: random.Random) -> tuple[list[Config], Iterator[int]]:
    """The random samples a local search starts from, and the rest of its samples."""
    samples = _distinct(rng, size(space))
    return [config_at(space, index) for index in itertools.islice(samples, LOCAL_STARTS)], \
        samples


STRATEGIES: dict[str, Callable[[Space, Evaluator, random.Random], None]] = dict(
    zip(STRATEGY_NAMES, (exhaustive, random_sample, local)))


@dataclass(frozen=True)
class Search:
    """What one search found: every trial in evaluation order, the default's and the best."""

    strategy: str
    trials: list[Trial]
    default: Trial | None
    best: Trial | None
    evaluated: int  # configurations built
    stopped: str | None = None  # where the budget ended it early: "after 15 s"

    @property
    def speedup(self) -> float | None:
        """Default time / best time."""
        if self.best is None or self.default is None or not self.default.valid:
            return None
        return self.default.median_s / self.best.median_s


def search(space: Space, measure: Callable[[Config], Attempt],
           restriction: Callable[[Config], str | None], strategy: str = "local",
           limit: int | None = None, seconds: float | None = None, seed: int = 0,
           on_trial: Callable[[Trial], None] | None = None,
           prepare: Callable[[list[Config]], None] | None = None) -> Search:
    """Evaluate the default, then search with ``strategy`` within ``limit`` configurations
    built and ``seconds``; the best is the fastest valid trial, or None if none was valid.
    ``prepare``: see ``Evaluator`` (a local search's start and each step's neighbours)."""
    if limit is None and strategy == "random":
        limit = RANDOM_SAMPLES
    evaluate = Evaluator(measure, restriction, limit, seconds, on_trial, prepare)
    stopped = None
    try:
        if strategy == "local":  # the default and the samples it starts from, at once
            evaluate.prepare([space.default,
                              *_local_starts(space, random.Random(seed))[0]])
        evaluate(space.default)
        STRATEGIES[strategy](space, evaluate, random.Random(seed))
    except BudgetSpent:
        stopped = evaluate.why_spent()
    trials = list(evaluate.trials.values())
    return Search(strategy=strategy, trials=trials,
                  default=evaluate.trials.get(key(space.default)), best=fastest(trials),
                  evaluated=evaluate.built, stopped=stopped)
