"""Python and Numba source of a transformed function: a drop-in replacement.

The emitted function keeps the original's name, parameters and docstring, and the module's
imports. Loops are ``for v in range(start, stop[, step])`` with the bounds isl simplified;
a parallel loop is ``prange`` under Numba (``@njit(parallel=True)``) and a plain ``range``
marked ``# parallel`` in Python. Every statement is the user's, its loop variables replaced
by what they are in the new loops (``A[i][j + 1]`` in the second copy of an unrolled ``j``),
its private variables renamed per copy of an unroll-and-jam (``c_1``), an expanded variable
indexed by its loops (``tmp_x[i]``), a staged array read from its buffer. Under Numba a
generalized reduction (an array element updated by iterations of a parallel loop) becomes an
atomic add (:func:`loclab.cpu.atomics.atomic_add`), or, where ``parallel`` was given
``copies=True``, an update of the thread's copy of the array: the loop's iterations are split
into one chunk per thread by hand (``prange`` over the chunks; Numba names no thread), each
chunk updates its own copy, and the copies are combined into the array after the loop, in
chunk order. A scalar reduction is left to Numba, which combines a ``prange`` loop's
``s += e`` per thread.
"""

from __future__ import annotations

import ast
import copy
import re
import textwrap
from collections.abc import Collection
from dataclasses import dataclass, field, replace

from loclab.errors import UsageError
from loclab.nest.expr import (BoolOp, Compare, Condition, FloorDiv, MinMax, Mod, Poly,
                              Symbol, condition_symbols)
from loclab.nest.ir import Access
from loclab.nest.python import serves, update_increment
from loclab.transform.buffers import BufferMarker
from loclab.transform.code import counting_down, held_sums, render, uses
from loclab.transform.lanes_code import (LANE_FUNCTIONS, Box, Touch, guard_range,
                                         held_subscripts, lanes_run, run_conditions,
                                         staged)
from loclab.transform.codegen import Call, Code, For, If, Mark, Select, Value, plus
from loclab.transform.python_program import FunctionSyntax
from loclab.transform.storage import Expansion, Placement, copy_suffix
from loclab.transform.subscripts import (unsigned_arrays, unsigned_by_statement,
                                         unsigned_in)
from loclab.transform.tree import Chunks, LoopNode, Program, Reduction, Unit
from loclab.transform.versioning import as_written_branch, overlap_helper

INDENT = "    "


@dataclass
class PythonOutput:
    """What the emitter needs besides the code tree."""

    program: Program
    placements: dict[str, Placement]
    expansions: dict[str, Expansion]
    numba: bool
    buffers: list[BufferMarker] = field(default_factory=list)
    scalar_types: dict[str, str] = field(default_factory=dict)  # an expanded scalar's dtype
    # pairs of arrays that may share memory: the function checks them first and runs as
    # written when they do (loop versioning, loclab.transform.versioning)
    overlaps: list[tuple[str, str]] = field(default_factory=list)


def emit_python(output: PythonOutput, code: list[Code]) -> str:
    return _Emitter(output).module(code)


