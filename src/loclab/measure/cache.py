"""The tuning cache: the best configuration found per device, variant and problem size.

One JSON file (``$LOCLAB_TUNING_CACHE``, else ``$XDG_CACHE_HOME/loclab/tuning.json``, else
``~/.cache/loclab/tuning.json``), shared by ``loclab tune`` (writes) and ``loclab run`` (reads)::

    {"loclab": "0.1.0", "format": 1,
     "entries": {"NVIDIA H200": {"mmm/gpu-register-tiled": {"k=4096 m=4096 n=4096": {
         "dims": {"m": 4096, "n": 4096, "k": 4096}, "params": {"T": 16, "R": 4},
         "median_s": 0.0021, "strategy": "local", "evaluated": 23,
         "date": "2025-01-31T12:00:00+00:00", "loclab": "0.1.0"}}}}}

A best configuration holds only for the device it was measured on and the exact size: the
device key is the GPU's name, or the CPU's model and the thread count the variants ran with.
A cache that cannot be read is worth less than none to ``loclab run``: a one-line warning, and
the run goes on untuned. It is still the user's file: ``loclab tune`` refuses to store into it
(one line, exit 2) rather than replace it.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from loclab.errors import LoclabError, UsageError
from loclab.hw import Machine
from loclab.measure.space import Config

Dims = Mapping[str, int]

CACHE_ENV = "LOCLAB_TUNING_CACHE"
FORMAT = 1
Entry = dict[str, Any]


def default_path() -> Path:
    """Where the cache lives unless ``--tuning-cache`` says otherwise."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    cache_home = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache_home) / "loclab" / "tuning.json"


def device_name(device: str, machine: Machine, threads: int | None) -> str:
    """The cache's device key: what a tuned configuration depends on besides the size."""
    if device == "gpu":
        if machine.gpu is None:
            raise LoclabError(f"no GPU to name: {machine.gpu_unavailable}")
        return machine.gpu.name
    return f"{machine.cpu.model} ({threads} threads)"


def size_key(dims: Dims) -> str:
    """The exact problem size, independent of the order the dimensions are listed in."""
    return " ".join(f"{name}={value}" for name, value in sorted(dims.items()))


def make_entry(dims: Dims, params: Config, median_s: float, strategy: str,
               evaluated: int) -> Entry:
    from loclab.version import __version__

    return {"dims": dict(dims), "params": dict(params), "median_s": median_s,
            "strategy": strategy, "evaluated": evaluated,
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "loclab": __version__}


@dataclass(frozen=True)
class TuningCache:
    """The cache as read: ``entries[device][case/variant][size] = entry``."""

    path: Path
    entries: dict[str, dict[str, dict[str, Entry]]] = field(default_factory=dict)

    def lookup(self, device: str, case: str, variant: str, dims: Dims) -> Entry | None:
        return self.entries.get(device, {}).get(f"{case}/{variant}", {}).get(size_key(dims))


def _is_params(value: Any) -> bool:
    return isinstance(value, dict) and all(
        isinstance(v, int) and not isinstance(v, bool) for v in value.values())


def _items(level: Any, where: str) -> list[tuple[str, Any]]:
    if not isinstance(level, dict):
        raise ValueError(f"{where}: not an object")
    return list(level.items())


def _checked(document: Any) -> dict[str, dict[str, dict[str, Entry]]]:
    """The entries of a cache document, or ValueError saying what is wrong with it."""
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ValueError(f"not a loclab tuning cache (format {FORMAT})")
    entries = document.get("entries")
    if not isinstance(entries, dict):
        raise ValueError("no 'entries' object")
    for device, variants in entries.items():
        for name, sizes in _items(variants, device):
            for size, entry in _items(sizes, f"{device} {name}"):
                if not isinstance(entry, dict) or not _is_params(entry.get("params")):
                    raise ValueError(f"{device} {name} {size}: no whole-number params")
    return entries


def _warn(message: str) -> None:
    print(f"loclab: warning: {message}", file=sys.stderr)


def read(path: Path) -> TuningCache:
    """Read the cache; a missing file is an empty cache. One that cannot be read or is not a
    tuning cache is a UsageError saying so: the file is left as it is."""
    try:
        return TuningCache(path, _checked(json.loads(path.read_text())))
    except FileNotFoundError:
        return TuningCache(path)
    except OSError as err:
        problem = f"cannot read the tuning cache ({err.strerror or err})"
    except (UnicodeDecodeError, json.JSONDecodeError, ValueError) as err:
        problem = f"corrupt tuning cache ({err})"
    raise UsageError(f"{path}: {problem}")


def load(path: Path | None = None) -> TuningCache:
    """Read the cache for a run: one that cannot be read counts as empty, with a one-line
    warning on stderr. Never raises."""
    path = path or default_path()
    try:
        return read(path)
    except UsageError as err:
        _warn(f"{err}; ignoring it")
        return TuningCache(path)


def check_is_cache(path: Path) -> None:
    """Before a search: a file there must be a tuning cache loclab can add to (a missing one
    is fine), never something a store would replace."""
    try:
        read(path)
    except UsageError as err:
        raise UsageError(f"{err}; loclab keeps the file as it is: fix or move it, or name "
                         "another with --tuning-cache") from None


def store(path: Path, device: str, case: str, variant: str, entry: Entry) -> None:
    """Add or replace one entry, keeping every other: read again just before writing (another
    tune may have stored meanwhile), then replace the file whole (``outputs.replace_file``: a
    reader sees the old file or the new one, never half of one; a link to the cache stays a
    link). A file that is not a tuning cache is never replaced (UsageError)."""
    from loclab.outputs import JSON_MARK, replace_file
    from loclab.version import __version__

    entries = read(path).entries
    entries.setdefault(device, {}).setdefault(f"{case}/{variant}", {})[
        size_key(entry["dims"])] = entry
    text = json.dumps({JSON_MARK: __version__, "format": FORMAT, "entries": entries},
                      indent=2) + "\n"
    try:
        replace_file(path, text.encode())
    except OSError as err:
        raise LoclabError(f"{path}: cannot write the tuning cache: "
                          f"{err.strerror or err}") from None
