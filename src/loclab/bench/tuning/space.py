"""The configurations of a parameter space: enumeration, numbering and neighbours.

A configuration is numbered by its place in the product of the value lists (the first
parameter varying slowest), so that random sampling draws distinct numbers without listing a
space that may be large, and exhaustive search visits the same order on every machine.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from loclab.cases.base import Config, Space

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