class _Emitter:
    def __init__(self, output: PythonOutput) -> None:
        self.out = output
        self.program = output.program
        self.syntax: FunctionSyntax = output.program.syntax
        self.lines: list[str] = []
        self.atomics = False
        self.threads = False  # get_num_threads: a loop split into chunks by hand
        self.chunksize = False  # set_parallel_chunksize: a loop whose iterations are handed out
        # the elements held in scalars for a vectorized loop's run, by the loop's code (id):
        # the element as emitted -> the scalar
        self.held: dict[int, dict[str, str]] = {}
        self.expanded_done: set[str] = set()
        # under Numba: the arrays whose subscripts isl proves non-negative, by statement and
        # in every statement, and loclab's own (expanded scalars, buffers), always
        self.unsigned_proved: dict[int, frozenset[str]] = {}
        self.unsigned_everywhere: set[str] = set()
        self.unsigned_own: set[str] = set()
        if output.numba:
            self.unsigned_proved = unsigned_by_statement(output.program)
            self.unsigned_everywhere = unsigned_arrays(output.program, self.unsigned_proved)
            self.unsigned_own = {e.private.name for e in output.expansions.values()} | {
                b.buffer.name for b in output.buffers}
        self.uintp = False  # some subscript was cast: the module imports uintp
        self.lane_count = 0  # variables holding elements in vector lanes (``hold``) so far
        self.lanes_used = False  # the module imports loclab.cpu.lanes

    # -- the module -------------------------------------------------------------------------
    def module(self, code: list[Code]) -> str:
        body: list[str] = []
        self.lines = body
        if self.syntax.docstring is not None:
            docstring = ast.get_source_segment(self.syntax.source, self.syntax.docstring)
            self.line(1, textwrap.dedent(docstring or ast.unparse(self.syntax.docstring)))
        if self.out.overlaps:
            self.line(1, as_written_branch(self.syntax, self.out.overlaps, self.out.numba))
        self.buffer_allocations(None, 1)
        self.block(code, 1, [])
        if not any(text.strip() for text in body[1 if self.syntax.docstring else 0:]):
            self.line(1, "pass")
        head = self.imports()
        function = copy.copy(self.syntax.function)
        function.body = [ast.Pass()]
        function.decorator_list = []
        signature = ast.unparse(function).rsplit("\n", 1)[0]
        decorator: list[str] = []
        if self.out.numba:
            options = []
            if any(node.parallel for node in self.program.loops()):
                options.append("parallel=True")
            if self.program.fast_math:  # fastmath(): FMAs and reordered sums throughout
                options.append('fastmath={"contract", "reassoc"}')
            elif any(node.vectorized and node.reductions for node in self.program.loops()):
                options.append('fastmath={"reassoc"}')  # vectorize: sums may run in lanes
            decorator = [f"@njit({', '.join(options)})" if options else "@njit"]
        helper = overlap_helper(self.out.numba) if self.out.overlaps else []
        return "\n".join(head + (["", ""] if head else []) + helper + [*decorator, signature]
                         + body) + "\n"

    def imports(self) -> list[str]:
        lines = self.syntax.imports()
        if self.out.numba:
            if not any(l.startswith("import numpy") for l in lines):
                lines.append("import numpy as np")
            lines.append("from numba import njit, prange")
            if self.uintp:
                lines.append("from numpy import uintp  # unsigned subscripts skip Numba's "
                             "negative-index test")
            if self.atomics:
                lines.append("from loclab.cpu.atomics import atomic_add")
            if self.threads:
                lines.append("from numba import get_num_threads")
            if self.chunksize:
                lines.append("from numba import set_parallel_chunksize")
            if self.lanes_used:
                lines.append(f"from loclab.cpu.lanes import {', '.join(LANE_FUNCTIONS)}")
        elif (self.out.expansions or self.out.buffers or self.out.overlaps) and not any(
                l.startswith("import numpy as np") for l in lines):
            lines.append("import numpy as np")
        return lines

    def line(self, depth: int, text: str) -> None:
        for part in text.split("\n"):
            self.lines.append(INDENT * depth + part)

    # -- code -------------------------------------------------------------------------------
    def block(self, code: list[Code], depth: int, loops: list[For]) -> None:
        for item in code:
            self.expansions_before(item, depth, loops)
            if isinstance(item, For):
                self.loop(item, depth, loops)
            elif isinstance(item, If):
                self.line(depth, f"if {condition(item.condition)}:")
                self.block(item.then, depth + 1, loops)
                if item.orelse:
                    self.line(depth, "else:")
                    self.block(item.orelse, depth + 1, loops)
            elif isinstance(item, Call):
                self.call(item, depth, loops)
            elif isinstance(item, Mark):
                self.mark(item, depth)

    def loop(self, item: For, depth: int, loops: list[For], plain: bool = False) -> None:
        item = counting_down(item)
        node = item.node
        if node.hold and self.out.numba and not item.single and not plain \
                and self.lanes(item, depth, loops):
            return
        if item.single:
            self.line(depth, f"{item.var} = {value(item.start)}")
            self.allocations(node, depth)
            self.buffer_allocations(node, depth)
            self.block(item.body, depth, loops + [item])
            self.copy_back(node, depth)
            return
        if node.chunks is not None and node.parallel and self.out.numba:
            self.chunked(item, depth, loops)
            return
        parallel = node.parallel and not self.out.numba
        function = "prange" if node.parallel and self.out.numba else "range"
        start, stop = value(item.start), value(item.stop)
        handed_out = function == "prange" and node.dynamic
        if handed_out:  # one iteration at a time to the next free thread; then as it was
            self.chunksize = True
            self.line(depth, f"{item.var}_chunksize = set_parallel_chunksize(1)")
        inside = depth + 1  # where the body goes
        if function == "prange" and node.cyclic:  # iteration k in slot k mod N
            count = bare(_tiles(item))
            counter, slot = f"{item.var}_index", f"{item.var}_slot"
            self.line(depth, f"for {slot} in prange({node.cyclic}):")
            self.line(depth + 1, f"for {counter} in range({slot}, {count}, {node.cyclic}):")
            inside = depth + 2
            self.line(inside, f"{item.var} = {_nth(start, item.step, counter)}")
        elif function == "prange" and item.step != 1:  # prange steps by 1: count the tiles
            count = bare(_tiles(item))
            counter = f"{item.var}_index"
            self.line(depth, f"for {counter} in prange({count}):")
            self.line(depth + 1, f"{item.var} = {_nth(start, item.step, counter)}")
        else:
            held = self.held_elements(item, loops)
            if held:  # the elements' subscripts may be valid only where the loop runs
                self.line(depth, f"if {start} {'<' if item.step > 0 else '>'} {stop}:")
                depth, inside = depth + 1, inside + 1
                for target, name in held:
                    self.line(depth, f"{name} = {target}")
            arguments = stop if start == "0" and item.step == 1 else f"{start}, {stop}"
            if item.step != 1:
                arguments += f", {item.step}"
            comment = "  # parallel" if parallel else ""
            self.line(depth, f"for {item.var} in {function}({arguments}):{comment}")
        before = len(self.lines)
        self.allocations(node, inside)
        self.buffer_allocations(node, inside)
        self.block(item.body, inside, loops + [item])
        self.copy_back(node, inside)
        if len(self.lines) == before:
            self.line(inside, "pass")
        if handed_out:
            self.line(depth, f"set_parallel_chunksize({item.var}_chunksize)")
        for target, name in self.held.pop(id(item), {}).items():
            self.line(depth, f"{target} = {name}")

    def lanes(self, item: For, depth: int, loops: list[For]) -> bool:
        """A ``hold`` loop (Numba): where its inner strip is whole and the run's conditions
        hold (``lanes_code.run_conditions``: isl's guards inside the strip true throughout
        the run, reads of held arrays rows apart from the held ones), its run with the
        strip's updates in vector lanes (``lanes_code``), else the loops as they are.
        False, and nothing printed, where the code is not what the step proved (a copy or
        allocation inside, a loop around that combines across threads) or the text cannot
        be held: the caller prints the loops as they are, which is exact."""
        strips = [c for c in item.body if isinstance(c, For)]
        inner = strips[0] if len(strips) == 1 else None
        # beside the strip, only pieces isl split off for some runs (a triangle's diagonal
        # cut from the jammed copies' common range): the held runs are those without them
        beside = [c for c in item.body if c is not inner]
        if inner is None or inner.single or inner.step != 1 or item.step != 1 \
                or any(not isinstance(c, If) or item.var in condition_symbols(c.condition)
                       for c in beside) \
                or any(around.node.reductions or id(around) in self.held for around in loops):
            return False
        guarded = _guarded_calls(inner.body)
        bounds = (item.start, item.stop, inner.start)
        if guarded is None or not all(isinstance(b, Poly) for b in bounds):
            return False
        saved, self.lines = self.lines, []
        for node in (item.node, inner.node):
            self.allocations(node, 0)
            self.buffer_allocations(node, 0)
            self.copy_back(node, 0)
        inside, self.lines = self.lines, saved
        start, stop = value(inner.start), value(inner.stop)
        if inside or re.search(rf"\b{item.var}\b", f"{start} {stop}"):
            return False
        calls = [call for call, _ in guarded]
        touches = [self.touches_at(call) for call in calls]
        box = Box(item.var, item.start, item.stop - Poly.const(1),  # type: ignore[operator]
                  inner.var, inner.start, item.node.hold)  # type: ignore[arg-type]
        cut = guard_range(box, [guards for _, guards in guarded])
        names = [f"_lanes{self.lane_count + n}" for n in range(len(calls))]
        run = lanes_run([self.rewritten(c) for c in calls],
                        [target[1] for target, _ in touches], inner.var, start,
                        item.node.hold, names)
        if run is None or cut is None:
            return False
        # the held part of the run: past the guards' lower bounds, before their upper ones
        low, high = item.start, item.stop
        ends: list[str] = []
        if cut.lower:
            low = Poly.symbol(f"_{item.var}_from{self.lane_count}")  # named as _lanes0 is
            ends.append(f"{low} = max({', '.join(poly(b) for b in [item.start, *cut.lower])})")
        if cut.upper:
            high = Poly.symbol(f"_{item.var}_to{self.lane_count}")
            ends.append(f"{high} = min({', '.join(poly(b) for b in [item.stop, *cut.upper])})")
        checks = run_conditions(replace(box, low=low, last=high - Poly.const(1)),
                                [target for target, _ in touches],
                                [reads for _, reads in touches])
        if checks is None:
            return False
        self.lane_count += len(run.loads)
        self.lanes_used = True
        for text in ends:
            self.line(depth, text)
        skipped = [BoolOp("not", (c.condition,)) for c in beside if isinstance(c, If)]
        tests = "".join(f" and ({condition(c)})" if isinstance(c, BoolOp) else
                        f" and {condition(c)}" for c in [*cut.fixed, *checks, *skipped])
        self.line(depth, f"if {stop} - ({start}) == {item.node.hold} and {poly(low)} < "
                         f"{poly(high)}{tests}:")
        if cut.lower:  # the first iterations, as written
            self.loop(replace(item, stop=low), depth + 1, loops, plain=True)
        for text in run.loads:
            self.line(depth + 1, text)
        self.line(depth + 1, f"for {item.var} in range({poly(low)}, {poly(high)}):")
        for text in run.updates:
            self.line(depth + 2, text)
        for text in run.stores:
            self.line(depth + 1, text)
        if cut.upper:  # the last ones
            self.loop(replace(item, start=high), depth + 1, loops, plain=True)
        self.line(depth, "else:")
        self.loop(item, depth + 1, loops, plain=True)
        return True

    def touches_at(self, item: Call) -> tuple[Touch, list[Touch]]:
        """The element a statement writes and the array elements it reads (staged reads,
        which read a buffer, left out), at a point of the new loops: their subscripts as
        Polys of the new loops' variables, None where one is not a polynomial."""
        unit = item.placed.unit
        values = dict(zip((loop.var for loop in unit.loops), item.args))

        def at(access: Access) -> Touch:
            where = held_subscripts(self.program, access, unit)
            if where is None or not all(isinstance(v, Poly) for v in values.values()):
                return access.variable.name, None
            return access.variable.name, tuple(
                s.substitute(values) for s in where)  # type: ignore[arg-type]

        statement = unit.first
        target = at(statement.writes[0]) if len(unit.statements) == 1 and statement.writes \
            else ("", None)
        reads = [at(a) for a in statement.reads if a.variable.is_array
                 and staged(self.program, a, unit) is None]
        return target, reads

    def held_elements(self, item: For, loops: list[For]) -> list[tuple[str, str]]:
        """The array elements a vectorized loop sums into (``code.held_sums``), each as its
        statements write it, with the scalar that holds it for the loop's run. An element
        written in two ways (isl may place the update in two branches, an outer variable
        replaced by its value in one) or through the loop's own variable is left in memory:
        exact, only slower."""
        held: dict[str, str] = {}
        for array, scalar, calls in held_sums(item, loops):
            targets = [_target(self.rewritten(call), array) for call in calls]
            texts = {ast.unparse(t) for t in targets if t is not None}
            if len(texts) == 1 and None not in targets and item.var not in {
                    n.id for t in targets if t is not None for n in ast.walk(t)
                    if isinstance(n, ast.Name)}:
                held[texts.pop()] = scalar
        if held:
            self.held[id(item)] = held
        return list(held.items())

    def chunked(self, item: For, depth: int, loops: list[For]) -> None:
        """A parallel loop whose reductions into arrays go to a copy per thread: the copies
        (filled with the operator's identity, or with the array for an idempotent one),
        ``prange`` over one chunk of iterations per thread, then the copies combined into
        the array element by element, in chunk order."""
        node, names = item.node, item.node.chunks
        assert names is not None
        self.threads = True
        chunk, count = names.chunk, names.count
        self.line(depth, f"{count} = get_num_threads()")
        for reduction in node.reductions:
            if reduction.copy:
                self.line(depth, _copies_allocation(reduction, count,
                                                    self.program.rank(reduction.key)))
        self.line(depth, f"for {chunk} in prange({count}):")
        self.buffer_allocations(node, depth + 1)
        for reduction in node.reductions:
            if reduction.copy and reduction.op in _IDEMPOTENT:
                self.line(depth + 1, f"{reduction.copy}[{chunk}] = {reduction.name}")
        iterations = bare(_tiles(item))
        if not (iterations.isidentifier() or iterations.isdigit()):
            iterations = f"({iterations})"
        first = f"{chunk} * {iterations} // {count}"
        after = f"({chunk} + 1) * {iterations} // {count}"
        self.line(depth + 1, f"for {names.index} in range({first}, {after}):")
        start = value(item.start)
        offset = f"{item.step} * {names.index}" if item.step != 1 else names.index
        self.line(depth + 2, f"{item.var} = {offset if start == '0' else f'{start} + {offset}'}")
        self.allocations(node, depth + 2)
        self.block(item.body, depth + 2, loops + [item])
        self.copy_back(node, depth + 2)
        for reduction in node.reductions:
            if reduction.copy:
                self.combine(reduction, names, depth)

    def combine(self, reduction: Reduction, names: Chunks, depth: int) -> None:
        """``array[e] op= copies[c, e]`` for every element, chunk by chunk (the elements in
        parallel: each is one thread's)."""
        rank = self.program.rank(reduction.key)
        elements = names.elements[:rank]
        for d, element in enumerate(elements):
            self.line(depth + d, f"for {element} in {'prange' if d == 0 else 'range'}("
                                 f"{reduction.name}.shape[{d}]):")
        self.line(depth + rank, f"for {names.chunk} in range({names.count}):")
        target = f"{reduction.name}[{', '.join(elements)}]"
        part = f"{reduction.copy}[{names.chunk}, {', '.join(elements)}]"
        inner = depth + rank + 1
        if reduction.op in ("max", "min"):
            self.line(inner, f"{target} = {reduction.op}({target}, {part})")
        else:
            self.line(inner, f"{target} {reduction.op}= {part}")

    def allocations(self, node: LoopNode, depth: int) -> None:
        """Arrays private to each iteration of this loop: allocated at its start (one copied
        back: a copy of the array, so that the elements no iteration writes keep their
        values)."""
        for key, placement in self.out.placements.items():
            if node not in placement.nodes or not placement.private.variable.is_array:
                continue
            private = placement.private
            if private.last:
                self.line(depth, f"{private.name} = {private.variable.name}.copy()")
                continue
            allocation = self.syntax.allocations.get(placement.private.variable.name)
            if allocation is None:
                raise UsageError(f"{placement.private.variable.name} is not allocated in "
                                 f"{self.program.nest.name}: loclab cannot give each "
                                 "iteration a copy of it")
            suffixes = sorted({copy_suffix(u, placement) for u in node.units()
                               if any(a.variable.key == key for s in u.statements
                                      for a in s.accesses)})
            for suffix in suffixes:
                statement = copy.deepcopy(allocation)
                statement.targets = [ast.Name(placement.private.variable.name + suffix,
                                              ast.Store())]
                self.line(depth, ast.unparse(statement))

    def expansions_before(self, item: Code, depth: int, loops: list[For]) -> None:
        """An expanded variable's array, allocated before the first code that uses it."""
        if loops:
            return
        for key, expansion in self.out.expansions.items():
            if key in self.expanded_done or not uses(item, key):
                continue
            self.expanded_done.add(key)
            extents = ", ".join(f"max(0, {value(e)})" for e in expansion.extents)
            dtype = self.expanded_dtype(key)
            self.line(depth, f"{expansion.private.name} = np.empty(({extents},), "
                             f"dtype={dtype})")

    def expanded_dtype(self, key: str) -> str:
        """The element type of an expanded scalar's array: the type given for the scalar
        (Numba's, for the arguments the code is for: ``s = np.float32(0)`` summing float32
        values stays float32), else int64 for a scalar used in a subscript, else float64."""
        name = next(v.name for v in self.program.nest.variables if v.key == key)
        given = self.out.scalar_types.get(name)
        if given is not None:
            return f"np.{given}"
        return "np.int64" if _indexes(self.program, name) else "np.float64"

    def rewritten(self, item: Call) -> ast.AST:
        """A unit's syntax at one point of the new loops: their values for the original
        loop variables, private names per copy, expanded and staged accesses, and under
        Numba unsigned subscripts."""
        unit = item.placed.unit
        syntax = copy.deepcopy(unit.syntax)
        values = {loop.var: value(arg) for loop, arg in zip(unit.loops, item.args)
                  if value(arg) != loop.var}
        buffers = {b.buffer.variable.name: b for b in self.out.buffers if b.covers(unit)}
        rewriter = StatementRewriter(values, self.renames(unit), self.expanded(unit), buffers)
        syntax = rewriter.visit(syntax)
        ast.fix_missing_locations(syntax)
        if self.out.numba:
            unsigned = self.unsigned_own | unsigned_in(unit.statements, bool(unit.opaque),
                                                       self.unsigned_proved,
                                                       self.unsigned_everywhere)
            cast = _Unsigned(unsigned)
            syntax = cast.visit(syntax)
            self.uintp = self.uintp or cast.cast
        return syntax

    def call(self, item: Call, depth: int, loops: list[For]) -> None:
        unit = item.placed.unit
        syntax = self.rewritten(item)
        for around in loops:
            if id(around) in self.held:
                syntax = _Held(self.held[id(around)]).visit(syntax)
        reduction = self.atomic(unit, loops)
        if reduction is not None and self.out.numba:
            syntax = _Atomic(reduction, unit).visit(syntax)
            self.atomics = True
        for item in loops:
            if item.node.chunks is None or not self.out.numba:
                continue
            for copied in item.node.reductions:
                if copied.copy:
                    syntax = _OwnCopy(copied, item.node.chunks.chunk).visit(syntax)
        ast.fix_missing_locations(syntax)
        self.line(depth, ast.unparse(syntax))

    def copy_back(self, node: LoopNode, depth: int) -> None:
        """At the end of the last iteration, the caller's array gets the private copy."""
        for placement in self.out.placements.values():
            private = placement.private
            if not private.last or node not in placement.nodes:
                continue
            last = " and ".join(f"{loop.var} == {value(v)}"
                                for loop, v in zip(private.loop.enclosing, placement.last))
            self.line(depth, f"if {last}:  # the last iteration: the values the caller sees")
            self.line(depth + 1, f"{private.variable.name}[...] = {private.name}")

    def renames(self, unit: Unit) -> dict[str, str]:
        out: dict[str, str] = {}
        for placement in self.out.placements.values():
            private = placement.private
            if private.last and private.loop in unit.loops:
                out[private.variable.name] = private.name
                continue
            suffix = copy_suffix(unit, placement)
            if suffix and placement.private.loop in unit.loops:
                out[placement.private.variable.name] = placement.private.variable.name + suffix
        return out

    def expanded(self, unit: Unit) -> dict[str, tuple[str, list[str]]]:
        out: dict[str, tuple[str, list[str]]] = {}
        for expansion in self.out.expansions.values():
            private = expansion.private
            if private.loop not in unit.loops:
                continue  # outside the loop the variable is the original one
            indices = [f"{loop.var} - ({value(offset)})" if value(offset) != "0" else loop.var
                       for loop, offset in zip(private.expand_by, expansion.offsets)]
            out[private.variable.name] = (private.name, indices)
        return out

    def atomic(self, unit: Unit, loops: list[For]) -> Reduction | None:
        """The generalized reduction a parallel loop around the unit makes this update."""
        touched = {a.variable.key for s in unit.statements for a in s.accesses if a.write}
        for item in loops:
            for reduction in item.node.reductions:
                if not (reduction.scalar or reduction.copy or reduction.held) \
                        and reduction.key in touched:
                    return reduction
        return None

    def buffer_allocations(self, node: LoopNode | None, depth: int) -> None:
        """Under Numba, the buffers of the ``stage`` steps whose outermost parallel loop is
        ``node`` (None: those outside every parallel loop), allocated once at its largest
        slice: at the start of each of its iterations (a thread's own), or of the function.
        A buffer allocated where it is filled, each iteration of the staged loop, costs an
        allocation per tile (syrk's packed panel, 2 cores, 2026-11-29: 48.5 ms allocated
        per tile against 41.6 ms once per thread)."""
        if not self.out.numba:
            return
        for buffer in self.out.buffers:
            if buffer.buffer.kind != "stage" or _outermost_parallel(buffer) is not node:
                continue
            extents = [str(bounded) if bounded is not None else f"max(0, {bare(value(e))})"
                       for e, bounded in zip(buffer.in_buffer_order(buffer.extents),
                                             buffer.in_buffer_order(buffer.bounded_extents))]
            array = buffer.buffer.variable.name
            self.line(depth, f"{buffer.buffer.name} = np.empty(({', '.join(extents)},), "
                             f"dtype={array}.dtype)")

    def mark(self, item: Mark, depth: int) -> None:
        """The copy of a buffered array's slice: its first index per dimension, then the
        slice itself (a copy, so that it is contiguous and its own). Under Numba a staged
        slice is copied by loops into its buffer, allocated before: Numba's copy of a
        transposed slice (``.T.copy()``, or a slice assigned into the buffer) walks it
        through a generic iterator (syrk, 2 cores: 77 and 75 ms against 48.5 ms)."""
        buffer: BufferMarker = item.marker.payload
        ranges, highs = [], []
        for k, low in enumerate(buffer.lows):
            self.line(depth, f"{low} = {value(item.values[f'lo{k}'])}")
            highs.append(bare(value(plus(item.values[f"hi{k}"], 1))))
            ranges.append(f"{low}:{highs[-1]}")
        array = buffer.buffer.variable.name
        if self.out.numba and buffer.buffer.kind == "stage":
            indices = [f"{buffer.buffer.name}_i{k}" for k in range(buffer.rank)]
            for k, (index, low, high) in enumerate(zip(indices, buffer.lows, highs)):
                self.line(depth + k, f"for {index} in range({low}, {high}):")
            self.uintp = True
            into = buffer.in_buffer_order([f"uintp({index} - {low})"
                                           for index, low in zip(indices, buffer.lows)])
            self.line(depth + buffer.rank, f"{buffer.buffer.name}[{', '.join(into)}] = "
                                           f"{array}[{', '.join(indices)}]")
            return
        layout = ".T" if buffer.buffer.transposed else ""  # .copy(): C order, contiguous
        self.line(depth, f"{buffer.buffer.name} = {array}[{', '.join(ranges)}]{layout}.copy()")


