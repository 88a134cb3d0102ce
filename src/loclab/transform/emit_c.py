"""C source of a transformed function: the user's file with the function's body replaced.

Everything outside the body stays as written (includes, macros, other functions, the
signature), so the output compiles where the original does. The body keeps its declarations
and the code outside a ``#pragma scop`` region; the loop nest becomes the loops isl
generated: ``for (int i = ...; i < ...; i++)``, ``#pragma omp parallel for`` on a parallel
loop (with ``reduction(op: s)`` for a scalar reduction, ``#pragma omp atomic`` before a
generalized one), bounds with ``loclab_min``/``loclab_max``/``loclab_floord`` (macros defined
once at the top of the file). Statements are the original ones with macros expanded (the
preprocessed text loclab analyzed), loop variables replaced, private variables declared where
their storage goes (``float c_0, c_1;`` at the start of the loop they are private to), expanded
ones turned into arrays, buffered arrays read through their copy.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from loclab.errors import UsageError
from loclab.nest.expr import Compare, Condition, FloorDiv, MinMax, Mod, Poly, Symbol
from loclab.transform.buffers import BufferMarker
from loclab.transform.code import held_sums, render, upward
from loclab.transform.codegen import Call, Code, For, If, Mark, Select, Value, plus
from loclab.transform.storage import Expansion, Placement, copy_suffix
from loclab.transform.tree import LoopNode, Program, Reduction, Unit

if TYPE_CHECKING:
    from loclab.transform.emit import Lowered

INDENT = "  "
INCREMENTS = {"p++", "++", "p--", "--"}
HELPERS = """#ifndef loclab_min
#define loclab_min(a, b) ((a) < (b) ? (a) : (b))
#define loclab_max(a, b) ((a) > (b) ? (a) : (b))
#define loclab_floord(n, d) (((n) < 0) ? -((-(n) + (d) - 1) / (d)) : (n) / (d))
#define loclab_mod(n, d) ((((n) % (d)) + (d)) % (d))
#endif
"""


def emit_c(lowered: "Lowered", versioned: tuple[str, "Lowered"] | None = None) -> str:
    """The user's file with the function's body replaced; ``versioned``: (the C test that
    arrays share memory, the function as written, lowered), for a body that runs as written
    when the test holds and the transformed code otherwise (loop versioning)."""
    syntax = lowered.program.syntax
    source = syntax.text
    start, end = _body_span(syntax.unit, syntax.function, source)
    body = _body(lowered)
    if versioned is not None:
        test, written = versioned
        as_written = _body(written)
        body = "\n".join(["{", f"{INDENT}/* arrays that may share memory: if their spans "
                          "meet, run as written */", f"{INDENT}if ({test}) {{",
                          _indented(as_written), f"{INDENT}}} else {{", _indented(body),
                          f"{INDENT}}}", "}"])
    return HELPERS + source[:start] + body + source[end:]


def _body(lowered: "Lowered") -> str:
    return _Emitter(lowered.program, lowered.placements, lowered.expansions,
                    lowered.buffers).body(lowered.code)


def _indented(block: str) -> str:
    """A ``{ ... }`` block's inside, one level deeper (inside an if's branch)."""
    inside = block.split("\n")[1:-1]
    return "\n".join(INDENT + line if line else "" for line in inside)


def _body_span(unit: Any, function: Any, source: str) -> tuple[int, int]:
    """Offsets of the function body's ``{`` and just after its ``}`` in the user's file."""
    file, line, column = unit.locate(function.body.coord)
    if file != unit.source.main:
        raise UsageError(f"{function.decl.name} is defined in {file}: transform the file that "
                         "defines it")
    lines = source.split("\n")
    offset = sum(len(l) + 1 for l in lines[:line - 1]) + column - 1
    if source[offset:offset + 1] != "{":
        raise UsageError(f"{file}:{line}:{column}: the body of {function.decl.name} does not "
                         "start with '{' as written (a macro?): loclab cannot replace it")
    depth, position = 0, offset
    while position < len(source):
        char = source[position]
        if source.startswith("//", position):
            position = source.find("\n", position)
            position = len(source) if position < 0 else position
            continue
        if source.startswith("/*", position):
            position = source.find("*/", position) + 2
            continue
        if char in "\"'":
            position = _string_end(source, position)
            continue
        depth += {"{": 1, "}": -1}.get(char, 0)
        position += 1
        if depth == 0:
            return offset, position
    raise UsageError(f"{file}:{line}: the body of {function.decl.name} never closes")


def _string_end(source: str, position: int) -> int:
    quote = source[position]
    position += 1
    while position < len(source) and source[position] != quote:
        position += 2 if source[position] == "\\" else 1
    return position + 1


@dataclass(frozen=True)
class _Local:
    """A variable private to a loop: its declaration (type and array dimensions)."""

    name: str
    declaration: Any


class _Emitter:
    def __init__(self, program: Program, placements: dict[str, Placement],
                 expansions: dict[str, Expansion], buffers: list[BufferMarker]) -> None:
        from loclab.nest.c import _generator

        copied = [p.private.variable.name for p in placements.values() if p.private.last]
        if copied:
            raise UsageError(f"--emit c: {copied[0]} is private to each iteration and copied "
                             "back from the last one: loclab does not write that in C yet "
                             "(leave it shared)")
        self.program = program
        self.syntax = program.syntax
        self.generator = _generator()
        self.placements = placements
        self.expansions = expansions
        self.buffers = buffers
        self.lines: list[str] = []
        # the elements held in scalars for a vectorized loop's run, by the loop's code (id):
        # the element as emitted -> the scalar
        self.held: dict[int, dict[str, str]] = {}

    def body(self, code: list[Code]) -> str:
        self.lines = ["{"]
        code = [upward(item) for item in code]
        self.declared = _local_blocks(code, self.placements)
        replaced = {e.private.name for e in self.expansions.values()}
        for node in self.syntax.before:  # (an expanded scalar's declaration is the array's)
            if getattr(node, "name", None) not in replaced:
                self.statement_text(1, self.generator.visit(node), node)
        for expansion in self.expansions.values():
            self.expansion(expansion)
        self.hoisted(None, 1)
        self.block(code, 1, [])
        for node in self.syntax.after:
            self.statement_text(1, self.generator.visit(node), node)
        self.lines.append("}")
        return "\n".join(self.lines)

    def line(self, depth: int, text: str) -> None:
        for part in text.split("\n"):
            self.lines.append(INDENT * depth + part if part else "")

    def statement_text(self, depth: int, text: str, node: Any) -> None:
        from pycparser import c_ast

        ends = isinstance(node, (c_ast.Compound, c_ast.If, c_ast.For, c_ast.Pragma,
                                 c_ast.While, c_ast.DoWhile, c_ast.Switch))
        self.line(depth, text if ends or text.rstrip().endswith(";") else text + ";")

    # -- declarations -----------------------------------------------------------------------
    def expansion(self, expansion: Expansion) -> None:
        variable = expansion.private.variable
        declaration = self.syntax.declarations.get(variable.name)
        kind = _type_name(declaration) if declaration is not None else "double"
        dims = "".join(f"[loclab_max(1, {value(e)})]" for e in expansion.extents)
        self.line(1, f"{kind} {expansion.private.name}{dims};")

    def locals_at(self, block: list[Code], depth: int) -> None:
        """Private variables whose uses this block holds (in one iteration of the loop they
        are private to): declared at its start, one per copy of an unroll-and-jam."""
        for name in self.declared.get(id(block), []):
            base = name.split("#")[0]
            declaration = self.syntax.declarations.get(base)
            if declaration is None:
                raise UsageError(f"{base} is not declared in {self.program.nest.name}: "
                                 "loclab cannot give each iteration its own")
            self.line(depth, _declare(declaration, name.replace("#", ""), self.generator))

    def hoisted(self, node: LoopNode | None, depth: int) -> None:
        """Buffers copied inside this loop (or the function): declared at its start, so that
        the copy (wherever isl puts it) and the reads see them."""
        for buffer in self.buffers:
            around = buffer.path[-1] if buffer.path else None
            if around is not node:
                continue
            array = buffer.buffer.variable.name
            kind = _type_name(self.syntax.declarations.get(array))
            dims = "".join(f"[loclab_max(1, {value(e)})]"
                           for e in buffer.in_buffer_order(buffer.extents))
            self.line(depth, f"{kind} {buffer.buffer.name}{dims};")
            self.line(depth, f"long {', '.join(buffer.lows)};")

    # -- code -------------------------------------------------------------------------------
    def block(self, code: list[Code], depth: int, loops: list[For]) -> None:
        self.locals_at(code, depth)
        for item in code:
            if isinstance(item, For):
                self.loop(item, depth, loops)
            elif isinstance(item, If):
                self.line(depth, f"if ({condition(item.condition)}) {{")
                self.block(item.then, depth + 1, loops)
                if item.orelse:
                    self.line(depth, "} else {")
                    self.block(item.orelse, depth + 1, loops)
                self.line(depth, "}")
            elif isinstance(item, Call):
                self.call(item, depth, loops)
            elif isinstance(item, Mark):
                self.mark(item, depth)

    def loop(self, item: For, depth: int, loops: list[For]) -> None:
        node = item.node
        if item.single:
            self.line(depth, "{")
            self.line(depth + 1, f"const long {item.var} = {value(item.start)};")
        else:
            compare = "<" if item.step > 0 else ">"
            held = self.held_elements(item, loops)
            if held:  # the elements' subscripts may be valid only where the loop runs
                self.line(depth, f"if ({value(item.start)} {compare} {value(item.stop)}) {{")
                depth += 1
                for target, name in held.items():
                    self.line(depth, f"__typeof__({target}) {name} = {target};")
            # a sum into an element left in memory (not held) is no lane's: no simd then
            lanes = node.vectorized and len(held) == sum(bool(r.held) for r in node.reductions)
            if node.parallel or lanes:
                pragma = " ".join(["parallel for"] * node.parallel + ["simd"] * lanes)
                self.line(depth, f"#pragma omp {pragma}"
                          + " schedule(dynamic)" * (node.parallel and node.dynamic)
                          + " schedule(static, 1)" * (node.parallel and node.cyclic > 0)
                          + _reduction_clause(node, self.program))
            step = {1: f"{item.var}++", -1: f"{item.var}--"}.get(
                item.step, f"{item.var} += {item.step}")
            self.line(depth, f"for (long {item.var} = {value(item.start)}; {item.var} "
                             f"{compare} {value(item.stop)}; {step}) {{")
        self.hoisted(node, depth + 1)
        self.block(item.body, depth + 1, loops + [item])
        self.line(depth, "}")
        for target, name in self.held.pop(id(item), {}).items():
            self.line(depth, f"{target} = {name};")
            self.line(depth - 1, "}")

    def held_elements(self, item: For, loops: list[For]) -> dict[str, str]:
        """The array elements a vectorized loop sums into (``code.held_sums``), each as its
        statements write it, with the scalar that holds it for the loop's run; left in
        memory where written in two ways or through the loop's own variable."""
        from pycparser import c_ast

        held: dict[str, str] = {}
        for array, scalar, calls in held_sums(item, loops):
            targets = [next((n.lvalue for n in _nodes(self.rewritten(call))
                             if isinstance(n, c_ast.Assignment)
                             and isinstance(n.lvalue, c_ast.ArrayRef)
                             and _flatten(n.lvalue)[0] == array), None)
                       for call in calls]
            texts = {self.generator.visit(t) for t in targets if t is not None}
            if len(texts) == 1 and None not in targets and item.var not in {
                    n.name for t in targets if t is not None for n in _nodes(t)
                    if isinstance(n, c_ast.ID)}:
                held[texts.pop()] = scalar
        if held:
            self.held[id(item)] = held
        return held

    def rewritten(self, item: Call) -> Any:
        """A unit's statement at one point of the new loops (:class:`_Rewriter`)."""
        unit = item.placed.unit
        values = {loop.var: value(arg) for loop, arg in zip(unit.loops, item.args)
                  if value(arg) != loop.var}
        return _Rewriter(self, unit, values).statement(copy.deepcopy(unit.syntax))

    def call(self, item: Call, depth: int, loops: list[For]) -> None:
        unit = item.placed.unit
        node = self.rewritten(item)
        for around in loops:
            if id(around) in self.held:
                node = _held(node, self.held[id(around)], self.generator)
        for reduction in self.atomic(unit, loops):
            node = _atomic(node, reduction.name)
        self.statement_text(depth, self.generator.visit(node), node)

    def atomic(self, unit: Unit, loops: list[For]) -> list[Reduction]:
        """The generalized reductions parallel loops around the unit make its updates."""
        touched = {a.variable.key for s in unit.statements for a in s.accesses if a.write}
        return [reduction for item in loops for reduction in item.node.reductions
                if not (reduction.scalar or reduction.copy or reduction.held)
                and reduction.key in touched]

    def mark(self, item: Mark, depth: int) -> None:
        buffer: BufferMarker = item.marker.payload
        array = buffer.buffer.variable.name
        for k, low in enumerate(buffer.lows):
            self.line(depth, f"{low} = {value(item.values[f'lo{k}'])};")
        counters = [f"{buffer.buffer.name}_{k}" for k in range(buffer.rank)]
        for k, counter in enumerate(counters):
            extent = f"{value(plus(item.values[f'hi{k}'], 1))} - {buffer.lows[k]}"
            self.line(depth + k, f"for (long {counter} = 0; {counter} < {extent}; "
                                 f"{counter}++)")
        target = buffer.buffer.name + "".join(f"[{c}]"
                                              for c in buffer.in_buffer_order(counters))
        source = array + "".join(f"[{low} + {c}]" for low, c in zip(buffer.lows, counters))
        self.line(depth + len(counters), f"{target} = {source};")


