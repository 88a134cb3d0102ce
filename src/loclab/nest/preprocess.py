"""C as a compiler sees it: preprocessing with pcpp, and every position mapped back.

The C frontend reads what the preprocessor makes of a file, so that array declarations
written through macros (PolyBench's ``DATA_TYPE POLYBENCH_2D(A, NI, NK, ni, nk)``) and sizes
from included headers mean what they mean to a compiler. pcpp (pure Python, BSD) is the
preprocessor, so that the answer is the same on every machine.

Which headers are read: a quoted ``#include "x.h"`` is searched next to the including file,
then in the ``-I`` directories; an angle ``#include <x.h>`` in the ``-I`` directories only.
A header found neither way is a system header: it is left out (not expanded, not analyzed),
and its macros stay plain identifiers, which the frontend takes as sizes or constants. A
quoted include found nowhere is a mistake the user can fix: a one-line error.

Every output token remembers where the user wrote it: its own place, or for a token that a
macro expansion produced, the place of the macro's name in the user's text. The text given to
pycparser carries ``# LINE "FILE"`` markers, so pycparser's lines are the user's lines;
:meth:`Preprocessed.locate` maps its columns back too (an expansion shifts what follows it).
"""

from __future__ import annotations

import bisect
import functools
import io
import os
import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loclab.errors import UsageError

Location = tuple[str, int, int]  # (file as shown to the user, line, column), 1-based
# where one output token came from: (output column, line, column, the macro it came from)
Segment = tuple[int, int, int, "str | None"]

# Qualifiers of CUDA and friends that change nothing the analysis looks at.
EMPTY_MACROS = ("__global__", "__device__", "__host__", "__forceinline__", "__shared__",
                "__constant__", "__launch_bounds__(...)")
# As gcc's nesting limit: a header read this often is in an #include cycle, not a real program.
MAX_INCLUDES = 200
# Headers of the C library and POSIX: never named in a hint about missing headers.
STANDARD_HEADERS = frozenset(
    "assert.h complex.h ctype.h errno.h fenv.h float.h inttypes.h iso646.h limits.h locale.h "
    "math.h setjmp.h signal.h stdalign.h stdarg.h stdatomic.h stdbool.h stddef.h stdint.h "
    "stdio.h stdlib.h stdnoreturn.h string.h tgmath.h threads.h time.h uchar.h wchar.h "
    "wctype.h unistd.h strings.h fcntl.h pthread.h omp.h sys/time.h sys/types.h sys/stat.h "
    "sys/resource.h sys/mman.h immintrin.h x86intrin.h emmintrin.h xmmintrin.h "
    "cuda_runtime.h".split())
MACRO_NAME = re.compile(r"\b[A-Z_][A-Z0-9_]*[A-Z][A-Z0-9_]*\b")
_COMMENT_OR_STRING = re.compile(r"//[^\n]*|/\*.*?(?:\*/|\Z)|\"(?:\\.|[^\"\\\n])*\"?"
                                r"|'(?:\\.|[^'\\\n])*'?", re.S)


def looks_like_macro(name: str) -> bool:
    """Written in capitals, as C macros are by convention (``IDX``, ``POLYBENCH_2D``)."""
    return MACRO_NAME.fullmatch(name) is not None


def strip_preprocessor(text: str) -> str:
    """The text with comments and preprocessor lines blanked, every character in its place.

    Statement texts are sliced from this (the user's text as written, without comments).
    """
    def blank(match: re.Match[str]) -> str:
        piece = match.group()
        return piece if piece[0] in "\"'" else re.sub(r"\S", " ", piece)

    lines = _COMMENT_OR_STRING.sub(blank, text).split("\n")
    continuing = False
    for number, line in enumerate(lines):
        directive = continuing or line.lstrip().startswith("#")
        continuing = directive and line.rstrip().endswith("\\")
        if directive:
            lines[number] = ""
    return "\n".join(lines)


@dataclass
class SourceFile:
    """One file the preprocessor read: its name for the user and its lines."""

    display: str
    text: str
    starts: list[int] = field(default_factory=list)  # offsets of lines in pcpp's text
    _lines: list[str] | None = None

    def __post_init__(self) -> None:
        from pcpp.parser import trigraph

        # pcpp lexes the trigraph-replaced text with trailing blanks cut from every line:
        # token offsets (lexpos) count in that text
        lines = [line.rstrip() for line in trigraph(self.text).splitlines()]
        offset = 0
        for line in lines:
            self.starts.append(offset)
            offset += len(line) + 1

    def position(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self.starts, offset)
        return line, offset - self.starts[line - 1] + 1

    @property
    def lines(self) -> list[str]:
        """Comment-free lines, for slicing statements as the user wrote them."""
        if self._lines is None:
            self._lines = strip_preprocessor("\n".join(self.text.splitlines())).split("\n")
        return self._lines