class _Atomic(ast.NodeTransformer):
    """``X[i, j] += v`` (anywhere in a unit) as ``atomic_add(X.reshape(-1), index, v)``."""

    def __init__(self, reduction: Reduction, unit: Unit) -> None:
        self.reduction = reduction
        self.unit = unit

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.stmt:
        return self._update(node)

    def visit_Assign(self, node: ast.Assign) -> ast.stmt:
        return self._update(node)

    def _update(self, node: ast.AugAssign | ast.Assign) -> ast.stmt:
        target = node.target if isinstance(node, ast.AugAssign) else node.targets[0]
        if not isinstance(target, ast.Subscript) or _flatten(target)[0] != self.reduction.name:
            return node
        if self.reduction.op != "+":
            raise UsageError(f"--emit numba: the generalized reduction {self.reduction.op} on "
                             f"{self.reduction.name} (line {self.unit.line}) needs an atomic "
                             "update Numba lacks (loclab has an atomic add): emit python or c")
        target, increment = _update_parts(node, self.reduction.name)
        base, indices = _flatten(target)
        texts = [ast.unparse(i) for i in indices]
        if len(texts) == 1:
            array, flat = base, texts[0]
        else:
            array, flat = f"{base}.reshape({base}.size)", texts[0]
            for k, index in enumerate(texts[1:], 1):
                flat = f"({flat}) * {base}.shape[{k}] + {index}"
        return ast.parse(f"atomic_add({array}, {flat}, {increment})").body[0]


