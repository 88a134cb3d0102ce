"""How each array access of a loop nest walks memory as a loop advances: the lectures' spatial
and temporal locality, read off the (delinearized) affine subscripts.

With row-major arrays, an access is *unit-stride* in a loop when that loop moves only its last
subscript, by one (consecutive elements: every byte of a cache line used); *invariant* when
the loop does not move it at all (the same element again: temporal reuse, a register or the
L1 serves it); *strided* otherwise (a new line per iteration, as a column walk of a matrix).
The innermost loop decides which, so the optimizer orders loops for unit-stride innermost
accesses, and tiles a band where an access is strided in its innermost loop or invariant in
one of its loops (then a tile keeps what is reused in cache).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from loclab.deps.model import Model
from loclab.nest.expr import Poly, Symbol, atom_symbols
from loclab.nest.ir import Access, Loop, Statement

Stride = Literal["unit", "invariant", "strided", "unknown"]
# What each kind is worth when choosing a loop order (unit stride first, then reuse).
STRIDE_SCORE = {"unit": 2, "invariant": 1, "unknown": 0, "strided": -2}
WRITE_WEIGHT = {False: 1, True: 2}


def coefficient(poly: Poly, var: str) -> int | None:
    """The constant coefficient of ``var`` in ``poly``; None where ``var`` appears otherwise
    (times another symbol, inside a floor, a modulo, a min or a max)."""
    found = 0
    for monomial, value in poly.terms:
        if Symbol(var) in monomial:
            if monomial != (Symbol(var),):
                return None
            found = value
        elif any(var in atom_symbols(atom) for atom in monomial
                 if not isinstance(atom, Symbol)):
            return None
    return found


def stride(subscripts: tuple[Poly | None, ...] | None, var: str) -> Stride:
    """How an access with these subscripts moves as loop ``var`` advances by one."""
    if not subscripts or any(sub is None for sub in subscripts):
        return "unknown"
    coefficients = [coefficient(sub, var) for sub in subscripts if sub is not None]
    if any(c is None for c in coefficients):
        return "unknown"
    if all(c == 0 for c in coefficients):
        return "invariant"
    if all(c == 0 for c in coefficients[:-1]) and coefficients[-1] in (1, -1):
        return "unit"
    return "strided"


@dataclass(frozen=True)
class ArrayAccess:
    """An array access of a statement, with its delinearized subscripts."""

    statement: Statement
    access: Access
    subscripts: tuple[Poly | None, ...] | None

    @property
    def text(self) -> str:
        return self.access.text


def array_accesses(model: Model, statements: Iterable[Statement]) -> list[ArrayAccess]:
    """Every access to an array (scalars live in registers) of ``statements``."""
    return [ArrayAccess(statement, access, model.subscripts.get(id(access)))
            for statement in statements for access in statement.accesses
            if access.variable.is_array]


def innermost_after(statement: Statement, band: tuple[Loop, ...],
                    order: tuple[Loop, ...]) -> Loop:
    """The loop right around ``statement`` once ``band`` is permuted into ``order``: its
    own innermost loop where that lies below the band, else the band's new last loop."""
    inner = statement.loops[-1]
    return order[-1] if inner in band else inner


def order_score(accesses: list[ArrayAccess], band: tuple[Loop, ...],
                order: tuple[Loop, ...]) -> int:
    """The locality of a loop order: each access scored by its stride in its innermost
    loop (unit-stride accesses count most, strided ones against), a write twice: a line
    written in part is read for ownership and written back whole, so a strided write costs
    two lines' traffic where a strided read costs one (the lectures' transposition: writing
    the output along its rows measured 2x faster on the VM)."""
    return sum(WRITE_WEIGHT[a.access.write]
               * STRIDE_SCORE[stride(a.subscripts, innermost_after(a.statement, band, order).var)]
               for a in accesses)


@dataclass(frozen=True)
class Reuse:
    """Why tiling a band pays: accesses strided in the innermost loop (a tile uses the rest
    of each line they bring), and accesses invariant in a loop of the band (a tile keeps
    what the next iterations reuse)."""

    strided: tuple[str, ...]
    reused: tuple[tuple[str, str], ...]  # (access, loop it is invariant in)

    def __bool__(self) -> bool:
        return bool(self.strided or self.reused)

    def text(self) -> str:
        parts = []
        if self.strided:
            parts.append(f"{', '.join(self.strided)} strided in the innermost loop")
        if self.reused:
            parts.append(", ".join(f"{access} reused across {var}"
                                   for access, var in self.reused))
        return "; ".join(parts)


def band_reuse(accesses: list[ArrayAccess], band: tuple[Loop, ...],
               order: tuple[Loop, ...]) -> Reuse:
    """What a tile of ``band`` (in ``order``) would keep in cache."""
    strided = []
    reused = []
    for a in accesses:
        inner = innermost_after(a.statement, band, order)
        if inner in band and stride(a.subscripts, inner.var) == "strided":
            strided.append(a.text)
        for loop in order[:-1]:
            if loop in a.statement.loops and stride(a.subscripts, loop.var) == "invariant":
                reused.append((a.text, loop.var))
    return Reuse(tuple(dict.fromkeys(strided)), tuple(dict.fromkeys(reused)))
