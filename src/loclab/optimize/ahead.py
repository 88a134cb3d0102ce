"""The candidates' Numba compiles, made ahead and at once in forked processes.

Measuring a recipe costs one Numba compile of 2-4 s (a parallel function: more), and an
optimize call measures a dozen recipes and a dozen tile configurations: a matrix product
took over a minute on a 16-core host, nearly all of it compiling, one candidate after
another on one core. The candidates are known before they are measured (every acceptable
recipe; the configurations a local search tries next), so where this process may use more
than one CPU (Linux, whose ``fork`` gives the workers the candidates and the arguments'
types without sending them), their compiles run at once in a pool of workers; the tile
search's configurations are transformed there too (``build``: a transform proves its steps,
seconds for a deep band). Each worker writes Numba's cache into a directory of this call's
own; the measurement, here and one candidate at a time as before, then loads each function
from that cache in milliseconds.

What runs is what would have run: the same text, compiled by the same Numba for the same
argument types on the same CPU; only where it was compiled differs. Whatever fails in a
worker (a build, a compile, the worker itself, the fork) is made again here, where its
error is reported as before. The workers never run the code they compile (OpenMP's threads
do not survive a fork). Each text runs as a module of its own (registered while this object
lives): Numba's cache finds the globals of a function it loads by its module's name.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import re
import shutil
import signal
import sys
import tempfile
import types
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import replace
from pathlib import Path
from typing import Any

from loclab.deps.parallel import forkable_cpus
from loclab.transform.verify import define_in


def compile_workers(candidates: int) -> int:
    """How many processes compile ``candidates`` at once (1: none is forked; this process
    compiles each when it is measured)."""
    import numba

    if candidates < 2 or numba.config.CACHE_DIR:
        return 1  # with NUMBA_CACHE_DIR, Numba caches outside the directory removed
    return max(1, min(forkable_cpus(), candidates))


class CompiledAhead:
    """Transformed functions compiled ahead (``prepare``, ``build``) and handed out compiled
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
        waiting = {_digest(r.source): r for r in results if _compiles_with_numba(r)}
        self._in_pool([r for d, r in waiting.items() if d not in self._prepared])

    def build(self, builds: Sequence[Callable[[], Any]], like: Any) -> list[Any | None]:
        """Run each of ``builds`` (a transform, its steps proved where it runs) and compile
        what it built, at once in the workers; each result as this process measures it:
        ``like`` (a result of the same recipe at other tile sizes: the same function,
        loops and reductions) with the text built, or None where no worker built one with
        ``like``'s steps (one CPU; a build that failed, or whose plan fell back to
        another: built again here, where its steps and errors are its own)."""
        built = self._in_pool(list(builds)) if _compiles_with_numba(like) else {}
        return [replace(like, source=built[k][0])
                if k in built and built[k][1] == _shape(like) else None
                for k in range(len(builds))]

    def _in_pool(self, work: list[Any]) -> dict[int, tuple[str, tuple[str, ...]]]:
        """Each item of ``work`` (a result, or a build that returns one) compiled in a
        worker, at once where more than one CPU can: the text and the steps' shape of each
        one built, by number; what compiled into the cache is prepared. A worker that dies
        or a fork that fails ends the pool: what finished is kept."""
        workers = compile_workers(len(work))
        done: dict[int, tuple[str, tuple[str, ...]]] = {}
        if workers < 2:
            return done
        pool = ProcessPoolExecutor(workers, multiprocessing.get_context("fork"),
                                   initializer=_start_worker, initargs=(self, work))
        try:
            for future in as_completed([pool.submit(_compile_numbered, k)
                                        for k in range(len(work))]):
                number, built, cached = future.result()
                if built is not None:
                    done[number] = built
                if cached and built is not None:
                    self._prepared.add(_digest(built[0]))
        except (BrokenProcessPool, OSError):
            pass  # the rest compiles here, when it is measured
        finally:  # Ctrl-C here: no compile waiting in the queue starts
            pool.shutdown(wait=True, cancel_futures=True)
        return done

    def function(self, result: Any) -> Callable[..., Any]:
        """``result``'s function: loaded from the cache where it was compiled ahead and
        cached (the first call loads it), else compiled as ``result.compile()`` compiles
        it."""
        digest = _digest(result.source)
        if digest not in self._prepared:
            return result.compile()
        return self._load(digest, result)

    def _load(self, digest: str, result: Any) -> Any:
        """The function defined from its text's file, as a module of its own, with Numba's
        cache in this object's directory."""
        path = self._directory / f"{digest}.py"
        name = f"loclab_ahead_{self._directory.name.replace('-', '_')}_{digest}"
        module = types.ModuleType(name)
        sys.modules[name] = module
        self._modules.append(name)
        function = define_in(module.__dict__, result.source, result.origin,
                             result.name.split(".")[-1], str(path))
        function.enable_caching()
        return function

    def compile_here(self, result: Any) -> bool:
        """Compile ``result`` (in a worker): its text written to its file once (two builds
        may write the same text: the first file stays, its cache valid), its function
        compiled for the arguments' types; whether it is in the cache now (Numba caches
        no function that holds a pointer)."""
        digest = _digest(result.source)
        path = self._directory / f"{digest}.py"
        partial = path.with_suffix(f".{os.getpid()}.part")
        partial.write_text(result.source)
        try:
            os.link(partial, path)  # atomic, and never over a file another worker wrote
        except FileExistsError:
            pass
        finally:
            partial.unlink()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")  # this worker's; the parent compiles anew
            self._load(digest, result).compile(self._types)
        return not any("cannot cache" in str(warning.message).lower() for warning in caught)


# in a worker: the object compiling and what it compiles (results, or builds of them)
_batch: tuple[CompiledAhead | None, list[Any]] = (None, [])


def _start_worker(ahead: CompiledAhead, work: list[Any]) -> None:
    """A worker keeps the candidates (forked, not sent) and leaves Ctrl-C to the parent."""
    global _batch
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _batch = (ahead, work)


def _compile_numbered(number: int) -> tuple[int, tuple[str, tuple[str, ...]] | None, bool]:
    """Build the ``number``-th item where it is a build, and compile it: (``number``, its
    text and steps' shape or None where the build failed, whether it is cached)."""
    ahead, work = _batch
    assert ahead is not None
    try:
        result = work[number]() if callable(work[number]) else work[number]
    except Exception:  # built again where it is measured, its error reported there
        return number, None, False
    try:
        cached = ahead.compile_here(result)
    except Exception:  # compiled again where it is measured, its error reported there
        cached = False
    return number, (result.source, _shape(result)), cached


def _shape(result: Any) -> tuple[str, ...]:
    """A result's steps without their sizes: the same for every tile configuration of one
    plan (``tile(i@3=32, j@4=32)`` and ``tile(i@3=64, j@4=64)`` alike)."""
    return tuple(re.sub(r"=\d+", "=", step.step) for step in result.steps)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


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