@dataclass
class Preprocessed:
    """pcpp's output for pycparser, and the map back to the user's files."""

    text: str
    main: str  # the analyzed file, as the user named it
    files: dict[str, SourceFile]  # by name as shown
    segments: dict[tuple[str, int], list[Segment]]  # per output line: (file, line) it stands for
    macros: set[str]
    missing: list[str]  # headers found nowhere (system headers), in order
    # macros that expanded to nothing, per output line: (output column, name)
    vanished: dict[tuple[str, int], list[tuple[int, str]]] = field(default_factory=dict)
    defines: dict[str, str] = field(default_factory=dict)  # -D NAME: its definition as given
    # segments of each output line sorted by output column, with those columns: built on
    # first use, so that finding a token's place is a binary search even on a long line
    _sorted: dict[tuple[str, int], tuple[list[int], list[Segment]]] = field(
        default_factory=dict, repr=False)

    def locate(self, file: str, line: int, column: int | None) -> Location:
        """A position in ``text`` (as pycparser reports it) in the user's file."""
        column = column or 1
        found = self._segment(file, line, column)
        if found is None:
            return file, line, column
        out_column, original_line, original_column, _ = found
        inside = column - out_column if original_line == line else 0
        return file, original_line, original_column + inside

    def macro(self, file: str, line: int, column: int | None) -> str | None:
        """The macro whose expansion holds the token at this position of ``text``."""
        found = self._segment(file, line, column or 1)
        return found[3] if found is not None else None

    def culprit(self, file: str, line: int, column: int | None) -> str | None:
        """Where a syntax error at this position of ``text`` is in a macro's text: the token
        there came from one, or one expanded to nothing just before it, or the token just
        before it came from one. The hint that says so, naming the macro; else None."""
        column = column or 1
        found = self._segment(file, line, column)
        if found is not None and found[3]:
            return f"the text here is the expansion of macro {self._named(found[3])}"
        here = found[0] if found is not None else column
        before = [s for s in self.segments.get((file, line), ()) if s[0] < here]
        previous = max(before, default=None)
        start = previous[0] if previous is not None else 0
        empty = [name for at, name in self.vanished.get((file, line), ())
                 if start < at <= max(here, column)]
        if empty:
            given = self.defines.get(empty[-1])
            return f"macro {empty[-1]} expands to nothing here" + (
                f", as -D {shlex.quote(given)} defines it" if given is not None else "")
        if previous is not None and previous[3]:
            return f"just after the expansion of macro {self._named(previous[3])}"
        return None

    def _named(self, macro: str) -> str:
        """``IDX``, or ``IDX, defined with -D 'IDX(i)='`` for one from the command line."""
        given = self.defines.get(macro)
        return f"{macro}, defined with -D {shlex.quote(given)}" if given is not None else macro

    def _segment(self, file: str, line: int, column: int) -> Segment | None:
        """The segment at ``column`` of an output line, else the nearest one before it (of
        several at one column, the first emitted)."""
        columns, ordered = self._by_column(file, line)
        at = bisect.bisect_left(columns, column)
        if at < len(columns) and columns[at] == column:
            return ordered[at]
        if at == 0:
            return None
        return ordered[bisect.bisect_left(columns, columns[at - 1])]

    def _by_column(self, file: str, line: int) -> tuple[list[int], list[Segment]]:
        key = (file, line)
        found = self._sorted.get(key)
        if found is None:
            ordered = sorted(self.segments.get(key, ()), key=lambda s: s[0])  # stable
            found = self._sorted[key] = ([s[0] for s in ordered], ordered)
        return found

    def lines(self, file: str) -> list[str]:
        source = self.files.get(file)
        return source.lines if source is not None else []

    def unexpanded(self, file: str, line: int) -> list[str]:
        """Names on a line of the user's text that look like macros but are not defined."""
        lines = self.lines(file)
        text = lines[line - 1] if 1 <= line <= len(lines) else ""
        names = dict.fromkeys(MACRO_NAME.findall(text))
        return [name for name in names if name not in self.macros]

    def missing_hint(self) -> str:
        """``; headers not found: <polybench.h>`` for the headers that are not the C library's."""
        own = [name for name in self.missing if name not in STANDARD_HEADERS]
        return f"; headers not found: {', '.join(f'<{n}>' for n in own)}" if own else ""


