"""Integer index expressions: the subscripts, loop bounds and conditions of a loop nest.

An expression is a polynomial over *atoms*: a symbol (loop variable or size parameter), or a
quasi-affine piece (``floor(e / c)``, ``e mod c``, ``min``/``max`` of expressions). Keeping
products of symbols (``i*W``) instead of refusing them lets the analysis delinearize flattened
subscripts (``A[i*W + j]``) and substitute fixed sizes before deciding what is affine.
Both frontends (Python ``ast``, C through pycparser) build these; the analysis renders them
as isl text with its own variable names.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Union

Monomial = tuple["Atom", ...]  # sorted; () is the constant monomial


@dataclass(frozen=True, order=True)
class Symbol:
    """A loop variable or a size parameter."""

    name: str


@dataclass(frozen=True)
class FloorDiv:
    """``floor(inner / divisor)`` with a positive constant divisor (Python ``//``)."""

    inner: "Poly"
    divisor: int


@dataclass(frozen=True)
class Mod:
    """``inner mod divisor`` with a positive constant divisor (Python ``%``)."""

    inner: "Poly"
    divisor: int


@dataclass(frozen=True)
class MinMax:
    """``min(...)`` or ``max(...)`` of expressions (loop bounds, clamped subscripts)."""

    function: str  # "min" or "max"
    args: tuple["Poly", ...]


Atom = Union[Symbol, FloorDiv, Mod, MinMax]


@functools.lru_cache(maxsize=1 << 16)  # a few atoms recur in every term of a file
def _atom_key(atom: Atom) -> tuple[int, str]:
    kinds = {Symbol: 0, FloorDiv: 1, Mod: 2, MinMax: 3}
    return kinds[type(atom)], repr(atom)


@dataclass(frozen=True)
class Poly:
    """A polynomial with integer coefficients: ``terms`` maps monomials to coefficients."""

    terms: tuple[tuple[Monomial, int], ...]

    @staticmethod
    def of(mapping: Mapping[Monomial, int]) -> "Poly":
        items = [(tuple(sorted(m, key=_atom_key)), c) for m, c in mapping.items() if c != 0]
        merged: dict[Monomial, int] = {}
        for monomial, coeff in items:
            merged[monomial] = merged.get(monomial, 0) + coeff
        return Poly(tuple(sorted(((m, c) for m, c in merged.items() if c != 0),
                                 key=lambda t: (len(t[0]), [_atom_key(a) for a in t[0]]))))

    @staticmethod
    def const(value: int) -> "Poly":
        return Poly.of({(): value})

    @staticmethod
    def symbol(name: str) -> "Poly":
        return Poly.of({(Symbol(name),): 1})

    @staticmethod
    def atom(atom: Atom) -> "Poly":
        return Poly.of({(atom,): 1})

    # -- arithmetic -------------------------------------------------------------------------
    def __add__(self, other: "Poly") -> "Poly":
        mapping = dict(self.terms)
        for monomial, coeff in other.terms:
            mapping[monomial] = mapping.get(monomial, 0) + coeff
        return Poly.of(mapping)

    def __neg__(self) -> "Poly":
        return Poly.of({m: -c for m, c in self.terms})

    def __sub__(self, other: "Poly") -> "Poly":
        return self + (-other)

    def __mul__(self, other: "Poly") -> "Poly":
        mapping: dict[Monomial, int] = {}
        for m1, c1 in self.terms:
            for m2, c2 in other.terms:
                key = tuple(sorted(m1 + m2, key=_atom_key))
                mapping[key] = mapping.get(key, 0) + c1 * c2
        return Poly.of(mapping)

    def floordiv(self, divisor: int) -> "Poly":
        value = self.constant_value()
        if value is not None:
            return Poly.const(value // divisor)
        return Poly.atom(FloorDiv(self, divisor))

    def mod(self, divisor: int) -> "Poly":
        value = self.constant_value()
        if value is not None:
            return Poly.const(value % divisor)
        return Poly.atom(Mod(self, divisor))

    @staticmethod
    def minmax(function: str, args: Iterable["Poly"]) -> "Poly":
        unique = tuple(dict.fromkeys(args))
        values = [a.constant_value() for a in unique]
        known = [v for v in values if v is not None]
        if len(known) == len(values):
            return Poly.const(min(known) if function == "min" else max(known))
        if len(unique) == 1:
            return unique[0]
        return Poly.atom(MinMax(function, unique))

    # -- questions --------------------------------------------------------------------------
    def constant_value(self) -> int | None:
        if not self.terms:
            return 0
        if len(self.terms) == 1 and self.terms[0][0] == ():
            return self.terms[0][1]
        return None

    def symbols(self) -> set[str]:
        """Every symbol name, including those inside floor/mod/min/max pieces."""
        names: set[str] = set()
        for monomial, _ in self.terms:
            for atom in monomial:
                names |= atom_symbols(atom)
        return names

    def is_affine(self) -> bool:
        """Degree at most one, with affine pieces: what isl can represent."""
        return all(len(m) <= 1 and all(_atom_affine(a) for a in m) for m, _ in self.terms)

    def substitute(self, values: Mapping[str, "Poly"]) -> "Poly":
        """Replace symbols by expressions (fixed sizes, known scalars)."""
        if not values:  # nothing fixed, as mostly: the same polynomial, not a rebuilt copy
            return self
        result = Poly.const(0)
        for monomial, coeff in self.terms:
            term = Poly.const(coeff)
            for atom in monomial:
                term = term * _substitute_atom(atom, values)
            result = result + term
        return result

    # -- rendering --------------------------------------------------------------------------
    def render(self, name: Callable[[str], str] = str, *, isl: bool = False) -> str:
        """Source-like text; with ``isl=True`` the syntax isl parses (``mod``, ``floor``)."""
        if not self.terms:
            return "0"
        parts: list[str] = []
        ordered = sorted(self.terms, key=lambda t: t[0] == ())  # constant last: "j - 1"
        for monomial, coeff in ordered:
            factors = [_render_atom(a, name, isl) for a in monomial]
            if not factors:
                text = str(abs(coeff))
            elif abs(coeff) == 1:
                text = "*".join(factors)
            else:
                text = "*".join([str(abs(coeff))] + factors)
            sign = "-" if coeff < 0 else "+"
            parts.append(("-" + text) if not parts and sign == "-" else
                         text if not parts else f" {sign} {text}")
        return "".join(parts)

    def __str__(self) -> str:
        return self.render()


def atom_symbols(atom: Atom) -> set[str]:
    if isinstance(atom, Symbol):
        return {atom.name}
    if isinstance(atom, MinMax):
        return set().union(*(a.symbols() for a in atom.args))
    return atom.inner.symbols()


def _atom_affine(atom: Atom) -> bool:
    if isinstance(atom, Symbol):
        return True
    if isinstance(atom, MinMax):
        return all(a.is_affine() for a in atom.args)
    return atom.inner.is_affine()


def _substitute_atom(atom: Atom, values: Mapping[str, Poly]) -> Poly:
    if isinstance(atom, Symbol):
        return values.get(atom.name, Poly.atom(atom))
    if isinstance(atom, FloorDiv):
        return atom.inner.substitute(values).floordiv(atom.divisor)
    if isinstance(atom, Mod):
        return atom.inner.substitute(values).mod(atom.divisor)
    return Poly.minmax(atom.function, (a.substitute(values) for a in atom.args))


def _render_atom(atom: Atom, name: Callable[[str], str], isl: bool) -> str:
    if isinstance(atom, Symbol):
        return name(atom.name)
    if isinstance(atom, FloorDiv):
        inner = atom.inner.render(name, isl=isl)
        return f"floor(({inner})/{atom.divisor})" if isl else f"({inner})//{atom.divisor}"
    if isinstance(atom, Mod):
        inner = atom.inner.render(name, isl=isl)
        return f"(({inner}) mod {atom.divisor})" if isl else f"({inner})%{atom.divisor}"
    args = ", ".join(a.render(name, isl=isl) for a in atom.args)
    return f"{atom.function}({args})"


@dataclass(frozen=True)
class Compare:
    """``left op right`` with op one of < <= > >= == !=."""

    op: str
    left: Poly
    right: Poly


@dataclass(frozen=True)
class BoolOp:
    """``and`` / ``or`` of conditions, or ``not`` of one."""

    op: str  # "and", "or", "not"
    args: tuple["Condition", ...]


Condition = Union[Compare, BoolOp]

def condition_symbols(cond: Condition) -> set[str]:
    """Every symbol name a condition reads."""
    if isinstance(cond, Compare):
        return cond.left.symbols() | cond.right.symbols()
    return set().union(*(condition_symbols(c) for c in cond.args))


_ISL_COMPARE = {"<": "<", "<=": "<=", ">": ">", ">=": ">=", "==": "=", "!=": "!="}


def render_condition(cond: Condition, name: Callable[[str], str] = str, *,
                     isl: bool = False) -> str:
    if isinstance(cond, Compare):
        op = _ISL_COMPARE[cond.op] if isl else cond.op
        if isl and op == "!=":
            left, right = cond.left.render(name, isl=True), cond.right.render(name, isl=True)
            return f"(({left}) < ({right}) or ({left}) > ({right}))"
        return f"{cond.left.render(name, isl=isl)} {op} {cond.right.render(name, isl=isl)}"
    if cond.op == "not":
        return f"not ({render_condition(cond.args[0], name, isl=isl)})"
    joined = f" {cond.op} ".join(f"({render_condition(a, name, isl=isl)})" for a in cond.args)
    return f"({joined})"


def condition_polys(cond: Condition) -> list[Poly]:
    if isinstance(cond, Compare):
        return [cond.left, cond.right]
    return [p for a in cond.args for p in condition_polys(a)]


def substitute_condition(cond: Condition, values: Mapping[str, Poly]) -> Condition:
    if isinstance(cond, Compare):
        return Compare(cond.op, cond.left.substitute(values), cond.right.substitute(values))
    return BoolOp(cond.op, tuple(substitute_condition(a, values) for a in cond.args))
