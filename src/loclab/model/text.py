"""Console text of the models: lines of at most 80 columns, continuations indented under
the line they continue, words never broken (a number or an access stays whole)."""

from __future__ import annotations

import textwrap

MAX_LINE = 80


def wrap(text: str, width: int = MAX_LINE) -> list[str]:
    """``text`` in lines of at most ``width`` columns, continuations indented two more than
    the text itself."""
    indent = " " * (len(text) - len(text.lstrip()) + 2)
    return textwrap.wrap(text, width, subsequent_indent=indent, break_long_words=False,
                         break_on_hyphens=False) or [""]


def wrap_all(paragraphs: list[str]) -> list[str]:
    return [line for paragraph in paragraphs for line in wrap(paragraph)]
