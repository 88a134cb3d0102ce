"""Memory-based dependences, exactly, with isl: kinds, direction and distance vectors.

For every ordered pair of accesses to one variable (at least one a write) the dependence
relation is ``{ S1[x] -> S2[y] : x, y in their domains, same element, x runs before y }``.
Its direction vectors are the sign patterns of ``y - x`` over the common loops (in each
loop's execution order), found by splitting the delta set one loop at a time; a distance is
reported where a component takes a single value for every size.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from loclab.deps.model import Model
from loclab.nest.ir import Access, Loop, Statement, common_loops

if TYPE_CHECKING:
    import islpy as isl

DIRECTIONS = ("<", "=", ">")
SIGN = {"<": 1, "=": 0, ">": -1}  # "<": the sink runs in a later iteration (y - x > 0)
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

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "array": self.array, "source": self.source,
                "sink": self.sink, "direction": list(self.direction),
                "distance": list(self.distance), "carried_by": self.carried_by,
                "loops": [loop.id for loop in self.loops], "exact": self.exact,
                "source_access": self.source_access.text, "sink_access": self.sink_access.text}


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
    for first, second in _pairs_with_a_write(model):
        order = instance_order(first, second)
        if order is None:
            continue
        relation = same_element(model, first, second, order)
        if not relation.is_empty():
            yield first, second, relation


def instance_order(first: Use, second: Use) -> "isl.Map | None":
    """"Instance x of the first use runs before instance y of the second" (None: never)."""
    (s1, a1), (s2, a2) = first, second
    return _order(s1, a1, s2, a2, common_loops(s1, s2))


def same_element(model: Model, first: Use, second: Use, order: "isl.Map") -> "isl.Map":
    """``{ S1[x] -> S2[y] }`` of the instance pairs that touch one element in ``order``
    (equal subscripts, whatever variables the uses name: ``loclab.deps.overlap`` asks it of
    two arrays that may be one),
    as the intersection of pieces each parsed once (the statements' domains, the equal
    subscripts, the order): parsing one text per pair of accesses was most of the
    analysis' time. Equalities go in first, which keeps the order's disjunction small."""
    import islpy as isl

    (s1, _), (s2, _) = first, second
    same = " and ".join(model.same_location(first, second)) or "true"
    both = isl.Map.from_domain_and_range(model.domain_of(s1), model.domain_of(s2))
    return both.intersect(model.parsed(isl.Map, f"{model.header}{{ {model.point(s1, 'x')} -> "
                                                f"{model.point(s2, 'y')} : {same} }}")) \
        .intersect(order.set_tuple_name(isl.dim_type.in_, f"S{s1.ordinal}")
                   .set_tuple_name(isl.dim_type.out, f"S{s2.ordinal}"))


def _pairs_with_a_write(model: Model) -> Iterator[tuple[Use, Use]]:
    """The ordered pairs of accesses to one variable of which one is a write, in the order
    of all pairs (first by first access): listing only those keeps a statement of
    thousands of reads of an array that nothing writes linear, not quadratic."""
    for uses in model.accesses.values():
        writes = [use for use in uses if use[1].write]
        for first in uses:
            for second in (uses if first[1].write else writes):
                yield first, second


Relations = Iterator[tuple[Use, Use, "isl.Map"]]


def compute_dependences(model: Model,
                        relations: Relations | None = None) -> list[Dependence]:
    """The dependences of ``relations`` (every pair of accesses to one variable unless
    given: ``loclab.deps.overlap`` gives pairs of two arrays that may be one, and numbers
    them its own way), numbered ``D1``..."""
    found: dict[tuple, _Entry] = {}
    for first, second, relation in (dependence_relations(model) if relations is None
                                    else relations):
        (s1, a1), (s2, a2) = first, second
        loops = common_loops(s1, s2)
        multiples = _whole_strides(model, relation, s1, s2)
        exact = model.exact(s1, a1) and model.exact(s2, a2) and multiples is not None
        for vector, distance in direction_vectors(relation, loops):
            if multiples:  # along a loop that steps by a size: iterations, not values
                distance = tuple(multiples.get(level, d) for level, d in enumerate(distance))
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
           loops: tuple[Loop, ...]) -> "isl.Map | None":
    """"Instance x of s1 runs before instance y of s2" (unnamed tuples; None: never)."""
    textual = s1.ordinal < s2.ordinal or (s1 is s2 and not a1.write and a2.write)
    orientation = tuple(1 if loop.step > 0 else -1 for loop in loops)
    return _execution_order(len(s1.loops), len(s2.loops), orientation, textual)


@functools.lru_cache(maxsize=1024)
def _execution_order(n_in: int, n_out: int, orientation: tuple[int, ...],
                     textual: bool) -> "isl.Map | None":
    """The order of two statements' instances, from their depths, the directions of their
    common loops and whether the first comes first in the text: the same few shapes
    recur in every function, so each is parsed once (isl objects are values, safe to
    share)."""
    import islpy as isl

    cases: list[str] = []
    for level, sign in enumerate(orientation):
        equal = [f"x{k} = y{k}" for k in range(level)]
        earlier = f"x{level} < y{level}" if sign > 0 else f"x{level} > y{level}"
        cases.append(" and ".join(equal + [earlier]))
    if textual:
        cases.append(" and ".join(f"x{k} = y{k}" for k in range(len(orientation))) or "true")
    if not cases:
        return None
    xs = ", ".join(f"x{k}" for k in range(n_in))
    ys = ", ".join(f"y{k}" for k in range(n_out))
    return isl.Map(f"{{ [{xs}] -> [{ys}] : {' or '.join(f'({c})' for c in cases)} }}")


Vectors = Iterator[tuple[tuple[str, ...], tuple[int | None, ...]]]
MULTIPLES = 4  # a strided loop's distance is exact when it is at most this many strides


def _whole_strides(model: Model, relation: "isl.Map", s1: Statement,
                   s2: Statement) -> dict[int, int] | None:
    """Whether a relation over loops that step by a size (analyzed over every value between
    their bounds) holds between real iterations: every such loop is common to both
    statements and the distance along it is a whole number of strides (``a[i + inc]``), at
    most ``MULTIPLES``; then the distance in iterations at each strided level where it is
    one number (``{level: 1}``), else None: the dependence is possible, not exact."""
    import islpy as isl

    loops = common_loops(s1, s2)
    strided = [loop for loop in {*s1.loops, *s2.loops} if loop.stride is not None]
    if not strided:
        return {}
    if any(loop not in loops for loop in strided):
        return None
    delta = deltas(relation, len(loops))
    loop_vars = {loop.var for loop in model.nest.loops}
    multiples: dict[int, int] = {}
    for level, loop in enumerate(loops):
        if loop.stride is None:
            continue
        stride = model.render(loop.stride, s1, "x")
        if stride is None or loop.stride.symbols() & loop_vars:
            return None
        line = delta.project_out(isl.dim_type.set, level + 1, len(loops) - level - 1) \
            .project_out(isl.dim_type.set, 0, level)
        found = [m for m in range(-MULTIPLES, MULTIPLES + 1) if not line.intersect(
            model.parsed(isl.Set, f"{model.header}{{ [d] : d = {m} * ({stride}) }}")).is_empty()]
        whole = " or ".join(f"d = {m} * ({stride})" for m in found) or "false"
        if not line.is_subset(model.parsed(isl.Set, f"{model.header}{{ [d] : {whole} }}")):
            return None
        if len(found) == 1:
            multiples[level] = found[0]
    return multiples


def deltas(relation: "isl.Map", depth: int) -> "isl.Set":
    """``y - x`` over the first ``depth`` coordinates (the common loops), the others
    projected out, the tuples unnamed."""
    import islpy as isl

    common = relation.project_out(isl.dim_type.in_, depth, relation.dim(isl.dim_type.in_)
                                  - depth)
    common = common.project_out(isl.dim_type.out, depth, common.dim(isl.dim_type.out) - depth)
    return common.reset_tuple_id(isl.dim_type.in_).reset_tuple_id(isl.dim_type.out).deltas()


def direction_vectors(relation: "isl.Map", loops: tuple[Loop, ...]) -> Vectors:
    """Yield (direction vector, distance vector) for every sign pattern that occurs."""
    depth = len(loops)
    if depth == 0:
        yield (), ()
        return
    delta = deltas(relation, depth)
    if delta.is_empty():
        return
    # in each loop's execution order: a loop counting down runs y before x when y - x < 0
    yield from _split(delta, tuple(1 if loop.step > 0 else -1 for loop in loops), (), ())


def _split(delta: "isl.Set", orientation: tuple[int, ...], prefix: tuple[str, ...],
           known: tuple[int | None, ...]) -> Vectors:
    """Split ``delta`` (``y - x`` per common loop, not empty) one level at a time by the
    sign of its component in the loop's execution order (``orientation``: 1 counting up,
    -1 down). ``known``: the distances the splits above fixed. A component that isl's
    representation shows fixed needs no split: one sign, its distance known."""
    level = len(prefix)
    if level == len(orientation):
        yield prefix, _distance(delta, orientation, known)
        return
    fixed = _fixed(delta, level)
    if fixed is not None:
        distance = orientation[level] * fixed
        symbol = "<" if distance > 0 else "=" if distance == 0 else ">"
        yield from _split(delta, orientation, prefix + (symbol,), known + (distance,))
        return
    for symbol in DIRECTIONS:
        piece = _with_sign(delta, level, orientation[level] * SIGN[symbol])
        if not piece.is_empty():
            yield from _split(piece, orientation, prefix + (symbol,),
                              known + (0 if symbol == "=" else None,))


def _fixed(delta: "isl.Set", level: int) -> int | None:
    """The component's value where isl's representation fixes it to one number (no test
    for emptiness or singletons: a cheap look), else None."""
    import islpy as isl

    value = delta.plain_get_val_if_fixed(isl.dim_type.set, level)
    return int(value.to_python()) if value.is_int() else None


def _with_sign(delta: "isl.Set", level: int, sign: int) -> "isl.Set":
    """The part of ``delta`` whose component ``level`` is positive, zero or negative
    (``sign``), bounded through isl's API: parsing a set per split cost more than the
    split."""
    import islpy as isl

    if sign == 0:
        return delta.fix_val(isl.dim_type.set, level, isl.Val.zero(delta.get_ctx()))
    one = isl.Val.one(delta.get_ctx())
    if sign > 0:
        return delta.lower_bound_val(isl.dim_type.set, level, one)
    return delta.upper_bound_val(isl.dim_type.set, level, one.neg())


def _distance(delta: "isl.Set", orientation: tuple[int, ...],
              known: tuple[int | None, ...]) -> tuple[int | None, ...]:
    """Each component's value (in the loop's execution order) where it is the same for
    every size, else None; ``known`` where the splits fixed it already."""
    import islpy as isl

    depth = len(orientation)
    if None not in known:
        return known
    plain = delta.project_out(isl.dim_type.param, 0, delta.dim(isl.dim_type.param))
    out: list[int | None] = []
    for k in range(depth):
        if known[k] is not None:
            out.append(known[k])
            continue
        line = plain.project_out(isl.dim_type.set, k + 1, depth - k - 1)
        line = line.project_out(isl.dim_type.set, 0, k)
        if line.is_singleton():
            point = line.sample_point()
            value = int(point.get_coordinate_val(isl.dim_type.set, 0).to_python())
            out.append(orientation[k] * value)
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


def union_maps(union: "isl.UnionMap") -> list["isl.Map"]:
    """The maps of a union map (one per pair of statements, or of their copies)."""
    maps = union.get_map_list()
    return [maps.get_at(k) for k in range(maps.n_map())]
