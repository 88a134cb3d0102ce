"""The text of ``loclab analyze``: the slides' notation, one section per question.

For each dependence: the equations from equal subscripts (source variables suffixed 1, sink
variables 2), the relation they imply between the iterations, and the direction vector, e.g.
``S1->S1 RAW on A: (j1,i1) = (j2-1,i2) => i1 = i2 & j1 < j2 => [=,<]``. Then the direction
matrix, each loop's verdict with its reason, the legal loop orders, the distribution plan and
what would make each sequential loop parallel.

Dependences on scalars are summarized, one block per scalar (how many, which loops carry
them, what removes them), and counted per scalar in the loop verdicts: a Python scalar is one
location for the whole function, so its dependences outnumber those on arrays (32 against
none in matmul) and would bury them. ``--json`` keeps every one. Lines fit 80 columns where
they can, broken between steps with indented continuations.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from loclab.nest.ir import Access, Loop, Node

if TYPE_CHECKING:
    from loclab.deps.analysis import Analysis, LoopReport
    from loclab.deps.dependences import Dependence
    from loclab.deps.distribution import Piece
    from loclab.deps.idioms import Idiom
    from loclab.deps.interchange import Interchange
    from loclab.deps.remedies import Remedy


WIDTH = 80  # a terminal's width: continuation lines instead of the terminal's breaks
_SCALARS_TITLE = "Dependences on scalars (a summary per scalar; --json lists each one)"


def explain(analysis: "Analysis") -> str:
    nest = analysis.nest
    lines = [f"{nest.name}  ({nest.filename}:{nest.line}, {nest.language})"]
    if analysis.params:
        fixed = ", ".join(f"{k}={v}" for k, v in analysis.params.items())
        lines.append(f"  sizes fixed: {fixed} (answers hold for exactly these sizes)")
    lines += _structure(analysis)
    on_arrays = [d for d in analysis.dependences if not d.on_scalar]
    on_scalars = [d for d in analysis.dependences if d.on_scalar]
    lines += _section("Dependences (memory-based; source -> sink)",
                      [line for d in on_arrays for line in _dependence_lines(d)]
                      or [f"none{' on arrays' if on_scalars else ''}"])
    if on_scalars:
        lines += _section(_SCALARS_TITLE, _scalar_lines(analysis, on_scalars))
    lines += _matrix(on_arrays)
    lines += _aliasing(analysis)
    lines += _section("Loops", [line for r in analysis.loops
                                 for line in _verdict(r, analysis.idioms)] or ["no loops"])
    if analysis.idioms:
        lines += _section("Idioms (parallel forms a dependence test misses; not applied "
                          "yet)",
                          [line for idiom in analysis.idioms
                           for line in _wrap(f"{idiom.loop.id} {idiom.loop.var}: "
                                             f"{idiom.text()}", 2, 4)])
    if analysis.counting_down is not None:
        down = [loop for loop in analysis.nest.loops if not loop.signed]
        sizes = _names([str(loop.stride) for loop in down])
        lines += _section(f"Loops if {sizes} < 0 (they count down; the rest assumes > 0)",
                          [line for r in analysis.counting_down.loops
                           for line in _verdict(r)])
    if analysis.interchange_options:
        lines += _section("Loop orders of perfect nests (interchange theorem)",
                          [line for o in analysis.interchange_options
                           for line in _order_lines(o)]
                          + [line for cut in analysis.cut_bands
                             for line in _wrap(cut.text(), 2, 4)])
    if analysis.pieces:
        lines += _section("Loop distribution (statements in a dependence cycle stay "
                          "together)", _distribution_lines(analysis))
    if analysis.notes:
        lines += _section("Treated conservatively / notes",
                          [line for note in analysis.notes for line in _wrap(note, 2, 4)])
    return "\n".join(lines)


def _wrap(text: str, indent: int, hang: int) -> list[str]:
    """Words of ``text`` in lines that fit WIDTH at ``indent`` columns, continued ``hang``
    columns further in."""
    return _fill(text.split(" "), indent, hang)


def _fill(chunks: list[str], indent: int, hang: int, sep: str = " ") -> list[str]:
    """``chunks`` joined by ``sep``, broken between chunks into lines that fit WIDTH at
    ``indent`` columns (a chunk wider than a line alone between its words); continuation
    lines start ``hang`` columns in."""
    lines = [chunks[0]]
    for chunk in chunks[1:]:
        room = WIDTH - indent - (hang if len(lines) > 1 else 0)
        if len(lines[-1]) + len(sep) + len(chunk) <= room:
            lines[-1] += sep + chunk
        elif " " in chunk.strip() and len(chunk) > WIDTH - indent - hang:
            lines += _fill(chunk.split(" "), indent + hang, 0)  # too long: break its words
        else:
            lines.append(chunk.lstrip())
    return [lines[0].rstrip()] + [" " * hang + line.rstrip() for line in lines[1:]]


def _section(title: str, body: list[str]) -> list[str]:
    return ["", title] + [f"  {line}" for line in body]


def _structure(analysis: "Analysis") -> list[str]:
    out: list[str] = []
    for node in analysis.nest.body:
        out += _node_lines(node, 1)
    return _section("Loops and statements", [line[2:] for line in out] or ["none"])


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


def _dependence_lines(d: "Dependence") -> list[str]:
    """``D1 S1->S1 RAW on A: (j1,i1) = (j2-1,i2) => i1 = i2 & j1 < j2 => [=,<]  carried by j,
    distance (0,1)``, broken between its steps where it would pass WIDTH."""
    head = f"{d.id} {d.source}->{d.sink} {d.kind} on {d.array}"
    steps = [_equations(d), _relation(d) or "no common loop", _vector(d.direction)]
    carried = f"carried by {d.carrier.var}" if d.carrier else "loop-independent"
    distance = ""
    if d.loops and all(x is not None for x in d.distance):
        distance = f", distance ({','.join(str(x) for x in d.distance)})"
    chunks = [f"{head}: {steps[0]}"] + [f"=> {step}" for step in steps[1:]]
    chunks.append(f" {carried}{distance}")
    if not d.exact:
        chunks.append(" (possible: a non-affine access or condition, or a step that is a "
                      "size)")
    return _fill(chunks, 2, 4)


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


def _scalar_lines(analysis: "Analysis", on_scalars: list["Dependence"]) -> list[str]:
    """Per scalar: how many dependences, which loops carry them and what removes them."""
    groups: dict[str, list["Dependence"]] = {}
    for d in on_scalars:
        groups.setdefault(d.variable, []).append(d)
    reports = {id(r.loop): r for r in analysis.loops}
    out: list[str] = []
    for key, group in groups.items():
        count = f"{len(group)} dependence{'s' if len(group) > 1 else ''}"
        out.append(f"{group[0].array}: {count} ({_id_range(group)})")
        rows = [("loop-independent", [d for d in group if d.carrier is None], "")]
        for loop in dict.fromkeys(d.carrier for d in group if d.carrier is not None):
            remedy = reports[id(loop)].remedy_for(key)
            rows.append((f"carried by {loop.var}", [d for d in group if d.carrier is loop],
                         f"-> {remedy.label()}" if remedy else "-> nothing removes them"))
        out += _table([(title, members, remedy) for title, members, remedy in rows if members])
    return out


def _table(rows: list[tuple[str, list["Dependence"], str]]) -> list[str]:
    """One scalar's rows in columns: where, how many, kinds, vectors, remedy."""
    cells = []
    for title, members, remedy in rows:
        kinds = "/".join(k for k in ("RAW", "WAR", "WAW") if any(d.kind == k for d in members))
        vectors = " ".join(dict.fromkeys(_vector(d.direction) for d in members))
        cells.append((title, str(len(members)), kinds, vectors, remedy))
    widths = [max([len(row[k]) for row in cells] + [3 if k == 1 else 0]) for k in range(4)]
    out: list[str] = []
    for title, count, kinds, vectors, remedy in cells:
        text = (f"  {title:<{widths[0]}} {count:>{widths[1]}}  {kinds:<{widths[2]}}  "
                f"{vectors:<{widths[3]}}")
        out += _fill([text] + ([remedy] if remedy else []), 2, 6, "  ")
    return out


