"""The candidates' Numba compiles, made ahead and at once in forked processes.

Measuring a recipe costs one Numba compile of 2-4 s (a parallel function: more), and an
optimize call measures a dozen recipes and a dozen tile configurations: a matrix product
took over a minute on a 16-core host, nearly all of it compiling, one candidate after
another on one core. The candidates are known before they are measured (every acceptable
recipe; the configurations a local search tries next), so where this process may use more
than one CPU (Linux, whose ``fork`` gives the workers the candidates and the arguments'
types without sending them), their compiles run at once in a pool of workers. The recipes
and the tile search's configurations are transformed there too (``build``: a transform
proves its steps, seconds for a deep band), and the transforms are sent back and kept here
(``optimize.build.remember``): the same build made here afterwards is a lookup. Each worker
writes Numba's cache into a directory of this call's own; the measurement, here and one
candidate at a time as before, then loads each function from that cache in milliseconds.

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
import pickle
import shutil
import signal
import sys
import tempfile
import time
import types
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loclab.deps.parallel import forkable_cpus
from loclab.transform.verify import bounds_checked, define_in


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
        self.slowest_s = 0.0  # the longest a worker took to build and compile one item

    def __enter__(self) -> CompiledAhead:
        return self

    def __exit__(self, *exc: object) -> None:
        for name in self._modules:
            sys.modules.pop(name, None)
        shutil.rmtree(self._directory, ignore_errors=True)

    def prepare(self, results: Sequence[Any]) -> None:
        """Compile the Numba functions of ``results`` not compiled yet, at once where more
        than one CPU can (else nothing: each compiles when it is measured)."""
        waiting = {_key(r.source, checked=False): r for r in results
                   if _compiles_with_numba(r)}
        self._in_pool([r for d, r in waiting.items() if d not in self._prepared])

    def build(self, builds: Sequence[Callable[[], Any]],
              likely_proved: Sequence[Callable[[], Any]] = ()) -> None:
        """Run each of ``builds`` (transforms, their steps proved where they run) in the
        workers at once, and compile what each built there: the transforms are kept here
        (``build.remember``), so that the same builds run here afterwards find their steps
        proved and their functions compiled. One CPU, or a build that fails in a worker:
        built here, where its steps and errors are its own. ``likely_proved``: builds whose
        bounds-checked copy the proof will probably want (``prove``), compiled beside the
        others where CPUs would idle otherwise (a 16-core host compiling 3mm's 13 recipes:
        the proof's compile, 10-15 s there, was then made alone afterwards)."""
        spare = compile_workers(len(builds) + len(likely_proved)) - len(builds)
        self._in_pool([*builds, *(BoundsChecked(b) for b in likely_proved[:max(0, spare)])])

    def prove(self, result: Any) -> None:
        """Compile ``result`` in two workers at once: one as it is measured (``function``;
        not again where the search compiled it), the other with bounds checks, as the
        verification runs it (``checked_function``); neither where compiled already (by the
        search, or ``build``'s ``likely_proved``)."""
        if _compiles_with_numba(result):
            work = [made for made, checked in ((result, False), (BoundsChecked(result), True))
                    if _key(result.source, checked) not in self._prepared]
            self._in_pool(work)

    def _in_pool(self, work: list[Any]) -> None:
        """Each item of ``work`` (a result, or a build that returns one) compiled in a
        worker, at once where more than one CPU can; what compiled into the cache is
        prepared, the transforms a build made are kept. A worker that dies or a fork that
        fails ends the pool: what finished is kept."""
        from loclab.optimize.build import remember

        workers = compile_workers(len(work))
        if workers < 2:
            return
        pool = ProcessPoolExecutor(workers, multiprocessing.get_context("fork"),
                                   initializer=_start_worker, initargs=(self, work))
        try:
            for future in as_completed([pool.submit(_compile_numbered, k)
                                        for k in range(len(work))]):
                cached, transforms, seconds = future.result()
                self.slowest_s = max(self.slowest_s, seconds)
                remember(transforms)
                if cached is not None:
                    self._prepared.add(cached)
        except (BrokenProcessPool, OSError):
            pass  # the rest compiles here, when it is measured
        finally:  # Ctrl-C here: no compile waiting in the queue starts
            pool.shutdown(wait=True, cancel_futures=True)

    def function(self, result: Any) -> Callable[..., Any]:
        """``result``'s function: loaded from the cache where it was compiled ahead and
        cached (the first call loads it), else compiled here into the cache (so that the
        proof finds it there), else as ``result.compile()`` compiles it."""
        key = _key(result.source, checked=False)
        if key not in self._prepared and _compiles_with_numba(result) \
                and compile_workers(2) > 1 and self.compile_here(result, checked=False):
            self._prepared.add(key)
        if key not in self._prepared:
            return result.compile()
        return self._load(key, result, checked=False)

    def checked_function(self, result: Any) -> Callable[..., Any] | None:
        """``result``'s function with bounds checks (``transform.verify.bounds_checked``),
        loaded from the cache where ``prove`` compiled it, else None."""
        key = _key(result.source, checked=True)
        return self._load(key, result, checked=True) if key in self._prepared else None

    def _load(self, key: str, result: Any, checked: bool) -> Any:
        """The function defined from its text's file, as a module of its own, with Numba's
        cache in this object's directory (bounds-checked: a file and cache of its own)."""
        path = self._directory / f"{key}.py"
        name = f"loclab_ahead_{self._directory.name}_{key}".replace("-", "_")
        module = types.ModuleType(name)
        sys.modules[name] = module
        self._modules.append(name)
        function = define_in(module.__dict__, result.source, result.origin,
                             result.name.split(".")[-1], str(path))
        if checked:
            function = bounds_checked(function)
        function.enable_caching()
        return function

    def compile_here(self, result: Any, checked: bool) -> str | None:
        """Compile ``result`` into the cache (in a worker, or here for ``function``): its
        text written to its file once (two builds may write the same text: the first file
        stays, its cache valid), its function compiled for the arguments' types; its key
        where it is in the cache now (Numba caches no function that holds a pointer), else
        None."""
        key = _key(result.source, checked)
        path = self._directory / f"{key}.py"
        partial = path.with_suffix(f".{os.getpid()}.part")
        partial.write_text(result.source)
        try:
            os.link(partial, path)  # atomic, and never over a file another worker wrote
        except FileExistsError:
            pass
        finally:
            partial.unlink()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")  # heard here: "cannot cache" is the answer
            self._load(key, result, checked).compile(self._types)
        uncached = any("cannot cache" in str(warning.message).lower() for warning in caught)
        return None if uncached else key


@dataclass(frozen=True)
class BoundsChecked:
    """A result (or a build of one) whose function a worker compiles with bounds checks."""

    made: Any


# in a worker: the object compiling and what it compiles (results, or builds of them)
_batch: tuple[CompiledAhead | None, list[Any]] = (None, [])


def _start_worker(ahead: CompiledAhead, work: list[Any]) -> None:
    """A worker keeps the candidates (forked, not sent) and leaves Ctrl-C to the parent."""
    global _batch
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _batch = (ahead, work)


def _compile_numbered(number: int) -> tuple[str | None, list[Any], float]:
    """Build the ``number``-th item where it is a build, and compile it: (its key where it
    is in the cache now, else None; the transforms the build made that can be sent; the
    seconds it took)."""
    from loclab.optimize.build import recorded

    ahead, work = _batch
    assert ahead is not None
    started = time.perf_counter()
    item = work[number]
    checked = isinstance(item, BoundsChecked)
    made = item.made if checked else item
    with recorded() as transforms:
        try:
            result = made() if callable(made) else made
        except Exception:  # built again where it is measured, its error reported there
            return None, _sendable(transforms), time.perf_counter() - started
    try:
        cached = ahead.compile_here(result, checked) if _compiles_with_numba(result) \
            else None
    except Exception:  # compiled again where it is measured, its error reported there
        cached = None
    return cached, _sendable(transforms), time.perf_counter() - started


def _sendable(items: list[Any]) -> list[Any]:
    """The items that pickle (a refusal may hold what does not)."""
    sendable = []
    for item in items:
        try:
            pickle.dumps(item)
        except Exception:  # made again where it is needed
            continue
        sendable.append(item)
    return sendable


def _key(text: str, checked: bool) -> str:
    """A function's name in the cache: its text's digest (bounds-checked: marked so)."""
    return hashlib.sha256(text.encode()).hexdigest() + ("-checked" if checked else "")


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
