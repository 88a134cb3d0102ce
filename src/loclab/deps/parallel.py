"""The functions of a large file analyzed in parallel processes, in order.

Each function's analysis depends on nothing but its own nest, and a generated file of
thousands of them takes a few milliseconds each. Where this process may use more than one
CPU (Linux, whose ``fork`` gives the workers the nests already read: only their numbers
travel there, the analyses travel back pickled), a pool of workers analyzes a file of
PARALLEL_FROM functions or more per worker; fewer are quicker in this process. The analyses
come back in source order and are the same as one process makes: only where they are made
differs. Ctrl-C stops this process (the command line reports it); the pool's workers ignore
it and end with this process.
"""

from __future__ import annotations

import gc
import os
import signal
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

from loclab.deps.analysis import Analysis, analyze_nest
from loclab.nest.ir import Nest

PARALLEL_FROM = 200  # functions a worker must have for a pool to beat one process
CHUNK = 16  # functions a worker analyzes per message, and how often progress moves

Sizes = Mapping[str, int] | None

# in a worker: the nests, the fixed sizes, whether arguments are assumed distinct
_batch: tuple[list[Nest], Sizes, bool] = ([], None, False)


def analyze_nests(nests: list[Nest], params: Sizes,
                  progress: Callable[[int, int], None] | None = None,
                  assume_distinct: bool = False) -> list[Analysis]:
    """Every nest's analysis, in order, ``progress(done, total)`` after each."""
    workers = worker_count(len(nests))
    analyses: list[Analysis] = []
    with _no_collection():
        results = (_in_pool(nests, params, workers, assume_distinct) if workers > 1
                   else (analyze_nest(nest, params, assume_distinct) for nest in nests))
        for analysis in results:
            analyses.append(analysis)
            if progress is not None:
                progress(len(analyses), len(nests))
    return analyses


def worker_count(functions: int) -> int:
    """How many processes analyze a file of so many functions (1: this one alone)."""
    return max(1, min(forkable_cpus(), functions // PARALLEL_FROM))


def forkable_cpus() -> int:
    """How many forked workers this process may run at once: one a CPU it may use, none
    (1: this process alone) off Linux, whose ``fork`` gives the workers what this process
    holds without sending it, or inside a daemon (a worker of someone's pool may start no
    processes). The optimizer's compiles ahead use it too (``loclab.optimize.ahead``)."""
    import multiprocessing

    if not sys.platform.startswith("linux") or multiprocessing.current_process().daemon:
        return 1
    return len(os.sched_getaffinity(0))


@contextmanager
def _no_collection() -> Iterator[None]:
    """Python's cyclic garbage collector off (workers fork with it off too): an analysis
    leaves next to no cyclic garbage (a few objects per thousand functions), while the
    collector, woken by the objects of thousands of analyses piling up, walked them all
    again and again: about a twentieth of the time in one process, half of the work of
    the pool's parent (which unpickles the analyses)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def _in_pool(nests: list[Nest], params: Sizes, workers: int,
             assume_distinct: bool) -> Iterator[Analysis]:
    import multiprocessing

    context = multiprocessing.get_context("fork")
    # leaving the block (done, or an error) terminates the workers; Ctrl-C ends this
    # process, and its workers (daemons) with it
    with context.Pool(workers, initializer=_start_worker,
                      initargs=(nests, params, assume_distinct)) as pool:
        yield from pool.imap(_analyze_numbered, range(len(nests)), chunksize=CHUNK)


def _start_worker(nests: list[Nest], params: Sizes, assume_distinct: bool) -> None:
    """A worker keeps the nests (forked, not sent) and leaves Ctrl-C to the parent."""
    global _batch
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _batch = (nests, params, assume_distinct)


def _analyze_numbered(number: int) -> Analysis:
    nests, params, assume_distinct = _batch
    return analyze_nest(nests[number], params, assume_distinct)