class _Rewriter:
    """A copy of a statement's syntax with the new loops' values, names per copy, expanded
    and buffered accesses, and local declarations turned into assignments."""

    def __init__(self, emitter: _Emitter, unit: Unit, values: dict[str, str]) -> None:
        self.emitter = emitter
        self.unit = unit
        self.values = values
        self.renames = {p.private.variable.name: p.private.variable.name + copy_suffix(unit, p)
                        for p in emitter.placements.values()
                        if p.private.loop in unit.loops and copy_suffix(unit, p)}
        self.expanded = {e.private.variable.name: e for e in emitter.expansions.values()
                         if e.private.loop in unit.loops}
        self.buffers = {b.buffer.variable.name: b for b in emitter.buffers if b.covers(unit)}
        self.placed = {p.private.variable.name for p in emitter.placements.values()} | set(
            self.expanded)

    def statement(self, node: Any) -> Any:
        from pycparser import c_ast

        if isinstance(node, c_ast.Decl) and node.init is not None and (
                node.name in self.placed or self.unit.loops):
            node = c_ast.Assignment("=", c_ast.ID(node.name), node.init)
        return self.visit(node)

    def visit(self, node: Any, target: bool = False) -> Any:
        """``target``: the node is assigned to (a buffer is only read through)."""
        from pycparser import c_ast

        if isinstance(node, c_ast.ID):
            return self.name(node)
        if isinstance(node, c_ast.ArrayRef):
            base, indices = _flatten(node)
            if base in self.buffers and not target and self.buffers[base].buffer.serves(
                    " ".join(self.emitter.generator.visit(node).split())):
                buffer = self.buffers[base]
                out: Any = c_ast.ID(buffer.buffer.name)
                for shifted in buffer.in_buffer_order(
                        [f"({self.emitter.generator.visit(self.visit(index))}) - {low}"
                         for index, low in zip(indices, buffer.lows)]):
                    out = c_ast.ArrayRef(out, c_ast.ID(shifted))
                return out
        for name, child in node.children():
            assigned = (isinstance(node, c_ast.Assignment) and name == "lvalue") \
                or (isinstance(node, c_ast.UnaryOp) and node.op in INCREMENTS
                    and name == "expr") or (target and name == "name")
            self._replace(node, name, self.visit(child, assigned))
        return node

    def name(self, node: Any) -> Any:
        from pycparser import c_ast

        if node.name in self.expanded:
            expansion = self.expanded[node.name]
            out: Any = c_ast.ID(expansion.private.name)
            for loop, offset in zip(expansion.private.expand_by, expansion.offsets):
                index = poly(Poly.symbol(loop.var) - offset) if isinstance(offset, Poly) \
                    else f"{loop.var} - ({value(offset)})"
                out = c_ast.ArrayRef(out, self.visit(c_ast.ID(index)) if loop.var in
                                     self.values else c_ast.ID(index))
            return out
        if node.name in self.renames:
            return c_ast.ID(self.renames[node.name])
        if node.name in self.values:
            return c_ast.ID(f"({self.values[node.name]})")
        return node

    @staticmethod
    def _replace(parent: Any, name: str, child: Any) -> None:
        """Set a child found by ``children()`` (``stmts[0]``, ``lvalue``) on the parent."""
        if "[" in name:
            field_name, index = name[:-1].split("[")
            getattr(parent, field_name)[int(index)] = child
        else:
            setattr(parent, name, child)


