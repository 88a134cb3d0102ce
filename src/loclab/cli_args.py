"""Argument types of the command line: each turns one option's text into a value or raises
argparse's error with a line naming what is wrong (argparse adds the option's name)."""

from __future__ import annotations

import argparse
from pathlib import Path


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, got {text}")
    return value


def param(text: str) -> tuple[str, int]:
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    try:
        return name.strip(), int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{name.strip()}: not a whole number: "
                                         f"{value!r}") from None


def dims(text: str) -> dict[str, int]:
    """``m=5000,n=3000,k=700``: a size, each dimension a whole number (``1_000_000`` too)."""
    dims: dict[str, int] = {}
    for part in text.split(","):
        name, sep, value = (piece.strip() for piece in part.partition("="))
        if not sep or not name:
            raise argparse.ArgumentTypeError(f"expected NAME=VALUE[,NAME=VALUE...] "
                                             f"(m=5000,n=3000,k=700), got {text!r}")
        if name in dims:
            raise argparse.ArgumentTypeError(f"{name} given twice in {text!r}")
        try:
            dims[name] = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name}={value}: not a whole number") from None
    return dims


def byte_size(text: str) -> int:
    """``4096``, ``48K``, ``32KiB``, ``1MiB``: a number of bytes (K, M, G are powers of 1024)."""
    from loclab.hw.cpu import parse_size

    try:
        return parse_size(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size in bytes: {text!r} (4096, 48K, "
                                         f"32KiB, 1MiB)") from None


def block_shape(text: str) -> int:
    """``256`` or ``32x8``: the threads of a block (their product), in the models' syntax."""
    import math

    from loclab.errors import UsageError
    from loclab.model.text import parse_sizes

    try:
        return math.prod(parse_sizes(text, "block", "256 or 32x8", 3))
    except UsageError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def define(text: str) -> tuple[str, str]:
    """``NAME``, ``NAME=VALUE`` or ``NAME(ARGS)=VALUE`` of ``-D``, as a C compiler takes it
    (``NAME`` means 1)."""
    name, sep, value = text.partition("=")
    head, paren, _ = name.partition("(")
    if not head.isidentifier() or (paren and not name.endswith(")")):
        raise argparse.ArgumentTypeError(f"not a macro name: {name!r}")
    return name, value if sep else "1"


def c_options(command: argparse.ArgumentParser) -> None:
    """A C compiler's -I and -D, for the commands that read C."""
    command.add_argument("-I", dest="include_dirs", action="append", default=[], type=Path,
                         metavar="DIR", help="C: search DIR for #include files, repeatable")
    command.add_argument("-D", dest="defines", action="append", default=[], type=define,
                         metavar="NAME[=VALUE]",
                         help="C: define a macro before preprocessing, repeatable")
