"""Where transformed code goes: a new file, or one loclab wrote before; never the user's.

Every emitted file starts with a line that names loclab (``# loclab transform: ...``); an
existing file is replaced only when it starts so, and never when it is the input itself.
"""

from __future__ import annotations

from pathlib import Path

from loclab.errors import UsageError
from loclab.outputs import check_file

MARK = "loclab transform:"


def header(language: str, target: str, recipe: str) -> str:
    """The first line of an emitted file."""
    text = f"{MARK} {target} with {recipe}"
    return f"/* {text} */" if language == "c" else f"# {text}"


def check_output(path: Path, source: Path) -> None:
    """``-o FILE`` is writable and holds nothing of the user's (checked before any work)."""
    if path.exists() and source.exists() and path.resolve() == source.resolve():
        raise UsageError(f"-o {path}: is the input file; name a new file")
    if path.is_file() and path.stat().st_size:
        first = path.read_text(errors="replace").split("\n", 1)[0]
        if MARK not in first:
            raise UsageError(f"-o {path}: holds a file loclab did not write; name a new file")
    check_file(path, "-o")


def write_output(path: Path, source: str) -> None:
    try:
        path.write_text(source, encoding="utf-8")
    except OSError as err:
        raise UsageError(f"-o {path}: cannot write: {err.strerror or err}") from None
