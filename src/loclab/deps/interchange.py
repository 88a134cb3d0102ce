"""Loop interchange: the slides' theorem applied to every permutation of each perfect band.

A band is a chain of loops where each body is exactly the next loop. Permuting it is legal iff
no dependence vector, permuted the same way, gets ">" as its leftmost non-"=" component
(vectors already carried by a loop outside the band do not constrain it). For each legal
order we also report which loops of the band are then parallel.

``legal`` is exact and memory-based. A Python scalar is one location for the whole function,
so its dependences alone can forbid an order that a C twin, whose scalar lives in the loop
body, may take: an order is then ``legal after privatize tmp`` when every dependence that
forbids it is on a variable that privatization removes (a copy per iteration of the band:
every read sees a write of the same band iteration, the check of
:meth:`~loclab.deps.remedies.Remedies.privatization`). With those copies, only the other
variables' dependences remain, which also says which loops are then parallel.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from loclab.deps.dependences import Dependence
from loclab.deps.remedies import Remedy
from loclab.nest.ir import Loop, Nest

MAX_BAND_PERMUTED = 5  # 120 orders; deeper bands list only adjacent swaps
MAX_BAND_COUNTED = 12  # legal orders counted over the 2^12 sets of leading loops, not 12!

Privatization = Callable[[Loop, str], "Remedy | None"]


class Row(NamedTuple):
    """The band part of one concrete direction vector of one dependence."""

    dependence: Dependence
    vector: tuple[str, ...]


@dataclass(frozen=True)
class Interchange:
    band: tuple[Loop, ...]
    order: tuple[Loop, ...]
    legal: bool  # memory-based, exactly as written
    parallel: tuple[Loop, ...]  # loops of the band that are parallel in this order
    blocking: Dependence | None  # one that forbids it (one privatization leaves, if any)
    legal_after: tuple[Remedy, ...] = ()  # privatizations that make an illegal order legal
    privatizing: tuple[Remedy, ...] = ()  # what parallel_after_privatizing assumes
    parallel_after_privatizing: tuple[Loop, ...] = ()

    @property
    def legal_once_privatized(self) -> bool:
        return self.legal or bool(self.legal_after)

    def to_json(self) -> dict[str, object]:
        return {"order": [l.var for l in self.order], "legal": self.legal,
                "loops": [l.id for l in self.order],
                "parallel": [l.var for l in self.parallel],
                "blocked_by": None if self.blocking is None else self.blocking.id,
                "legal_after": [r.label() for r in self.legal_after],
                "privatizing": [r.label() for r in self.privatizing],
                "parallel_after_privatizing": [l.var for l in self.parallel_after_privatizing]}


@dataclass(frozen=True)
class CutBand:
    """A band too deep to judge every order of: how many there are and, up to
    MAX_BAND_COUNTED loops, how many of them are legal (as written)."""

    band: tuple[Loop, ...]
    legal: int | None

    def text(self) -> str:
        loops = f"{self.band[0].id}-{self.band[-1].id} ({' '.join(l.var for l in self.band)})"
        orders = math.factorial(len(self.band))
        legal = "" if self.legal is None else f", {self.legal:,} of them legal"
        return (f"{loops} is a perfect band of {len(self.band)} loops with {orders:,} orders"
                f"{legal}: listed are only the order as written and the "
                f"{len(self.band) - 1} swaps of adjacent loops")


def cut_bands(nest: Nest, dependences: list[Dependence]) -> list[CutBand]:
    """The bands whose orders :func:`interchanges` does not all list."""
    out: list[CutBand] = []
    for band in perfect_bands(nest):
        if len(band) > MAX_BAND_PERMUTED:
            legal = None
            if len(band) <= MAX_BAND_COUNTED:
                legal = count_legal_orders(len(band), _band_rows(band, dependences))
            out.append(CutBand(band, legal))
    return out


def count_legal_orders(size: int, rows: list[Row]) -> int:
    """How many orders of a band of ``size`` loops no row forbids, without listing them.

    An order is legal when every row's first component that is not '=' is '<'. Placing the
    loops outermost first, a row still undecided after the loops of set S (all '=' there)
    forbids placing next a loop where it is '>'; the count of legal orders of each set of
    leading loops follows from those of its subsets: 2^size sets, not size! orders.
    """
    patterns = {(_mask(row.vector, "="), _mask(row.vector, ">")) for row in rows}
    counts = [0] * (1 << size)
    counts[0] = 1
    for placed in range(1 << size):
        if not counts[placed]:
            continue
        forbidden = 0
        for equal, greater in patterns:
            if placed & equal == placed:  # undecided so far
                forbidden |= greater
        for loop in range(size):
            bit = 1 << loop
            if not placed & bit and not forbidden & bit:
                counts[placed | bit] += counts[placed]
    return counts[-1]


def _mask(vector: tuple[str, ...], symbol: str) -> int:
    return sum(1 << k for k, s in enumerate(vector) if s == symbol)


def perfect_bands(nest: Nest) -> list[tuple[Loop, ...]]:
    """Maximal chains of perfectly nested loops, two deep or more."""
    bands: list[tuple[Loop, ...]] = []
    for loop in nest.loops:
        parent = loop.parent
        if parent is not None and len(parent.body) == 1:
            continue  # inside a band that starts higher up
        chain = [loop]
        while len(chain[-1].body) == 1 and isinstance(chain[-1].body[0], Loop):
            chain.append(chain[-1].body[0])
        if len(chain) >= 2:
            bands.append(tuple(chain))
    return bands


def band_orders(band: tuple[Loop, ...]) -> list[tuple[int, ...]]:
    """Every permutation of a band, or for deep bands the identity and adjacent swaps."""
    if len(band) <= MAX_BAND_PERMUTED:
        return list(itertools.permutations(range(len(band))))
    identity = list(range(len(band)))
    return [tuple(identity)] + [tuple(identity[:k] + [k + 1, k] + identity[k + 2:])
                                for k in range(len(band) - 1)]


def interchanges(nest: Nest, dependences: list[Dependence],
                 privatization: Privatization | None = None) -> list[Interchange]:
    """Every order of every perfect band, judged as written and after privatization.

    ``privatization(loop, key)`` is the remedy for one variable at one loop, or None.
    """
    out: list[Interchange] = []
    for band in perfect_bands(nest):
        rows = _band_rows(band, dependences)
        removable = _removable(band, rows, privatization)
        out += [_judge(band, order, rows, removable) for order in band_orders(band)]
    return out


def _band_rows(band: tuple[Loop, ...], dependences: list[Dependence]) -> list[Row]:
    """The band part of the vectors not carried outside the band (others do not constrain)."""
    start = band[0].depth
    inner = {id(s) for s in band[-1].statements()}
    rows: list[Row] = []
    for dependence in dependences:
        ends = {id(dependence.source_statement), id(dependence.sink_statement)}
        if not ends <= inner:
            continue
        for vector in dependence.vectors():
            if all(v == "=" for v in vector[:start]):
                rows.append(Row(dependence, vector[start:start + len(band)]))
    return rows


def _removable(band: tuple[Loop, ...], rows: list[Row],
               privatization: Privatization | None) -> dict[str, Remedy]:
    """Variables (by key) whose dependences across band iterations privatization removes:
    a copy per iteration of the innermost loop of the band is a copy per band iteration."""
    if privatization is None:
        return {}
    found: dict[str, Remedy] = {}
    for row in rows:
        key = row.dependence.variable
        if key not in found and any(v != "=" for v in row.vector):
            remedy = privatization(band[-1], key)
            if remedy is not None:
                found[key] = remedy
    return found


def _judge(band: tuple[Loop, ...], order: tuple[int, ...], rows: list[Row],
           removable: dict[str, Remedy]) -> Interchange:
    leads = [_lead([row.vector[k] for k in order]) for row in rows]
    blocking = [row for row, (_, symbol) in zip(rows, leads) if symbol == ">"]
    permuted = tuple(band[k] for k in order)
    parallel = _parallel(band, order, [lead for lead, _ in leads])
    if not blocking:
        result = Interchange(band, permuted, True, parallel, None)
    else:
        kept = [row for row in blocking if row.dependence.variable not in removable]
        result = Interchange(band, permuted, False, (), (kept or blocking)[0].dependence)
        if kept:
            return result
    return _after_privatizing(result, order, rows, leads, removable)


def _after_privatizing(result: Interchange, order: tuple[int, ...], rows: list[Row],
                       leads: list[tuple[int | None, str]],
                       removable: dict[str, Remedy]) -> Interchange:
    """Add what privatizing the removable variables of an order's dependences gives: the
    privatizations it needs to be legal, and those that free more loops to run in parallel."""
    kept = [lead for row, (lead, _) in zip(rows, leads)
            if row.dependence.variable not in removable]
    after = _parallel(result.band, order, kept)
    freed = {k for k, loop in enumerate(result.order) if loop in after} - {
        k for k, loop in enumerate(result.order) if loop in result.parallel}
    needed = {row.dependence.variable for row, (lead, symbol) in zip(rows, leads)
              if row.dependence.variable in removable and (symbol == ">" or lead in freed)}
    blocking = {row.dependence.variable for row, (_, symbol) in zip(rows, leads)
                if symbol == ">"}
    return Interchange(result.band, result.order, result.legal, result.parallel,
                       result.blocking,
                       legal_after=tuple(r for k, r in removable.items() if k in blocking),
                       privatizing=tuple(r for k, r in removable.items() if k in needed),
                       parallel_after_privatizing=after)


def _lead(permuted: list[str]) -> tuple[int | None, str]:
    """(position, symbol) of the leftmost component that is not '=' (None, '=' if none)."""
    for position, symbol in enumerate(permuted):
        if symbol != "=":
            return position, symbol
    return None, "="


def _parallel(band: tuple[Loop, ...], order: tuple[int, ...],
              carried: list[int | None]) -> tuple[Loop, ...]:
    """The loops of the permuted band at positions that carry none of the vectors."""
    busy = set(carried)
    return tuple(band[order[k]] for k in range(len(band)) if k not in busy)
