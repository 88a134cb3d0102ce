"""Loop-nest IR and its frontends: Python functions (``ast``) and C functions (pycparser).

``load_source`` and ``load_file`` give one :class:`~loclab.nest.ir.Nest` per function;
``load_function`` takes a live Python function and keeps the line numbers of its file.
C is preprocessed first (``include_dirs`` and ``defines`` are ``-I`` and ``-D``).

Reading a whole file, a function that cannot be read (a ``while`` loop, ``self.x[i]``) need
not stop the others: given a ``skipped`` list, ``load_source`` and ``load_file`` leave such a
function out and append a :class:`Skipped` (its name and one-line error) to the list, as a
compiler reports each bad function and goes on. A file that cannot be parsed at all, and a
function named with ``function=``, are still errors.
"""

from __future__ import annotations

import inspect
import textwrap
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from loclab.errors import UsageError
from loclab.nest.builder import NestError, defined_twice, pick_function
from loclab.nest.ir import Nest

_Node = TypeVar("_Node")
Progress = Callable[[int, int], None]  # (functions read so far, functions in all)

C_SUFFIXES = {".c", ".h", ".cu", ".cpp", ".cc"}


@dataclass(frozen=True)
class Skipped:
    """A function left out of a whole file's analysis: its name and why (``error`` is the
    one-line error that reading it alone gives, starting with file:line:column)."""

    name: str
    error: NestError

    def __str__(self) -> str:
        return f"skipped {self.name}: {self.error}"


def load_source(source: str, *, language: str = "python", filename: str = "<source>",
                function: str | None = None, line_offset: int = 0,
                include_dirs: Iterable[str | Path] = (),
                defines: Mapping[str, str] | None = None,
                skipped: list[Skipped] | None = None, warnings: list[str] | None = None,
                progress: Progress | None = None) -> list[Nest]:
    """Every function of ``source`` (or the one named ``function``) as IR.

    With ``skipped`` and no ``function``, a function that cannot be read is left out and
    appended to ``skipped`` instead of failing the file (the result may then be empty).
    ``warnings`` gets a line for each name that several functions share (each is read; a
    ``function`` so named is an error naming them). ``progress(done, total)`` is called as
    the functions are read.
    """
    from loclab.nest.deep import on_deep_stack

    read = _Reading(filename, function, skipped, warnings, progress)
    return on_deep_stack(filename, lambda: _load_source(source, language, line_offset,
                                                        include_dirs, defines, read))


@dataclass(frozen=True)
class _Reading:
    """What to read of a file and where to report: the options of :func:`load_source`."""

    filename: str
    function: str | None
    skipped: list[Skipped] | None
    warnings: list[str] | None
    progress: Progress | None

    def choose(self, nodes: list[_Node], names: list[str], places: list[str]) -> list[_Node]:
        """The named function, or every one (a warning for each name defined twice)."""
        if self.function is not None:
            return [pick_function(nodes, names, places, self.function, self.filename)]
        if not nodes:
            raise UsageError(f"{self.filename}: no function definitions found")
        if self.warnings is not None:
            self.warnings.extend(defined_twice(names, places))
        return nodes

    def build(self, nodes: list[_Node], name: Callable[[_Node], str],
              build: Callable[[_Node], Nest]) -> list[Nest]:
        """``build`` of every node; reading a whole file with ``skipped``, one that fails
        is left out and listed."""
        listing = self.skipped if self.function is None else None
        nests: list[Nest] = []
        for done, node in enumerate(nodes, 1):
            try:
                nests.append(build(node))
            except NestError as err:
                if listing is None:
                    raise
                listing.append(Skipped(name(node), err))
            if self.progress is not None:
                self.progress(done, len(nodes))
        return nests


def _load_source(source: str, language: str, line_offset: int,
                 include_dirs: Iterable[str | Path], defines: Mapping[str, str] | None,
                 read: _Reading) -> list[Nest]:
    filename = read.filename
    if language == "python":
        from loclab.nest.python import build_python, python_functions
        from loclab.nest.source import SourceLines

        if list(include_dirs) or defines:
            raise UsageError(f"{filename}: -I and -D (include_dirs, defines) apply to C files "
                             "only")
        named = python_functions(source, filename)
        chosen = read.choose([node for _, node in named], [name for name, _ in named],
                             [f"{filename}:{node.lineno + line_offset}" for _, node in named])
        lines = SourceLines(source)  # split once for every function of the file
        names = {id(node): name for name, node in named}
        return read.build(chosen, lambda node: names[id(node)],
                          lambda node: build_python(lines, node, filename, line_offset,
                                                    names[id(node)]))
    if language == "c":
        from loclab.nest.c import build_c
        from loclab.nest.cunit import parse_c

        unit = parse_c(source, filename, include_dirs, defines)
        # without a name: the file's own functions (or those with a scop); with one: any
        nodes = unit.functions if read.function else unit.own_functions()
        chosen = read.choose(nodes, [node.decl.name for node in nodes],
                             [unit.place(node) for node in nodes])
        note = None
        if read.function is None:
            chosen, note = unit.scop_functions(chosen)
        return read.build(chosen, lambda node: node.decl.name,
                          lambda node: build_c(node, unit, note))
    raise UsageError(f"unknown language {language!r}: use 'python' or 'c'")


def load_file(path: str | Path, function: str | None = None, *,
              include_dirs: Iterable[str | Path] = (),
              defines: Mapping[str, str] | None = None,
              skipped: list[Skipped] | None = None, warnings: list[str] | None = None,
              progress: Progress | None = None) -> list[Nest]:
    """Every function of a .py or .c file (or the one named ``function``), as
    :func:`load_source` reads them (``skipped``, ``warnings`` and ``progress`` as there)."""
    path = Path(path)
    source = read_source(path)
    language = "c" if path.suffix in C_SUFFIXES else "python"
    return load_source(source, language=language, filename=str(path), function=function,
                       include_dirs=include_dirs, defines=defines, skipped=skipped,
                       warnings=warnings, progress=progress)


def read_source(path: Path) -> str:
    """A source file's text, or a one-line UsageError saying why it cannot be read."""
    if path.is_dir():
        raise UsageError(f"{path}: is a directory; give a .py or .c file")
    if not path.exists():
        raise UsageError(f"{path}: no such file")
    if not path.is_file():  # a device (/dev/null), a pipe: no source to read back
        raise UsageError(f"{path}: not a regular file; give a .py or .c file")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise UsageError(f"{path}: not UTF-8 text (byte 0x{err.object[err.start]:02x} at "
                         f"offset {err.start}): loclab reads source files as UTF-8") from None
    except OSError as err:
        raise UsageError(f"{path}: cannot read: {err.strerror or err}") from None


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