class _OwnCopy(ast.NodeTransformer):
    """An update of a reduced array, ``y[j] += v`` (or ``y[j] = max(y[j], v)``), as one of
    the chunk's copy, ``y_copies[c, j] += v``: the target and its own reads only (other
    elements of the array, which the loop never updates, are read from the array)."""

    def __init__(self, reduction: Reduction, chunk: str) -> None:
        self.reduction = reduction
        self.chunk = chunk

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.stmt:
        if self._reduced(node.target):
            node.target = self._own(node.target, ast.Store())
        return node

    def visit_Assign(self, node: ast.Assign) -> ast.stmt:
        target = node.targets[0]
        if len(node.targets) != 1 or not self._reduced(target):
            return node
        same = ast.dump(loaded(target))
        node.value = _Replace(same, self._own(target, ast.Load())).visit(node.value)
        node.targets = [self._own(target, ast.Store())]
        return node

    def _reduced(self, target: ast.expr) -> bool:
        return isinstance(target, ast.Subscript) and _flatten(target)[0] == self.reduction.name

    def _own(self, target: ast.expr, context: ast.expr_context) -> ast.Subscript:
        _, indices = _flatten(target)
        items = [ast.Name(self.chunk, ast.Load()), *(loaded(i) for i in indices)]
        return ast.Subscript(ast.Name(self.reduction.copy, ast.Load()),
                             ast.Tuple(items, ast.Load()), context)


