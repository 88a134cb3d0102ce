"""Memory-based dependences, exactly, with isl: kinds, direction and distance vectors.

For every ordered pair of accesses to one variable (at least one a write) the dependence
relation is ``{ S1[x] -> S2[y] : x, y in their domains, same element, x runs before y }``.
Its direction vectors are the sign patterns of ``y - x`` over the common loops (in each
loop's execution order), found by splitting the delta set one loop at a time; a distance is
reported where a component takes a single value for every size.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from loclab.deps.model import Model
from loclab.nest.ir import Access, Loop, Statement, common_loops

if TYPE_CHECKING:
    import islpy as isl

DIRECTIONS = ("<", "=", ">")
KIND_ORDER = {"RAW": 0, "WAR": 1, "WAW": 2}


@dataclass(eq=False)
class Dependence:
    """One dependence: source statement -> sink statement on one variable, one direction."""

    kind: str
    variable: str  # the variable's key
    array: str  # its name as written
    source_statement: Statement
    sink_statement: Statement
    loops: tuple[Loop, ...]  # the common loops the vectors range over
    direction: tuple[str, ...]
    distance: tuple[int | None, ...]
    exact: bool
    source_access: Access
    sink_access: Access
    id: str = ""
    concrete: list[tuple[str, ...]] = field(default_factory=list)

    @property
    def on_scalar(self) -> bool:
        """On a scalar: one location (per function in Python, per iteration for a C local)."""
        return not self.source_access.variable.is_array

    @property
    def source(self) -> str:
        return self.source_statement.id

    @property
    def sink(self) -> str:
        return self.sink_statement.id

    @property
    def carrier(self) -> Loop | None:
        """The loop that carries it: the first component that is not '='."""
        level = self.carried_level
        return None if level is None else self.loops[level]

    @property
    def carried_by(self) -> str | None:
        carrier = self.carrier
        return None if carrier is None else carrier.id

    @property
    def carried_level(self) -> int | None:
        """Index into ``loops`` of the carrying loop."""
        for level, symbol in enumerate(self.direction):
            if symbol != "=":
                return level
        return None

    def vectors(self) -> list[tuple[str, ...]]:
        """The concrete direction vectors this entry stands for ('*' expanded)."""
        return list(self.concrete)


def kind_of(first: Access, second: Access) -> str:
    if first.write and second.write:
        return "WAW"
    return "RAW" if first.write else "WAR"


Use = tuple[Statement, Access]


def dependence_relations(model: Model) -> Iterator[tuple[Use, Use, "isl.Map"]]:
    """Every ordered pair of accesses to one variable, one of them a write, with the
    non-empty relation ``{ S1[x] -> S2[y] }`` of the instance pairs that touch one element,
    ``x`` running before ``y`` (``model.point`` names the instances). What
    :func:`compute_dependences` summarizes, and what ``loclab.transform`` checks a new order
    against."""
    import islpy as isl

    for uses in model.accesses.values():
        for first, second in itertools.product(uses, repeat=2):
            (s1, a1), (s2, a2) = first, second
            if not (a1.write or a2.write) or (a1 is a2 and not a1.write):
                continue
            order = _order(s1, a1, s2, a2, common_loops(s1, s2))
            if order is None:
                continue
            parts = [model.domain(s1, "x"), model.domain(s2, "y"), order]
            parts += model.same_location(first, second)
            relation = isl.Map(f"{model.header}{{ {model.point(s1, 'x')} -> "
                               f"{model.point(s2, 'y')} : {' and '.join(parts)} }}")
            if not relation.is_empty():
                yield first, second, relation


def compute_dependences(model: Model) -> list[Dependence]:
    found: dict[tuple, _Entry] = {}
    for first, second, relation in dependence_relations(model):
        (s1, a1), (s2, a2) = first, second
        loops = common_loops(s1, s2)
        exact = model.exact(s1, a1) and model.exact(s2, a2)
        for vector, distance in direction_vectors(relation, loops):
            key = (s1.ordinal, s2.ordinal, kind_of(a1, a2), a1.variable.key, vector)
            entry = found.setdefault(key, _Entry(first, second, loops))
            entry.add(distance, exact)
    return _compact(found, _ranks(model))


def _ranks(model: Model) -> dict[str, int]:
    """Variables in the order the function declares or first mentions them (the frontends
    list them so): the order of dependences must not depend on what the user named them."""
    keys = [v.key for v in model.nest.variables] + list(model.accesses)
    return {key: rank for rank, key in enumerate(dict.fromkeys(keys))}


def _order(s1: Statement, a1: Access, s2: Statement, a2: Access,
           loops: tuple[Loop, ...]) -> str | None:
    """isl text for "instance x of s1 runs before instance y of s2" (None: never)."""
    cases: list[str] = []
    for level, loop in enumerate(loops):
        equal = [f"x{k} = y{k}" for k in range(level)]
        earlier = f"x{level} < y{level}" if loop.step > 0 else f"x{level} > y{level}"
        cases.append(" and ".join(equal + [earlier]))
    textual = s1.ordinal < s2.ordinal or (s1 is s2 and not a1.write and a2.write)
    if textual:
        cases.append(" and ".join(f"x{k} = y{k}" for k in range(len(loops))) or "true")
    if not cases:
        return None
    return "(" + " or ".join(f"({c})" for c in cases) + ")"


Vectors = Iterator[tuple[tuple[str, ...], tuple[int | None, ...]]]


def direction_vectors(relation: "isl.Map", loops: tuple[Loop, ...]) -> Vectors:
    """Yield (direction vector, distance vector) for every sign pattern that occurs."""
    import islpy as isl

    depth = len(loops)
    if depth == 0:
        yield (), ()
        return
    space_in = relation.dim(isl.dim_type.in_)
    space_out = relation.dim(isl.dim_type.out)
    # y - x per common loop, in execution order (a loop counting down flips the sign)
    xs = [f"x{k}" for k in range(space_in)]
    ys = [f"y{k}" for k in range(space_out)]
    ds = [f"d{k}" for k in range(depth)]
    signs = ["" if loop.step > 0 else "-" for loop in loops]
    deltas = " and ".join(f"d{k} = {signs[k]}(y{k} - x{k})" for k in range(depth))
    name_in = relation.get_tuple_name(isl.dim_type.in_)
    name_out = relation.get_tuple_name(isl.dim_type.out)
    to_delta = isl.Map(f"{{ [{name_in}[{', '.join(xs)}] -> {name_out}[{', '.join(ys)}]] -> "
                       f"[{', '.join(ds)}] : {deltas} }}")
    delta = relation.wrap().apply(to_delta)
    yield from _split(delta, 0, depth, ())


def _split(delta: "isl.Set", level: int, depth: int, prefix: tuple[str, ...]) -> Vectors:
    import islpy as isl

    if level == depth:
        yield prefix, _distance(delta, depth)
        return
    for symbol in DIRECTIONS:
        relation = {"<": ">", "=": "=", ">": "<"}[symbol]  # "<" means y - x > 0
        names = ", ".join(f"d{k}" for k in range(depth))
        piece = delta.intersect(isl.Set(f"{{ [{names}] : d{level} {relation} 0 }}"))
        if not piece.is_empty():
            yield from _split(piece, level + 1, depth, prefix + (symbol,))


def _distance(delta: "isl.Set", depth: int) -> tuple[int | None, ...]:
    """Each component's value where it is the same for every size, else None."""
    import islpy as isl

    plain = delta.project_out(isl.dim_type.param, 0, delta.dim(isl.dim_type.param))
    out: list[int | None] = []
    for k in range(depth):
        line = plain.project_out(isl.dim_type.set, k + 1, depth - k - 1)
        line = line.project_out(isl.dim_type.set, 0, k)
        if line.is_singleton():
            point = line.sample_point()
            out.append(int(point.get_coordinate_val(isl.dim_type.set, 0).to_python()))
        else:
            out.append(None)
    return tuple(out)