def _id_range(group: list["Dependence"]) -> str:
    """``D9-D40``: a scalar's dependences are numbered together."""
    return group[0].id if len(group) == 1 else f"{group[0].id}-{group[-1].id}"


def _matrix(dependences: list["Dependence"]) -> list[str]:
    if not dependences:
        return []
    rows = [f"{d.source}->{d.sink:<4} {_vector(d.direction):<12} {d.kind} {d.array}"
            + (f"  over ({','.join(l.var for l in d.loops)})" if d.loops else "")
            for d in dependences]
    return _section("Direction matrix", rows)


def _carried_items(dependences: list["Dependence"], item: Callable[["Dependence"], str],
                   scalars: str = "on") -> str:
    """Array dependences one by one (``item(d)``), then scalars counted per name
    (``on scalars acc (12), a (3)``)."""
    items = [item(d) for d in dependences if not d.on_scalar]
    counts: dict[str, int] = {}
    for d in dependences:
        if d.on_scalar:
            counts[d.array] = counts.get(d.array, 0) + 1
    if counts:
        items.append(f"{scalars} scalar{'s' if len(counts) > 1 else ''} "
                     + ", ".join(f"{name} ({n})" for name, n in counts.items()))
    return ", ".join(items)


def _aliasing(analysis: "Analysis") -> list[str]:
    """What the verdicts assume about arguments sharing memory, and what sharing adds."""
    if analysis.assume_distinct:
        from loclab.deps.overlap import may_overlap

        names = list(dict.fromkeys(v.name for pair in may_overlap(analysis.nest)
                                   for v in pair))
        if not names:
            return []
        return _section("Arguments", _wrap(
            f"{_names(names)} assumed distinct (--assume-distinct): the verdicts do not "
            "hold for a call where they share memory", 2, 2))
    if not analysis.overlaps:
        return []
    c = analysis.nest.language == "c"
    lines: list[str] = []
    for overlap in analysis.overlaps:
        first, second = overlap.names
        lines += _wrap(f"{overlap.label}: {overlap.why}", 2, 4)
        if overlap.same_array:
            lines.append(f"  if {second} is {first} (the same array passed twice):")
            lines += [line for d in overlap.same_array for line in _wrap(_shared(d), 6, 8)]
        carriers = ", ".join(f"{loop.id} {loop.var}" for loop in overlap.carriers)
        lines += _wrap(f"  overlapping at other offsets may carry a dependence in "
                       f"{carriers}" if carriers else
                       "  overlapping adds no dependence that a loop carries", 2, 4)
    fix = ("declare them restrict" if c else "pass distinct arrays and say so with "
           "--assume-distinct")
    lines += _wrap(f"The dependences, orders and distribution here are those of distinct "
                   f"arrays; where that matters a loop's verdict says so ({fix}).", 2, 0)
    return _section("Arguments that may share memory", lines)


