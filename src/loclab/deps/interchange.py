"""Loop interchange: the slides' theorem applied to every permutation of each perfect band.

A band is a chain of loops where each body is exactly the next loop. Permuting it is legal iff
no dependence vector, permuted the same way, gets ">" as its leftmost non-"=" component
(vectors already carried by a loop outside the band do not constrain it). For each legal
order we also report which loops of the band are then parallel.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from loclab.deps.dependences import Dependence
from loclab.nest.ir import Loop, Nest

MAX_BAND_PERMUTED = 5  # 120 orders; deeper bands list only adjacent swaps


@dataclass(frozen=True)
class Interchange:
    band: tuple[Loop, ...]
    order: tuple[Loop, ...]
    legal: bool
    parallel: tuple[Loop, ...]  # loops of the band that are parallel in this order
    blocking: str | None  # id of a dependence that forbids it

    def to_json(self) -> dict[str, object]:
        return {"order": [l.var for l in self.order], "legal": self.legal,
                "loops": [l.id for l in self.order],
                "parallel": [l.var for l in self.parallel], "blocked_by": self.blocking}


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


def interchanges(nest: Nest, dependences: list[Dependence]) -> list[Interchange]:
    out: list[Interchange] = []
    for band in perfect_bands(nest):
        start = band[0].depth
        rows = _band_rows(band, start, dependences)
        if len(band) <= MAX_BAND_PERMUTED:
            orders = list(itertools.permutations(range(len(band))))
        else:
            identity = list(range(len(band)))
            orders = [tuple(identity)] + [tuple(identity[:k] + [k + 1, k] + identity[k + 2:])
                                          for k in range(len(band) - 1)]
        for order in orders:
            out.append(_judge(band, order, rows))
    return out


def _band_rows(band: tuple[Loop, ...], start: int, dependences: list[Dependence]
               ) -> list[tuple[str, tuple[str, ...]]]:
    """(dependence id, band part of a vector) for vectors not carried outside the band."""
    inner = {id(s) for s in band[-1].statements()}
    rows: list[tuple[str, tuple[str, ...]]] = []
    for dependence in dependences:
        ends = {id(dependence.source_statement), id(dependence.sink_statement)}
        if not ends <= inner:
            continue
        for vector in dependence.vectors():
            if all(v == "=" for v in vector[:start]):
                rows.append((dependence.id, vector[start:start + len(band)]))
    return rows


def _judge(band: tuple[Loop, ...], order: tuple[int, ...],
           rows: list[tuple[str, tuple[str, ...]]]) -> Interchange:
    blocking = None
    carried: set[int] = set()
    for dep_id, vector in rows:
        permuted = [vector[k] for k in order]
        first = next((k for k, v in enumerate(permuted) if v != "="), None)
        if first is None:
            continue
        if permuted[first] == ">":
            blocking = blocking or dep_id
        carried.add(first)
    parallel = tuple(band[order[k]] for k in range(len(band)) if k not in carried)
    return Interchange(band, tuple(band[k] for k in order), blocking is None,
                       parallel if blocking is None else (), blocking)
