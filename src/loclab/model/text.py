"""Text in and out of the models: sizes written ``32x8`` (no NumPy, so that the command line
reads them fast), and console lines of at most 80 columns, continuations indented under the
line they continue, words never broken (a number or an access stays whole)."""

from __future__ import annotations

import textwrap

from loclab.errors import UsageError

MAX_LINE = 80


def wrap(text: str, width: int = MAX_LINE) -> list[str]:
    """``text`` in lines of at most ``width`` columns, continuations indented two more than
    the text itself."""
    indent = " " * (len(text) - len(text.lstrip()) + 2)
    return textwrap.wrap(text, width, subsequent_indent=indent, break_long_words=False,
                         break_on_hyphens=False) or [""]


def wrap_all(paragraphs: list[str]) -> list[str]:
    return [line for paragraph in paragraphs for line in wrap(paragraph)]


def parse_sizes(text: str, what: str, example: str, most: int) -> tuple[int, ...]:
    """``"32x8"`` as positive integers: the one syntax for block shapes and array shapes."""
    parts = text.strip().lower().split("x")
    if not 1 <= len(parts) <= most or not all(p.strip().isdigit() for p in parts):
        raise UsageError(f"bad {what} {text!r}: give 1 to {most} positive sizes like {example}")
    sizes = tuple(int(p) for p in parts)
    if min(sizes) < 1:
        raise UsageError(f"bad {what} {text!r}: sizes must be positive")
    return sizes
