"""Dependence analysis of loop nests, exact on affine code (islpy), explained like the slides.

``analyze`` takes a Python function or source text (Python, or C with ``language="c"``);
``analyze_file`` every function of a file. Both return :class:`~loclab.deps.analysis.Analysis`
objects: loops, statements, dependences, ``.explain()`` and ``.to_json()``. C is preprocessed
first: ``include_dirs`` and ``defines`` are a compiler's ``-I`` and ``-D``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from loclab.deps.analysis import Analysis, analyze_nest
from loclab.errors import UsageError
from loclab.nest.ir import Nest


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
                 defines: Mapping[str, str] | None = None) -> list[Analysis]:
    """Analyze every function of a .py or .c file (or the one named ``function``)."""
    from loclab.nest import load_file

    nests = load_file(path, function, include_dirs=include_dirs, defines=defines)
    _check_params(nests, params)
    return [analyze_nest(nest, params) for nest in nests]


def _check_params(nests: list[Nest], params: Mapping[str, int] | None) -> None:
    """A fixed size must be a size of some analyzed function (a typo is an error)."""
    known = {p for nest in nests for p in nest.parameters}
    unknown = sorted(set(params or {}) - known)
    if unknown:
        where = nests[0].name if len(nests) == 1 else "these functions"
        raise UsageError(f"{where}: unknown size parameter {', '.join(unknown)} "
                         f"(parameters: {', '.join(sorted(known)) or 'none'})")


__all__ = ["Analysis", "analyze", "analyze_file"]
