"""A Python file's text split into lines once, for the source text of any node.

``ast.get_source_segment`` splits the whole file on every call; called for every statement
of every function, analyzing a file grew with the square of its size (2,000 functions took
minutes). :class:`SourceLines` splits once and slices the lines a node spans.
"""

from __future__ import annotations

import ast
import re

# Python's tokenizer ends lines at \r\n, \r and \n only (a form feed does not end one)
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


class SourceLines:
    """The lines of one source text; :meth:`segment` is ``ast.get_source_segment``."""

    def __init__(self, source: str) -> None:
        self.lines: list[str] = _LINE.findall(source)

    def segment(self, node: ast.AST) -> str | None:
        """The text of ``node`` (its offsets count UTF-8 bytes, as ``ast`` gives them)."""
        end_line = getattr(node, "end_lineno", None)
        end_column = getattr(node, "end_col_offset", None)
        if end_line is None or end_column is None:
            return None
        first, last = node.lineno - 1, end_line - 1  # type: ignore[attr-defined]
        column = node.col_offset  # type: ignore[attr-defined]
        if not 0 <= first <= last < len(self.lines):
            return None
        if first == last:
            return self.lines[first].encode()[column:end_column].decode()
        head = self.lines[first].encode()[column:].decode()
        tail = self.lines[last].encode()[:end_column].decode()
        return head + "".join(self.lines[first + 1:last]) + tail
