"""The configurations of a parameter space: enumeration, numbering and neighbours.

A configuration is numbered by its place in the product of the value lists (the first
parameter varying slowest), so that random sampling draws distinct numbers without listing a
space that may be large, and exhaustive search visits the same order on every machine.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from loclab.hw import Machine


# A configuration of a tunable variant: keyword arguments of its setup (tile sizes, threads).
Config = Mapping[str, int]


@dataclass(frozen=True)
class Space:
    """The tunable parameters of a variant, for ``loclab tune``.

    ``values`` lists the candidate values of each keyword of the variant's setup, in order, so
    that a local search can step to the neighbouring value; ``default`` is the configuration
    the variant uses untuned. ``restriction(config, dims, machine)`` says why a configuration
    cannot run there (too much shared memory, too many threads per block or registers), or
    None; the tuner never builds a configuration it rejects.
    """

    values: Mapping[str, Sequence[int]]
    default: Config
    restriction: Callable[[Config, Mapping[str, int], "Machine"], str | None] = lambda config, dims, m: None

    def configure(self, config: Config) -> dict[str, int]:
        """The default with ``config`` applied (for setups that take ``**config``); a keyword
        the space lacks is an error."""
        unknown = set(config) - set(self.values)
        if unknown:
            raise TypeError(f"unknown parameters {sorted(unknown)}; "
                            f"expected {sorted(self.values)}")
        return {**self.default, **config}



Key = tuple[tuple[str, int], ...]


def key(config: Config) -> Key:
    """A hashable, order-independent name of a configuration (to never evaluate one twice)."""
    return tuple(sorted(config.items()))


def text(config: Config) -> str:
    """'T=32 R=4', as tables and messages show a configuration."""
    return " ".join(f"{name}={value}" for name, value in config.items())


def size(space: Space) -> int:
    return math.prod(len(values) for values in space.values.values())


def config_at(space: Space, index: int) -> dict[str, int]:
    """The ``index``-th configuration of the product (mixed radix, the last parameter
    fastest, as ``itertools.product``)."""
    config = {}
    for name, values in reversed(list(space.values.items())):
        index, place = divmod(index, len(values))
        config[name] = values[place]
    return {name: config[name] for name in space.values}


def every(space: Space) -> Iterator[dict[str, int]]:
    return (config_at(space, index) for index in range(size(space)))


def neighbours(space: Space, config: Config) -> list[dict[str, int]]:
    """Configurations that change one parameter to the value before or after it in its list.

    A value not in the list (a default outside the searched values) has no neighbours along
    that parameter.
    """
    found = []
    for name, values in space.values.items():
        if config.get(name) not in values:
            continue
        place = list(values).index(config[name])
        for step in (place - 1, place + 1):
            if 0 <= step < len(values):
                found.append({**config, name: values[step]})
    return found
