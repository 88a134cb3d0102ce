"""A C file as loclab reads it: preprocessed, parsed as GNU C, its functions and scops.

:func:`parse_c` preprocesses (``loclab.nest.preprocess``: pcpp, ``-I``, ``-D``, positions
mapped back to the user's files) and parses with pycparserext's GNU C parser, which accepts
the extensions real code uses (``__restrict__``, ``__attribute__((...))``, ``__asm__``).
System headers are not read, so common integer typedefs are predeclared.

Which functions are analyzed without ``::FUNC``: those defined in the file itself (not in its
headers); where some of them hold a ``#pragma scop`` region, only those (as PET and ppcg
extract scops), and the analysis says so in a note.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loclab.nest.builder import NestError, pick_function
from loclab.nest.preprocess import Location, Preprocessed, preprocess

PRELUDE_TYPES = ["uint8_t", "uint16_t", "uint32_t", "uint64_t", "int8_t", "int16_t",
                 "int32_t", "int64_t", "size_t", "ssize_t", "ptrdiff_t", "intptr_t",
                 "uintptr_t", "bool", "uint", "real", "ElTp", "float4", "half", "FILE",
                 "clock_t", "time_t", "va_list"]
_PARSE_ERROR = re.compile(r"^(?P<file>.*?):(?P<line>\d+)(?::(?P<column>\d+))?: (?P<msg>.*)$",
                          re.S)


@dataclass
class CUnit:
    """A parsed C file: pycparser's tree and the map back to the user's text."""

    tree: Any
    source: Preprocessed
    functions: list[Any]  # FuncDef nodes of the user's files, in order
    declared: set[str]  # names declared or defined as functions

    def locate(self, coord: Any) -> Location:
        if coord is None:
            return self.source.main, 0, 1
        return self.source.locate(str(coord.file), coord.line, coord.column)

    def macro(self, coord: Any) -> str | None:
        """The macro a node's first token came from, if any."""
        if coord is None:
            return None
        return self.source.macro(str(coord.file), coord.line, coord.column)

    def place(self, function: Any) -> str:
        """file:line of a function's definition, as the user wrote it."""
        file, line, _ = self.locate(function.coord)
        return f"{file}:{line}"

    def function(self, name: str) -> Any:
        """The definition of ``name``; none, or several, is an error (as ``FILE::NAME``
        is for every command)."""
        return pick_function(self.functions, [f.decl.name for f in self.functions],
                             [self.place(f) for f in self.functions], name,
                             self.source.main)

    def own_functions(self) -> list[Any]:
        """The functions defined in the file itself (not in a header it includes)."""
        return [f for f in self.functions if self.locate(f.coord)[0] == self.source.main]

    def scop_functions(self, functions: list[Any]) -> tuple[list[Any], str | None]:
        """Where some functions hold a ``#pragma scop`` region: those, and a note saying so."""
        scops = [f for f in functions if has_scop(f)]
        if not scops or len(scops) == len(functions):
            return functions, None
        names = ", ".join(f.decl.name for f in scops)
        return scops, (f"{self.source.main} has #pragma scop regions: analyzed the functions "
                       f"that hold one ({names}); FILE::NAME analyzes another")

    def lines(self, file: str) -> list[str]:
        return self.source.lines(file)


def parse_c(source: str, filename: str, include_dirs: Iterable[str | Path] = (),
            defines: Mapping[str, str] | None = None) -> CUnit:
    """Preprocess and parse one C file."""
    from pycparser import c_ast
    from pycparser.c_parser import ParseError
    from pycparserext.ext_c_parser import FuncDeclExt, GnuCParser

    pre = preprocess(source, filename, include_dirs, defines)
    prelude = "".join(f"typedef int {name};\n" for name in PRELUDE_TYPES)
    parser = GnuCParser()
    try:
        tree = parser.parse(prelude + pre.text, pre.main)
    except ParseError as err:
        raise _parse_error(str(err), parser, pre) from None
    except (NotImplementedError, AssertionError) as err:  # pycparserext's own limits
        raise NestError(f"{pre.main}: not C that loclab can read ({err})") from None
    except RecursionError:  # pycparser descends once a level (on the worker's stack)
        raise NestError(f"{pre.main}: nested too deeply for loclab's C parser (parentheses "
                        "or expressions thousands of levels deep)") from None
    _check_nesting(tree, pre)
    functions = [node for node in tree.ext if isinstance(node, c_ast.FuncDef)]
    declared = {node.name for node in tree.ext if isinstance(node, c_ast.Decl)
                and isinstance(node.type, (c_ast.FuncDecl, FuncDeclExt))}
    return CUnit(tree, pre, functions, declared | {f.decl.name for f in functions})


