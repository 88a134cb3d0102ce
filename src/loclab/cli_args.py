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
    """``N=512``: a size parameter, a whole number at least 1 (``1_000`` too): a loop nest
    at a size of 0 or less runs nothing, or nonsense."""
    name, sep, value = (piece.strip() for piece in text.partition("="))
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    try:
        size = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{name}={value}: not a whole number") from None
    if size < 1:
        raise argparse.ArgumentTypeError(f"{name}={value}: a size must be at least 1")
    return name, size


class Params(argparse.Action):
    """``--param NAME=VALUE``, repeatable, into a dict of sizes (:func:`param`). A name
    given twice is an error, as in ``--dims``: silently keeping the last would run at a
    size the user did not mean."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: object) -> None:
        kwargs.setdefault("type", param)
        kwargs.setdefault("default", {})
        kwargs.setdefault("metavar", "NAME=VALUE")
        super().__init__(option_strings, dest, **kwargs)  # type: ignore[arg-type]

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        name, value = values  # type: ignore[misc]
        given = dict(getattr(namespace, self.dest) or {})  # never the shared default
        if name in given:
            raise argparse.ArgumentError(self, f"{name} given twice ({name}={given[name]}, "
                                               f"{name}={value})")
        given[name] = value
        setattr(namespace, self.dest, given)


def function_target(text: str) -> tuple[Path, str | None]:
    """``FILE`` or ``FILE::NAME``: a source file and the function it names (None: none)."""
    path, sep, name = text.partition("::")
    if not path:
        raise argparse.ArgumentTypeError(f"{text!r}: no file before '::' (FILE::NAME)")
    if sep and not name.strip():
        raise argparse.ArgumentTypeError(f"{text!r}: no function name after '::' "
                                         "(FILE::NAME, or FILE alone)")
    return Path(path), name.strip() or None


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
    """``4096``, ``48K``, ``32KiB``, ``1.5MiB``, ``1TiB``: a number of bytes (K, M, G, T are
    powers of 1024). Zero is a size (no shared memory); an option that needs more says so."""
    from loclab.hw.cpu import parse_size

    try:
        return parse_size(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"{err} (write e.g. 4096, 48K, 32KiB, 1.5MiB, "
                                         f"1TiB)") from None


def element_type(text: str) -> tuple[str, str]:
    """``A=float64`` of ``--dtype``: an array and the element type its kernels are written for
    (the type itself is checked by the emitter, which knows NumPy's and CUDA's)."""
    name, sep, kind = (piece.strip() for piece in text.partition("="))
    if not sep or not name.isidentifier() or not kind:
        raise argparse.ArgumentTypeError(f"expected ARRAY=TYPE (e.g. A=float64), got {text!r}")
    return name, kind


def define(text: str) -> tuple[str, str]:
    """``NAME``, ``NAME=VALUE`` or ``NAME(ARGS)=VALUE`` of ``-D``, as a C compiler takes it
    (``NAME`` means 1)."""
    name, sep, value = text.partition("=")
    head, paren, _ = name.partition("(")
    if not head.isidentifier() or (paren and not name.endswith(")")):
        raise argparse.ArgumentTypeError(f"not a macro name: {name!r}")
    return name, value if sep else "1"


def distinct_option(command: argparse.ArgumentParser) -> None:
    """``--assume-distinct``, for the commands whose verdicts depend on arguments that may
    share memory."""
    command.add_argument("--assume-distinct", action="store_true",
                         help="no two array arguments share memory (not one array passed "
                              "twice, nor overlapping views or pointers): without it, a "
                              "verdict that needs them apart says so")


def c_options(command: argparse.ArgumentParser) -> None:
    """A C compiler's -I and -D, for the commands that read C."""
    command.add_argument("-I", dest="include_dirs", action="append", default=[], type=Path,
                         metavar="DIR", help="C: search DIR for #include files, repeatable")
    command.add_argument("-D", dest="defines", action="append", default=[], type=define,
                         metavar="NAME[=VALUE]",
                         help="C: define a macro before preprocessing, repeatable")