class _Replace(ast.NodeTransformer):
    """Every occurrence of one expression (by its dump) replaced by another."""

    def __init__(self, dump: str, replacement: ast.expr) -> None:
        self.dump = dump
        self.replacement = replacement

    def visit(self, node: ast.AST) -> ast.AST:
        if isinstance(node, ast.expr) and ast.dump(node) == self.dump:
            return copy.deepcopy(self.replacement)
        return super().visit(node)


# How a copy of a reduced array starts: the operator's identity, or, for an idempotent
# operator (x op x == x), the array itself
_IDENTITY = {"+": "np.zeros", "|": "np.zeros", "^": "np.zeros", "*": "np.ones"}
_IDEMPOTENT = {"max", "min", "&"}


def _outermost_parallel(buffer: BufferMarker) -> LoopNode | None:
    """The outermost parallel loop around a buffer's marker (None: none is)."""
    return next((node for node in buffer.path if node.parallel), None)


def _copies_allocation(reduction: Reduction, count: str, rank: int) -> str:
    shape = ", ".join([count, *(f"{reduction.name}.shape[{d}]" for d in range(rank))])
    allocate = _IDENTITY.get(reduction.op, "np.empty")
    return f"{reduction.copy} = {allocate}(({shape}), {reduction.name}.dtype)"


