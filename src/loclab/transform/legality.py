"""Is a new loop tree a legal order? Checked exactly, with isl, on the real dependences.

A step is legal when every dependence of the original function keeps its source before its
sink in the new order: for every pair of instances that touch one element (one of them
writing), the time of the first stays lexicographically smaller. The dependences are the
analysis' memory-based relations (:func:`~loclab.deps.dependences.dependence_relations`),
with the storage the recipe has given variables of their own taken into account: a variable
private to each iteration of a loop (``privatize``, or declared inside it) only depends within
one iteration; one expanded into an array only between instances of one element; a read of
an array copied before a loop (``copy``) reads the copy and no longer waits for the loop's
writes.

A loop is parallel when no dependence is *carried* by it: no pair whose times agree on every
outer level and differ in its own value. Carried dependences on a variable that every
statement of the loop updates with one associative operator (``s += e``) are a reduction.

When a step breaks a dependence, :class:`Violation` names it as the analysis does (``D2 S1->S1
RAW on A``) with its direction vector before and after.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from loclab.deps.dependences import (Dependence, Use, compute_dependences,
                                     dependence_relations, direction_vectors, union_maps)
from loclab.deps.model import Model
from loclab.deps.remedies import reduction_operator
from loclab.nest.ir import common_loops
from loclab.transform.schedule import Placed, Schedule, unit_number
from loclab.transform.tree import LoopNode, Program

if TYPE_CHECKING:
    import islpy as isl


@dataclass(frozen=True)
class Violation:
    """A dependence a new order would break, in the slides' notation."""

    dependence: Dependence | None
    before: tuple[str, ...]  # its direction vector in the original loops
    after: tuple[str, ...]  # the sign pattern of the pair's times in the new common loops
    after_loops: tuple[str, ...]  # names of those loops
    sizes: dict[str, int] = field(default_factory=dict)  # sizes where a broken pair exists

    def __str__(self) -> str:
        old = f"[{','.join(self.before)}]"
        new = f"[{','.join(self.after)}]"
        if self.dependence is None:
            return f"a dependence {old} would become {new}"
        d = self.dependence
        what = f"{d.id} {d.source}->{d.sink} {d.kind} on {d.array} {old}"
        if ">" in self.after and self.after[:self.after.index(">")].count("<") == 0:
            return f"{what} would become {new}"
        return f"{what} would run {d.sink} before {d.source}" + (
            f" (in ({', '.join(self.after_loops)}): {new})" if self.after_loops else "")


@dataclass(frozen=True)
class Carried:
    """The dependences a loop carries on one variable, and whether they form a reduction."""

    key: str
    name: str
    dependences: tuple[Dependence, ...]
    reduction: str | None  # the operator when every update is ``x op= e``
    scalar: bool
    sizes: dict[str, int] = field(default_factory=dict)  # sizes where a carried pair exists


class Dependences:
    """The original function's dependence relations, computed once per recipe."""

    def __init__(self, model: Model) -> None:
        self.model = model
        self.relations: list[tuple[Use, Use, "isl.Map"]] = list(dependence_relations(model))

    @cached_property
    def analysis(self) -> list[Dependence]:
        return compute_dependences(self.model)

    def named(self, first: Use, second: Use, vector: tuple[str, ...]) -> Dependence | None:
        """The analysis' dependence for this access pair that holds ``vector``."""
        from loclab.deps.dependences import kind_of

        kind = kind_of(first[1], second[1])
        for dependence in self.analysis:
            if (dependence.source_statement is first[0] and dependence.sink_statement
                    is second[0] and dependence.kind == kind
                    and dependence.variable == first[1].variable.key
                    and vector in dependence.concrete):
                return dependence
        return None