def preprocess(source: str, filename: str, include_dirs: Iterable[str | Path] = (),
               defines: Mapping[str, str] | None = None) -> Preprocessed:
    """Run pcpp on ``source`` (the text of ``filename``) as a compiler would."""
    directories = [Path(d) for d in include_dirs]
    for directory in directories:
        if directory.exists() and not directory.is_dir():
            raise UsageError(f"-I {directory}: not a directory (-I takes the directory that "
                             "holds the headers)")
        if not directory.is_dir():
            raise UsageError(f"-I {directory}: no such directory")
    source = source.lstrip("\ufeff")  # a byte-order mark is no column
    preprocessor = _preprocessor_class()(filename, source)
    for directory in directories:
        preprocessor.add_path(str(directory))
    for name in EMPTY_MACROS:
        preprocessor.define(f"{name} ")
    given: dict[str, str] = {}
    for name, value in (defines or {}).items():
        preprocessor.define(f"{name} {value}")
        given[re.sub(r"\W.*", "", name, flags=re.S)] = f"{name}={value}"
    preprocessor.parse(source, filename)
    pre = _Assembler(preprocessor).run()
    pre.defines = given
    return pre


@functools.cache
def _preprocessor_class() -> Any:
    """pcpp's Preprocessor with loclab's hooks (built on first use: pcpp loads lazily)."""
    from pcpp import Action, OutputDirective, Preprocessor

    class LoclabPreprocessor(Preprocessor):  # type: ignore[misc]
        def __init__(self, filename: str, source: str) -> None:
            super().__init__()
            self.rewrite_paths = []  # token sources stay absolute: they key self.files
            self.main = _quoted(filename)
            self.files = {os.path.abspath(filename): SourceFile(self.main, source)}
            self.missing: list[str] = []
            self.opened: dict[str, int] = {}  # how often each header was read

        def display(self, path: str) -> str:
            known = self.files.get(path)
            if known is not None:
                return known.display
            relative = os.path.relpath(path)
            return _quoted(path if relative.startswith("..") else relative)

        def on_file_open(self, is_system_include: bool, includepath: str) -> Any:
            path = os.path.abspath(includepath)
            self.opened[path] = self.opened.get(path, 0) + 1
            if self.opened[path] > MAX_INCLUDES:
                directive = self.lastdirective
                raise UsageError(f"{self.display(directive.source)}:{directive.lineno}: "
                                 f"{self.display(path)} included more than {MAX_INCLUDES} "
                                 "times: an #include cycle without an include guard?")
            with open(includepath, encoding="utf-8", errors="replace") as handle:
                text = handle.read().lstrip("\ufeff")
            self.files.setdefault(path, SourceFile(self.display(path), text))
            return io.StringIO(text)

        def on_include_not_found(self, is_malformed: bool, is_system_include: bool,
                                 curdir: str, includepath: str) -> Any:
            directive = self.lastdirective
            where = f"{self.display(directive.source)}:{directive.lineno}"
            if is_malformed:
                raise UsageError(f"{where}: malformed #include {includepath}")
            if not is_system_include:
                raise UsageError(f'{where}: #include "{includepath}": not found next to the '
                                 "file nor in an -I directory (add -I DIR)")
            if includepath not in self.missing:
                self.missing.append(includepath)
            raise OutputDirective(Action.IgnoreAndRemove)

        def on_error(self, file: str, line: int, msg: str) -> None:
            raise UsageError(f"{self.display(file)}:{line}: preprocessor: {msg}")

        def on_directive_unknown(self, directive: Any, toks: Any, ifpassthru: bool,
                                 precedingtoks: Any) -> Any:
            if directive.value == "error":
                text = "".join(tok.value for tok in toks).strip()
                raise UsageError(f"{self.display(directive.source)}:{directive.lineno}: "
                                 f"#error {text}")
            # pragmas go on to pycparser (#pragma scop); #line, #ident, #warning do not
            return None if directive.value == "pragma" else True

        def expand_macros(self, tokens: list[Any], expanding_from: list[str] = []) -> Any:
            """pcpp's expansion, then every token a macro produced gets the place of the
            macro's name (``loclab_at``); macro arguments keep their own places."""
            if expanding_from:
                return super().expand_macros(tokens, expanding_from)
            originals = list(tokens)
            result = super().expand_macros(tokens, expanding_from)
            _anchor(originals, result)
            return result

    return LoclabPreprocessor