def _nth(start: str, step: int, counter: str) -> str:
    """The loop's value at its ``counter``-th iteration."""
    offset = counter if step == 1 else f"{step} * {counter}"
    return f"{start} + {offset}" if start != "0" else offset


def _tiles(item: For) -> str:
    """How many values a loop from start to stop by step takes (a loop counting down, as
    the user wrote it, from start down to stop: the span and the step turned around)."""
    high, low = (item.stop, item.start) if item.step > 0 else (item.start, item.stop)
    step = abs(item.step)
    span = high - low if isinstance(high, Poly) and isinstance(low, Poly) else None
    if span is None:
        return f"({value(high)} - ({value(low)}) + {step - 1}) // {step}" if step != 1 \
            else f"({value(high)} - ({value(low)}))"
    return poly((span + Poly.const(step - 1)).floordiv(step)) if step != 1 else poly(span)


class _Held(ast.NodeTransformer):
    """Every access of an element held in a scalar (as emitted) as that scalar."""

    def __init__(self, held: dict[str, str]) -> None:
        self.held = held

    def visit_Subscript(self, node: ast.Subscript) -> ast.expr:
        name = self.held.get(ast.unparse(node))
        if name is not None:
            return ast.Name(name, node.ctx)
        self.generic_visit(node)
        return node


