"""Where loclab writes: checked before a long run, so that a bad path costs seconds, not the run,
and so that no file of the user's is ever replaced.

The rule every option that writes follows: write a new file, or one loclab wrote and nobody has
changed since; never a file the same command reads (an input, the tuning cache), never one that
another output of the same command writes, whatever the spelling (``./a.json`` and ``a.json``,
a symbolic or a hard link: :func:`same_file`). Each refusal is one line, before any work.

A check creates what a write would create (missing parent directories) and then proves the
write by doing a harmless one: an existing file is opened for appending (its contents stay),
a temporary file is created and removed beside it. That is the only test that holds everywhere
(``os.access`` answers yes to root on /proc, and knows nothing of quotas or read-only mounts).
A report directory must be new, empty, or an earlier loclab report: anything else holds files
a report could replace (README.md, results.json, a PNG).

Every JSON document loclab writes to a file opens with the key ``loclab`` (the version that
wrote it) and ends with ``sha256``, the digest of the rest (:func:`json_text`): a later write
replaces it only while the digest still matches, so that a user's edits are never lost. Files
from before the digest carry only the version key; they are replaced as loclab's own.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loclab.errors import UsageError

# Written into every report's index.html, so that a later report may replace it.
REPORT_MARK = '<meta name="generator" content="loclab">'
# The pages and data every report writes besides its charts; a later report removes those of
# them it does not write (a comparison's over a run's: results.json).
REPORT_FILES = ("index.html", "README.md", "results.json", "comparison.json")
# A chart an earlier report shows: a PNG beside the page (never a path elsewhere; chart names
# hold no character HTML escapes, so a name read here is the file's).
REPORT_CHART = re.compile(r'<img src="([^"/\\]+\.png)"')

JSON_MARK = "loclab"  # the key every JSON document loclab writes opens with: its version
JSON_DIGEST = "sha256"  # the key it ends with: the digest of the rest (json_text)
# What each kind of document loclab writes holds and no other kind does: run's, compare's
# and tune's --json.
DOCUMENT_KEYS = {"a run's results": "results", "a comparison": "rows",
                 "a tune's configurations": "tunings"}
# A JSON file larger than this is nobody's results: refused without being read whole.
LARGEST_JSON_BYTES = 256 * 2**20
MOST_LINKS = 40  # links followed from a path before giving up (Linux's own limit)


@dataclass(frozen=True)
class Place:
    """A file or report directory one command reads or writes, as the user named it:
    ``label`` is the option (``--json``) or what it is (``BASE``, ``the tuning cache``)."""

    label: str
    path: Path
    directory: bool = False


def same_file(one: Path, other: Path) -> bool:
    """Whether two paths name one file: two spellings, a symbolic link or a hard link of it.
    A missing file is compared by where it would be created."""
    try:
        return os.path.samefile(one, other)
    except OSError:  # one of them does not exist (yet)
        return one.resolve() == other.resolve()


def is_within(path: Path, directory: Path) -> bool:
    """``path`` lies inside ``directory`` (links followed)."""
    return path.resolve().is_relative_to(directory.resolve())


def check_apart(outputs: Sequence[Place], inputs: Sequence[Place] = ()) -> None:
    """No output is, or (a report directory) holds, a file the command reads, and no two
    outputs write the same file. Reads nothing and creates nothing: call it first."""
    for index, output in enumerate(outputs):
        for read in inputs:
            _check_clear(output, read, ", which this command reads")
        for other in outputs[index + 1:]:
            _check_clear(output, other, ", which this command also writes")
            if other.directory and is_within(output.path, other.path):
                raise UsageError(f"{output.label} {output.path}: is inside {other.label} "
                                 f"{other.path}; name a file outside it")


def _check_clear(output: Place, other: Place, why: str) -> None:
    """``output`` is not ``other`` and, a directory, does not hold it."""
    if same_file(output.path, other.path):
        raise UsageError(f"{output.label} {output.path}: is {other.label} {other.path}"
                         f"{why}; name another {'directory' if output.directory else 'file'}")
    if output.directory and is_within(other.path, output.path):
        raise UsageError(f"{output.label} {output.path}: holds {other.label} {other.path}"
                         f"{why}; name another directory")


def check_file(path: Path, option: str) -> None:
    """``path`` can be written as a file (UsageError naming ``option`` otherwise)."""
    if path.is_dir():
        raise UsageError(f"{option} {path}: is a directory")
    if path.is_symlink() and not path.exists():
        raise UsageError(f"{option} {path}: is a link to a missing file; name the file itself")
    _make_parents(path, option)
    if path.exists() and not path.is_file():  # a device or a pipe: opening one is no probe
        if not os.access(path, os.W_OK):  # (a pipe's reader would see its end)
            raise UsageError(f"{option} {path}: cannot write: Permission denied")
        return
    existed = path.exists()
    try:
        with open(path, "a"):
            pass
        if existed:  # replaced by a rename: its directory must take a new file
            _probe(path.resolve().parent)
        else:
            path.unlink()
    except OSError as err:
        raise UsageError(f"{option} {path}: cannot write: {err.strerror or err}") from None


def check_json_output(path: Path, option: str, kind: str) -> None:
    """``path`` may take a JSON document of ``kind`` (:data:`DOCUMENT_KEYS`): it is new,
    empty, or one of that kind loclab wrote that nobody has edited since (never a tuning
    cache, whose entries it would replace, nor another kind: a run's results are not lost to
    a comparison written over them by a slip of the name)."""
    problem = json_problem(path, kind) if path.is_file() and path.stat().st_size else None
    if problem:
        raise UsageError(f"{option} {path}: {problem}")
    check_file(path, option)


def json_problem(path: Path, kind: str) -> str | None:
    """Why the existing file ``path`` must not be replaced by a JSON document of ``kind``;
    None if it may."""
    foreign = "holds a file loclab did not write; name a new file"
    if path.stat().st_size > LARGEST_JSON_BYTES:
        return foreign
    try:
        document = json.loads(path.read_bytes())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return foreign
    if not isinstance(document, dict):
        return foreign
    if "entries" in document and "format" in document:
        return "is a tuning cache; name a new file"
    if not isinstance(document.get(JSON_MARK), str):
        return foreign
    held = next((name for name, key in DOCUMENT_KEYS.items() if key in document), None)
    if held != kind:
        return f"holds {held or 'JSON of another kind'}, not {kind}; name a new file"
    if JSON_DIGEST in document and document[JSON_DIGEST] != json_digest(document):
        return "was edited since loclab wrote it; name a new file, or move it away first"
    return None


def json_digest(document: dict[str, Any]) -> str:
    """The digest of a document, less its own digest key: over a canonical form (sorted keys,
    no spaces), so that reindenting a file is not an edit, changing a value is."""
    body = {key: value for key, value in document.items() if key != JSON_DIGEST}
    canonical = json.dumps(json.loads(json.dumps(body)), sort_keys=True,
                           separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def json_text(document: dict[str, Any]) -> str:
    """A document as loclab writes it to a file: indented, ending with its digest."""
    body = {key: value for key, value in document.items() if key != JSON_DIGEST}
    return json.dumps({**body, JSON_DIGEST: json_digest(body)}, indent=2) + "\n"


def replace_file(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` whole or not at all: into a temporary file beside it, renamed
    over it. A full disk leaves the old file as it was; a symbolic link is followed (the file
    it names is replaced, the link stays); a hard link to the old file keeps the old contents.
    The new file keeps the old one's permissions (a new one: the umask's). A device or a pipe
    (``/dev/stdout``, even where the shell sent it to a file) is written as it is, never
    replaced. OSError on failure."""
    if path.exists() and not path.is_file() or _is_process_link(path):
        with open(path, "wb") as stream:
            stream.write(data)
        return
    target = path.resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    mode = target.stat().st_mode & 0o777 if target.exists() else 0o666 & ~_umask()
    handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp",
                                         dir=target.parent)
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


