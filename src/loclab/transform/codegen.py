"""From a new loop tree to loops: isl's AST generator, read into a small code tree.

isl scans every unit's instances in the order of their times and writes the loops and
conditions that do so, with bounds it has simplified (``for (c1 = c0; c1 <= min(N - 1,
c0 + 31); ...)``, no ``max(0, ...)`` where it proves one away). This module reads that
AST into :class:`For`, :class:`If` and :class:`Call` nodes whose expressions are
:class:`~loclab.nest.expr.Poly` (in the new loops' names and the function's sizes), so that
each emitter prints them in its own language. A ``Call`` runs one unit at the original
coordinates its arguments give (``A[i][j + 1]`` for the second copy of an unrolled ``j``).

Markers are extra points of the schedule, one per iteration of a loop (or one before it),
where code is emitted that is no statement of the function: a staged copy of an array's
slice. Their expressions (the slice's bounds) are isl functions of the loops around them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Union

from loclab.nest.expr import BoolOp, Compare, Condition, Poly
from loclab.transform.copy_groups import Follower, copy_groups
from loclab.transform.schedule import Placed, Schedule
from loclab.transform.tree import LoopNode

if TYPE_CHECKING:
    import islpy as isl


@dataclass(frozen=True)
class Select:
    """``then if condition else otherwise`` (isl's ``select``)."""

    condition: Condition
    then: "Value"
    otherwise: "Value"


Value = Union[Poly, Select]


@dataclass(eq=False)
class For:
    node: LoopNode
    var: str
    start: Value
    stop: Value  # exclusive
    step: int
    body: list["Code"]
    single: bool = False  # isl found exactly one iteration: emitted as an assignment


@dataclass(eq=False)
class If:
    condition: Condition
    then: list["Code"]
    orelse: list["Code"]


@dataclass(eq=False)
class Call:
    placed: Placed
    args: list[Value]  # the original coordinates, outermost loop first


@dataclass(eq=False)
class Mark:
    marker: "Marker"
    values: dict[str, Value]


Code = Union[For, If, Call, Mark]


@dataclass(eq=False)
class Marker:
    """A point in the schedule where extra code goes: ``domain`` and ``schedule`` as isl text
    over a space of its own (``name``), ``functions`` isl functions on it to evaluate there."""

    name: str
    domain: str
    schedule: str
    functions: dict[str, str] = field(default_factory=dict)
    payload: Any = None


class Codegen:
    """The code tree of a program's schedule (and markers)."""

    def __init__(self, schedule: Schedule, markers: list[Marker] | None = None) -> None:
        self.schedule = schedule
        self.model = schedule.model
        self.markers = {m.name: m for m in markers or []}
        self.values: dict[str, dict[str, "isl.AstExpr"]] = {}
        self.params = {name: original for original, name in
                       zip(self.model.symbolic, self.model.isl_parameters)}
        self.followers = copy_groups(schedule)

    def run(self) -> list[Code]:
        import islpy as isl

        schedule = self.schedule.codegen_schedule(
            {f.placed.number for group in self.followers.values() for f in group})
        for marker in self.markers.values():
            schedule = schedule.union(isl.UnionMap(marker.schedule).intersect_domain(
                isl.UnionSet(marker.domain)))
        sizes = " and ".join(f"{p} >= 0" for p in self.model.isl_parameters) or "true"
        context = isl.Set(f"{self.model.header}{{ : {sizes} }}")  # sizes are never negative
        build = isl.AstBuild.from_context(context)
        # "atomic": one loop per tree loop, its remainder cases as guards inside, rather than
        # a copy of the whole nest per case of the sizes modulo the unroll factors; but
        # "separate" for the level of an innermost fused loop: its statements' ranges differ
        # by their shifts, and guards in the innermost loop kept a time-tiled stencil from
        # vectorizing (jacobi-2d, 2 cores: 188 ms guarded, 142 ms separated); so for an
        # innermost loop whose range moves with a loop unrolled around it (a triangle's
        # ``j`` from ``i + 1`` with ``i`` unrolled and jammed: each copy's own start)
        dims = ", ".join(f"t{k}" for k in range(self.schedule.depth))
        separate = {2 * len(p.path) - 1 for p in self.schedule.placed
                    if p.path and (p.path[-1].fused or _ranges_move_with_copies(p.path))}
        atomic = " and ".join([f"0 <= x < {self.schedule.depth}"]
                              + [f"x != {level}" for level in separate])
        options = [f"[{dims}] -> atomic[x] : {atomic}"]
        options += [f"[{dims}] -> separate[x] : x = {level}" for level in separate]
        build = build.set_options(isl.UnionMap(f"{{ {'; '.join(options)} }}"))
        if self.markers:
            build, _ = build.set_at_each_domain(self._at_domain)
        tree = build.node_from_schedule_map(schedule)
        return self.block(tree, {})

    def _at_domain(self, node: "isl.AstNode", build: "isl.AstBuild") -> "isl.AstNode":
        import islpy as isl

        name = node.user_get_expr().op_get_arg(0).id_get_id().name
        marker = self.markers.get(name)
        if marker is not None and marker.functions:
            where = isl.PwMultiAff.from_map(isl.Map.from_union_map(
                build.get_schedule()).reverse())
            self.values[name] = {
                key: build.expr_from_pw_aff(isl.PwAff(text).pullback_pw_multi_aff(where))
                for key, text in marker.functions.items()}
        return node

    # -- nodes ------------------------------------------------------------------------------
    def block(self, node: "isl.AstNode", names: dict[str, str]) -> list[Code]:
        import islpy as isl

        kind = node.get_type()
        if kind == isl.ast_node_type.block:
            children = node.block_get_children()
            return [code for k in range(children.n_ast_node())
                    for code in self.block(children.get_at(k), names)]
        if kind == isl.ast_node_type.for_:
            return [self.loop(node, names)]
        if kind == isl.ast_node_type.if_:
            condition = self.condition(node.if_get_cond(), names)
            then = self.block(node.if_get_then_node(), names)
            orelse = self.block(node.if_get_else_node(), names) if node.if_has_else_node() \
                else []
            known = truth(condition)
            if known is not None:
                return then if known else orelse
            return [If(condition, then, orelse)]
        if kind == isl.ast_node_type.user:
            return self.call(node.user_get_expr(), names)
        if kind == isl.ast_node_type.mark:
            return self.block(node.mark_get_node(), names)
        raise AssertionError(f"unexpected isl AST node {kind}")

    def loop(self, node: "isl.AstNode", names: dict[str, str]) -> For:
        iterator = node.for_get_iterator().id_get_id().name
        level = int(iterator[1:])
        start = self.value(node.for_get_init(), names)
        loop_node = self._tree_loop(node.for_get_body(), level)
        step = int(node.for_get_inc().int_get_val().to_python())
        named = dict(names)
        named[iterator] = loop_node.name
        body = self.block(node.for_get_body(), named)
        stop = self._stop(node.for_get_cond(), iterator, named)
        return For(loop_node, loop_node.name, start, stop, step, body,
                   single=bool(node.for_is_degenerate()))

    def _tree_loop(self, body: "isl.AstNode", level: int) -> LoopNode:
        """The tree loop a generated loop at time dimension ``level`` runs: the one at that
        depth around the first unit (or marker) inside it."""
        import islpy as isl

        found: list[str] = []

        def first_user(node: "isl.AstNode") -> bool:
            if not found and node.get_type() == isl.ast_node_type.user:
                found.append(node.user_get_expr().op_get_arg(0).id_get_id().name)
            return not found

        body.foreach_descendant_top_down(first_user)
        name = found[0]
        if name in self.markers:
            path = self.markers[name].payload.path
        else:
            path = self.schedule.placed[int(name[1:])].path
        return path[(level - 1) // 2]

    def _stop(self, condition: "isl.AstExpr", iterator: str, names: dict[str, str]) -> Value:
        import islpy as isl

        op = condition.op_get_type()
        bound = self.value(condition.op_get_arg(1), names)
        left = condition.op_get_arg(0)
        assert left.get_type() == isl.ast_expr_type.id and \
            left.id_get_id().name == iterator, "isl loop conditions compare the iterator"
        if op == isl.ast_expr_op_type.lt:
            return bound
        assert op == isl.ast_expr_op_type.le
        return plus(bound, 1)

    def call(self, expr: "isl.AstExpr", names: dict[str, str]) -> list[Code]:
        """The unit's call (or the marker's code), and its followers' (``copy_groups``)."""
        name = expr.op_get_arg(0).id_get_id().name
        args = [self.value(expr.op_get_arg(k), names) for k in range(1, expr.op_get_n_arg())]
        if name in self.markers:
            marker = self.markers[name]
            values = {key: self.value(e, names)
                      for key, e in self.values.get(name, {}).items()}
            return [Mark(marker, values)]
        number = int(name[1:])
        return _merged([Call(self.schedule.placed[number], args),
                        *(self._follower(f, args) for f in self.followers.get(number, []))])

    def _follower(self, follower: Follower, args: list[Value]) -> Code:
        """A copy's call at its leader's coordinates shifted, under its guard (one ``If`` a
        condition, as isl writes them)."""
        code: Code = Call(follower.placed, [plus(value, offset) if offset else value
                                            for value, offset in zip(args, follower.offsets)])
        if follower.guard is None:
            return code
        pieces = [self._conditions_of(basic, args) for basic in follower.guard.get_basic_sets()]
        if len(pieces) > 1:
            return If(joined("or", [joined("and", piece) for piece in pieces]), [code], [])
        for condition in reversed(pieces[0]):
            known = truth(condition)
            if known is None:
                code = If(condition, [code], [])
            elif not known:
                code = If(condition, [], [])
        return code

    def _conditions_of(self, basic: "isl.BasicSet", args: list[Value]) -> list[Condition]:
        """The constraints of an isl set without divisions over a unit's coordinates
        (``args``, and the sizes), each as a comparison of their values: the terms with a
        positive coefficient on the left (``M >= i + 2``)."""
        import islpy as isl

        t = isl.ast_expr_op_type
        names = [basic.get_dim_name(isl.dim_type.param, k)
                 for k in range(basic.dim(isl.dim_type.param))]
        out = []
        for constraint in basic.get_constraints():
            terms = [(_integer(constraint.get_coefficient_val(isl.dim_type.param, k)),
                      Poly.symbol(self.params.get(name, name))) for k, name in enumerate(names)]
            terms += [(_integer(constraint.get_coefficient_val(isl.dim_type.set, k)), arg)
                      for k, arg in enumerate(args)]
            terms.append((_integer(constraint.get_constant_val()), Poly.const(1)))
            sides: list[Value] = [Poly.const(0), Poly.const(0)]
            for coefficient, value in terms:
                if coefficient:
                    side = 0 if coefficient > 0 else 1
                    sides[side] = self._apply(t.add, [sides[side], self._apply(
                        t.mul, [Poly.const(abs(coefficient)), value])])
            out.append(comparison("==" if constraint.is_equality() else ">=", *sides))
        return out

    # -- expressions ------------------------------------------------------------------------
    def value(self, expr: "isl.AstExpr", names: dict[str, str]) -> Value:
        import islpy as isl

        kind = expr.get_type()
        if kind == isl.ast_expr_type.int:
            return Poly.const(int(expr.int_get_val().to_python()))
        if kind == isl.ast_expr_type.id:
            name = expr.id_get_id().name
            if name in names:
                return Poly.symbol(names[name])
            return Poly.symbol(self.params.get(name, name))
        op = expr.op_get_type()
        t = isl.ast_expr_op_type
        args = [expr.op_get_arg(k) for k in range(expr.op_get_n_arg())]
        if op in (t.select, t.cond):
            return Select(self.condition(args[0], names), self.value(args[1], names),
                          self.value(args[2], names))
        values = [self.value(a, names) for a in args]
        for k, v in enumerate(values):  # arithmetic on a select: on each of its arms
            if isinstance(v, Select):
                return Select(v.condition, self._apply(op, values[:k] + [v.then] + values[k + 1:]),
                              self._apply(op, values[:k] + [v.otherwise] + values[k + 1:]))
        return self._apply(op, values)

    def _apply(self, op: Any, values: list[Value]) -> Value:
        """An isl operation on values (a select among them: on each arm)."""
        import islpy as isl

        t = isl.ast_expr_op_type
        for k, v in enumerate(values):
            if isinstance(v, Select):
                return Select(v.condition, self._apply(op, values[:k] + [v.then] + values[k + 1:]),
                              self._apply(op, values[:k] + [v.otherwise] + values[k + 1:]))
        polys = [v for v in values if isinstance(v, Poly)]
        if op == t.add:
            return polys[0] + polys[1]
        if op == t.sub:
            return polys[0] - polys[1]
        if op == t.mul:
            return polys[0] * polys[1]
        if op == t.minus:
            return -polys[0]
        if op in (t.min, t.max):
            return Poly.minmax("min" if op == t.min else "max", polys)
        divisor = polys[1].constant_value()
        assert divisor is not None and divisor > 0, "isl divides by positive constants"
        if op in (t.fdiv_q, t.pdiv_q, t.div):
            return polys[0].floordiv(divisor)
        if op in (t.pdiv_r, t.zdiv_r):
            return polys[0].mod(divisor)
        raise AssertionError(f"unexpected isl operation {op}")

    def condition(self, expr: "isl.AstExpr", names: dict[str, str]) -> Condition:
        import islpy as isl

        if expr.get_type() == isl.ast_expr_type.int:  # isl writes a condition that holds as 1
            value = int(expr.int_get_val().to_python())
            return TRUE if value else FALSE
        t = isl.ast_expr_op_type
        op = expr.op_get_type()
        args = [expr.op_get_arg(k) for k in range(expr.op_get_n_arg())]
        if op in (t.and_, t.and_then, t.or_, t.or_else):
            return joined("and" if op in (t.and_, t.and_then) else "or",
                          [self.condition(a, names) for a in args])
        compare = {t.lt: "<", t.le: "<=", t.gt: ">", t.ge: ">=", t.eq: "=="}[op]
        left, right = (self.value(a, names) for a in args)
        return comparison(compare, left, right)


def _merged(codes: list[Code]) -> list[Code]:
    """Adjacent ``If``s of one condition (and no ``else``) as one."""
    out: list[Code] = []
    for code in codes:
        last = out[-1] if out else None
        if isinstance(code, If) and isinstance(last, If) and not code.orelse \
                and not last.orelse and code.condition == last.condition:
            out[-1] = If(code.condition, _merged(last.then + code.then), [])
        else:
            out.append(code)
    return out


def _integer(value: "isl.Val") -> int:
    return int(value.to_python())


def plus(value: Value, constant: int) -> Value:
    """``value + constant``, with the constant moved inside ``min``/``max`` (``min(N - 1,
    ii + 31) + 1`` is ``min(N, ii + 32)``) and into both arms of a select."""
    if isinstance(value, Select):
        return Select(value.condition, plus(value.then, constant),
                      plus(value.otherwise, constant))
    from loclab.nest.expr import MinMax

    if len(value.terms) == 1 and len(value.terms[0][0]) == 1 and value.terms[0][1] == 1:
        atom = value.terms[0][0][0]
        if isinstance(atom, MinMax):
            return Poly.minmax(atom.function, (a + Poly.const(constant) for a in atom.args))
    return value + Poly.const(constant)


def parameter_value(schedule: Schedule, function: str) -> Value:
    """An isl function of the sizes alone (``[p0] -> { [(p0 - 1)] }``) as an expression."""
    import islpy as isl

    codegen = Codegen(schedule)
    build = isl.AstBuild.from_context(isl.Set(f"{schedule.model.header}{{ : }}"))
    return codegen.value(build.expr_from_pw_aff(isl.PwAff(function)), {})


TRUE = Compare("==", Poly.const(0), Poly.const(0))
FALSE = Compare("!=", Poly.const(0), Poly.const(0))


def truth(condition: Condition) -> bool | None:
    """The value of a condition that holds or fails whatever the variables, else None."""
    if isinstance(condition, Compare):
        a, b = condition.left.constant_value(), condition.right.constant_value()
        if a is None or b is None:
            return None
        return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b,
                "!=": a != b}[condition.op]
    return None


def joined(op: str, parts: list[Condition]) -> Condition:
    """``and``/``or`` of conditions, the constant ones folded away."""
    kept: list[Condition] = []
    for part in parts:
        known = truth(part)
        if known is None:
            kept.append(part)
        elif known == (op == "or"):
            return TRUE if known else FALSE
    if not kept:
        return TRUE if op == "and" else FALSE
    return kept[0] if len(kept) == 1 else BoolOp(op, tuple(kept))


def comparison(op: str, left: Value, right: Value) -> Condition:
    """``left op right``; a select on either side compares each of its arms."""
    for side, value in (("left", left), ("right", right)):
        if isinstance(value, Select):
            arms = [(value.condition, value.then),
                    (BoolOp("not", (value.condition,)), value.otherwise)]
            return joined("or", [joined("and", [guard, comparison(
                op, arm if side == "left" else left, arm if side == "right" else right)])
                for guard, arm in arms])
    assert isinstance(left, Poly) and isinstance(right, Poly)
    return Compare(op, left, right)


def _ranges_move_with_copies(path: list[LoopNode]) -> bool:
    """Whether the innermost loop's bounds name a loop whose copies were jammed around it."""
    inner = path[-1].origin
    jammed = {node.origin.var for node in path[:-1] if node.copies}
    bounds = [b for b in (inner.start, inner.stop) if b is not None]
    return bool(jammed) and any(b.symbols() & jammed for b in bounds)
