"""How large an index expression can get, bounded before NumPy evaluates it.

The models evaluate subscripts and loop bounds on int64 arrays, where a value past 2^63
wraps around silently (NumPy does not check) and a Python integer past it cannot even be
converted (``OverflowError``). Bounding every term with Python's exact integers first, from
the largest magnitude each symbol takes, turns both into a usage error that names the term
that is too large, before any array is built.

The limit (:data:`loclab.model.limits.INDEX_LIMIT`) leaves room for what the models do with
an index afterwards: multiply it by an element size and add an array's base address.
"""

from __future__ import annotations

from collections.abc import Mapping

from loclab.errors import UsageError
from loclab.model.limits import INDEX_LIMIT, INDEX_LIMIT_BITS
from loclab.nest.expr import Atom, FloorDiv, MinMax, Mod, Poly, Symbol


def too_large(value: int) -> bool:
    return abs(value) >= INDEX_LIMIT


def limit_text() -> str:
    return f"2^{INDEX_LIMIT_BITS}"


def check_magnitude(poly: Poly, magnitudes: Mapping[str, int], where: str) -> int:
    """The largest magnitude ``poly`` can take when each symbol's magnitude is at most
    ``magnitudes[name]``; a term (or divisor) of ``INDEX_LIMIT`` or more is a usage error
    that names it, prefixed with ``where`` (the access or the statement)."""
    total = 0
    for monomial, coeff in poly.terms:
        term = abs(coeff)
        for atom in monomial:
            term *= _atom_magnitude(atom, magnitudes, where)
        if too_large(term):
            raise UsageError(f"{where}: {Poly.of({monomial: coeff})} can reach {term:.3g}: "
                             f"too large (numbers in indices must stay below {limit_text()})")
        total += term
    if too_large(total):
        raise UsageError(f"{where}: {poly} can reach {total:.3g}: too large (numbers in "
                         f"indices must stay below {limit_text()})")
    return total


def _atom_magnitude(atom: Atom, magnitudes: Mapping[str, int], where: str) -> int:
    if isinstance(atom, Symbol):
        return magnitudes[atom.name]
    if isinstance(atom, MinMax):
        return max(check_magnitude(arg, magnitudes, where) for arg in atom.args)
    if too_large(atom.divisor):
        raise UsageError(f"{where}: the divisor {atom.divisor} is too large (numbers in "
                         f"indices must stay below {limit_text()})")
    inner = check_magnitude(atom.inner, magnitudes, where)  # evaluated before it divides
    if isinstance(atom, Mod):
        return atom.divisor - 1  # a positive divisor's remainder, whatever the sign
    assert isinstance(atom, FloorDiv)
    return inner // atom.divisor + 1  # flooring a negative value adds one
