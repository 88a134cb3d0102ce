"""What building, validating and timing one configuration gave: the record every measured
attempt leaves (``loclab run``'s rows, ``loclab tune``'s and ``loclab optimize``'s trials).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from loclab.errors import LoclabError
from loclab.measure.stats import Summary
from loclab.measure.validate import Check


def describe(err: Exception) -> str:
    """An exception in one line: a LoclabError says it all, anything else names its type."""
    return str(err) if isinstance(err, LoclabError) else f"{type(err).__name__}: {err}"


@dataclass(frozen=True)
class Attempt:
    """What building, validating and timing one configuration gave.

    ``check`` is None when something raised before the output was compared; ``error`` is what
    raised (a compile or launch error, anything), ``summary`` None when it was not timed.
    ``phases``: seconds per phase of a run made of steps (``Bound.steps``), else empty.
    """

    params: dict[str, Any] = field(default_factory=dict)
    check: Check | None = None
    error: str | None = None
    summary: Summary | None = None
    batch: int = 0
    phases: dict[str, float] = field(default_factory=dict)

    @property
    def valid(self) -> bool:
        return self.error is None and self.check is not None and self.check.valid