def _is_process_link(path: Path) -> bool:
    """``path`` reaches /proc (``/dev/stdout``, ``/dev/fd/1``): a link to what a process has
    open, which a rename would replace by a file of its own name (/dev/stdout itself)."""
    hop = Path(os.path.abspath(path))
    for _ in range(MOST_LINKS):
        hop = Path(os.path.realpath(hop.parent)) / hop.name
        if hop.is_relative_to("/proc"):
            return True
        if not hop.is_symlink():
            return False
        hop = hop.parent / os.readlink(hop)
    return False


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def check_report_directory(path: Path, option: str) -> None:
    """``path`` can hold a report: missing, empty, or an earlier loclab report."""
    if path.exists() and not path.is_dir():
        raise UsageError(f"{option} {path}: not a directory")
    _make_parents(path / "index.html", option)
    held = sorted(entry.name for entry in path.iterdir()) if path.is_dir() else []
    if held and not _is_report(path):
        shown = ", ".join(held[:3]) + (f" and {len(held) - 3} more" if len(held) > 3 else "")
        raise UsageError(f"{option} {path}: holds {shown}, not a loclab report; name a new "
                         "or empty directory")
    linked = [name for name in held if (path / name).is_symlink()
              and (name in REPORT_FILES or name.endswith(".png"))]
    if linked:  # a report would write through it, into a file elsewhere
        raise UsageError(f"{option} {path}: {linked[0]} is a link; a report writes its own "
                         "files there: remove the link or name another directory")
    try:
        _probe(path)
    except OSError as err:
        raise UsageError(f"{option} {path}: cannot write: {err.strerror or err}") from None


def report_files(directory: Path) -> set[str]:
    """The files the report now in ``directory`` wrote: its pages and data, and the charts its
    index.html shows (every report, old ones too, shows each chart it writes). Empty where
    there is no loclab report."""
    if not _is_report(directory):
        return set()
    page = (directory / "index.html").read_text(errors="replace")
    return {*REPORT_FILES, *REPORT_CHART.findall(page)}


def remove_stale(directory: Path, earlier: Iterable[str], written: Iterable[str]) -> None:
    """Remove what an earlier report in ``directory`` wrote (``earlier``: :func:`report_files`
    before the new one was written) and the new one did not: charts of cases no longer in the
    results. Only plain files: a link, or anything of the user's, stays."""
    for name in set(earlier) - set(written):
        stale = directory / name
        if stale.is_file() and not stale.is_symlink():
            stale.unlink()


def _is_report(path: Path) -> bool:
    """An earlier report: its index.html carries loclab's mark (or, before the mark existed,
    a title starting 'loclab')."""
    try:
        head = (path / "index.html").read_text(errors="replace")[:2000]
    except OSError:
        return False
    return REPORT_MARK in head or "<title>loclab " in head


def _probe(directory: Path) -> None:
    """A file can be created in ``directory`` (OSError otherwise); nothing is left behind."""
    handle, probe = tempfile.mkstemp(prefix=".loclab-", dir=directory)
    os.close(handle)
    os.unlink(probe)


def _make_parents(path: Path, option: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        blocking = next(p for p in path.parents if p.exists())
        raise UsageError(f"{option} {path}: {blocking} is not a directory") from None
    except OSError as err:
        raise UsageError(f"{option} {path}: cannot create {path.parent}: "
                         f"{err.strerror or err}") from None
