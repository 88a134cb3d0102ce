"""Reading a recipe: ``"tile(i=32, j=32); parallel(ii)"`` into steps.

A recipe is steps separated by ``;`` (or new lines). A step is a name and arguments in
parentheses, separated by commas: loops (``i``, or ``j@45`` for the loop of that name whose
``for`` is on line 45), whole numbers (``32``, ``1_024``), ``loop=number`` pairs
(``tile(i@12=32)``) and ``name=True/False`` options (``jam=True``). The shape of a recipe
(parentheses, commas, ``=``) is checked here, each error a line naming the step and the
text at fault; what an argument must be (a size, a loop) only its step knows, so anything
else is kept as :class:`Unparsed` text for the step to refuse by its role ("bad tile size
'0x20'"), rather than misread here as a loop.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from loclab.errors import UsageError

_NAME = r"[^\W\d]\w*"
_LOOP = re.compile(rf"(?P<var>{_NAME})(?:@(?P<line>[0-9]+))?")
_NUMBER = re.compile(r"[+-]?[0-9][0-9_]*")
_STEP = re.compile(rf"(?P<name>{_NAME})\s*\((?P<inner>.*)\)", re.S)
EXAMPLE = "e.g. tile(i=32, j=32)"


@dataclass(frozen=True)
class LoopRef:
    """A loop as a step names it: its variable, and the line of its ``for`` if given."""

    var: str
    line: int | None = None

    def __str__(self) -> str:
        return self.var if self.line is None else f"{self.var}@{self.line}"


@dataclass(frozen=True)
class Unparsed:
    """An argument that is neither a number, a loop nor True/False (``0x20``, ``32.5``):
    the step that expects a size or a loop there says which it is not."""

    text: str

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return repr(self.text)

    @property
    def hint(self) -> str:
        """What text that runs on past a blank or an ``=`` most likely lacks."""
        return " (is a ',' missing?)" if " " in self.text or "=" in self.text else ""


Arg = LoopRef | int | bool | Unparsed


@dataclass(frozen=True)
class Step:
    name: str
    args: tuple[Arg, ...]
    keywords: tuple[tuple[LoopRef, Arg], ...]
    text: str  # as written (blanks normalized)

    def __str__(self) -> str:
        return self.text

    def error(self, message: str) -> UsageError:
        return UsageError(f"{self.text}: {message}")


def make_step(name: str, *args: Arg | str,
              keywords: Iterable[tuple[LoopRef | str, Arg]] = ()) -> Step:
    """A step built in code (the typed API: ``make_step("tile", keywords=[("i", 32)])``):
    loops as :class:`LoopRef` or as a recipe names them (``"i"``, ``"j@45"``), sizes as
    ints, options as bools; its text is what a recipe of it reads, so that
    ``parse_recipe(str(step)) == [step]``. A malformed loop name is a ValueError: the
    caller is code, not a user."""
    values = [_loop_or_value(arg) for arg in args]
    pairs = [(_code_loop(key), _loop_or_value(value)) for key, value in keywords]
    return Step(name, tuple(values), tuple(pairs), _normalized(name, values, pairs))


def _loop_or_value(value: Arg | str) -> Arg:
    return _code_loop(value) if isinstance(value, str) else value


def _code_loop(loop: LoopRef | str) -> LoopRef:
    if isinstance(loop, LoopRef):
        return loop
    match = _LOOP.fullmatch(loop)
    if match is None:
        raise ValueError(f"{loop!r} is not a loop (a name, or name@line)")
    return LoopRef(match["var"], int(match["line"]) if match["line"] else None)


def parse_recipe(text: str) -> list[Step]:
    """The steps of a recipe; a malformed one is a UsageError naming it."""
    steps = [_parse_step(piece.strip()) for piece in _split_steps(text) if piece.strip()]
    if not steps:
        raise UsageError(f"the recipe has no steps ({EXAMPLE})")
    return steps


def _split_steps(text: str) -> list[str]:
    """The recipe cut at each ``;`` or new line outside parentheses (one inside them is
    a mistake its step reports)."""
    pieces, depth, start = [], 0, 0
    for index, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char in ";\n" and depth <= 0:
            pieces.append(text[start:index])
            start = index + 1
    return pieces + [text[start:]]


def _parse_step(text: str) -> Step:
    shown = " ".join(text.split())
    match = _STEP.fullmatch(text)
    if match is None:
        hint = " (a ')' is missing)" if text.count("(") > text.count(")") else ""
        raise UsageError(f"{shown}: a step is name(args), {EXAMPLE}{hint}")
    name, inner = match["name"], match["inner"]
    _check_inner(text, inner, shown)
    args: list[Arg] = []
    keywords: list[tuple[LoopRef, Arg]] = []
    for argument in _split_arguments(inner, shown):
        key, value = _argument(argument, shown)
        if key is None:
            args.append(value)
        elif any(str(known) == str(key) for known, _ in keywords):
            raise UsageError(f"{shown}: {key} given twice")
        else:
            keywords.append((key, value))
    return Step(name, tuple(args), tuple(keywords), _normalized(name, args, keywords))


def _check_inner(text: str, inner: str, shown: str) -> None:
    """The text between a step's parentheses holds no step boundary nor parentheses."""
    if ";" in inner:
        raise UsageError(f"{shown}: ';' inside the parentheses: steps are separated by ';', "
                         "arguments by ','")
    if ")" in inner:
        rest = " ".join(text[text.index(")") + 1:].split())
        raise UsageError(f"{shown}: {rest!r} after the step's ')': separate steps with ';'")
    if "(" in inner:
        raise UsageError(f"{shown}: unexpected '(' inside the arguments")


def _split_arguments(inner: str, shown: str) -> list[str]:
    if not inner.strip():
        return []
    arguments = [" ".join(argument.split()) for argument in inner.split(",")]
    if not all(arguments):
        raise UsageError(f"{shown}: an empty argument (a stray ',')")
    return arguments


def _argument(argument: str, shown: str) -> tuple[LoopRef | None, Arg]:
    """(name, value) of ``name=value``, (None, value) of a value alone; a value that runs
    on past a blank or another ``=`` (a comma missing) is Unparsed, for its step to name."""
    key, sep, value = (part.strip() for part in argument.partition("="))
    if not sep:
        return None, _value(key)
    if not (key and value):
        raise UsageError(f"{shown}: {argument!r} needs a name before '=' and a value after")
    return _loop_ref(key, shown), _value(value)


def _loop_ref(text: str, shown: str) -> LoopRef:
    match = _LOOP.fullmatch(text)
    if match is None:
        raise UsageError(f"{shown}: {text!r} before '=' is not a loop or an option (a "
                         f"name, or name@line){Unparsed(text).hint}")
    return LoopRef(match["var"], int(match["line"]) if match["line"] else None)


def _value(text: str) -> Arg:
    if text in {"True", "False"}:
        return text == "True"
    if _NUMBER.fullmatch(text):
        try:
            return int(text)
        except ValueError:  # 1__000: not Python's, nor ours
            return Unparsed(text)
    match = _LOOP.fullmatch(text)
    if match is not None:
        return LoopRef(match["var"], int(match["line"]) if match["line"] else None)
    return Unparsed(text)


def _normalized(name: str, args: Iterable[Arg], keywords: Iterable[tuple[LoopRef, Arg]]) -> str:
    parts = [str(a) for a in args] + [f"{k}={v}" for k, v in keywords]
    return f"{name}({', '.join(parts)})"
