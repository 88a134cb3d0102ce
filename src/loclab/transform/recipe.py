"""Reading a recipe: ``"tile(i=32, j=32); parallel(ii)"`` into steps.

A recipe is steps separated by ``;`` (or new lines). A step is a name and arguments in
parentheses: loops (``i``, or ``j@45`` for the loop of that name whose ``for`` is on line 45),
whole numbers, ``loop=number`` pairs (``tile(i@12=32)``) and ``name=True/False`` options
(``jam=True``). Anything else is a one-line error naming the step.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from loclab.errors import UsageError

_TOKEN = re.compile(r"\s*(?:(?P<name>[^\W\d]\w*)|(?P<number>-?\d+)|(?P<punct>[(),=@;\n]))",
                    re.UNICODE)


@dataclass(frozen=True)
class LoopRef:
    """A loop as a step names it: its variable, and the line of its ``for`` if given."""

    var: str
    line: int | None = None

    def __str__(self) -> str:
        return self.var if self.line is None else f"{self.var}@{self.line}"


Arg = LoopRef | int | bool


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


def parse_recipe(text: str) -> list[Step]:
    """The steps of a recipe; a malformed one is a UsageError naming it."""
    steps: list[Step] = []
    for piece in re.split(r"[;\n]", text):
        if piece.strip():
            steps.append(_parse_step(piece.strip()))
    if not steps:
        raise UsageError("the recipe has no steps (e.g. --apply \"tile(i=32, j=32)\")")
    return steps


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    position = 0
    while position < len(text):
        if text[position:].strip() == "":
            break
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            raise UsageError(f"{text}: unexpected {text[position:].strip()[0]!r} (a step is "
                             "name(args), e.g. tile(i=32, j=32))")
        kind = match.lastgroup or ""
        out.append((kind, match.group(kind)))
        position = match.end()
    return out


def _parse_step(text: str) -> Step:
    tokens = _tokens(text)
    shown = " ".join(text.split())
    if len(tokens) < 3 or tokens[0][0] != "name" or tokens[1] != ("punct", "(") \
            or tokens[-1] != ("punct", ")"):
        raise UsageError(f"{shown}: a step is name(args), e.g. tile(i=32, j=32)")
    name = tokens[0][1]
    inner = tokens[2:-1]
    args: list[Arg] = []
    keywords: list[tuple[LoopRef, Arg]] = []
    for group in _split(inner, shown):
        if ("punct", "=") in group:
            at = group.index(("punct", "="))
            key = _loop_ref(group[:at], shown)
            keywords.append((key, _value(group[at + 1:], shown)))
        else:
            args.append(_value(group, shown))
    return Step(name, tuple(args), tuple(keywords), _normalized(name, args, keywords))


def _split(tokens: list[tuple[str, str]], shown: str) -> list[list[tuple[str, str]]]:
    if not tokens:
        return []
    groups: list[list[tuple[str, str]]] = [[]]
    for token in tokens:
        if token == ("punct", ","):
            groups.append([])
        elif token[1] in "()":
            raise UsageError(f"{shown}: unexpected {token[1]!r} inside the arguments")
        else:
            groups[-1].append(token)
    if any(not g for g in groups):
        raise UsageError(f"{shown}: an empty argument")
    return groups


def _loop_ref(tokens: list[tuple[str, str]], shown: str) -> LoopRef:
    if len(tokens) == 1 and tokens[0][0] == "name":
        return LoopRef(tokens[0][1])
    if len(tokens) == 3 and tokens[0][0] == "name" and tokens[1] == ("punct", "@") \
            and tokens[2][0] == "number":
        return LoopRef(tokens[0][1], int(tokens[2][1]))
    written = "".join(t[1] for t in tokens)
    raise UsageError(f"{shown}: {written!r} is not a loop (a name, or name@line)")


def _value(tokens: list[tuple[str, str]], shown: str) -> Arg:
    if len(tokens) == 1 and tokens[0][0] == "number":
        return int(tokens[0][1])
    if len(tokens) == 1 and tokens[0][1] in {"True", "False"}:
        return tokens[0][1] == "True"
    return _loop_ref(tokens, shown)


def _normalized(name: str, args: list[Arg], keywords: list[tuple[LoopRef, Arg]]) -> str:
    parts = [str(a) for a in args] + [f"{k}={v}" for k, v in keywords]
    return f"{name}({', '.join(parts)})"
