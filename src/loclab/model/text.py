"""Text in and out of the models: sizes written ``32x8``, with the one check of a block shape
that every model makes (no NumPy, so that the command line reads them fast), and console
lines of at most 80 columns, continuations indented under the line they continue, words
never broken (a number or an access stays whole)."""

from __future__ import annotations

import math
import textwrap

from loclab.errors import UsageError

MAX_LINE = 80
MAX_THREADS = 1024
MAX_BLOCK = (1024, 1024, 64)  # CUDA's per-dimension limits of a block
AXES = ("x", "y", "z")

Block = tuple[int, int, int]


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


def parse_block(text: str) -> Block:
    """``"32x8"`` -> ``(32, 8, 1)``: a block shape, checked against CUDA's limits."""
    sizes = parse_sizes(text, "block", "32x8", 3) + (1, 1)
    return check_block(sizes[:3])


def check_block(block: tuple[int, ...]) -> Block:
    """The block as three sizes (a launch's (x,) or (x, y) gets sizes 1 for the rest); one
    that CUDA could not launch is a usage error."""
    if not 1 <= len(block) <= 3 or any(not isinstance(b, int) or b < 1 for b in block):
        raise UsageError(f"bad block {block!r}: give one to three positive sizes (x, y, z)")
    block = (*block, 1, 1)[:3]
    threads = math.prod(block)
    if threads > MAX_THREADS:
        shown = block[:2] if block[2] == 1 else block
        sides = "" if shown[1:] == (1,) else f"{shape_text(shown)} = "
        raise UsageError(f"{sides}{threads} threads exceed {MAX_THREADS} per block")
    for axis, size, most in zip(AXES, block, MAX_BLOCK):
        if size > most:
            raise UsageError(f"blockDim.{axis} = {size} exceeds CUDA's limit of {most}")
    return (block[0], block[1], block[2])


def shape_text(shape: tuple[int, ...]) -> str:
    return "x".join(str(s) for s in shape)