class _Entry:
    """Dependences between two statements on one variable with one vector, merged over
    access pairs (distances agree or become None; exact if any pair is exact)."""

    def __init__(self, first: tuple[Statement, Access], second: tuple[Statement, Access],
                 loops: tuple[Loop, ...]) -> None:
        self.first, self.second, self.loops = first, second, loops
        self.distance: tuple[int | None, ...] | None = None
        self.exact = False

    def add(self, distance: tuple[int | None, ...], exact: bool) -> None:
        self.distance = distance if self.distance is None else _agree(self.distance, distance)
        self.exact = self.exact or exact


def _agree(a: tuple[int | None, ...], b: tuple[int | None, ...]) -> tuple[int | None, ...]:
    return tuple(x if x == y else None for x, y in zip(a, b))


def _compact(found: dict[tuple, _Entry], rank: dict[str, int]) -> list[Dependence]:
    """Merge vectors that differ in one component and cover <, =, > into '*'; number them.

    ``rank`` orders variables by first use in the program, so that the numbering does not
    depend on what the user named them.
    """
    groups: dict[tuple, dict[tuple[str, ...], list[tuple[str, ...]]]] = {}
    for key in found:
        groups.setdefault(key[:4], {})[key[4]] = [key[4]]
    dependences: list[Dependence] = []
    for head, vectors in groups.items():
        merged = _merge_stars(vectors)
        for vector, members in merged.items():
            entries = [found[head + (m,)] for m in members]
            first = entries[0]
            distance = first.distance or ()
            for entry in entries[1:]:
                distance = _agree(distance, entry.distance or ())
            (s1, a1), (s2, a2) = first.first, first.second
            dependences.append(Dependence(
                kind=head[2], variable=head[3], array=a1.variable.name, source_statement=s1,
                sink_statement=s2,
                loops=first.loops, direction=vector,
                distance=tuple(None if v == "*" else d for v, d in zip(vector, distance)),
                exact=any(e.exact for e in entries), source_access=a1, sink_access=a2,
                concrete=sorted(members)))
    # arrays first, then the scalars in order of first use, each one's together: the ids of
    # a scalar's dependences form one range (D9-D40) that a summary can name
    dependences.sort(key=lambda d: (d.on_scalar, rank[d.variable] if d.on_scalar else 0,
                                    d.source_statement.ordinal, d.sink_statement.ordinal,
                                    KIND_ORDER[d.kind], rank[d.variable], d.direction))
    for number, dependence in enumerate(dependences, 1):
        dependence.id = f"D{number}"
    return dependences


def _merge_stars(vectors: dict[tuple[str, ...], list[tuple[str, ...]]]
                 ) -> dict[tuple[str, ...], list[tuple[str, ...]]]:
    changed = True
    while changed:
        changed = False
        for vector in list(vectors):
            if vector not in vectors:
                continue
            for position, symbol in enumerate(vector):
                if symbol == "*":
                    continue
                siblings = [vector[:position] + (s,) + vector[position + 1:] for s in DIRECTIONS]
                if all(s in vectors for s in siblings):
                    star = vector[:position] + ("*",) + vector[position + 1:]
                    vectors[star] = [m for s in siblings for m in vectors.pop(s)]
                    changed = True
                    break
    return vectors