def _atomic(node: Any, name: str) -> Any:
    """Every update of an element of ``name`` in a statement (or a block kept as written)
    preceded by ``#pragma omp atomic``."""
    from pycparser import c_ast

    def updates(child: Any) -> bool:
        target = child.lvalue if isinstance(child, c_ast.Assignment) else \
            child.expr if isinstance(child, c_ast.UnaryOp) else None
        return isinstance(target, c_ast.ArrayRef) and _flatten(target)[0] == name

    if updates(node):
        return c_ast.Compound([c_ast.Pragma("omp atomic"), node])
    for field_name, child in node.children():
        _Rewriter._replace(node, field_name, _atomic(child, name))
    return node


def _held(node: Any, held: dict[str, str], generator: Any) -> Any:
    """Every access of an element held in a scalar (as emitted) as that scalar."""
    from pycparser import c_ast

    scalar = held.get(generator.visit(node)) if isinstance(node, c_ast.ArrayRef) else None
    if scalar is not None:
        return c_ast.ID(scalar)
    for field_name, child in node.children():
        _Rewriter._replace(node, field_name, _held(child, held, generator))
    return node


def _nodes(node: Any) -> Any:
    """A C syntax tree's nodes, the root first."""
    yield node
    for _, child in node.children():
        yield from _nodes(child)