def _target(syntax: ast.AST, name: str) -> ast.Subscript | None:
    """The element of array ``name`` a statement assigns to (``A[i, j] -= ...``)."""
    for node in ast.walk(syntax):
        targets = node.targets if isinstance(node, ast.Assign) else (
            [node.target] if isinstance(node, ast.AugAssign) else [])
        for target in targets:
            if isinstance(target, ast.Subscript) and _flatten(target)[0] == name:
                return target
    return None


class _Unsigned(ast.NodeTransformer):
    """``A[i, j + 1]`` as ``A[uintp(i), uintp(j + 1)]`` for the arrays named."""

    def __init__(self, names: Collection[str]) -> None:
        self.names = names
        self.cast = False  # whether it cast any subscript

    def visit_Subscript(self, node: ast.Subscript) -> ast.expr:
        self.generic_visit(node)
        if _flatten(node)[0] not in self.names:
            return node
        self.cast = True
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        cast = [ast.Call(ast.Name("uintp", ast.Load()), [item], []) for item in items]
        node.slice = ast.Tuple(cast, ast.Load()) if len(cast) > 1 else cast[0]
        return node


class StatementRewriter(ast.NodeTransformer):
    """Loop variables replaced, private names per copy, expanded and staged accesses."""

    def __init__(self, values: dict[str, str], renames: dict[str, str],
                 expanded: dict[str, tuple[str, list[str]]],
                 buffers: dict[str, BufferMarker]) -> None:
        self.values = {name: ast.parse(text, mode="eval").body for name, text in values.items()}
        self.renames = renames
        self.expanded = expanded
        self.buffers = buffers

    def visit_Name(self, node: ast.Name) -> ast.expr:
        if node.id in self.expanded:
            name, indices = self.expanded[node.id]
            index = self.visit(ast.parse(", ".join(indices), mode="eval").body)
            return ast.Subscript(ast.Name(name, ast.Load()), index, node.ctx)
        if node.id in self.renames:
            return ast.Name(self.renames[node.id], node.ctx)
        if isinstance(node.ctx, ast.Load) and node.id in self.values:
            return copy.deepcopy(self.values[node.id])
        return node

    def visit_Subscript(self, node: ast.Subscript) -> ast.expr:
        base, indices = _flatten(node)
        if base in self.buffers and isinstance(node.ctx, ast.Load) \
                and serves(self.buffers[base].buffer.reads, node):
            buffer = self.buffers[base]
            shifted = buffer.in_buffer_order(
                [f"({ast.unparse(self.visit(copy.deepcopy(i)))}) - {low}"
                 for i, low in zip(indices, buffer.lows)])
            return ast.parse(f"{buffer.buffer.name}[{', '.join(shifted)}]", mode="eval").body
        self.generic_visit(node)
        return node


