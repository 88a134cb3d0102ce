"""The states a recipe's prefixes reach, kept: a recipe that starts with steps already proved
for the same function starts from where they left it.

``loclab optimize`` transforms one function dozens of times with recipes that share long
prefixes: every tile size of its search repeats the distribution and permutation before the
tile step, and every tier repeats the first nest's plan while the second's changes. Each
step is an isl proof (2mm's recipe: 9 s, its distributions a third of it), so the optimizer
spent more time proving the same prefixes again than compiling. A state is the program
after the steps (steps never change a program in place: each rewrites a clone), the
context its proofs used (the function's dependences, computed once) and the steps'
results; it is kept for the function's text and the steps' texts, the most recent
``PREFIX_STATES`` of them.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

PREFIX_STATES = 64  # a few recipes' worth of prefixes (a program is a tree of a few hundred nodes)


@dataclass(frozen=True)
class State:
    """Where a prefix of a recipe leaves the function."""

    program: Any  # loclab.transform.tree.Program
    context: Any  # loclab.transform.steps.Context
    results: tuple[Any, ...]  # StepResult of each step
    copied: str | None  # the stage/copy step after which no loop may move
    mapped: str | None  # the grid/block step after which only those may follow


class Prefixes:
    """The most recent states, by (function, step texts), least recently used dropped."""

    def __init__(self, size: int = PREFIX_STATES) -> None:
        self.size = size
        self.states: OrderedDict[tuple[Hashable, tuple[str, ...]], State] = OrderedDict()
        self.lock = threading.Lock()

    def longest(self, function: Hashable, steps: tuple[str, ...]) -> tuple[int, State | None]:
        """The longest prefix of ``steps`` kept for ``function``: its length and state."""
        with self.lock:
            for length in range(len(steps), 0, -1):
                state = self.states.get((function, steps[:length]))
                if state is not None:
                    self.states.move_to_end((function, steps[:length]))
                    return length, state
        return 0, None

    def clear(self) -> None:
        """Forget every state (a test that turns the proofs off must not leave its states
        for a run with them on)."""
        with self.lock:
            self.states.clear()

    def keep(self, function: Hashable, steps: tuple[str, ...], state: State) -> None:
        with self.lock:
            self.states[(function, steps)] = state
            self.states.move_to_end((function, steps))
            while len(self.states) > self.size:
                self.states.popitem(last=False)


PREFIXES = Prefixes()