def _local_blocks(code: list[Code], placements: dict[str, Placement]) -> dict[int, list[str]]:
    """Per block of the code tree (by ``id``), the private variables to declare at its start:
    for each one, the innermost block that holds all its uses under one of the loops it is
    private to (names per copy as ``c#_1``: the variable, then the copy's suffix)."""
    out: dict[int, list[str]] = {}
    for placement in placements.values():
        key = placement.private.variable.key
        chains: dict[str, list[list[list[Code]]]] = {}
        for chain, unit in _calls(code, [code]):
            if not any(a.variable.key == key for s in unit.statements for a in s.accesses):
                continue
            if placement.private.loop not in unit.loops:
                continue
            chains.setdefault(copy_suffix(unit, placement), []).append(chain)
        for suffix, found in chains.items():
            common = found[0]
            for chain in found[1:]:
                common = [a for a, b in zip(common, chain) if a is b]
            name = f"{placement.private.variable.name}#{suffix}"
            names = out.setdefault(id(common[-1]), [])
            if name not in names:
                names.append(name)
    return out


def _calls(code: list[Code], chain: list[list[Code]]) -> Any:
    """(blocks from the top down to it, unit) for every call in the code tree."""
    for item in code:
        if isinstance(item, Call):
            yield chain, item.placed.unit
        elif isinstance(item, For):
            yield from _calls(item.body, chain + [item.body])
        elif isinstance(item, If):
            yield from _calls(item.then, chain + [item.then])
            yield from _calls(item.orelse, chain + [item.orelse])


