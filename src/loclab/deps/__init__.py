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

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from loclab.deps.analysis import Analysis, analyze_nest
from loclab.errors import UsageError
from loclab.nest import Skipped
from loclab.nest.builder import NestError
from loclab.nest.ir import Nest


class FileAnalyses(list[Analysis]):
    """The analyses of a file's functions, in source order (a plain list of them), and
    ``skipped``: the functions that could not be read, each with its one-line error."""

    def __init__(self, analyses: Iterable[Analysis] = (),
                 skipped: Iterable[Skipped] = ()) -> None:
        super().__init__(analyses)
        self.skipped: list[Skipped] = list(skipped)


def analyze(func_or_source: Callable[..., Any] | str, function: str | None = None, *,
            params: Mapping[str, int] | None = None, language: str | None = None,
            filename: str | None = None, include_dirs: Iterable[str | Path] = (),
            defines: Mapping[str, str] | None = None) -> Analysis:
    """Analyze one function: a live Python function, or source text holding it."""
    from loclab.nest import load_function, load_source

    if callable(func_or_source):
        nest = load_function(func_or_source)
        _check_params([nest], params)
        return analyze_nest(nest, params)
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
    return analyze_nest(nests[0], params)


def analyze_file(path: str | Path, function: str | None = None, *,
                 params: Mapping[str, int] | None = None,
                 include_dirs: Iterable[str | Path] = (),
                 defines: Mapping[str, str] | None = None) -> FileAnalyses:
    """Analyze every function of a .py or .c file (or the one named ``function``).

    Without ``function``, one that cannot be read is left out and listed in the result's
    ``skipped``; if none can be read, the error names each one (the only one's error as is).
    """
    from loclab.nest import load_file

    skipped: list[Skipped] = []
    nests = load_file(path, function, include_dirs=include_dirs, defines=defines,
                      skipped=skipped)
    if not nests:
        raise _unreadable(path, skipped)
    _check_params(nests, params)
    return FileAnalyses((analyze_nest(nest, params) for nest in nests), skipped)


def _unreadable(path: str | Path, skipped: list[Skipped]) -> NestError:
    """No function of the file can be read: the one error, or one line for each."""
    if len(skipped) == 1:
        return skipped[0].error
    lines = "".join(f"\n  {s.name}: {s.error}" for s in skipped)
    return NestError(f"{path}: none of its {len(skipped)} functions can be read:{lines}")


def _check_params(nests: list[Nest], params: Mapping[str, int] | None) -> None:
    """A fixed size must be a size of some analyzed function (a typo is an error)."""
    known = {p for nest in nests for p in nest.parameters}
    unknown = sorted(set(params or {}) - known)
    if unknown:
        where = nests[0].name if len(nests) == 1 else "these functions"
        raise UsageError(f"{where}: unknown size parameter {', '.join(unknown)} "
                         f"(parameters: {', '.join(sorted(known)) or 'none'})")


__all__ = ["Analysis", "FileAnalyses", "Skipped", "analyze", "analyze_file"]
