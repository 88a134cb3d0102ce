"""Dependence analysis of loop nests, exact on affine code (islpy), explained like the slides.

``analyze`` takes a Python function or source text (Python, or C with ``language="c"``);
``analyze_file`` every function of a file. Both return :class:`~loclab.deps.analysis.Analysis`
objects: loops, statements, dependences, ``.explain()`` and ``.to_json()``. C is preprocessed
first: ``include_dirs`` and ``defines`` are a compiler's ``-I`` and ``-D``.

A whole file is analyzed as a compiler compiles one: a function (or method) that cannot be
read does not stop the others. ``analyze_file`` returns the others' analyses, a list whose
``skipped`` names each function left out with its one-line error (file:line:column and the
reason); only when no function can be read is it an error, naming each one.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from loclab.deps.analysis import Analysis, analyze_nest
from loclab.deps.parallel import analyze_nests
from loclab.errors import UsageError
from loclab.nest import Skipped
from loclab.nest.builder import NestError
from loclab.nest.ir import Nest


# How many unreadable functions the error of a file with none readable names (the rest are
# counted): a generated file of thousands of them must not print thousands of lines.
MAX_LISTED = 20

Progress = Callable[[int, int, str], None]  # (done, total, what is being done)


class FileAnalyses(list[Analysis]):
    """The analyses of a file's functions, in source order (a plain list of them),
    ``skipped``: the functions that could not be read, each with its one-line error, and
    ``warnings``: one line for each name that several functions share."""

    def __init__(self, analyses: Iterable[Analysis] = (), skipped: Iterable[Skipped] = (),
                 warnings: Iterable[str] = ()) -> None:
        super().__init__(analyses)
        self.skipped: list[Skipped] = list(skipped)
        self.warnings: list[str] = list(warnings)


def analyze(func_or_source: Callable[..., Any] | str, function: str | None = None, *,
            params: Mapping[str, int] | None = None, language: str | None = None,
            filename: str | None = None, include_dirs: Iterable[str | Path] = (),
            defines: Mapping[str, str] | None = None,
            assume_distinct: bool = False) -> Analysis:
    """Analyze one function: a live Python function, or source text holding it.

    ``assume_distinct``: no two arguments share memory (the caller vouches); otherwise the
    analysis says what arguments that may overlap would add (``Analysis.overlaps``)."""
    from loclab.nest.deep import on_deep_stack

    where = filename or getattr(func_or_source, "__name__", "<source>")
    return on_deep_stack(where, lambda: _analyze(func_or_source, function, params, language,
                                                 filename, include_dirs, defines,
                                                 assume_distinct))


def _analyze(func_or_source: Callable[..., Any] | str, function: str | None,
             params: Mapping[str, int] | None, language: str | None, filename: str | None,
             include_dirs: Iterable[str | Path],
             defines: Mapping[str, str] | None, assume_distinct: bool) -> Analysis:
    from loclab.nest import load_function, load_source

    if callable(func_or_source):
        nest = load_function(func_or_source)
        _check_params([nest], params)
        return analyze_nest(nest, params, assume_distinct)
    if not isinstance(func_or_source, str):
        raise UsageError(f"analyze() takes a function or source text, not "
                         f"{type(func_or_source).__name__}")
    nests = load_source(func_or_source, language=language or "python",
                        filename=filename or "<source>", function=function,
                        include_dirs=include_dirs, defines=defines)
    if len(nests) > 1:
        names = ", ".join(n.name for n in nests)
        raise UsageError(f"the source defines {names}: pass function=NAME")
    _check_params(nests, params)
    return analyze_nest(nests[0], params, assume_distinct)


def analyze_file(path: str | Path, function: str | None = None, *,
                 params: Mapping[str, int] | None = None,
                 include_dirs: Iterable[str | Path] = (),
                 defines: Mapping[str, str] | None = None,
                 progress: Progress | None = None,
                 assume_distinct: bool = False) -> FileAnalyses:
    """Analyze every function of a .py or .c file (or the one named ``function``).

    Without ``function``, one that cannot be read is left out and listed in the result's
    ``skipped``; if none can be read, the error names each one (the only one's error as is).
    ``progress(done, total, label)`` is called as the functions are read, then analyzed.
    ``assume_distinct`` as for :func:`analyze`.
    """
    from loclab.nest.deep import on_deep_stack

    return on_deep_stack(str(path), lambda: _analyze_file(path, function, params,
                                                          include_dirs, defines, progress,
                                                          assume_distinct))


def _analyze_file(path: str | Path, function: str | None, params: Mapping[str, int] | None,
                  include_dirs: Iterable[str | Path], defines: Mapping[str, str] | None,
                  progress: Progress | None, assume_distinct: bool) -> FileAnalyses:
    from loclab.nest import load_file

    skipped: list[Skipped] = []
    warnings: list[str] = []
    nests = load_file(path, function, include_dirs=include_dirs, defines=defines,
                      skipped=skipped, warnings=warnings,
                      progress=_labelled(progress, "reading functions"))
    if not nests:
        raise _unreadable(path, skipped)
    _check_params(nests, params)
    analyses = analyze_nests(nests, params, _labelled(progress, "analyzing functions"),
                             assume_distinct)
    return FileAnalyses(analyses, skipped, warnings)


def _labelled(progress: Progress | None, label: str) -> Callable[[int, int], None] | None:
    if progress is None:
        return None
    return lambda done, total: progress(done, total, label)


def _unreadable(path: str | Path, skipped: list[Skipped]) -> NestError:
    """No function of the file can be read: the one error, or one line for each."""
    if len(skipped) == 1:
        return skipped[0].error
    lines = "".join(f"\n  {s.name}: {s.error}" for s in skipped[:MAX_LISTED])
    if len(skipped) > MAX_LISTED:
        lines += f"\n  and {len(skipped) - MAX_LISTED} more"
    return NestError(f"{path}: none of its {len(skipped)} functions can be read:{lines}")


def _check_params(nests: list[Nest], params: Mapping[str, int] | None) -> None:
    """A fixed size must be a whole number, not negative, and a size of some analyzed
    function (a typo is an error). Size 0 is allowed here, where the command line refuses
    it: the loops then run nothing, and the oracle tests check that edge exactly."""
    for name, value in (params or {}).items():
        if not _whole(value) or value < 0:
            raise UsageError(f"size {name}={value!r}: a size is a whole number, 0 or more")
    known = {p for nest in nests for p in nest.parameters}
    unknown = sorted(set(params or {}) - known)
    if unknown:
        where = nests[0].name if len(nests) == 1 else "these functions"
        raise UsageError(f"{where}: unknown size parameter {', '.join(unknown)} "
                         f"(parameters: {', '.join(sorted(known)) or 'none'})")


def _whole(value: object) -> bool:
    """An integer (NumPy's too), not a bool or a float."""
    if isinstance(value, bool):
        return False
    try:
        operator.index(value)
    except TypeError:
        return False
    return True


__all__ = ["Analysis", "FileAnalyses", "Skipped", "analyze", "analyze_file"]