def _flatten(node: Any) -> tuple[str, list[Any]]:
    from pycparser import c_ast

    indices: list[Any] = []
    while isinstance(node, c_ast.ArrayRef):
        indices.insert(0, node.subscript)
        node = node.name
    return (node.name if isinstance(node, c_ast.ID) else ""), indices


def _type_name(declaration: Any) -> str:
    """``float`` of ``float *A``, ``const double B[N][M]``, ``float x = 0``."""
    from pycparser import c_ast

    kind = declaration.type if declaration is not None else None
    while kind is not None and not isinstance(kind, c_ast.TypeDecl):
        kind = kind.type
    if kind is None or not isinstance(kind.type, c_ast.IdentifierType):
        return "double"
    return " ".join(kind.type.names)


def _declare(declaration: Any, name: str, generator: Any) -> str:
    """The declaration of a private copy: the original's type and dimensions, no value."""
    twin = copy.deepcopy(declaration)
    twin.init = None
    twin.name = name
    kind = twin.type
    while hasattr(kind, "type") and not hasattr(kind, "declname"):
        kind = kind.type
    if hasattr(kind, "declname"):
        kind.declname = name
    return generator.visit(twin) + ";"


def _reduction_clause(node: LoopNode, program: Program) -> str:
    """OpenMP's reductions of a parallel or vectorized loop: each scalar's (an element held
    in one for the loop's run: that scalar's), and each array's that has a copy per thread
    (``copies=True``: an array section, which needs the array's declared extents)."""
    clauses = []
    for reduction in node.reductions:
        if reduction.scalar or reduction.held:
            name = reduction.held or reduction.name
            clauses.append(f" reduction({reduction.op}: {name})")
        elif reduction.copy:
            clauses.append(f" reduction({reduction.op}: {reduction.name}"
                           f"{_section(program, reduction)})")
    return "".join(clauses)


