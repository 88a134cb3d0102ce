"""The candidates' Numba compiles, made ahead and at once in forked processes.

Measuring a recipe costs one Numba compile of 2-4 s (a parallel function: more), and an
optimize call measures a dozen recipes and a dozen tile configurations: a matrix product
took over a minute on a 16-core host, nearly all of it compiling, one candidate after
another on one core. The candidates are known before they are measured (every acceptable
recipe; the configurations a local search tries next), so where this process may use more
than one CPU (Linux, whose ``fork`` gives the workers the candidates and the arguments'
types without sending them), their compiles run at once in a pool of workers. Each worker
writes Numba's cache into a directory of this call's own; the measurement, here and one
candidate at a time as before, then loads each function from that cache in milliseconds.

What runs is what would have run: the same text, compiled by the same Numba for the same
argument types on the same CPU; only where it was compiled differs. A compile that fails in
a worker is made again here, where its error is reported as before. The workers only
compile, never run parallel code (OpenMP's threads do not survive a fork). Each text runs
as a module of its own (registered while this object lives): Numba's cache finds the
globals of a function it loads by its module's name.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import shutil
import signal
import sys
import tempfile
import types
import warnings
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from loclab.transform.verify import define_in

# compiles in a worker (each is seconds): one candidate at a time is as quick as any
CHUNK = 1


def compile_workers(candidates: int) -> int:
    """How many processes compile ``candidates`` at once (1: none is forked; this process
    compiles each when it is measured)."""
    if not sys.platform.startswith("linux") or candidates < 2:
        return 1
    if multiprocessing.current_process().daemon:
        return 1  # a worker of someone's pool may start no processes
    return max(1, min(len(os.sched_getaffinity(0)), candidates))


class CompiledAhead:
    """Transformed functions compiled ahead (``prepare``) and handed out compiled
    (``function``), for one set of arguments (their Numba types are what is compiled for).
    A context manager: leaving it removes the cache directory and the modules."""

    def __init__(self, arguments: Sequence[Any]) -> None:
        self._types = tuple(_called_type(value) for value in arguments)
        self._directory = Path(tempfile.mkdtemp(prefix="loclab-ahead-"))
        self._prepared: set[str] = set()
        self._modules: list[str] = []

    def __enter__(self) -> CompiledAhead:
        return self

    def __exit__(self, *exc: object) -> None:
        for name in self._modules:
            sys.modules.pop(name, None)
        shutil.rmtree(self._directory, ignore_errors=True)

    def prepare(self, results: Sequence[Any]) -> None:
        """Compile the Numba functions of ``results`` not compiled yet, at once where more
        than one CPU can (else nothing: each compiles when it is measured)."""
        waiting = {}
        for result in results:
            if _compiles_with_numba(result) and _digest(result) not in self._prepared:
                waiting[_digest(result)] = result
        self._in_pool(list(waiting.values()))

    def build(self, builds: Sequence[Callable[[], Any]], like: Any) -> list[Any | None]:
        """Run each of ``builds`` (a transform, its steps proved where it runs) and compile
        what it built, at once in the workers; each result as this process measures it:
        ``like`` (a result of the same recipe at other tile sizes: the same function,
        loops and reductions) with the text built, or None where no worker built it (one
        CPU; a build that failed: built again here, where its error is reported). The tile
        search's configurations: transforming one takes seconds too."""
        texts = self._in_pool(list(builds)) if _compiles_with_numba(like) else {}
        return [replace(like, source=texts[k]) if k in texts else None
                for k in range(len(builds))]

    def _in_pool(self, work: list[Any]) -> dict[int, str]:
        """Each item of ``work`` (a result, or a build that returns one) compiled in a
        worker, at once where more than one CPU can: the text of each one built, by
        number; what compiled into the cache is prepared."""
        workers = compile_workers(len(work))
        if workers < 2:
            return {}
        texts: dict[int, str] = {}
        context = multiprocessing.get_context("fork")
        with context.Pool(workers, initializer=_start_worker, initargs=(self, work)) as pool:
            for number, text, cached in pool.imap_unordered(
                    _compile_numbered, range(len(work)), chunksize=CHUNK):
                if text is not None:
                    texts[number] = text
                if cached:
                    self._prepared.add(_digest_of(text))
        return texts

    def function(self, result: Any) -> Callable[..., Any]:
        """``result``'s function: loaded from the cache where it was compiled ahead and
        cached (the first call loads it), else compiled as ``result.compile()`` compiles
        it."""
        digest = _digest(result)
        if digest not in self._prepared:
            return result.compile()
        return self._load(digest, result)

    def _load(self, digest: str, result: Any) -> Any:
        """The function defined from its text's file, as a module of its own, with Numba's
        cache in this object's directory."""
        path = self._directory / f"{digest}.py"
        name = f"loclab_ahead_{self._directory.name.replace('-', '_')}_{digest}"
        module = types.ModuleType(name)
        module.__file__ = str(path)
        sys.modules[name] = module
        self._modules.append(name)
        function = define_in(module.__dict__, result.source, result.origin,
                             result.name.split(".")[-1], str(path))
        function.enable_caching()
        return function

    def compile_here(self, result: Any) -> bool:
        """Compile ``result`` (in a worker): its text written to its file (atomically: two
        builds may write the same), its function compiled for the arguments' types;
        whether it is in the cache now (Numba caches no function that holds a pointer)."""
        digest = _digest(result)
        path = self._directory / f"{digest}.py"
        if not path.exists():
            partial = path.with_suffix(f".{os.getpid()}.part")
            partial.write_text(result.source)
            os.replace(partial, path)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")  # the measurement here warns, where it does
            self._load(digest, result).compile(self._types)
        return not any("cannot cache" in str(warning.message).lower() for warning in caught)


# in a worker: the object compiling and the results it compiles, by number
_batch: tuple[CompiledAhead | None, list[Any]] = (None, [])  # results, or builds of them


def _start_worker(ahead: CompiledAhead, work: list[Any]) -> None:
    """A worker keeps the candidates (forked, not sent) and leaves Ctrl-C to the parent."""
    global _batch
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _batch = (ahead, work)


def _compile_numbered(number: int) -> tuple[int, str | None, bool]:
    """Build the ``number``-th item where it is a build, and compile it: (``number``, the
    text built or None, whether it is cached)."""
    ahead, work = _batch
    assert ahead is not None
    text = None
    try:
        result = work[number]() if callable(work[number]) else work[number]
        text = result.source
        return number, text, ahead.compile_here(result)
    except Exception:  # built or compiled again where it is measured, its error said there
        return number, text, False


def _digest(result: Any) -> str:
    return _digest_of(result.source)


def _digest_of(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _compiles_with_numba(result: Any) -> bool:
    return result.language == "python" and "@njit" in result.source


def _called_type(value: Any) -> Any:
    """The Numba type of an argument as the measurement passes it: arrays as copies of
    their own (C order, writable)."""
    import numba
    from numba.core import types as numba_types

    kind = numba.typeof(value)
    if isinstance(kind, numba_types.Array):
        return kind.copy(layout="C", readonly=False)
    return kind
