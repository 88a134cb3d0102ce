"""Where transformed code goes: a new file, or one loclab wrote before and nobody has edited
since; never the user's, never a file the command reads.

Every emitted file starts with a line that names loclab (``# loclab transform: ...``); written
to a file, that line also records the digest of the rest (``[body sha256 ...]``). An existing
file is replaced only when it starts so and its body still has that digest: a user's edits to
a generated file are never lost to the next ``-o``. ``--force`` replaces an edited one, and one
an older loclab wrote (its header has no digest, so its edits cannot be told); never a file
loclab did not write, nor the input.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from pathlib import Path

from loclab.errors import UsageError
from loclab.outputs import Place, check_apart, check_file, replace_file

# The first line of every file loclab writes with -o starts so (``header``): transform's, and
# optimize's GPU module (optimize's CPU code is transform's).
MARKS = ("loclab transform:", "loclab optimize:")
# The header's record of the body it was written with: 16 hex digits of its SHA-256 (a file
# is compared with what loclab wrote, not guarded against forgery).
DIGEST = re.compile(rb" \[body sha256 ([0-9a-f]{16})\]( \*/)?$")
LONGEST_HEADER = 64 * 1024  # read no further for the header line of a file that has none


def header(language: str, target: str, recipe: str, tool: str = "transform") -> str:
    """The first line of an emitted file: which ``tool`` wrote it, from what, with what."""
    text = f"loclab {tool}: {target} with {recipe}"
    assert text.startswith(MARKS), tool
    return f"/* {text} */" if language == "c" else f"# {text}"


def check_output(path: Path, source: Path, *, force: bool = False,
                 others: Sequence[Place] = ()) -> None:
    """``-o FILE`` is writable and holds nothing of the user's (checked before any work): not
    the input ``source``, nor any of ``others`` (what else the command reads or writes), nor a
    file loclab did not write; one it wrote but that was edited since only with ``force``."""
    check_apart([Place("-o", path)], [Place("the input file", source), *others])
    if path.is_file() and path.stat().st_size:
        with open(path, "rb") as file:
            first = file.readline(LONGEST_HEADER).rstrip(b"\r\n")
            if not any(mark.encode() in first for mark in MARKS):
                raise UsageError(f"-o {path}: holds a file loclab did not write; name a new "
                                 "file")
            problem = _changed(first, file.read())
        if problem and not force:
            raise UsageError(f"-o {path}: {problem}; --force replaces it, or name a new file")
    check_file(path, "-o")


def _changed(first: bytes, body: bytes) -> str | None:
    """Why loclab cannot tell that ``body``, below the header line ``first``, is as loclab
    wrote it; None where it is."""
    found = DIGEST.search(first)
    if found is None:
        return "was written by an older loclab, so edits to it cannot be told"
    if found.group(1).decode() != _digest(body):
        return "was edited since loclab wrote it"
    return None


def _digest(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()[:16]


def stamped(source: str) -> bytes:
    """``source`` as written to a file: its header line records the digest of the rest."""
    first, _, body = source.encode("utf-8").partition(b"\n")
    stamp = b" [body sha256 " + _digest(body).encode() + b"]"
    first = first[:-3] + stamp + b" */" if first.endswith(b" */") else first + stamp
    return first + b"\n" + body


def write_output(path: Path, source: str) -> None:
    try:
        replace_file(path, stamped(source))
    except OSError as err:
        raise UsageError(f"-o {path}: cannot write: {err.strerror or err}") from None
