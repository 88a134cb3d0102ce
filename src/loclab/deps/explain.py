"""The text of ``loclab analyze``: the slides' notation, one section per question.

For each dependence: the equations from equal subscripts (source variables suffixed 1, sink
variables 2), the relation they imply between the iterations, and the direction vector, e.g.
``S1->S1 RAW on A: (j1,i1) = (j2-1,i2) => i1 = i2 & j1 < j2 => [=,<]``. Then the direction
matrix, each loop's verdict with its reason, the legal loop orders, the distribution plan and
what would make each sequential loop parallel.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from loclab.nest.ir import Access, Loop, Node

if TYPE_CHECKING:
    from loclab.deps.analysis import Analysis, LoopReport
    from loclab.deps.dependences import Dependence
    from loclab.deps.interchange import Interchange


def explain(analysis: "Analysis") -> str:
    nest = analysis.nest
    lines = [f"{nest.name}  ({nest.filename}:{nest.line}, {nest.language})"]
    if analysis.params:
        fixed = ", ".join(f"{k}={v}" for k, v in analysis.params.items())
        lines.append(f"  sizes fixed: {fixed} (answers hold for exactly these sizes)")
    lines += _structure(analysis)
    lines += _section("Dependences (memory-based; source -> sink)",
                      [_dependence_line(d) for d in analysis.dependences] or ["none"])
    lines += _matrix(analysis)
    lines += _section("Loops", [line for r in analysis.loops for line in _verdict(r)]
                      or ["no loops"])
    if analysis.interchange_options:
        lines += _section("Loop orders of perfect nests (interchange theorem)",
                          [_order_line(o) for o in analysis.interchange_options])
    if analysis.pieces:
        lines += _section("Loop distribution (statements in a dependence cycle stay "
                          "together)", _distribution_lines(analysis))
    if analysis.notes:
        lines += _section("Treated conservatively / notes", analysis.notes)
    return "\n".join(lines)


def _section(title: str, body: list[str]) -> list[str]:
    return ["", title] + [f"  {line}" for line in body]


def _structure(analysis: "Analysis") -> list[str]:
    out: list[str] = []
    for node in analysis.nest.body:
        out += _node_lines(node, 1)
    return _section("Loops and statements", [line[2:] for line in out])


def _node_lines(node: Node, depth: int) -> list[str]:
    pad = "  " * depth
    if isinstance(node, Loop):
        lines = [f"{pad}{node.id:<4} line {node.line:<4} {node.header}"]
        for child in node.body:
            lines += _node_lines(child, depth + 1)
        return lines
    guard = ""
    if node.guards:
        guard = "   [if " + " and ".join(("not " if g.negated else "") + g.text
                                         for g in node.guards) + "]"
    return [f"{pad}{node.id:<4} line {node.line:<4} {node.source}{guard}"]


def _vector(direction: tuple[str, ...]) -> str:
    return "[" + ",".join(direction) + "]"


def _dependence_line(d: "Dependence") -> str:
    head = f"{d.id} {d.source}->{d.sink} {d.kind} on {d.array}"
    equations = _equations(d)
    relation = _relation(d)
    steps = [s for s in (equations, relation or "no common loop") if s]
    vector = _vector(d.direction)
    carried = f"carried by {d.carrier.var}" if d.carrier else "loop-independent"
    distance = ""
    if d.loops and all(x is not None for x in d.distance):
        distance = f", distance ({','.join(str(x) for x in d.distance)})"
    maybe = "" if d.exact else "  (possible: non-affine access or condition)"
    chain = " => ".join(steps + [vector])
    return f"{head}: {chain}  {carried}{distance}{maybe}"


def _access_subscripts(access: Access, suffix: str, loops: set[str]) -> str | None:
    """``(j1,i1)`` for ``A[j][i]`` at the source; None when a subscript is unknown."""
    fresh = len(access.variable.scope)
    subscripts = access.subscripts[fresh:]
    if not subscripts:
        return None
    if any(s is None for s in subscripts):
        return access.text

    def rename(name: str) -> str:
        return f"{name}{suffix}" if name in loops else name

    return "(" + ",".join(s.render(rename).replace(" ", "") for s in subscripts
                          if s is not None) + ")"


def _equations(d: "Dependence") -> str:
    loops1 = {l.var for l in d.source_statement.loops}
    loops2 = {l.var for l in d.sink_statement.loops}
    left = _access_subscripts(d.source_access, "1", loops1)
    right = _access_subscripts(d.sink_access, "2", loops2)
    if left is None or right is None:
        return "same scalar" if not d.source_access.variable.is_array else "same element"
    return f"{left} = {right}"


def _relation(d: "Dependence") -> str:
    parts: list[str] = []
    for loop, symbol in zip(d.loops, d.direction):
        v = loop.var
        if symbol == "*":
            parts.append(f"{v}1 ? {v}2")
            continue
        if symbol == "=":
            parts.append(f"{v}1 = {v}2")
            continue
        earlier = symbol == "<"
        up = loop.step > 0
        parts.append(f"{v}1 {'<' if earlier == up else '>'} {v}2")
    return " & ".join(parts)


def _matrix(analysis: "Analysis") -> list[str]:
    if not analysis.dependences:
        return []
    rows = [f"{d.source}->{d.sink:<4} {_vector(d.direction):<12} {d.kind} {d.array}"
            + (f"  over ({','.join(l.var for l in d.loops)})" if d.loops else "")
            for d in analysis.dependences]
    return _section("Direction matrix", rows)


def _verdict(report: "LoopReport") -> list[str]:
    head = f"{report.id} {report.var} (line {report.line}): "
    if report.parallel:
        return [head + "PARALLEL - carries no dependence"]
    carried = ", ".join(f"{d.id} {d.kind} {d.array} {_vector(d.direction)}"
                        for d in report.carried)
    lines = [head + f"sequential as written - carries {carried}"]
    if report.unresolved:
        blocking = ", ".join(f"{d.id} {d.kind} on {d.array}" for d in report.unresolved)
        lines.append(f"    nothing removes {blocking}: stays sequential"
                     + (" (a true dependence)" if all(d.kind == "RAW"
                                                     for d in report.unresolved) else ""))
        helpful = [r.label() for r in report.remedies]
        if helpful:
            lines.append(f"    (would still help: {'; '.join(helpful)})")
    else:
        lines.append(f"    parallel after: {'; '.join(report.parallel_after)}")
    return lines


def _order_line(option: "Interchange") -> str:
    order = " ".join(l.var for l in option.order)
    if option.legal:
        parallel = ", ".join(l.var for l in option.parallel) or "none"
        return f"({order})  legal    parallel loops: {parallel}"
    return f"({order})  ILLEGAL  {option.blocking} would get '>' first"


def _distribution_lines(analysis: "Analysis") -> list[str]:
    out: list[str] = []
    current = None
    for piece in analysis.pieces:
        if piece.loop is not current:
            current = piece.loop
            count = sum(1 for p in analysis.pieces if p.loop is piece.loop)
            out.append(f"{piece.loop.id} {piece.loop.var}: "
                       + (f"{count} loops" if count > 1 else "cannot be split"))
        kind = "parallel" if piece.parallel else "sequential"
        expand = f"; expand {', '.join(piece.expand)} into arrays" if piece.expand else ""
        inner = ", ".join(l.var for l in piece.parallel_loops) or "none"
        out.append(f"  {{{' '.join(s.id for s in piece.statements)}}}  {kind}"
                   f"{' (cycle)' if piece.cycle else ''}; parallel loops: {inner}{expand}")
    return out
