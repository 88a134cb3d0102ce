"""What both frontends share: building the IR while walking a function's syntax tree.

A frontend translates syntax (Python ``ast`` or pycparser nodes) and calls the builder to open
loops, push conditions, declare variables and add statements. The builder numbers loops and
statements in program order, resolves names through block scopes, and turns a variable
declared inside a loop into a fresh location per iteration (its accesses get the enclosing
loop variables as extra leading subscripts).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from loclab.errors import UsageError
from loclab.nest.expr import Condition, Poly
from loclab.nest.ir import Access, Guard, Loop, Nest, Node, Statement, Update, Variable

# Deeper nests take isl minutes (its work grows with the cube of the loops around a
# statement: 50 loops take seconds); real code nests a dozen at most.
MAX_LOOP_DEPTH = 50
# Pairs of accesses (to one variable, one of them a write) whose dependences the analysis
# computes with isl, about half a millisecond each: 20,000 are some ten seconds.
MAX_ACCESS_PAIRS = 20_000

_Function = TypeVar("_Function")


class NestError(UsageError):
    """An unsupported or malformed loop nest; the message starts with file:line:column."""


def pick_function(functions: Sequence[_Function], names: Sequence[str],
                  places: Sequence[str], name: str, filename: str) -> _Function:
    """The one function called ``name`` (``places``: each one's file:line). Every command
    that takes FILE::NAME picks through here, so that none silently takes another copy of a
    function defined twice than the others: that is an error naming both places."""
    found = [k for k, known in enumerate(names) if known == name]
    if not found:
        known = ", ".join(dict.fromkeys(names)) or "none"
        raise NestError(f"{filename}: no function named {name!r} (functions: {known})")
    if len(found) > 1:
        raise NestError(f"{filename}: {name} is defined {len(found)} times "
                        f"({', '.join(places[k] for k in found)}): rename all but one")
    return functions[found[0]]


def defined_twice(names: Sequence[str], places: Sequence[str]) -> list[str]:
    """A warning for each name that several functions of a file share (each place)."""
    where: dict[str, list[str]] = {}
    for name, place in zip(names, places):
        where.setdefault(name, []).append(place)
    return [f"{name} is defined {len(found)} times ({', '.join(found)}): each is analyzed, "
            f"and FILE::{name} names none of them" for name, found in where.items()
            if len(found) > 1]


def nested_too_deep(place: str, statement: bool) -> NestError:
    """Code at ``place`` (file:line:column) nested past ``MAX_NESTING`` levels."""
    from loclab.nest.deep import MAX_NESTING

    what = "statements" if statement else "an expression"
    hint = "" if statement else f" (a sum of more than {MAX_NESTING:,} terms?)"
    return NestError(f"{place}: {what} nested more than {MAX_NESTING:,} levels deep{hint}: "
                     f"loclab reads at most {MAX_NESTING:,} levels")


class NestBuilder:
    def __init__(self, name: str, filename: str, language: str, line: int) -> None:
        self.nest = Nest(name=name, filename=filename, language=language, line=line, body=[],
                         loops=[], statements=[], variables=[], parameters=[])
        self._loops: list[Loop] = []
        self._guards: list[Guard] = []
        self._bodies: list[list[Node]] = [self.nest.body]
        self._scopes: list[dict[str, Variable]] = [{}]
        self.arguments: set[str] = set()  # the function's parameter names
        # the overlap class (``Variable.overlap_class``) of an array the function does not
        # declare (an argument in Python, a global): the frontend's rule
        self.undeclared_overlap: Callable[[str], str | None] = lambda name: None

    # -- errors and notes -------------------------------------------------------------------
    def error(self, line: int, column: int, message: str,
              filename: str | None = None) -> NestError:
        """``filename`` where the code comes from another file (a header) than the nest."""
        return NestError(f"{filename or self.nest.filename}:{line}:{column}: {message}")

    def note(self, line: int, message: str) -> None:
        """A note on the analysis; ``line`` 0 for one about no line in particular."""
        text = f"line {line}: {message}" if line else message
        if text not in self.nest.notes:
            self.nest.notes.append(text)

    # -- names ------------------------------------------------------------------------------
    @property
    def loop_vars(self) -> dict[str, Loop]:
        return {loop.var: loop for loop in self._loops}

    def parameter(self, name: str) -> Poly:
        """A size parameter: a name fixed while the loops run."""
        if name not in self.nest.parameters:
            self.nest.parameters.append(name)
        return Poly.symbol(name)

    def opaque(self, name: str, line: int) -> None:
        """``name`` is a local set once before the loops to a value that is no index
        expression: an unknown size whose ties to the others are lost (not exact)."""
        if name not in self.nest.opaque:
            self.nest.opaque.append(name)
            self.note(line, f"the value of {name} is not an affine expression of the sizes: "
                      f"{name} is treated as an unknown size, and what uses it is not exact")

    def push_scope(self) -> None:
        self._scopes.append({})

    def pop_scope(self) -> None:
        self._scopes.pop()

    def lookup(self, name: str) -> Variable | None:
        for scope in reversed(self._scopes):
            if name in scope:
                return scope[name]
        return None

    def declare(self, name: str, *, is_array: bool, line: int,
                extents: tuple[Poly | None, ...] | None = None, private: bool = True,
                argument: bool = False, overlap_class: str | None = None) -> Variable:
        """A new variable in the innermost scope; ``private``: fresh in every iteration."""
        taken = {v.key for v in self.nest.variables}
        key = name if name not in taken else f"{name}@{line}"
        variable = Variable(key=key, name=name, is_array=is_array,
                            scope=tuple(self._loops) if private else (), extents=extents,
                            line=line, is_argument=argument, overlap_class=overlap_class)
        self.nest.variables.append(variable)
        self._scopes[-1][name] = variable
        return variable

    def variable(self, name: str, *, is_array: bool, line: int, column: int) -> Variable:
        """The variable a name refers to; undeclared names are function-wide (globals)."""
        found = self.lookup(name)
        if found is None:
            found = Variable(key=name, name=name, is_array=is_array, line=line,
                             is_argument=name in self.arguments,
                             overlap_class=self.undeclared_overlap(name) if is_array else None)
            self.nest.variables.append(found)
            self._scopes[0][name] = found
        if found.is_array != is_array:
            used, declared = ("subscripted", "a scalar") if is_array else ("used whole",
                                                                           "an array")
            raise self.error(line, column, f"{name} is {used} here but is {declared}; "
                             "whole-array or aliasing operations are not supported")
        return found

    def access(self, variable: Variable, write: bool, subscripts: list[Poly | None],
               text: str, line: int, column: int) -> Access:
        if variable.extents is not None and len(variable.extents) != len(subscripts):
            raise self.error(line, column, f"{variable.name} has {len(variable.extents)} "
                             f"dimensions but {len(subscripts)} subscripts here")
        # A fresh-per-iteration variable is indexed by its declaring loops' variables; used
        # after such a loop (Python allows it) the iteration is unknown.
        fresh = [Poly.symbol(loop.var) if loop in self._loops else None
                 for loop in variable.scope]
        return Access(variable, write, tuple(fresh + list(subscripts)), text)

    # -- structure --------------------------------------------------------------------------
    def open_loop(self, var: str, start: Poly | None, stop: Poly | None, step: int,
                  line: int, column: int, header: str, file: str | None = None,
                  stride: Poly | None = None, signed: bool = True) -> Loop:
        """``file`` where the loop is in another file (a header) than the nest; ``stride``
        a step that is a size, ``step`` its sign (``signed``: fixed by the code)."""
        if var in self.loop_vars:
            raise self.error(line, column, f"loop variable {var} is already the variable of "
                             f"the enclosing loop at line {self.loop_vars[var].line}")
        if len(self._loops) == MAX_LOOP_DEPTH:
            raise self.error(line, column, f"loop {var} is nested {MAX_LOOP_DEPTH + 1} loops "
                             f"deep: loclab analyzes nests of at most {MAX_LOOP_DEPTH} loops")
        loop = Loop(id=f"L{len(self.nest.loops) + 1}", var=var, start=start, stop=stop,
                    step=step, line=line, column=column, depth=len(self._loops),
                    parent=self._loops[-1] if self._loops else None,
                    guards=tuple(self._guards), header=header,
                    file=file or self.nest.filename, stride=stride, signed=signed)
        self.nest.loops.append(loop)
        self._bodies[-1].append(loop)
        self._loops.append(loop)
        self._bodies.append(loop.body)
        return loop

    def close_loop(self) -> None:
        self._loops.pop()
        self._bodies.pop()

    def push_guard(self, condition: Condition | None, text: str,
                   test: Statement | None = None) -> None:
        self._guards.append(Guard(condition, False, text, test))

    def flip_guard(self) -> None:
        """Enter the else branch of the innermost condition."""
        top = self._guards.pop()
        self._guards.append(Guard(top.condition, True, top.text, top.test))

    def pop_guard(self) -> None:
        self._guards.pop()

    def add_statement(self, line: int, column: int, source: str, accesses: list[Access],
                      update: Update | None = None, file: str | None = None) -> Statement:
        """``file`` where the statement is in another file (a header) than the nest."""
        reads = [a for a in accesses if not a.write]
        writes = [a for a in accesses if a.write]
        statement = Statement(id=f"S{len(self.nest.statements) + 1}",
                              ordinal=len(self.nest.statements), line=line, column=column,
                              source=source, loops=tuple(self._loops),
                              guards=tuple(self._guards), accesses=reads + writes,
                              update=update, file=file or self.nest.filename)
        self.nest.statements.append(statement)
        self._bodies[-1].append(statement)
        return statement

    def finish(self) -> Nest:
        self._check_work()
        return self.nest

    def _check_work(self) -> None:
        """Refuse a function whose dependence analysis would take minutes, up front: it
        checks every pair of accesses to one variable of which one is a write (200
        statements writing one array are 40,000 pairs, seconds each thousand)."""
        counts: dict[str, list[int]] = {}  # variable key -> [accesses, writes]
        for statement in self.nest.statements:
            for access in statement.accesses:
                count = counts.setdefault(access.variable.key, [0, 0])
                count[0] += 1
                count[1] += access.write
        pairs = {key: writes * (2 * accesses - writes)
                 for key, (accesses, writes) in counts.items()}
        total = sum(pairs.values())
        if total > MAX_ACCESS_PAIRS:
            worst = max(pairs, key=lambda key: pairs[key])
            name = next(v.name for v in self.nest.variables if v.key == worst)
            accesses, writes = counts[worst]
            raise self.error(self.nest.line, 1, f"{self.nest.name} has {total:,} pairs of "
                             f"accesses to check for dependences (most: {writes} writes of "
                             f"{name} among its {accesses} accesses): loclab checks at most "
                             f"{MAX_ACCESS_PAIRS:,} a function; split it")