def _anchor(originals: list[Any], result: list[Any]) -> None:
    """Place every token a macro produced at the macro's name; a macro that produced nothing
    marks the token after it (``loclab_vanished``) or, at the end, the one before it
    (``loclab_vanished_after``), so that a syntax error there can name it."""
    index = {id(tok): k for k, tok in enumerate(originals)}
    position = 0
    anchor: tuple[str, int] | None = None
    produced = False  # a macro produced a token since the last untouched one
    for tok in result:
        k = index.get(id(tok))
        if k is not None:
            if not tok.expanded_from:  # untouched by any macro: the next one starts after it
                if not produced and position < k:
                    tok.loclab_vanished = originals[position].value
                position, anchor, produced = k + 1, None, False
            else:
                produced = True
            continue
        produced = True
        if getattr(tok, "loclab_at", None) is not None:
            continue  # placed by an expansion inside a macro argument
        if anchor is None and position < len(originals):
            name = originals[position]
            anchor = getattr(name, "loclab_at", None) or (name.source, name.lexpos)
        tok.loclab_at = anchor
    if not produced and position < len(originals) and result:
        result[-1].loclab_vanished_after = originals[position].value


class _Assembler:
    """pcpp's tokens to text for pycparser: every line at its own line number (with markers
    where needed) and, where nothing shifted them, every token at its own column.

    Tokens are joined as pcpp joins them (pcpp lexes ``1.0f`` as four tokens): a space only
    where pcpp had whitespace, padding only to move a token to its own column.
    """

    def __init__(self, preprocessor: Any) -> None:
        self.pp = preprocessor
        self.skip = set(preprocessor.t_WS) | set(preprocessor.t_COMMENT)
        self.out: list[str] = []
        self.line: list[str] = []
        self.width = 0
        self.spaced = False  # whitespace since the last token
        self.key: tuple[str, int] | None = None  # (file, line) the output line stands for
        self.segments: dict[tuple[str, int], list[Segment]] = {}
        self.vanished: dict[tuple[str, int], list[tuple[int, str]]] = {}

    def run(self) -> Preprocessed:
        files = self.pp.files
        where: tuple[SourceFile, int, int] | None = None
        while (tok := self.pp.token()) is not None:
            if tok.type in self.skip:
                self.spaced = True
                continue
            source, offset = getattr(tok, "loclab_at", None) or (tok.source, tok.lexpos)
            known = files.get(source)
            if known is not None:
                where = (known, *known.position(offset))
            if where is not None:
                macros = getattr(tok, "expanded_from", None)
                self.emit(tok.value, where[0].display, where[1], where[2],
                          macros[-1] if macros else None,
                          getattr(tok, "loclab_vanished", None))
                after = getattr(tok, "loclab_vanished_after", None)
                if after is not None and self.key is not None:
                    self.vanished.setdefault(self.key, []).append((self.width + 1, after))
        self.flush()
        return Preprocessed(text="\n".join(self.out) + "\n", main=self.pp.main,
                            files={f.display: f for f in files.values()},
                            segments=self.segments, macros=set(self.pp.macros),
                            missing=self.pp.missing, vanished=self.vanished)

    def emit(self, value: str, file: str, line: int, column: int, macro: str | None,
             vanished: str | None = None) -> None:
        """One token; ``vanished``: a macro that expanded to nothing just before it."""
        if self.key is None or file != self.key[0] or line > self.key[1]:
            self.newline(file, line)
        assert self.key is not None
        if self.width < column - 1:
            self.line.append(" " * (column - 1 - self.width))
            self.width = column - 1
        elif self.width and self.spaced:
            self.line.append(" ")
            self.width += 1
        if vanished is not None:
            self.vanished.setdefault(self.key, []).append((self.width + 1, vanished))
        self.segments.setdefault(self.key, []).append((self.width + 1, line, column, macro))
        self.line.append(value)
        self.width += len(value)
        self.spaced = False
        if "\n" in value:  # a token over several lines: the next line needs a marker
            self.flush()
            self.key = ("", 0)

    def newline(self, file: str, line: int) -> None:
        self.flush()
        if self.key is not None and self.key[0] == file and 0 < line - self.key[1] <= 8:
            self.out.extend([""] * (line - self.key[1] - 1))
        else:
            self.out.append(f'# {line} "{file}"')
        self.key = (file, line)

    def flush(self) -> None:
        if self.line:
            self.out.append("".join(self.line))
        self.line, self.width, self.spaced = [], 0, False


def _quoted(name: str) -> str:
    """A file name that a line marker can carry as is."""
    return name.replace("\\", "/").replace('"', "'")
