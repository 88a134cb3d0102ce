"""Where loclab writes: checked before a long run, so that a bad path costs seconds, not the run.

A check creates what a write would create (missing parent directories) and then proves the
write by doing a harmless one: an existing file is opened for appending (its contents stay),
a new one is created and removed again, a report directory gets a temporary file. That is the
only test that holds everywhere (``os.access`` answers yes to root on /proc, and knows nothing
of quotas or read-only mounts). A report directory must be new, empty, or an earlier loclab
report: anything else holds files a report could replace (README.md, results.json, a PNG).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from loclab.errors import UsageError

# Written into every report's index.html, so that a later report may replace it.
REPORT_MARK = '<meta name="generator" content="loclab">'


def check_file(path: Path, option: str) -> None:
    """``path`` can be written as a file (UsageError naming ``option`` otherwise)."""
    if path.is_dir():
        raise UsageError(f"{option} {path}: is a directory")
    _make_parents(path, option)
    existed = path.exists()
    try:
        with open(path, "a"):
            pass
    except OSError as err:
        raise UsageError(f"{option} {path}: cannot write: {err.strerror or err}") from None
    if not existed:
        path.unlink()


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
    try:
        handle, probe = tempfile.mkstemp(prefix=".loclab-", dir=path)
        os.close(handle)
        os.unlink(probe)
    except OSError as err:
        raise UsageError(f"{option} {path}: cannot write: {err.strerror or err}") from None


def _is_report(path: Path) -> bool:
    """An earlier report: its index.html carries loclab's mark (or, before the mark existed,
    a title starting 'loclab')."""
    try:
        head = (path / "index.html").read_text(errors="replace")[:2000]
    except OSError:
        return False
    return REPORT_MARK in head or "<title>loclab " in head


def _make_parents(path: Path, option: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        blocking = next(p for p in path.parents if p.exists())
        raise UsageError(f"{option} {path}: {blocking} is not a directory") from None
    except OSError as err:
        raise UsageError(f"{option} {path}: cannot create {path.parent}: "
                         f"{err.strerror or err}") from None
