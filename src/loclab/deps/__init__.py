"""Dependence analysis of loop nests, exact on affine code (islpy), explained like the slides.

``analyze`` takes a Python function or source text (Python, or C with ``language="c"``);
``analyze_file`` every function of a file. Both return :class:`~loclab.deps.analysis.Analysis`
objects: loops, statements, dependences, ``.explain()`` and ``.to_json()``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from loclab.deps.analysis import Analysis, analyze_nest
from loclab.errors import UsageError


def analyze(func_or_source: Callable[..., Any] | str, function: str | None = None, *,
            params: Mapping[str, int] | None = None, language: str | None = None,
            filename: str | None = None) -> Analysis:
    """Analyze one function: a live Python function, or source text holding it."""
    from loclab.nest import load_function, load_source

    if callable(func_or_source):
        return analyze_nest(load_function(func_or_source), params)
    if not isinstance(func_or_source, str):
        raise UsageError(f"analyze() takes a function or source text, not "
                         f"{type(func_or_source).__name__}")
    nests = load_source(func_or_source, language=language or "python",
                        filename=filename or "<source>", function=function)
    if len(nests) > 1:
        names = ", ".join(n.name for n in nests)
        raise UsageError(f"the source defines {names}: pass function=NAME")
    return analyze_nest(nests[0], params)


def analyze_file(path: str | Path, function: str | None = None, *,
                 params: Mapping[str, int] | None = None) -> list[Analysis]:
    """Analyze every function of a .py or .c file (or the one named ``function``)."""
    from loclab.nest import load_file

    return [analyze_nest(nest, params) for nest in load_file(path, function)]


__all__ = ["Analysis", "analyze", "analyze_file"]
