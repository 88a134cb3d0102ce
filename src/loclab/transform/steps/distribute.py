"""``distribute(i)``: one loop per strongly connected component of the dependence graph.

The graph's nodes are what the loop's body holds (statements, inner loops, blocks kept as
written); an edge runs from the one holding a dependence's source to the one holding its
sink, for every dependence within one iteration of the loops outside ``i`` (those outside
order the instances already). Dependences on a variable that privatization removes (every
read sees a write of the same iteration) are left out, as the slides do; such a variable used
in two of the new loops is expanded into an array with an element per iteration
(``acc[i]``). Components stay whole, in an order that keeps every edge forward (the slides'
theorem), ties in program order.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from loclab.deps.dependences import union_maps
from loclab.nest.ir import Loop, Variable
from loclab.transform.recipe import Step
from loclab.transform.schedule import unit_number
from loclab.transform.steps import (Applied, Context, expect_args, find_loop, no_keywords,
                                    replace_node, require_plain)
from loclab.transform.tree import LoopNode, Node, Private, Program, units_of

if TYPE_CHECKING:
    import islpy as isl

NAMES = ("distribute",)


def apply(program: Program, step: Step, context: Context) -> Applied:
    import networkx as nx

    expect_args(step, 1, 1, "distribute(loop)")
    no_keywords(step)
    new = program.clone()
    node = find_loop(new, step.args[0], step)
    require_plain(new, [node], step)
    if node.tile:
        raise step.error(f"{node.label} runs over tiles: distribute the loop over "
                         f"{node.origin.var} inside it")
    if len(node.body) < 2:
        raise step.error(f"the body of {node.label} holds one statement or loop: nothing to "
                         "distribute")
    expandable = _expandable(new, node, context)
    saved = dict(new.private)
    for key in expandable:  # their dependences between iterations vanish with the expansion
        if new.private_in(key, node.origin.enclosing) is None:
            new.with_private(Private(_variable(new, key), node.origin, "privatize"))
    graph = _graph(new, node, context)
    condensed = nx.condensation(graph)
    order = nx.lexicographical_topological_sort(
        condensed, key=lambda c: min(condensed.nodes[c]["members"]))
    groups = [sorted(condensed.nodes[c]["members"]) for c in order]
    pieces = [replace(node, body=[node.body[k] for k in members]) for members in groups]
    replace_node(new, node, pieces)
    new.private = saved
    expanded = []
    for key, loops in expandable.items():
        users = [p for p in pieces if any(a.variable.key == key for u in units_of(p.body)
                                          for s in u.statements for a in s.accesses)]
        if len(users) > 1:
            variable = _variable(new, key)
            new.with_private(Private(variable, loops[-1], "expand",
                                     _as_nested(new, users[0], loops),
                                     new.expansion_name(variable, loops[0])))
            expanded.append(variable.name)
    context.require_order(new, step, pieces)
    shape = " | ".join(", ".join(_label(c) for c in p.body) for p in pieces)
    return Applied(new, f"{len(pieces)} loops ({shape}), every dependence forward"
                        + (f"; expanded {', '.join(expanded)}" if expanded else ""))


def _label(node: Node) -> str:
    return node.name if isinstance(node, LoopNode) else f"line {node.line}"


def _expandable(program: Program, node: LoopNode,
                context: Context) -> dict[str, tuple[Loop, ...]]:
    """Scalars whose dependences between iterations of the loop storage per iteration
    removes, with the loops an expansion would index them by: privatized ones (from the loop
    down to the one they are private to), those declared in its body, and those the analysis
    finds privatizable (every read sees a write of the same iteration, none needed after)."""
    remedies = context.remedies
    found: dict[str, tuple[Loop, ...]] = {}
    for unit in node.units():
        for statement in unit.statements:
            for access in statement.accesses:
                variable = access.variable
                key = variable.key
                if key in found or variable.is_array or variable.is_argument:
                    continue
                near = program.privates_near(key, node.origin)  # (not another nest's)
                private = near[0] if near else None
                if private is not None and private.kind != "expand" \
                        and node.origin in private.loop.enclosing:
                    found[key] = _between(node.origin, private.loop)
                elif private is None and variable.scope and node.origin in variable.scope:
                    found[key] = _between(node.origin, variable.scope[-1])
                elif private is None and remedies.privatizable(node.origin, key) \
                        and not remedies.live_out(node.origin, key):
                    found[key] = (node.origin,)
    return found


def _as_nested(program: Program, piece: LoopNode, loops: tuple[Loop, ...]
               ) -> tuple[Loop, ...]:
    """The expanding loops in the order the new tree nests them, outermost first: the
    array's last dimension is then the innermost loop's, which its elements follow in
    memory. Back substitution's ``total``, privatized in the band ``r, i`` whose ``r`` was
    sunk inside ``i`` into vector lanes, became ``total[r, i]``: a stride of ``N`` elements
    along the vector loop (``total[i, r]``: 3.2x faster on 2 cores). Which element an
    iteration uses does not change, only where it lies."""
    unit = next(piece.units())
    path = program.path(unit)
    depth = {id(node.origin): k for k, node in reversed(list(enumerate(path)))
             if node.tile == 0}
    return tuple(sorted(loops, key=lambda loop: depth.get(id(loop), loop.depth)))


def _between(outer: Loop, inner: Loop) -> tuple[Loop, ...]:
    """The loops from ``outer`` down to ``inner``."""
    return tuple(l for l in inner.enclosing if l.depth >= outer.depth)


def _variable(program: Program, key: str) -> Variable:
    return next(v for v in program.nest.variables if v.key == key)


def _graph(program: Program, node: LoopNode, context: Context):
    """Edges between the body's children for dependences within one execution of the loop
    (between its iterations and within one alike)."""
    import islpy as isl
    import networkx as nx

    checker = context.checker(program)
    child_of: dict[int, int] = {}
    for index, child in enumerate(node.body):
        for unit in ([child] if not isinstance(child, LoopNode) else list(child.units())):
            child_of[checker.schedule.by_unit[id(unit)].number] = index
    graph = nx.DiGraph()
    graph.add_nodes_from(range(len(node.body)))
    for _, _, copies in checker.relations_within(node):
        for pair in union_maps(checker.same_execution(copies, node)):
            source = unit_number(pair.get_tuple_name(isl.dim_type.in_))
            sink = unit_number(pair.get_tuple_name(isl.dim_type.out))
            if source in child_of and sink in child_of:
                graph.add_edge(child_of[source], child_of[sink])
    return graph
