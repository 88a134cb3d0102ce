"""Loop-nest IR and its frontends: Python functions (``ast``) and C functions (pycparser).

``load_source`` and ``load_file`` give one :class:`~loclab.nest.ir.Nest` per function;
``load_function`` takes a live Python function and keeps the line numbers of its file.
C is preprocessed first (``include_dirs`` and ``defines`` are ``-I`` and ``-D``).
"""

from __future__ import annotations

import inspect
import textwrap
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from loclab.errors import UsageError
from loclab.nest.ir import Nest

C_SUFFIXES = {".c", ".h", ".cu", ".cpp", ".cc"}


def load_source(source: str, *, language: str = "python", filename: str = "<source>",
                function: str | None = None, line_offset: int = 0,
                include_dirs: Iterable[str | Path] = (),
                defines: Mapping[str, str] | None = None) -> list[Nest]:
    """Every function of ``source`` (or the one named ``function``) as IR."""
    if language == "python":
        from loclab.nest.python import build_python, python_functions
        from loclab.nest.source import SourceLines

        if list(include_dirs) or defines:
            raise UsageError(f"{filename}: -I and -D (include_dirs, defines) apply to C files "
                             "only")
        named = python_functions(source, filename)
        chosen = _choose([node for _, node in named], [name for name, _ in named], function,
                         filename)
        lines = SourceLines(source)  # split once for every function of the file
        names = {id(node): name for name, node in named}
        return [build_python(lines, node, filename, line_offset, names[id(node)])
                for node in chosen]
    if language == "c":
        from loclab.nest.c import build_c
        from loclab.nest.cunit import parse_c

        unit = parse_c(source, filename, include_dirs, defines)
        # without a name: the file's own functions (or those with a scop); with one: any
        nodes = unit.functions if function else unit.own_functions()
        chosen = _choose(nodes, [node.decl.name for node in nodes], function, filename)
        note = None
        if function is None:
            chosen, note = unit.scop_functions(chosen)
        return [build_c(node, unit, note) for node in chosen]
    raise UsageError(f"unknown language {language!r}: use 'python' or 'c'")


def load_file(path: str | Path, function: str | None = None, *,
              include_dirs: Iterable[str | Path] = (),
              defines: Mapping[str, str] | None = None) -> list[Nest]:
    path = Path(path)
    if path.is_dir():
        raise UsageError(f"{path}: is a directory; give a .py or .c file")
    if not path.is_file():
        raise UsageError(f"{path}: no such file")
    try:
        source = path.read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise UsageError(f"{path}: cannot read: {err}") from None
    language = "c" if path.suffix in C_SUFFIXES else "python"
    return load_source(source, language=language, filename=str(path), function=function,
                       include_dirs=include_dirs, defines=defines)


def load_function(func: Callable[..., Any]) -> Nest:
    """A live Python function, with the line numbers of the file that defines it."""
    target = inspect.unwrap(func)
    target = getattr(target, "py_func", target)  # a numba dispatcher keeps the Python one
    try:
        lines, start = inspect.getsourcelines(target)
        filename = inspect.getsourcefile(target) or "<function>"
    except (OSError, TypeError) as err:
        raise UsageError(f"cannot read the source of {func!r}: {err}") from None
    source = textwrap.dedent("".join(lines))
    nest = load_source(source, filename=filename, function=target.__name__,
                       line_offset=start - 1)[0]
    if "<" not in target.__qualname__:  # a method: Class.method, as in whole-file analysis
        nest.name = target.__qualname__
    return nest


def _choose(nodes: list[Any], names: list[str], function: str | None,
            filename: str) -> list[Any]:
    if function is None:
        if not nodes:
            raise UsageError(f"{filename}: no function definitions found")
        return nodes
    if function not in names:
        known = ", ".join(names) or "none"
        raise UsageError(f"{filename}: no function named {function!r} (functions: {known})")
    return [nodes[names.index(function)]]
