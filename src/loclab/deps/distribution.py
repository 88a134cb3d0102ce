"""Loop distribution: the dependence graph, its strongly connected components, and the plan.

For a loop with several statements or inner loops in its body, the graph has an edge from
the unit (statement or inner loop) holding a dependence's source to the unit holding its sink,
for every dependence not carried by an outer loop. Dependences that privatizing a variable
removes are left out: distribution then needs that variable expanded into an array (one
element per iteration) when it is used in more than one of the new loops. Units in a cycle
stay in one loop; the others are split off in graph order (the slides' theorem), ties broken
by program order. Each new loop is parallel iff it carries none of its own dependences, left
out ones included: a new loop that is parallel only because privatization removed some names
them (``parallel_after``: ``expand tmp`` for a variable the split expands anyway, ``privatize
t`` for one only this loop uses), so that nothing is called parallel without its step.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from loclab.deps.dependences import Dependence
from loclab.deps.remedies import Remedy
from loclab.nest.ir import Loop, Nest, Node, Statement


@dataclass(frozen=True)
class Piece:
    """One loop of the distributed nest."""

    loop: Loop
    statements: tuple[Statement, ...]
    parallel: bool
    parallel_loops: tuple[Loop, ...]  # this loop (if parallel) and parallel inner loops
    expand: tuple[str, ...]  # variables to expand into arrays indexed by the loop
    cycle: bool  # a dependence cycle keeps these units together
    parallel_after: tuple[Remedy, ...] = ()  # the steps `parallel` relies on
    copy_out: tuple[str, ...] = ()  # expanded variables whose last value is used later

    def to_json(self) -> dict[str, object]:
        return {"loop": self.loop.id, "statements": [s.id for s in self.statements],
                "parallel_loops": [l.var for l in self.parallel_loops],
                "parallel": self.parallel, "expand": list(self.expand),
                "cycle": self.cycle,
                "parallel_after": [r.label() for r in self.parallel_after],
                "copy_out": list(self.copy_out)}


def distribute(nest: Nest, dependences: list[Dependence],
               privatized: dict[int, dict[str, Remedy]]) -> list[Piece]:
    """Plans for every loop whose body has two units or more.

    ``privatized[id(loop)]`` maps the keys of the variables privatization removes for that
    loop to their remedy. Variables declared inside the loop body (C locals, NumPy
    allocations) are private already; they too need expanding when they end up in two of
    the new loops.
    """
    pieces: list[Piece] = []
    for loop in nest.loops:
        if len(loop.body) >= 2:
            local = {v.key for v in nest.variables if v.scope and v.scope[-1] is loop}
            pieces += _distribute_loop(loop, dependences, privatized.get(id(loop), {}), local)
    return pieces


def _distribute_loop(loop: Loop, dependences: list[Dependence],
                     expandable: dict[str, Remedy], local: set[str]) -> list[Piece]:
    import networkx as nx

    unit_of = {id(s): k for k, unit in enumerate(loop.body) for s in _statements(unit)}
    level = loop.depth
    graph = nx.DiGraph()
    graph.add_nodes_from(range(len(loop.body)))
    # control dependences: a condition's test runs before the statements it guards
    for statement in loop.statements():
        for guard in statement.guards:
            if guard.test is not None and id(guard.test) in unit_of:
                graph.add_edge(unit_of[id(guard.test)], unit_of[id(statement)])
    relevant: list[Dependence] = []
    removed: list[Dependence] = []
    for dependence in dependences:
        source, sink = id(dependence.source_statement), id(dependence.sink_statement)
        if source not in unit_of or sink not in unit_of:
            continue
        carried = dependence.carried_level
        if carried is not None and carried < level:
            continue  # an outer loop orders these instances already
        if dependence.variable in expandable and carried == level:
            removed.append(dependence)  # gone once the variable is expanded per iteration
            continue
        relevant.append(dependence)
        graph.add_edge(unit_of[source], unit_of[sink])
    condensed = nx.condensation(graph)
    order = nx.lexicographical_topological_sort(
        condensed, key=lambda c: min(condensed.nodes[c]["members"]))
    groups = [sorted(condensed.nodes[c]["members"]) for c in order]
    users = _users_per_group(loop, groups, set(expandable) | local)
    out: list[Piece] = []
    for members in groups:
        statements = tuple(s for k in members for s in _statements(loop.body[k]))
        inside = {id(s) for s in statements}
        own = [d for d in relevant
               if id(d.source_statement) in inside and id(d.sink_statement) in inside]
        parallel = not any(d.carried_level == level for d in own)
        inner = [l for k in members if isinstance(loop.body[k], Loop)
                 for l in _loops(loop.body[k])]
        parallel_inner = [l for l in inner if not any(
            d.carrier is l for d in dependences
            if id(d.source_statement) in inside and id(d.sink_statement) in inside)]
        expand = tuple(name for name, count in users.items()
                       if count > 1 and _uses(statements, name))
        expand += _split_conditions(statements, inside)
        cycle = len(members) > 1 or not parallel
        piece = Piece(loop, statements, parallel,
                      ((loop,) if parallel else ()) + tuple(parallel_inner), expand, cycle)
        out.append(_with_steps(piece, removed, expandable))
    return out


def _with_steps(piece: Piece, removed: list[Dependence],
                expandable: dict[str, Remedy]) -> Piece:
    """Name what a new loop's parallelism relies on (the variables whose left-out
    dependences it would carry) and which expanded variables need their last value."""
    inside = {id(s) for s in piece.statements}
    keys = dict.fromkeys(d.variable for d in removed
                         if id(d.source_statement) in inside and id(d.sink_statement) in inside)
    steps = tuple(_step(expandable[key], piece.expand) for key in keys) if piece.parallel \
        else ()
    copy_out = tuple(r.variable for r in expandable.values()
                     if r.live_out and r.variable in piece.expand)
    return replace(piece, parallel_after=steps, copy_out=copy_out)


def _step(remedy: Remedy, expand: tuple[str, ...]) -> Remedy:
    """A privatization is an expansion where the split expands the variable anyway."""
    return replace(remedy, kind="expand") if remedy.variable in expand else remedy


def _users_per_group(loop: Loop, groups: list[list[int]], keys: set[str]) -> dict[str, int]:
    """How many new loops use each expandable variable (by the name the user wrote), in
    the order the loop first uses them."""
    counts: dict[str, int] = {}
    used = dict.fromkeys(a.variable.key for s in loop.statements() for a in s.accesses)
    for key in (k for k in used if k in keys):
        users = [members for members in groups
                 if any(a.variable.key == key for k in members
                        for s in _statements(loop.body[k]) for a in s.accesses)]
        if users:
            name = next(a.variable.name for s in loop.statements() for a in s.accesses
                        if a.variable.key == key)
            counts[name] = max(counts.get(name, 0), len(users))
    return counts


def _split_conditions(statements: tuple[Statement, ...], inside: set[int]) -> tuple[str, ...]:
    """Conditions evaluated in another new loop: their outcomes must be kept per iteration."""
    found: dict[str, None] = {}
    for statement in statements:
        for guard in statement.guards:
            if guard.test is not None and id(guard.test) not in inside:
                found[f"the outcome of 'if {guard.text}' (line {guard.test.line})"] = None
    return tuple(found)


def _uses(statements: tuple[Statement, ...], name: str) -> bool:
    return any(a.variable.name == name for s in statements for a in s.accesses)


def _statements(node: Node) -> list[Statement]:
    return node.statements() if isinstance(node, Loop) else [node]


def _loops(loop: Loop) -> list[Loop]:
    out = [loop]
    for child in loop.body:
        if isinstance(child, Loop):
            out += _loops(child)
    return out
