"""Arguments that may share memory, and what sharing it would add to the dependences.

C lets two pointer parameters of one element type point into one array unless one is
``restrict``; NumPy lets two array arguments be one array or overlapping views of one. The
dependences of :mod:`loclab.deps.dependences` are those of distinct arrays (as polyhedral
tools assume); this module says, for each pair that may overlap (one of them written, one an
argument), what the overlap would add, in two cases:

- the same array passed twice (``f(x, x)``): the pair's accesses compared subscript by
  subscript, exactly as accesses to one array (``same_array``, ids ``O1``...);
- overlapping at any offset (``f(x[1:], x[:-1])``, strides of their own): for two instances
  that touch the pair, some offset makes them touch one element, so every loop in which
  they run in different iterations may carry a dependence (``carriers``). That is exact for
  views of one buffer, and what a compiler must assume without ``restrict``.

A loop is then parallel whatever the arguments are only if it carries nothing and no
overlap makes it carry; "parallel if a and b do not overlap" otherwise.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from loclab.deps.dependences import Dependence, Use, compute_dependences, deltas, \
    instance_order, same_element
from loclab.deps.model import Model
from loclab.nest.ir import Loop, Nest, Variable, common_loops

if TYPE_CHECKING:
    import islpy as isl

WHY = {"python": "NumPy arrays passed as arguments may be one array or views of one",
       "c": "pointers to {kind} without restrict may point into one array"}


@dataclass(eq=False)
class Overlap:
    """Two arrays that may share memory, and what sharing it would add."""

    first: Variable
    second: Variable
    why: str
    same_array: list[Dependence] = field(default_factory=list)  # f(x, x): exact
    carriers: list[Loop] = field(default_factory=list)  # some overlap makes these carry

    @property
    def names(self) -> tuple[str, str]:
        return self.first.name, self.second.name

    @property
    def label(self) -> str:
        return f"{self.first.name} and {self.second.name}"

    def to_json(self) -> dict[str, Any]:
        return {"arrays": list(self.names), "why": self.why,
                "carried_by": [loop.id for loop in self.carriers],
                "same_array_dependences": [d.to_json() for d in self.same_array]}


def may_overlap(nest: Nest) -> list[tuple[Variable, Variable]]:
    """Pairs of arrays that may share memory and whose sharing matters: overlap classes
    that match (equal, or either "any"), one of them an argument, one of them written."""
    written = {access.variable.key for statement in nest.statements
               for access in statement.writes}
    arrays = [v for v in nest.variables if v.is_array and v.overlap_class is not None
              and not v.scope]
    pairs: list[tuple[Variable, Variable]] = []
    for k, first in enumerate(arrays):
        for second in arrays[k + 1:]:
            classes = {first.overlap_class, second.overlap_class}
            if (len(classes) == 1 or "any" in classes) \
                    and (first.is_argument or second.is_argument) \
                    and (first.key in written or second.key in written):
                pairs.append((first, second))
    return pairs


def overlaps(model: Model) -> list[Overlap]:
    """What each pair of :func:`may_overlap` would add, numbered ``O1``... across pairs."""
    found: list[Overlap] = []
    number = 0
    for first, second in may_overlap(model.nest):
        kind = first.overlap_class if first.overlap_class != "any" else second.overlap_class
        why = WHY[model.nest.language].format(kind=kind if kind != "any" else "char or void")
        overlap = Overlap(first, second, why)
        uses = model.accesses.get(first.key, []) + model.accesses.get(second.key, [])
        pairs = list(_cross_pairs(uses, first))
        if _same_rank(uses):
            relations = ((a, b, r) for a, b, order in pairs
                         if not (r := same_element(model, a, b, order)).is_empty())
            overlap.same_array = compute_dependences(model, relations)
            for dependence in overlap.same_array:
                number += 1
                dependence.id = f"O{number}"
        overlap.carriers = _carriers(model, pairs)
        found.append(overlap)
    return found


def _cross_pairs(uses: list[Use], first: Variable) -> Iterator[tuple[Use, Use, "isl.Map"]]:
    """Ordered pairs of one use of each array, one of them a write, with their order."""
    for one in uses:
        for other in uses:
            if (one[1].variable is first) == (other[1].variable is first):
                continue
            if not (one[1].write or other[1].write):
                continue
            order = instance_order(one, other)
            if order is not None:
                yield one, other, order


def _same_rank(uses: list[Use]) -> bool:
    return len({len(access.subscripts) for _, access in uses}) == 1


def _carriers(model: Model, pairs: list[tuple[Use, Use, "isl.Map"]]) -> list[Loop]:
    """The loops in which two instances of a pair run in different iterations (and the
    same iteration of every loop outside): an offset exists that makes them collide."""
    import islpy as isl

    carriers: dict[int, Loop] = {}
    seen: set[tuple[int, int, int]] = set()  # locations play no part: once per statements
    for (s1, _), (s2, _), order in pairs:
        loops = common_loops(s1, s2)
        key = (s1.ordinal, s2.ordinal, id(order))  # orders are shared (lru_cache)
        if key in seen or all(id(loop) in carriers for loop in loops):
            continue
        seen.add(key)
        both = isl.Map.from_domain_and_range(model.domain_of(s1), model.domain_of(s2))
        relation = both.intersect(order.set_tuple_name(isl.dim_type.in_, f"S{s1.ordinal}")
                                  .set_tuple_name(isl.dim_type.out, f"S{s2.ordinal}"))
        if not loops or relation.is_empty():
            continue
        # carried at the first level where two instances differ, the outer ones equal
        delta = deltas(relation, len(loops))
        zero = isl.Val.zero(delta.get_ctx())
        for level, loop in enumerate(loops):
            same = delta.fix_val(isl.dim_type.set, level, zero)
            if not delta.is_subset(same):
                carriers[id(loop)] = loop
            if same.is_empty():
                break
            delta = same
    return [loop for loop in model.nest.loops if id(loop) in carriers]