def _shared(d: "Dependence") -> str:
    """``O1 RAW a[i] -> b[i - 1] [<] carried by i, distance (1)``: a dependence between two
    arrays that may be one, on one line (indented under their pair)."""
    where = f"carried by {d.carrier.var}" if d.carrier else "loop-independent"
    if d.loops and all(x is not None for x in d.distance):
        where += f", distance ({','.join(str(x) for x in d.distance)})"
    return (f"    {d.id} {d.kind} {d.source_access.text} -> {d.sink_access.text} "
            f"{_vector(d.direction)} {where}")


def _names(words: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def _verdict(report: "LoopReport", idioms: Iterable["Idiom"] = ()) -> list[str]:
    head = f"{report.id} {report.var} (line {report.line}): "
    if report.parallel:
        return [head + "PARALLEL - carries no dependence"]
    unless = _names(list(dict.fromkeys(name for o in report.overlaps for name in o.names))) \
        if report.overlaps else ""
    if report.parallel_if_distinct:
        return _wrap(head + f"PARALLEL if {unless} do not overlap - carries no dependence "
                     "between distinct arrays; sharing memory may make it carry one", 2, 4)
    carried = _carried_items(report.carried,
                             lambda d: f"{d.id} {d.kind} {d.array} {_vector(d.direction)}")
    lines = _wrap(head + f"sequential as written - carries {carried}", 2, 4)
    if report.unresolved:
        blocking = _carried_items(report.unresolved, lambda d: f"{d.id} {d.kind} on {d.array}",
                                  "those on")
        true = " (a true dependence)" if all(d.kind == "RAW" for d in report.unresolved) else ""
        lines += _wrap(f"    nothing removes {blocking}: stays sequential{true}", 2, 6)
        blocked = {d.array for d in report.unresolved}
        mine = [i for i in idioms if i.loop is report.loop and blocked & set(i.variables)]
        if mine:
            covered = "all of them" if blocked <= {v for i in mine for v in i.variables} \
                else "some of them"
            kinds = _names([f"{i.kind} of {i.variables[0]}" for i in mine])
            lines += _wrap(f"    ({covered} an idiom's: {kinds}, parallel in its own form; "
                           "see Idioms)", 2, 6)
        if report.remedies:
            lines += _wrap(f"    (would still help: {_steps(report.remedies, '; ')})", 2, 6)
    else:
        condition = f" (if {unless} do not overlap)" if unless else ""
        lines += _wrap(f"    parallel after: {_steps(report.remedies, '; ')}{condition}", 2, 6)
    return lines


def _loops(loops: tuple[Loop, ...]) -> str:
    return ", ".join(l.var for l in loops) or "none"


def _steps(remedies: Iterable["Remedy"], sep: str = ", ") -> str:
    """Remedy labels, privatizations (expansions) in a row merged: ``privatize acc, a, b``."""
    out: list[str] = []
    merge = None
    for remedy in remedies:
        mergeable = remedy.kind in {"privatize", "expand"} and not remedy.live_out
        if mergeable and merge == remedy.kind:
            out[-1] += f", {remedy.variable}"
        else:
            out.append(remedy.label())
        merge = remedy.kind if mergeable else None
    return sep.join(out)


def _order_lines(option: "Interchange") -> list[str]:
    """``(j i)  legal after privatize tmp   parallel loops: j, i`` and its kin."""
    order = f"({' '.join(l.var for l in option.order)})"
    extra = tuple(r for r in option.privatizing if r not in option.legal_after)
    if option.legal:
        verdict = f"{order}  legal    parallel loops: {_loops(option.parallel)}"
        if option.privatizing:
            verdict += (f"; after {_steps(option.privatizing)}: "
                        f"{_loops(option.parallel_after_privatizing)}")
    elif option.legal_after:
        verdict = (f"{order}  legal after {_steps(option.legal_after)}   parallel loops: "
                   f"{_loops(option.parallel_after_privatizing)}")
        if extra:
            verdict += f" (with {_steps(extra)} too)"
    else:
        d = option.blocking
        assert d is not None
        verdict = f"{order}  ILLEGAL  {d.id} {d.kind} on {d.array} would get '>' first"
    return _wrap(verdict, 2, 4)


def _distribution_lines(analysis: "Analysis") -> list[str]:
    out: list[str] = []
    for loop in dict.fromkeys(p.loop for p in analysis.pieces):
        pieces = [p for p in analysis.pieces if p.loop is loop]
        out += _wrap(f"{loop.id} {loop.var}: {_split_text(loop, pieces)}", 2, 4)
        for piece in pieces:
            kind = "parallel" if piece.parallel else "sequential"
            if piece.parallel_after:
                kind += f" after {_steps(piece.parallel_after)}"
            out += _wrap(f"  {{{' '.join(s.id for s in piece.statements)}}}  {kind}"
                         f"{' (cycle)' if piece.cycle else ''}; parallel loops: "
                         f"{_loops(piece.parallel_loops)}", 2, 6)
    return out


def _split_text(loop: Loop, pieces: list["Piece"]) -> str:
    """``3 loops after expanding tmp into arrays indexed by j``: what the split needs."""
    if len(pieces) == 1:
        return "cannot be split"
    expand = list(dict.fromkeys(name for p in pieces for name in p.expand))
    copy_out = list(dict.fromkeys(name for p in pieces for name in p.copy_out))
    text = f"{len(pieces)} loops"
    if expand:
        text += f" after expanding {', '.join(expand)} into arrays indexed by {loop.var}"
    if copy_out:
        text += f"; copy out the last value of {', '.join(copy_out)} if used after the loop"
    return text