class Checker:
    """Legality questions about one program (one state of a recipe)."""

    def __init__(self, program: Program, dependences: Dependences) -> None:
        self.program = program
        self.dependences = dependences
        self.schedule = Schedule(program)
        self.model = program.model

    # -- the relations, with the recipe's storage -------------------------------------------
    @cached_property
    def relations(self) -> list[tuple[Use, Use, "isl.UnionMap"]]:
        """Every dependence relation between copies (``S5u3``), storage taken into account."""
        return self._relations(None)

    def _relations(self, statements: set[int] | None) -> list[tuple[Use, Use, "isl.UnionMap"]]:
        """The relations between copies of the statements (by id; None: all)."""
        import islpy as isl

        out: list[tuple[Use, Use, isl.UnionMap]] = []
        sizes = " and ".join(f"{p} >= 0" for p in self.model.isl_parameters) or "true"
        never_negative = isl.Set(f"{self.model.header}{{ : {sizes} }}")
        for first, second, relation in self.dependences.relations:
            if statements is not None and not (id(first[0]) in statements
                                               and id(second[0]) in statements):
                continue
            # the emitted code takes sizes as never negative: so does its legality
            relation = self._private(first, second, relation.intersect_params(never_negative))
            if relation is None:
                continue
            copies = isl.UnionMap.from_map(relation) \
                .apply_domain(self.schedule.restrict_of([first[0]])) \
                .apply_range(self.schedule.restrict_of([second[0]]))
            if first[0] is second[0]:  # a statement's read before its own write is no order
                copies = copies.subtract(copies.domain().identity())
            copies = self._copied(first, second, copies)
            if not copies.is_empty():
                out.append((first, second, copies))
        return out

    def _private(self, first: Use, second: Use, relation: "isl.Map") -> "isl.Map | None":
        """Only pairs that share storage still depend on each other."""
        import islpy as isl

        if relation.is_empty():
            return None
        (s1, access), (s2, _) = first, second
        private = self.program.private_in(access.variable.key, s1.loops)
        if private is not self.program.private_in(access.variable.key, s2.loops):
            return None  # one of them uses storage of its own (privatize proved it apart)
        if private is None:
            return relation  # both use the variable itself
        if private.kind == "expand":
            depths = [loop.depth for loop in private.expand_by]
        else:
            depths = list(range(private.loop.depth + 1))
        same = " and ".join(f"x{k} = y{k}" for k in depths) or "true"
        shared = isl.Map(f"{self.model.header}{{ {self.model.point(s1, 'x')} -> "
                         f"{self.model.point(s2, 'y')} : {same} }}")
        relation = relation.intersect(shared)
        return None if relation.is_empty() else relation

    def _copied(self, first: Use, second: Use, copies: "isl.UnionMap") -> "isl.UnionMap":
        """A read inside a loop whose array was copied before it reads the copy: the loop's
        later writes no longer wait for it."""
        import islpy as isl

        for buffer in self.program.buffers:
            if buffer.kind != "copy" or buffer.variable.key != first[1].variable.key \
                    or first[1].write or not buffer.serves(first[1].text):
                continue
            inside = isl.UnionSet(f"{self.model.header}{{ }}")
            for unit in buffer.loop.units():
                placed = self.schedule.by_unit[id(unit)]
                if first[0] in unit.statements:
                    inside = inside.union(isl.UnionSet(
                        f"{self.model.header}{{ {self.schedule.instance(first[0], placed)} }}"))
            copies = copies.subtract_domain(inside)
        return copies

    # -- order ------------------------------------------------------------------------------
    @cached_property
    def lex_less(self) -> "isl.Map":
        import islpy as isl

        dims = ", ".join(f"t{k}" for k in range(self.schedule.length))
        return isl.Map.lex_lt(isl.Set(f"{self.model.header}{{ [{dims}] }}").get_space())

    def timed(self, copies: "isl.UnionMap") -> "isl.Map":
        """Pairs of instances as pairs of their times."""
        import islpy as isl

        time = self.schedule.time_of(copy_names(copies))
        pairs = copies.apply_domain(time).apply_range(time)
        if pairs.is_empty():
            return self.lex_less.subtract(self.lex_less)
        return isl.Map.from_union_map(pairs)

    def violation(self, nests: Sequence[LoopNode] = ()) -> Violation | None:
        """The first dependence the program's order breaks, or None when it is legal.
        ``nests``: only the dependences between statements inside those top-level nests (the
        ones a step changed: the order between two nests is their order in the function,
        which no step changes, and a step moves nothing outside its nest; 2mm's second
        product, checked step by step against the first's dependences too, spent 10 of the
        16 s of its recipe there)."""
        relations = self._relations({id(s) for nest in nests for unit in nest.units()
                                     for s in unit.statements}) if nests else self.relations
        for first, second, copies in relations:
            if not self.timed(copies).is_subset(self.lex_less):
                return self.explain(first, second, copies)
        return None

    def explain(self, first: Use, second: Use, copies: "isl.UnionMap") -> Violation:
        """Name a broken dependence: its vector before, and after in the new loops."""
        import islpy as isl

        time = self.schedule.time
        not_before = time.apply_range(isl.UnionMap.from_map(self.lex_less.reverse()
                                                            .union(_identity(self.lex_less))))
        broken = copies.intersect(not_before.apply_range(time.reverse()))
        original = broken.apply_domain(self.schedule.restrict.reverse()) \
            .apply_range(self.schedule.restrict.reverse())
        loops = common_loops(first[0], second[0])
        vectors = [v for v, _ in direction_vectors(isl.Map.from_union_map(original), loops)]
        vector = vectors[0] if vectors else ()
        dependence = self.dependences.named(first, second, vector)
        after, names, sizes = self._after(broken)
        return Violation(dependence, vector, after, names, sizes)

    def _after(self, broken: "isl.UnionMap"
               ) -> tuple[tuple[str, ...], tuple[str, ...], dict[str, int]]:
        """The sign pattern of a broken pair's times over the loops both copies share, and
        sizes at which such a pair exists."""
        import islpy as isl

        point_map = broken.sample()
        source_name = point_map.get_tuple_name(isl.dim_type.in_)
        sink_name = point_map.get_tuple_name(isl.dim_type.out)
        source = self._placed(source_name)
        sink = self._placed(sink_name)
        shared: list[LoopNode] = []
        for a, b in zip(source.path, sink.path):
            if a is not b:
                break
            shared.append(a)
        wrapped = point_map.wrap()
        point = wrapped.sample_point()
        n_in = point_map.dim(isl.dim_type.in_)
        n_out = point_map.dim(isl.dim_type.out)
        xs = [int(point.get_coordinate_val(isl.dim_type.set, k).to_python())
              for k in range(n_in)]
        ys = [int(point.get_coordinate_val(isl.dim_type.set, n_in + k).to_python())
              for k in range(n_out)]
        params = {k: int(point.get_coordinate_val(isl.dim_type.param, k).to_python())
                  for k in range(point_map.dim(isl.dim_type.param))}
        signs = []
        for level, node in enumerate(shared):
            a = evaluate(self.schedule.value(node, source.unit), xs, params, self.model)
            b = evaluate(self.schedule.value(node, sink.unit), ys, params, self.model)
            signs.append("<" if a < b else "=" if a == b else ">")
        sizes = {name: params[k] for k, name in enumerate(self.model.symbolic) if k in params}
        return tuple(signs), tuple(node.name for node in shared), sizes

    def _placed(self, instance_name: str) -> Placed:
        number = unit_number(instance_name)
        return self.schedule.placed[number]

    def within(self, node: LoopNode) -> "isl.UnionSet":
        """Every instance (of every copy) inside a loop of the tree."""
        import islpy as isl

        out = isl.UnionSet(f"{self.model.header}{{ }}")
        for unit in node.units():
            placed = self.schedule.by_unit[id(unit)]
            for statement in unit.statements:
                out = out.union(isl.UnionSet(
                    f"{self.model.header}{{ {self.schedule.instance(statement, placed)} }}"))
        return out

    def relations_within(self, node: LoopNode) -> list[tuple[Use, Use, "isl.UnionMap"]]:
        """The relations between copies that both lie inside a loop of the tree (every
        instance of a copy inside it is: its unit is), the others' maps dropped before any
        isl work on them: a step on one nest of a long function asks about that nest
        only, and 2mm's second product, register-tiled, asked about the first's sixteen
        copies too."""
        import islpy as isl

        inside = {self.schedule.by_unit[id(unit)].number for unit in node.units()}
        statements = {id(s) for unit in node.units() for s in unit.statements}
        out = []
        for first, second, copies in self._relations(statements):
            maps = [m for m in union_maps(copies)
                    if unit_number(m.get_tuple_name(isl.dim_type.in_)) in inside
                    and unit_number(m.get_tuple_name(isl.dim_type.out)) in inside]
            if maps:
                union = isl.UnionMap.from_map(maps[0])
                for more in maps[1:]:
                    union = union.union(isl.UnionMap.from_map(more))
                out.append((first, second, union))
        return out

    def same_execution(self, copies: "isl.UnionMap", node: LoopNode) -> "isl.UnionMap":
        """The pairs whose times agree on every level outside the loop (one execution)."""
        import islpy as isl

        level = self.level(node)
        length = self.schedule.length
        same = " and ".join(f"t{k} = u{k}" for k in range(level)) or "true"
        outer = isl.Map(f"{self.model.header}{{ [{', '.join(f't{k}' for k in range(length))}]"
                        f" -> [{', '.join(f'u{k}' for k in range(length))}] : {same} }}")
        # only the copies' own times: the whole program's composed with their inverse
        # pair every two statements (2 s a step on 3mm)
        time = self.schedule.time_of(copy_names(copies))
        return copies.intersect(time.apply_range(isl.UnionMap.from_map(outer))
                                .apply_range(time.reverse()))

    # -- parallelism ------------------------------------------------------------------------
    def carried(self, node: LoopNode) -> list[Carried]:
        """The dependences a loop of the new tree carries, per variable."""
        level = self.level(node)
        import islpy as isl

        dims = [f"t{k}" for k in range(self.schedule.length)]
        others = [f"u{k}" for k in range(self.schedule.length)]
        same = " and ".join(f"t{k} = u{k}" for k in range(level))
        carried_at = isl.Map(f"{self.model.header}{{ [{', '.join(dims)}] -> "
                             f"[{', '.join(others)}] : {same + ' and ' if same else ''}"
                             f"t{level} < u{level} }}")
        groups: dict[str, list[tuple[Use, Use, isl.UnionMap]]] = {}
        witnesses: dict[str, dict[str, int]] = {}
        inside = self.within(node)
        for first, second, copies in self.relations_within(node):
            copies = copies.intersect_domain(inside).intersect_range(inside)
            pairs = self.timed(copies).intersect(carried_at)
            if not pairs.is_empty():
                groups.setdefault(first[1].variable.key, []).append((first, second, copies))
                witnesses.setdefault(first[1].variable.key, self._sizes(pairs))
        out: list[Carried] = []
        for key, group in groups.items():
            variable = group[0][0][1].variable
            dependences = tuple(dict.fromkeys(
                d for first, second, copies in group
                for d in self.dependences_of(first, second)))
            statements = list({id(s): s for unit in node.units()
                               for s in unit.statements}.values())
            operator = reduction_operator(statements, key, [(first[1], second[1])
                                                            for first, second, _ in group])
            out.append(Carried(key, variable.name, dependences, operator,
                               not variable.is_array, witnesses[key]))
        return out

    def _sizes(self, pairs: "isl.Map") -> dict[str, int]:
        """Sizes at which a set of instance pairs is not empty."""
        import islpy as isl

        point = pairs.params().sample_point()
        return {name: int(point.get_coordinate_val(isl.dim_type.param, k).to_python())
                for k, name in enumerate(self.model.symbolic)}

    def dependences_of(self, first: Use, second: Use) -> list[Dependence]:
        """The analysis' dependences of one access pair (every direction vector)."""
        from loclab.deps.dependences import kind_of

        kind = kind_of(first[1], second[1])
        return [d for d in self.dependences.analysis
                if d.source_statement is first[0] and d.sink_statement is second[0]
                and d.kind == kind and d.variable == first[1].variable.key]

    def level(self, node: LoopNode) -> int:
        """The time dimension of a loop's value."""
        for placed in self.schedule.placed:
            if node in placed.path:
                return 2 * placed.path.index(node) + 1
        raise KeyError(node.name)


def copy_names(copies: "isl.UnionMap") -> set[str]:
    """The copies (``S5u3``) a relation between copies relates."""
    import islpy as isl

    return {m.get_tuple_name(kind) for m in union_maps(copies)
            for kind in (isl.dim_type.in_, isl.dim_type.out)}


def _identity(lex: "isl.Map") -> "isl.Map":
    import islpy as isl

    return isl.Map.identity(lex.get_space())


def evaluate(expression: str, xs: list[int], params: dict[int, int], model: Model) -> int:
    """The value of an isl expression of x0, x1, ... at a point."""
    import islpy as isl

    coords = ", ".join(f"x{k}" for k in range(len(xs)))
    fixed = " and ".join([f"x{k} = {v}" for k, v in enumerate(xs)]
                         + [f"{name} = {params[k]}" for k, name in
                            enumerate(model.isl_parameters) if k in params])
    value = isl.Set(f"{model.header}{{ [v] : exists ({coords} : v = {expression} and "
                    f"{fixed or 'true'}) }}")
    return int(value.sample_point().get_coordinate_val(isl.dim_type.set, 0).to_python())