def _check_nesting(tree: Any, pre: Preprocessed) -> None:
    """Refuse code nested deeper than the walks that read it follow (``MAX_NESTING``
    levels), naming where, before a walk fails without a place."""
    from pycparser import c_ast

    from loclab.nest.builder import nested_too_deep
    from loclab.nest.deep import MAX_NESTING

    statements = (c_ast.Compound, c_ast.For, c_ast.If, c_ast.While, c_ast.DoWhile)
    pending: list[tuple[Any, int]] = [(tree, 0)]
    while pending:
        node, depth = pending.pop()
        if depth > MAX_NESTING:
            coord = node.coord
            file, line, column = pre.locate(str(coord.file), coord.line, coord.column) \
                if coord is not None else (pre.main, 0, 1)
            raise nested_too_deep(f"{file}:{line}:{column}", isinstance(node, statements))
        pending.extend((child, depth + 1) for _, child in node.children())


def has_scop(node: Any) -> bool:
    """Whether a ``#pragma scop`` occurs inside ``node``."""
    from pycparser import c_ast

    if isinstance(node, c_ast.Pragma):
        return is_pragma(node, "scop")
    return any(has_scop(child) for _, child in node.children())


def is_pragma(node: Any, word: str) -> bool:
    from pycparser import c_ast

    return isinstance(node, c_ast.Pragma) and node.string.split() == [word]


def _parse_error(message: str, parser: Any, pre: Preprocessed) -> NestError:
    """pycparser's error at the user's file, line and column, naming macros it did not know."""
    match = _PARSE_ERROR.match(message)
    file, line, column, text = pre.main, 0, 1, message
    if match:
        file, line = match["file"], int(match["line"])
        column, text = int(match["column"] or 1), match["msg"]
    else:
        file, _, text = message.partition(": ")
        try:  # errors without a place ("Invalid expression"): the token the parser is at
            token = parser._peek()
            line, column = token.lineno, token.column
        except (AttributeError, TypeError):
            pass
    macro = pre.culprit(file, line, column) if line else None
    file, line, column = pre.locate(file, line, column)
    unknown = pre.unexpanded(file, line)
    hint: str | None = None
    if unknown:
        hint = (f"{', '.join(unknown)}: not defined in the files loclab read"
                f"{pre.missing_hint()}; give the header's directory with -I DIR or define "
                "it with -D NAME=VALUE")
    elif macro:
        hint = macro
    elif (name := _unknown_type(parser)) is not None:
        hint = (f"{name} is not a type loclab knows: declare it with typedef, or give the "
                f"directory of its header with -I DIR{pre.missing_hint()}")
    where = f"{file}:{line}:{column}" if line else file
    return NestError(f"{where}: {text}: not C that loclab can read"
                     + (f" ({hint})" if hint else ""))


_OPERAND_START = {"ID", "INT_CONST_DEC", "INT_CONST_OCT", "INT_CONST_HEX", "INT_CONST_BIN",
                  "INT_CONST_CHAR", "FLOAT_CONST", "HEX_FLOAT_CONST", "CHAR_CONST",
                  "STRING_LITERAL", "LPAREN", "MINUS", "PLUS", "NOT", "LNOT"}


def _unknown_type(parser: Any) -> str | None:
    """The name a syntax error suggests is a type the parser does not know: around the
    error, an identifier declared nowhere that is followed by a name or ``*`` (``mytype x``,
    ``mytype *p``), or a cast ``(mytype) x``. None where nothing looks like one."""
    try:
        stream = parser._tokens
        window = [tok for tok in stream._buffer[max(0, stream._index - 4):stream._index + 1]
                  if tok is not None]
        scopes = list(parser._scope_stack)
    except (AttributeError, TypeError):  # another pycparser: no hint rather than a wrong one
        return None

    def unknown(tok: Any) -> bool:
        return tok.type == "ID" and not any(tok.value in scope for scope in scopes)

    for first, second in zip(window, window[1:]):
        if unknown(first) and second.type in {"ID", "TIMES"}:
            return str(first.value)
    for opening, name, closing, operand in zip(window, window[1:], window[2:], window[3:]):
        if (opening.type, closing.type) == ("LPAREN", "RPAREN") and unknown(name) \
                and operand.type in _OPERAND_START:
            return str(name.value)
    return None