def _section(program: Program, reduction: Reduction) -> str:
    """``[0:N][0:M]``: the whole of a declared array, as an OpenMP array section."""
    variable = next(v for v in program.nest.variables if v.key == reduction.key)
    extents = variable.extents or ()
    if len(extents) != program.rank(reduction.key) or any(e is None for e in extents):
        raise UsageError(f"--emit c: {reduction.name} has no declared extents (a pointer): "
                         f"OpenMP cannot give each thread a copy of it; declare it as "
                         f"{reduction.name}[N] or drop copies=True")
    return "".join(f"[0:{poly(extent)}]" for extent in extents if extent is not None)


# -- expressions ------------------------------------------------------------------------------
def value(v: Value) -> str:
    if isinstance(v, Select):
        return f"({condition(v.condition)} ? {value(v.then)} : {value(v.otherwise)})"
    return poly(v)


def poly(p: Poly) -> str:
    return render(p, _atom)


def _atom(atom: object) -> str:
    if isinstance(atom, Symbol):
        return atom.name
    if isinstance(atom, FloorDiv):
        return f"loclab_floord({poly(atom.inner)}, {atom.divisor})"
    if isinstance(atom, Mod):
        return f"loclab_mod({poly(atom.inner)}, {atom.divisor})"
    assert isinstance(atom, MinMax)
    texts = [poly(a) for a in atom.args]
    out = texts[-1]
    for text in reversed(texts[:-1]):
        out = f"loclab_{atom.function}({text}, {out})"
    return out


def condition(cond: Condition) -> str:
    if isinstance(cond, Compare):
        return f"{poly(cond.left)} {cond.op} {poly(cond.right)}"
    if cond.op == "not":
        return f"!({condition(cond.args[0])})"
    joined = " && " if cond.op == "and" else " || "
    return joined.join(f"({condition(a)})" for a in cond.args)