def _flatten(node: ast.expr) -> tuple[str, list[ast.expr]]:
    """``A[i][j]`` and ``A[i, j]``: (``A``, [i, j])."""
    indices: list[ast.expr] = []
    while isinstance(node, ast.Subscript):
        piece = node.slice
        items = piece.elts if isinstance(piece, ast.Tuple) else [piece]
        indices = list(items) + indices
        node = node.value
    return (node.id if isinstance(node, ast.Name) else ast.unparse(node)), indices


def _update_parts(syntax: ast.stmt, name: str) -> tuple[ast.Subscript, str]:
    """(target, increment) of ``X[..] += v``, ``X[..] -= v`` or ``X[..] = X[..] + v``
    (``nest.python.update_increment``)."""
    target = syntax.target if isinstance(syntax, ast.AugAssign) else \
        syntax.targets[0] if isinstance(syntax, ast.Assign) else None
    increment = update_increment(syntax) if isinstance(target, ast.Subscript) else None
    if increment is None:
        raise UsageError(f"--emit numba: cannot read {ast.unparse(syntax)} as an update of "
                         f"{name}")
    sign, value = increment
    text = ast.unparse(value)
    return target, f"-({text})" if sign else text


def loaded(node: ast.expr) -> ast.expr:
    """A copy of an expression with every name and subscript read, not stored."""
    twin = copy.deepcopy(node)
    for child in ast.walk(twin):
        if hasattr(child, "ctx"):
            child.ctx = ast.Load()  # type: ignore[attr-defined]
    return twin


def _indexes(program: Program, name: str) -> bool:
    """Whether a scalar is used in a subscript (it then holds integers)."""
    return any(isinstance(n, ast.Name) and n.id == name
               for node in ast.walk(program.syntax.function) if isinstance(node, ast.Subscript)
               for n in ast.walk(node.slice))


# -- expressions ------------------------------------------------------------------------------
def value(v: Value) -> str:
    """Python source of an index expression."""
    if isinstance(v, Select):
        return f"({value(v.then)} if {condition(v.condition)} else {value(v.otherwise)})"
    return poly(v)


def bare(text: str) -> str:
    """Text without the parentheses that enclose all of it (``(M // 2)`` is ``M // 2``)."""
    while text.startswith("(") and text.endswith(")"):
        depth = 0
        for position, char in enumerate(text):
            depth += {"(": 1, ")": -1}.get(char, 0)
            if depth == 0 and position < len(text) - 1:
                return text
        text = text[1:-1]
    return text


def poly(p: Poly) -> str:
    return render(p, _atom)


def _atom(atom: object) -> str:
    if isinstance(atom, Symbol):
        return atom.name
    if isinstance(atom, (FloorDiv, Mod)):
        inner = poly(atom.inner)
        if len(atom.inner.terms) > 1 or atom.inner.terms[0][1] != 1:
            inner = f"({inner})"
        return f"({inner} {'//' if isinstance(atom, FloorDiv) else '%'} {atom.divisor})"
    assert isinstance(atom, MinMax)
    return f"{atom.function}({', '.join(poly(a) for a in atom.args)})"


def condition(cond: Condition) -> str:
    if isinstance(cond, Compare):
        return f"{poly(cond.left)} {cond.op} {poly(cond.right)}"
    if cond.op == "not":
        return f"not ({condition(cond.args[0])})"
    return f" {cond.op} ".join(f"({condition(a)})" if isinstance(a, BoolOp) else condition(a)
                               for a in cond.args)


def _guarded_calls(body: list[Code]) -> list[tuple[Call, list[Condition]]] | None:
    """A strip's statements with the isl guards around each (a guard without an else, and
    nothing else, may wrap them); None where the body holds anything else."""
    found: list[tuple[Call, list[Condition]]] = []
    for item in body:
        if isinstance(item, Call):
            found.append((item, []))
        elif isinstance(item, If) and not item.orelse:
            inside = _guarded_calls(item.then)
            if inside is None:
                return None
            found += [(call, [item.condition, *guards]) for call, guards in inside]
        else:
            return None
    return found
