"""Deep code without a crash: reading and analyzing on a thread with a large stack.

Reading a loop nest recurses as deep as the code nests: ``ast``, pycparser, the frontends'
walks, isl's generated AST. A 3,000-term sum nests 3,000 deep, past Python's default limit
of 1,000 frames, and rewriting every walk (the libraries' too) as a loop is not possible. So
the work runs on a worker thread with a stack of ``STACK_BYTES`` and a recursion limit of
``RECURSION_LIMIT``, far more than the deepest code loclab accepts needs
(``MAX_NESTING`` levels, checked by the frontends with file:line); what still recurses too
deep is a one-line UsageError, never a RecursionError.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from loclab.errors import UsageError

MAX_NESTING = 10_000  # levels of nested expressions and statements a function may have
RECURSION_LIMIT = 12 * MAX_NESTING  # a dozen frames a level: every walk needs fewer
STACK_BYTES = 1 << 29  # 512 MiB of address space; only the pages touched are used

_Result = TypeVar("_Result")
_inside = threading.local()  # .deep: this thread is a worker already
_lock = threading.Lock()
_workers = 0  # workers running: the limit goes back when the last one ends
_saved_limit = 0


def on_deep_stack(where: str, work: Callable[[], _Result]) -> _Result:
    """``work()`` on a thread with a large stack and a high recursion limit (directly where
    this is one already); a RecursionError there is a UsageError naming ``where``."""
    if getattr(_inside, "deep", False):
        return work()
    outcome: dict[str, Any] = {}

    def run() -> None:
        _inside.deep = True
        try:
            outcome["value"] = work()
        except RecursionError:
            outcome["error"] = UsageError(
                f"{where}: nested too deeply for loclab (it follows at most "
                f"{RECURSION_LIMIT:,} nested calls; split long expressions or deep nests)")
        except BaseException as err:  # re-raised in the caller's thread, as if called there
            outcome["error"] = err
        finally:
            _inside.deep = False

    _enter()
    try:
        worker = _start(run)
        if worker is None:  # no thread of that size here: the caller's own stack must do
            run()
        else:
            worker.join()
    finally:
        _leave()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]  # type: ignore[no-any-return]


def _start(run: Callable[[], None]) -> threading.Thread | None:
    """A started daemon thread (Ctrl-C must not wait for it) with a stack of STACK_BYTES, or
    None where the platform or a memory limit refuses one."""
    with _lock:
        try:
            previous = threading.stack_size(STACK_BYTES)
        except (ValueError, RuntimeError):
            return None
        try:
            worker = threading.Thread(target=run, name="loclab-deep", daemon=True)
            worker.start()
        except RuntimeError:
            return None
        finally:
            threading.stack_size(previous)
    return worker


def _enter() -> None:
    """Raise the recursion limit (one for every thread in Python) while a worker runs."""
    global _workers, _saved_limit
    with _lock:
        if _workers == 0:
            _saved_limit = sys.getrecursionlimit()
            sys.setrecursionlimit(max(_saved_limit, RECURSION_LIMIT))
        _workers += 1


def _leave() -> None:
    global _workers
    with _lock:
        _workers -= 1
        if _workers == 0:
            sys.setrecursionlimit(_saved_limit)
