"""CUDA of a transformed Python function: a Python module whose function of the same name and
parameters takes CuPy arrays and launches kernels written from the same code tree as the other
emitters (``loclab transform --emit cuda``).

What runs where follows the tree. A loop the ``grid`` step mapped starts a kernel: its loops
run over blocks, the loops ``block`` mapped inside it over threads, each strided over as many
blocks or threads as there are (``for (i = start + threadIdx.x; i < stop; i +=
blockDim.x)``), so every trip count is covered whatever the launch; the code inside runs in
each thread, in the tree's order. Loops around a grid run on the host: one launch per
iteration, the arrays staying on the device. Any other top-level code that touches arrays
runs as written in a kernel of one thread (correct, and said to be slow: map its loops);
scalar code outside the loops runs on the host. Statements are the user's, rewritten as for
Python (loop variables, unrolled copies) and printed as typed C by
:mod:`loclab.transform.cuda_syntax`: arrays have the element types they are emitted for
(``array_types``: float32, or int64 for arrays whose values index others, unless told), loop
variables and sizes are 64-bit, and a generalized reduction under a mapped loop is an atomic
add. Values do not cross from a kernel to later code through scalars: a GPU thread keeps its
scalars to itself, so such code is refused with the line.
"""

from __future__ import annotations

import ast
import copy
import functools
import math
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from loclab.errors import UsageError
from loclab.nest.expr import MinMax, Poly, Symbol
from loclab.transform.code import counting_down, fors, substitute_value, upward, walk
from loclab.transform.codegen import Call, Code, For, If, Mark, Select, Value, plus
from loclab.transform.cuda_syntax import (BINARY, HELPERS, LauncherNames, Translator, Typing,
                                         c_type, join)
from loclab.transform.emit_c import condition as c_condition
from loclab.transform.emit_c import value as c_value
from loclab.transform.emit_python import StatementRewriter, loaded
from loclab.transform.emit_python import condition as py_condition
from loclab.transform.emit_python import value as py_value
from loclab.transform.buffers import BufferMarker
from loclab.transform.cuda_staging import (ASYNC_HELPERS, Staging, buffer_size,
                                           largest_slice, leading_marks, reads_of,
                                           shared_layout)
from loclab.transform.storage import Placement, copy_suffix
from loclab.transform.subscripts import unsigned_arrays
from loclab.transform.tree import LoopNode, Program, Reduction, Unit

FLOAT = np.dtype(np.float32)  # an array's element type unless told or used as an index
INDEX = np.dtype(np.int64)
GRID_LIMITS = {"x": 2**31 - 1, "y": 65535, "z": 65535}
BARRIER = "__syncthreads();"
MAX_UNROLLED = 32  # a loop of at most this many iterations is unrolled in a whole tile
DEVICE_HELPERS = HELPERS + """
template <typename A, typename B> __device__ __forceinline__ A loclab_floord(A a, B b) {
  return loclab_floordiv(a, b); }
""" + ASYNC_HELPERS


@dataclass
class CudaOutput:
    """What the emitter needs besides the code tree."""

    program: Program
    array_types: dict[str, np.dtype]  # every array argument's element type
    # pairs of arrays that may share memory: the function refuses to run when they do
    overlaps: list[tuple[str, str]] = field(default_factory=list)
    buffers: list[BufferMarker] = field(default_factory=list)  # staged slices
    placements: dict[str, Placement] = field(default_factory=dict)  # private scalars' places


def array_types(program: Program, given: dict[str, str] | None = None) -> dict[str, np.dtype]:
    """The element type each array argument is emitted for: as ``given``, else int64 for an
    array whose values index others and float32 for the rest. A name that is not an array
    argument is an error naming the arrays."""
    from loclab.transform.inputs import index_names

    arrays = [v.name for v in program.nest.variables if v.is_array and v.is_argument]
    given = dict(given or {})
    unknown = sorted(set(given) - set(arrays))
    if unknown:
        raise UsageError(f"--dtype {unknown[0]}: not an array argument of "
                         f"{program.nest.name} (arrays: {', '.join(arrays) or 'none'})")
    indexes = index_names(program)
    out = {}
    for name in arrays:
        try:
            out[name] = np.dtype(given.get(name) or (INDEX if name in indexes else FLOAT))
        except TypeError:
            raise UsageError(f"--dtype {name}={given[name]}: not a NumPy type") from None
        c_type(out[name])  # one CUDA has
    return out


def emit_cuda(output: CudaOutput, code: list[Code]) -> str:
    return _Emitter(output).module(code)


@dataclass
class _Kernel:
    name: str
    text: str
    parameters: list[str]  # host expressions passed, in order
    grid: list[str]  # blocks along x, y, z (host expressions)
    block: list[int]  # threads along x, y, z
    line: int


class _Emitter:
    def __init__(self, output: CudaOutput) -> None:
        self.out = output
        self.program = output.program
        self.syntax = output.program.syntax
        self.names = LauncherNames.avoiding(self.syntax.function)
        self.where = f"{self.syntax.filename}"
        nest = self.program.nest
        self.arrays = {v.name: v for v in nest.variables if v.is_array}
        for name, variable in self.arrays.items():
            if not variable.is_argument:
                raise UsageError(f"{self.syntax.filename}:{variable.line}: {name} is an array "
                                 "the function makes: the CUDA emitter takes arrays as "
                                 "arguments only")
        self.ndims = {name: self._ndim(name) for name in self.arrays}
        self.dtypes = output.array_types
        floats = [d for d in self.dtypes.values() if d.kind == "f"]
        self.compute = max(floats, key=lambda d: d.itemsize) if floats else FLOAT
        self.sizes = set(nest.parameters)  # what bounds loops and subscripts: integers
        self.parameters = [a.arg for a in self.syntax.function.args.args]
        self.unsigned = unsigned_arrays(self.program)
        self.kernels: list[_Kernel] = []
        self.host_scalars: set[str] = set()  # scalars the host assigns (passed by value)
        self.kernel_scalars: dict[str, int] = {}  # scalar -> line of the kernel assigning it

    # -- the module -------------------------------------------------------------------------
    def module(self, code: list[Code]) -> str:
        for marker in self.out.buffers:
            self._check_staged(marker)
        for private in self.program.private.values():
            if private.variable.is_array:
                raise UsageError(f"{private.variable.name}: an array private to iterations is "
                                 "not yet emitted for CUDA")
        body: list[str] = []
        self.host(code, body, 1, [])
        function = copy.copy(self.syntax.function)
        function.body = [ast.Pass()]
        function.decorator_list = []
        signature = ast.unparse(function).rsplit("\n", 1)[0]
        source = DEVICE_HELPERS + "\n" + "\n\n".join(k.text for k in self.kernels) + "\n"
        arrays = {name: (str(self.dtypes[name]), self.ndims[name]) for name in self.arrays}
        lines = ["import numpy as np", "", f"SOURCE = r'''{source}'''",
                 f"ARRAYS = {arrays!r}  # the element type and rank each kernel is written for",
                 f"KERNELS = {[k.name for k in self.kernels]!r}",
                 f"WIDE_BOUNDS = {self._wide_bounds()!r}  # a loop bound multiplies sizes",
                 f"OVERLAPS = {self.out.overlaps!r}  # arrays that may share memory", "",
                 RUNTIME, "", "", signature]
        if self.syntax.docstring is not None:
            lines.append("    " + repr(ast.literal_eval(self.syntax.docstring.value)))
        arrays = ", ".join(f"{n}={n}" for n in self.arrays)
        sizes = ", ".join(n for n in self.parameters if n in self.sizes)
        lines.append(f"    _check({arrays})")
        lines.append(f"    {self.names.index} = _index(dict({arrays}), [{sizes}])")
        lines.append(f"    {self.names.index_type} = np.int32 if {self.names.index} == 'int' "
                     "else np.int64")
        return "\n".join(lines + body) + "\n"

    def _check_staged(self, marker: BufferMarker) -> None:
        """A staged slice goes to shared memory: a stage (not a copy) of a loop inside a grid
        and outside its block, whose slices are bounded by constants (tiles)."""
        buffer = marker.buffer
        what = f"stage({buffer.variable.name}, {buffer.loop.name})"
        if buffer.kind != "stage":
            raise UsageError(f"copy({buffer.variable.name}, {buffer.loop.name}): not emitted "
                             "for CUDA (stage a loop of a kernel instead)")
        around = [*marker.path]
        if not any(n.gpu.startswith("blockIdx") for n in around):
            raise UsageError(f"{what}: {buffer.loop.name} is not inside a grid: the slice is "
                             "staged in a block's shared memory")
        strided = [n for n in around if n.gpu.startswith("threadIdx") and not _one_each(n)]
        if strided:
            raise UsageError(f"{what}: {buffer.loop.name} runs in each thread, inside "
                             f"{strided[0].name}, which has more iterations than threads: "
                             "stage a loop outside the block's loops, or give the block a "
                             "thread per iteration, so that its threads share the slice")
        if any(extent is None for extent in largest_slice(marker)):
            raise UsageError(f"{what}: the slice is not bounded by a constant (it grows "
                             "with the sizes): tile the loops it runs over first")

    def _wide_bounds(self) -> bool:
        return any(bound is not None and not bound.is_affine()
                   for loop in self.program.nest.loops for bound in (loop.start, loop.stop))

    def _ndim(self, name: str) -> int:
        counts = {len(a.subscripts) for s in self.program.nest.statements for a in s.accesses
                  if a.variable.name == name}
        if len(counts) != 1:
            raise UsageError(f"{name} is indexed with {' and '.join(map(str, sorted(counts)))} "
                             "subscripts: the CUDA emitter needs one rank per array")
        return counts.pop()

    # -- the host ---------------------------------------------------------------------------
    def host(self, code: list[Code], lines: list[str], depth: int, loops: list[str]) -> None:
        pad = "    " * depth
        for item in code:
            if isinstance(item, For) and _maps(item):
                if item.node.gpu:
                    self.launch(self.kernel([item], loops), lines, pad)
                    continue
                item = counting_down(item)
                if item.single:
                    lines.append(f"{pad}{item.var} = {py_value(item.start)}")
                    self.host(item.body, lines, depth, loops + [item.var])
                    continue
                step = f", {item.step}" if item.step != 1 else ""
                lines.append(f"{pad}for {item.var} in range({py_value(item.start)}, "
                             f"{py_value(item.stop)}{step}):")
                self.host(item.body, lines, depth + 1, loops + [item.var])
            elif isinstance(item, If) and _maps(item):
                lines.append(f"{pad}if {py_condition(item.condition)}:")
                self.host(item.then, lines, depth + 1, loops)
                if item.orelse:
                    lines.append(f"{pad}else:")
                    self.host(item.orelse, lines, depth + 1, loops)
            elif isinstance(item, Call) and self.on_host(item):
                statement = self.rewritten(item)
                self.host_scalars |= _assigned(statement)
                lines.append(pad + ast.unparse(statement))
            elif isinstance(item, Mark):
                raise UsageError("stage and copy: not yet emitted for CUDA")
            else:
                self.launch(self.kernel([item], loops), lines, pad)
        if not any(line.strip() for line in lines):
            lines.append(f"{pad}pass")

    def on_host(self, item: Call) -> bool:
        """A statement outside every loop that touches no array element: the host runs it
        (a kernel's scalar it reads is refused: the value stayed in the kernel)."""
        unit = item.placed.unit
        if unit.loops or unit.opaque:
            return False
        syntax = unit.syntax
        if any(isinstance(n, ast.Subscript) for n in ast.walk(syntax)) or isinstance(
                syntax, (ast.For, ast.While, ast.If)):
            return False
        read = {n.id for n in ast.walk(syntax) if isinstance(n, ast.Name)
                and isinstance(n.ctx, ast.Load)}
        self._refuse_kernel_values(read, unit.line)
        return True

    def _refuse_kernel_values(self, names: set[str], line: int) -> None:
        for name in sorted(names & set(self.kernel_scalars)):
            raise UsageError(f"{self.where}:{line}: {name} is assigned in the kernel of line "
                             f"{self.kernel_scalars[name]} and read here: on the GPU each "
                             "thread keeps its scalars to itself")

    def launch(self, kernel: _Kernel, lines: list[str], pad: str) -> None:
        self.kernels.append(kernel)
        grid = ", ".join(kernel.grid)
        block = ", ".join(map(str, kernel.block))
        lines.append(f"{pad}_launch({kernel.name!r}, {self.names.index}, ({grid}), ({block}), "
                     f"({''.join(p + ', ' for p in kernel.parameters)}))")

    # -- a kernel ---------------------------------------------------------------------------
    def kernel(self, items: list[Code], host_loops: list[str]) -> _Kernel:
        items = [upward(item) for item in items]
        name = f"kernel_{len(self.kernels)}"
        line = _first_line(items)
        statements = {id(call): self.rewritten(call) for call in _calls(items)}
        staged = [mark.marker.payload for mark in _marks(items)]
        buffers = {m.buffer.name: m for m in staged}
        lows = {low for m in staged for low in m.lows}
        assigned = set().union(*(_assigned(s) for s in statements.values())) \
            - _loop_names(items, statements)
        read = (set().union(*(_read(s) for s in statements.values())) | _symbols(items)) \
            - set(buffers) - lows
        local_loops = _loop_names(items, statements) | lows
        arrays = read & set(self.arrays) | {m.buffer.variable.name for m in staged} | {
            _base(target) for s in statements.values() for target in _subscript_targets(s)}
        outside = sorted((read | assigned) - local_loops - set(self.arrays) - _builtins()) \
            + sorted(arrays)
        self._refuse_kernel_values((read - assigned) & set(outside), line)
        reads_before = self._reads_before(items, assigned)
        integers = set(local_loops) | (self.sizes & set(outside)) | set(host_loops)
        # the function's other scalar arguments and the host's scalars: passed by value in
        # the compute type (kernel_parameters)
        given = {name: self.compute for name in outside
                 if name not in self.arrays and name not in assigned and name not in integers
                 and (name in self.parameters or name in self.host_scalars)}
        scalars = {**given, **self.scalar_types(statements.values(), assigned, local_loops,
                                                given)}
        typing = Typing({**self.dtypes, **{n: self.dtypes[m.buffer.variable.name]
                                           for n, m in buffers.items()}},
                        {**self.ndims, **{n: m.rank for n, m in buffers.items()}},
                        self.compute, scalars, integers)
        translator = Translator(typing, self.subscript, lambda node: self._where(node, line))
        params, passed = self.kernel_parameters(outside, assigned, reads_before, typing,
                                                host_loops)
        body: list[str] = []
        grid, block = self.geometry(items, host_loops)
        self.staged = {n: shared_layout(m, reads_of(n, statements.values()), items, block,
                                     self.dtypes[m.buffer.variable.name].itemsize)
                       for n, m in buffers.items()}
        self.pipelined = {mark.marker.payload.buffer.name: f"{loop.var}_slot"
                          for loop in fors(items) for mark in leading_marks(loop)}
        for buffer, (extents, pad) in self.staged.items():
            kind = c_type(self.dtypes[buffers[buffer].buffer.variable.name])
            size = " * ".join(map(str, (extents[:-1] + [extents[-1] + pad]
                                        + ([2] if buffer in self.pipelined else []))))
            padded = f"  // rows padded by {pad}: the warps' reads meet fewer conflicts" if pad else ""
            body.append(f"  __shared__ __align__(16) {kind} {buffer}[{size}];{padded}")
        for scalar in sorted(assigned):
            initial = f" = {scalar}_in" if scalar in reads_before else ""
            body.append(f"  {c_type(scalars[scalar])} {scalar}{initial};")
        writer = _KernelWriter(self, translator, statements, body, block)
        writer.axes = {item.node.gpu for item in fors(items) if item.node.gpu}
        writer.block(items, 1, [])
        for scalar in assigned:
            self.kernel_scalars.setdefault(scalar, line)
        text = (f"template <typename {self.names.index_type}>\n"
                f"__global__ void {name}({', '.join(params)}) {{\n" + "\n".join(body) + "\n}")
        return _Kernel(name, text, passed, grid, block, line)

    def _reads_before(self, items: list[Code], assigned: set[str]) -> set[str]:
        """Scalars the kernel assigns whose value from before it may be read in it (by
        isl's dataflow): passed in; one a kernel before assigned is refused."""
        found = set()
        for scalar in assigned:
            variable = next((v for v in self.program.nest.variables if v.name == scalar), None)
            if variable is None:
                continue  # a name the emitter made (an unrolled copy): assigned before use
            tops = [item.node.origin for item in items if isinstance(item, For)]
            exposed = any(self._remedies.reads_values_from_before(top, variable.key)
                          for top in tops) if tops else True
            if exposed and (scalar in self.parameters or scalar in self.host_scalars
                            or scalar in self.kernel_scalars):
                if scalar in self.kernel_scalars:
                    self._refuse_kernel_values({scalar}, _first_line(items))
                found.add(scalar)
        return found

    @functools.cached_property
    def _remedies(self) -> Any:
        """isl's dataflow of the function, built only for a kernel that needs it."""
        from loclab.deps.remedies import Remedies

        return Remedies(self.program.model)

    def kernel_parameters(self, outside: list[str], assigned: set[str],
                          reads_before: set[str], typing: Typing,
                          host_loops: list[str]) -> tuple[list[str], list[str]]:
        """The kernel's parameters (C) and what the host passes (Python): arrays with their
        extents, sizes and host loop variables as 64-bit integers, the host's other scalars
        in the compute type, and the value from before of a scalar the kernel assigns."""
        params: list[str] = []
        passed: list[str] = []
        for name in sorted(self.arrays):
            if name not in outside:
                continue
            const = "" if self._written(name) else "const "
            params.append(f"{const}{c_type(self.dtypes[name])}* __restrict__ {name}")
            passed.append(name)
            for axis in range(self.ndims[name]):
                params.append(f"{self.names.index_type} {name}_n{axis}")
                passed.append(f"{self.names.index_type}({name}.shape[{axis}])")
        for name in outside:
            if name in self.arrays:
                continue
            if name in assigned:
                if name in reads_before:
                    kind = typing.scalars[name]
                    params.append(f"{c_type(kind)} {name}_in")
                    passed.append(f"np.{kind.name}({name})")
                continue
            if name in typing.integers or name in host_loops:
                params.append(f"{self.names.index_type} {name}")
                passed.append(f"{self.names.index_type}({name})")
            elif name in typing.scalars:  # an argument or a host scalar (kernel: given)
                kind = typing.scalars[name]
                params.append(f"{c_type(kind)} {name}")
                passed.append(f"np.{kind.name}({name})")
            else:
                raise UsageError(f"{self.where}: {name} is read in a kernel but is neither an "
                                 "argument nor a value the host computes")
        return params, passed

    def _written(self, name: str) -> bool:
        return any(a.write and a.variable.name == name for s in self.program.nest.statements
                   for a in s.accesses)

    def scalar_types(self, statements: Any, assigned: set[str], loops: set[str],
                     given: dict[str, np.dtype]) -> dict[str, np.dtype]:
        """Each scalar a kernel assigns, typed by what is assigned to it (the join, to a
        fixed point; integers where only integers are), ``given`` the scalars passed in."""
        found: dict[str, np.dtype | None] = {name: None for name in assigned}
        for _ in range(8):
            typing = Typing(self.dtypes, self.ndims, self.compute,
                            {**given, **{k: v for k, v in found.items() if v is not None}},
                            set(loops) | self.sizes)
            translator = Translator(typing, self.subscript, lambda node: self.where)
            changed = False
            for statement in statements:
                for target, value in _assignments(statement):
                    kind = join(found.get(target), translator.type_of(value))
                    if target in found and kind is not None and kind != found[target]:
                        found[target] = kind
                        changed = True
            if not changed:
                break
        return {name: kind if kind is not None else self.compute for name, kind in found.items()}

    def geometry(self, items: list[Code], host_loops: list[str]) -> tuple[list[str], list[int]]:
        """Blocks along x, y, z (the trip count of each grid loop, computed on the host, up to
        CUDA's limit: a loop strides over the rest) and the threads along them."""
        grid = ["1", "1", "1"]
        block = [1, 1, 1]
        known = set(self.parameters) | self.host_scalars | set(host_loops)
        ends: dict[str, tuple[Value, Value]] = {}  # an outer grid loop's first and last value
        for item in fors(items):
            if not item.node.gpu:
                continue
            axis = "xyz".index(item.node.gpu[-1])
            if item.node.gpu.startswith("threadIdx"):
                block[axis] = item.node.threads
                continue
            bounds = _symbols_of(item.start) | _symbols_of(item.stop)
            unknown = bounds - known - set(ends)
            if unknown:
                raise UsageError(f"{self.where}:{item.node.line}: grid loop {item.var} runs "
                                 f"over bounds that depend on {sorted(unknown)[0]}, which the "
                                 "host does not know before the launch (map that loop with "
                                 "block, or leave it inside the thread)")
            last = plus(item.stop, -item.step)
            counts = {self._count(item, values)
                      for values in _corners([(var, ends[var]) for var in sorted(bounds)
                                              if var in ends])}
            ends[item.var] = (item.start, item.start if item.single else last)
            limit = GRID_LIMITS["xyz"[axis]]
            count = counts.pop() if len(counts) == 1 else f"max({', '.join(sorted(counts))})"
            grid[axis] = f"max(1, min({limit}, {count}))"
        return grid, block

    @staticmethod
    def _count(item: For, values: dict[str, Value]) -> str:
        """The trip count of a loop with the outer grid loops' variables at ``values`` (their
        first or last value: a count there launches enough blocks for a triangle; the
        loops stride over whatever a launch leaves)."""
        if item.single:
            return "1"
        polys = {k: v for k, v in values.items() if isinstance(v, Poly)}
        start, stop = substitute_value(item.start, polys), substitute_value(item.stop, polys)
        high, low = (stop, start) if item.step > 0 else (start, stop)
        return f"-(-({py_value(high)} - ({py_value(low)})) // {abs(item.step)})"

    # -- statements -------------------------------------------------------------------------
    def rewritten(self, item: Call) -> ast.stmt:
        unit = item.placed.unit
        values = {loop.var: py_value(arg) for loop, arg in zip(unit.loops, item.args)
                  if py_value(arg) != loop.var}
        buffers = {b.buffer.variable.name: b for b in self.out.buffers if b.covers(unit)}
        syntax = StatementRewriter(values, self.renames(unit), {}, buffers).visit(
            copy.deepcopy(unit.syntax))
        ast.fix_missing_locations(syntax)
        return syntax

    def renames(self, unit: Unit) -> dict[str, str]:
        out: dict[str, str] = {}
        for placement in self.out.placements.values():
            suffix = copy_suffix(unit, placement)
            if suffix and placement.private.loop in unit.loops:
                out[placement.private.variable.name] = placement.private.variable.name + suffix
        return out

    def subscript(self, base: str, indices: list[ast.expr], translator: Translator) -> str:
        index_translator = replace(translator, index=True)
        if base in getattr(self, "staged", {}):
            extents, pad = self.staged[base]
            widths = extents[1:-1] + [extents[-1] + pad] if len(extents) > 1 else []
            flat = index_translator.expr(indices[0])
            for width, index in zip(widths, indices[1:]):
                flat = f"({flat}) * {width} + {index_translator.expr(index)}"
            if base in self.pipelined:  # the buffer of the two this iteration reads
                flat = f"{self.pipelined[base]} * {buffer_size(extents, pad)} + {flat}"
            return f"{base}[{flat}]"
        if base not in self.arrays:
            raise UsageError(f"{self.where}: {base}[...] is not an array argument")
        texts = []
        for axis, index in enumerate(indices):
            text = index_translator.expr(index)
            if base not in self.unsigned:
                text = f"loclab_wrap({text}, {base}_n{axis})"
            texts.append(text)
        flat = texts[0]
        for axis, text in enumerate(texts[1:], 1):
            flat = f"({flat}) * {base}_n{axis} + {text}"
        return f"{base}[{flat}]"

    def _where(self, node: ast.AST, line: int) -> str:
        return f"{self.where}:{getattr(node, 'lineno', line) + self.syntax.offset}"


class _KernelWriter:
    """The body of one kernel: mapped loops strided over blocks and threads, the rest as
    ordered in the tree."""

    def __init__(self, emitter: _Emitter, translator: Translator,
                 statements: dict[int, ast.stmt], lines: list[str], block: list[int]) -> None:
        self.shape = block  # threads along x, y, z: constants in the code (shifts, unrolling)
        self.ix = emitter.names.index_type  # the template's index type
        self.threads = math.prod(block)
        self.staging = Staging(self.line, block, emitter.staged, emitter.dtypes,
                               emitter.unsigned, translator, self.ix)
        self.axes: set[str] = set()  # the blocks' and threads' axes the kernel maps
        self.guards: list[str] = []  # where a thread's one iteration exists
        self.thread_values: set[str] = set()  # a thread's one iteration of a block loop
        self.divergent: set[str] = set()  # loops threads run a different number of times
        self.diverging = 0  # inside guards that do
        self.assumed: set[str] = set()  # guards a loop's fast version runs under (unswitched)
        self.emitter = emitter
        self.translator = translator
        self.statements = statements
        self.lines = lines

    def line(self, depth: int, text: str) -> None:
        if text == BARRIER and self.lines and self.lines[-1].strip() == BARRIER:
            return  # a barrier right after another waits for nothing more
        self.lines.append("  " * depth + text)

    def block(self, code: list[Code], depth: int, loops: list[For]) -> None:
        for item in code:
            if isinstance(item, For):
                self.loop(item, depth, loops)
            elif isinstance(item, If) and c_condition(item.condition) in self.assumed:
                self.block(item.then, depth, loops)
            elif isinstance(item, If):
                divergent = bool((self.thread_values | self.divergent)
                                 & _condition_symbols(item.condition))
                self.line(depth, f"if ({c_condition(item.condition)}) {{")
                self.diverging += divergent
                self.block(item.then, depth + 1, loops)
                if item.orelse:
                    self.line(depth, "} else {")
                    self.block(item.orelse, depth + 1, loops)
                self.diverging -= divergent
                self.line(depth, "}")
            elif isinstance(item, Call):
                self.require_every_axis(item, loops)
                reduction = self.atomic(item.placed.unit, loops)
                if self.guards:
                    self.line(depth, f"if ({' && '.join(self.guards)}) {{")
                    self.statement(self.statements[id(item)], depth + 1, reduction)
                    self.line(depth, "}")
                else:
                    self.statement(self.statements[id(item)], depth, reduction)
            else:
                self.require_every_thread(item, loops)
                self.stage(item, depth)

    def require_every_axis(self, item: Call, loops: list[For]) -> None:
        """A statement runs inside a loop of every axis its kernel maps: isl may generate
        part of a mapped loop's iterations apart from it (an unroll's remainder, a peeled
        iteration), and that code would then run once per thread (or block) of the axis."""
        around = {loop.node.gpu for loop in loops if loop.node.gpu}
        missing = sorted(self.axes - around)
        if missing:
            unit = item.placed.unit
            raise UsageError(f"{self.emitter.where}:{unit.line + self.emitter.syntax.offset}: "
                             f"isl generates this statement outside the loop mapped to "
                             f"{missing[0]} (an unroll's remainder, or a peeled iteration), "
                             "where every thread of the axis would run it: unroll loops "
                             "the threads do not run over, or leave this loop unmapped")

    def loop(self, item: For, depth: int, loops: list[For]) -> None:
        var, start, stop = item.var, c_value(item.start), c_value(item.stop)
        node = item.node
        if node.gpu.startswith("threadIdx") and _one_each(node):
            self.one_each(item, depth, loops)
            return
        bounds = _symbols_of(item.start) | _symbols_of(item.stop)
        if (self.thread_values | self.divergent) & bounds:
            self.divergent.add(var)  # threads run it a different number of times
        if item.single and not node.gpu:
            self.line(depth, f"{{ const {self.ix} {var} = {start};")
            self.block(item.body, depth + 1, loops + [item])
            self.line(depth, "}")
            return
        marks = [] if item.single or node.gpu else leading_marks(item)
        if item.single:
            stop = f"({start}) + {item.step}"
        elif marks:
            self.pipelined(item, marks, depth, loops)
            return
        elif not node.gpu and _innermost(item):
            invariant = self._invariant_guards(item)
            whole = _whole_trip(item)
            if whole and whole[0] > MAX_UNROLLED:
                whole = None
            if invariant or whole:
                self.unswitched(item, invariant, whole, depth, loops)
                return
        elif node.gpu.startswith("threadIdx") and self.threads_over_tile(item, depth, loops):
            return
        self.for_loop(item, stop, depth, loops)

    def threads_over_tile(self, item: For, depth: int, loops: list[For]) -> bool:
        """A block loop inside a tile that its threads divide (32 iterations, 8 threads):
        each thread runs a constant number of iterations, unrolled (its loads all in
        flight), the edge of the sizes as a guard. Not where a slice is staged inside (every
        thread must reach the barriers)."""
        whole = _whole_trip(item)
        stride = self.shape["xyz".index(item.node.gpu[-1])]
        if whole is None or any(isinstance(x, Mark) for x in walk(item.body)):
            return False
        trip, bound, others = whole
        if trip % stride or trip // stride > MAX_UNROLLED:
            return False
        var = item.var
        self.line(depth, "#pragma unroll")
        self.line(depth, f"for (int {var}_r = 0; {var}_r < {trip // stride}; ++{var}_r) {{")
        self.line(depth + 1, f"const {self.ix} {var} = {c_value(item.start)} + "
                             f"({self.ix}){item.node.gpu} + {var}_r * {stride};")
        edges = " && ".join(f"{var} < {c_value(other)}" for other in others)
        self.divergent.add(var)
        if edges:
            self.line(depth + 1, f"if ({edges}) {{")
        self.block(item.body, depth + 1 + bool(edges), loops + [item])
        if edges:
            self.line(depth + 1, "}")
        self.line(depth, "}")
        return True

    def _invariant_guards(self, item: For) -> list[str]:
        """The guards inside an innermost loop that hold or fail for all its iterations
        (on the sizes and the loops around it: a register tile's copies past the last
        tile's edge, a thread past the edge of the block's tile), with the guard on the
        thread's iteration."""
        body = list(walk(item.body))
        assigned = {item.var}.union(*(_assigned(self.statements[id(x)]) for x in body
                                      if isinstance(x, Call)))
        conditions = [c_condition(x.condition) for x in body if isinstance(x, If)
                      and not _condition_symbols(x.condition) & assigned]
        calls = any(isinstance(x, Call) for x in body)
        return list(dict.fromkeys((self.guards if calls else []) + conditions))

    def unswitched(self, item: For, invariant: list[str],
                   whole: tuple[int, Poly, list[Poly]] | None, depth: int,
                   loops: list[For]) -> None:
        """Two versions of an innermost loop: where all its invariant guards hold and it
        runs a whole tile's trip (the common case), one with no guard inside and a constant
        trip, which the compiler unrolls and schedules freely; the loop as generated
        elsewhere."""
        shorter = [f"{c_value(whole[1])} <= {c_value(other)}" for other in whole[2]] \
            if whole else []
        stop = c_value(whole[1]) if whole else c_value(item.stop)
        self.line(depth, f"if ({' && '.join(invariant + shorter)}) {{  // a whole tile")
        guards, assumed = self.guards, self.assumed
        self.guards, self.assumed = [], assumed | set(invariant)
        if whole:
            self.line(depth + 1, "#pragma unroll")
        self.for_loop(item, stop, depth + 1, loops)
        self.guards, self.assumed = guards, assumed
        self.line(depth, "} else {")
        self.for_loop(item, c_value(item.stop), depth + 1, loops)
        self.line(depth, "}")

    def for_loop(self, item: For, stop: str, depth: int, loops: list[For]) -> None:
        var, start, node = item.var, c_value(item.start), item.node
        compare = "<" if item.step > 0 else ">"
        if node.gpu:
            index = node.gpu
            count = str(self.shape["xyz".index(index[-1])]) if index.startswith("threadIdx") \
                else index.replace("blockIdx", "gridDim")
            times = f" * {abs(item.step)}" if abs(item.step) != 1 else ""
            sign = "+" if item.step > 0 else "-"
            offset = f"({self.ix}){index}{times}"
            first = offset if start == "0" and sign == "+" else f"{start} {sign} {offset}"
            advance = f"{var} {sign}= ({self.ix}){count}{times}"
        else:
            first, advance = start, (f"{var} += {item.step}" if item.step != 1 else f"++{var}")
        self.line(depth, f"for ({self.ix} {var} = {first}; {var} {compare} {stop}; "
                         f"{advance}) {{")
        self.block(item.body, depth + 1, loops + [item])
        if not node.gpu and _threads_inside(item.body):
            # a loop between the grid and the block, which the block's threads run in step:
            # what one iteration's threads did is done before the next begins (a grid
            # loop's iterations are independent; a staged slice waits for its readers)
            self.line(depth + 1, BARRIER)
        self.line(depth, "}")

    def one_each(self, item: For, depth: int, loops: list[For]) -> None:
        """A block loop with no more iterations than threads: each thread takes one, and
        the code inside runs in every thread (so that the block's threads copy slices and
        meet at barriers together), its statements only where the iteration exists."""
        var, start, stop = item.var, c_value(item.start), c_value(item.stop)
        sign, compare = ("+", "<") if item.step > 0 else ("-", ">")
        times = f" * {abs(item.step)}" if abs(item.step) != 1 else ""
        offset = f"({self.ix}){item.node.gpu}{times}"
        first = offset if start == "0" and sign == "+" else f"{start} {sign} {offset}"
        self.line(depth, f"{{ const {self.ix} {var} = {first};  // one iteration a thread")
        self.line(depth + 1, f"const bool {var}_on = {var} {compare} ({stop});")
        self.guards.append(f"{var}_on")
        self.thread_values.add(var)
        self.block(item.body, depth + 1, loops + [item])
        self.guards.pop()
        self.line(depth, "}")

    def stage(self, item: Mark, depth: int) -> None:
        """The slice one iteration of the staged loop reads, copied into shared memory by
        all the block's threads between two barriers: the last iteration's readers are
        done, and the whole slice is there before any thread reads it."""
        self.line(depth, BARRIER)
        self.staging.fill(item, depth, None)
        self.line(depth, BARRIER)

    def pipelined(self, item: For, marks: list[Mark], depth: int, loops: list[For]) -> None:
        """A loop whose iterations each stage slices first (the product's ``kk``), double
        buffered: the next iteration's slices are copied (``cp.async`` from sm_80 on, in
        the background) into one buffer while this iteration reads the other, one barrier
        an iteration (its copies arrived, and every thread done with the last iteration,
        whose buffer the next copy overwrites). Each copy is its own scope where the loop
        variable is that iteration's, so that the slices' bounds are computed as they are
        written."""
        var, step = item.var, item.step
        start, stop = c_value(item.start), c_value(item.stop)
        for mark in marks:
            self.require_every_thread(mark, loops + [item])
        self.line(depth, BARRIER)  # the last readers of these buffers (a tile before) done
        self.line(depth, f"int {var}_slot = 0;  // the buffer this iteration reads")
        self.line(depth, f"if ({start} < {stop}) {{  // the first iteration's slices")
        self.line(depth + 1, f"const {self.ix} {var} = {start};")
        for mark in marks:
            self.staging.fill(mark, depth + 1, "0")
        self.line(depth + 1, "loclab_copies_sent();")
        self.line(depth, "}")
        self.line(depth, f"for ({self.ix} {var} = {start}; {var} < {stop}; {var} += {step}) {{")
        self.line(depth + 1, "loclab_copies_arrived();")
        self.line(depth + 1, BARRIER)
        for mark in marks:
            marker: BufferMarker = mark.marker.payload
            for k, low in enumerate(marker.lows):
                self.line(depth + 1, f"const {self.ix} {low} = {c_value(mark.values[f'lo{k}'])};")
        self.line(depth + 1, f"if ({var} + {step} < {stop}) {{  // the next iteration's")
        self.line(depth + 2, f"const {self.ix} {var}_next = {var} + {step};")
        self.line(depth + 2, f"const {self.ix} {var} = {var}_next;")
        for mark in marks:
            self.staging.fill(mark, depth + 2, f"1 - {var}_slot")
        self.line(depth + 1, "}")
        self.line(depth + 1, "loclab_copies_sent();")
        self.block(item.body[len(marks):], depth + 1, loops + [item])
        # (the barrier an iteration of a loop around the block's loops ends with, for_loop,
        # is the next iteration's first)
        self.line(depth + 1, f"{var}_slot = 1 - {var}_slot;")
        self.line(depth, "}")

    def require_every_thread(self, item: Mark, loops: list[For]) -> None:
        if self.diverging or any(loop.var in self.divergent for loop in loops):
            marker = item.marker.payload
            raise UsageError(f"stage({marker.buffer.variable.name}, "
                             f"{marker.buffer.loop.name}): the block's threads "
                             "would not all reach the copy (a loop or guard around "
                             "it depends on the thread): stage a loop outside it")

    def atomic(self, unit: Unit, loops: list[For]) -> Reduction | None:
        """The generalized reduction a mapped loop around the unit makes this update."""
        touched = {a.variable.key for s in unit.statements for a in s.accesses if a.write}
        for item in loops:
            for reduction in item.node.reductions:
                if item.node.gpu and not reduction.scalar and reduction.key in touched:
                    return reduction
        return None

    def statement(self, node: ast.stmt, depth: int, reduction: Reduction | None) -> None:
        tr = self.translator
        if isinstance(node, (ast.Pass,)) or (isinstance(node, ast.Expr)
                                             and isinstance(node.value, ast.Constant)):
            return
        if isinstance(node, ast.Assign):
            if any(isinstance(target, (ast.Tuple, ast.List)) for target in node.targets):
                raise tr.error(node, "an assignment that unpacks")
            if len(node.targets) == 1:
                self.assign(node.targets[0], node.value, depth, reduction, node)
                return
            # a = b[i] = v: v once, then each target from the left, as Python does
            self.line(depth, f"{{ const auto loclab_value = {tr.expr(node.value)};")
            self.translator = replace(tr, values={**tr.values, "loclab_value": "loclab_value"})
            for target in node.targets:
                self.assign(target, ast.Name("loclab_value", ast.Load()), depth + 1, reduction,
                            node)
            self.translator = tr
            self.line(depth, "}")
        elif isinstance(node, ast.AugAssign):
            value = ast.BinOp(loaded(node.target), node.op, node.value)
            ast.copy_location(value, node)
            self.assign(node.target, value, depth, reduction, node)
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            self.assign(node.target, node.value, depth, reduction, node)
        elif isinstance(node, ast.If):
            self.line(depth, f"if ({tr.expr(node.test)}) {{")
            for child in node.body:
                self.statement(child, depth + 1, reduction)
            if node.orelse:
                self.line(depth, "} else {")
                for child in node.orelse:
                    self.statement(child, depth + 1, reduction)
            self.line(depth, "}")
        elif isinstance(node, ast.For):
            self.python_loop(node, depth, reduction)
        elif isinstance(node, ast.Break):
            self.line(depth, "break;")
        elif isinstance(node, ast.Continue):
            self.line(depth, "continue;")
        else:
            raise tr.error(node, f"the statement {type(node).__name__}")

    def assign(self, target: ast.expr, value: ast.expr, depth: int,
               reduction: Reduction | None, node: ast.stmt) -> None:
        tr = self.translator
        if isinstance(target, ast.Name):
            kind = tr.typing.of_name(target.id)
            cast = c_type(kind) if kind is not None else None
            text = tr.expr(value)
            self.line(depth, f"{target.id} = {f'({cast})({text})' if cast else text};")
            return
        if not isinstance(target, ast.Subscript):
            raise tr.error(node, "an assignment to this target")
        written = tr.expr(target)
        base = written.split("[", 1)[0]
        element = c_type(tr.typing.arrays[base])
        if reduction is not None and base == reduction.name:
            increment = _increment(target, value)
            if increment is None or reduction.op != "+":
                raise tr.error(node, f"the update of {base} across threads (only += is "
                                     "atomic here)")
            self.line(depth, f"loclab_atomic_add(&{written}, ({element})({tr.expr(increment)}));")
            return
        self.line(depth, f"{written} = ({element})({tr.expr(value)});")

    def python_loop(self, node: ast.For, depth: int, reduction: Reduction | None) -> None:
        """A loop kept as written (its bounds read data): ``range`` with a constant step."""
        tr = self.translator
        call = node.iter
        if not (isinstance(node.target, ast.Name) and isinstance(call, ast.Call)
                and isinstance(call.func, ast.Name) and call.func.id == "range"
                and 1 <= len(call.args) <= 3 and not node.orelse):
            raise tr.error(node, "this loop (only for v in range(...))")
        args = list(call.args)
        start, stop = (args[0], args[1]) if len(args) > 1 else (ast.Constant(0), args[0])
        step = 1
        if len(args) == 3:
            literal = args[2]
            if isinstance(literal, ast.UnaryOp) and isinstance(literal.op, ast.USub) \
                    and isinstance(literal.operand, ast.Constant):
                step = -literal.operand.value
            elif isinstance(literal, ast.Constant):
                step = literal.value
            if not isinstance(step, int) or step == 0:
                raise tr.error(node, "a range whose step is not a constant")
        var = node.target.id
        compare = "<" if step > 0 else ">"
        self.line(depth, f"for ({self.ix} {var} = {tr.expr(start)}; {var} {compare} "
                         f"{tr.expr(stop)}; {var} += {step}) {{")
        for child in node.body:
            self.statement(child, depth + 1, reduction)
        self.line(depth, "}")


RUNTIME = '''_COMPILED = {}


def _kernel(name, index):
    """Kernel ``name`` of SOURCE for loop variables and subscripts of type ``index``,
    compiled by CuPy on first use."""
    import cupy as cp

    if index not in _COMPILED:
        _COMPILED[index] = cp.RawModule(code=SOURCE, options=("-std=c++14",),
                                        name_expressions=[f"{k}<{index}>" for k in KERNELS])
    return _COMPILED[index].get_function(f"{name}<{index}>")


def _launch(name, index, grid, block, args):
    _kernel(name, index)(grid, block, args)


def _index(arrays, sizes):
    """32-bit loop variables and subscripts where every array's elements and every size
    stay below 2^30 (a sum of two still fits), and no bound multiplies sizes; else 64."""
    largest = max([a.size for a in arrays.values()] + [abs(int(s)) for s in sizes],
                  default=0)
    return "int" if largest < 2**30 and not WIDE_BOUNDS else "long long"


def _check(**arrays):
    """The arrays are CuPy's, C-contiguous, of the types and ranks the kernels are written
    for, and apart from one another where the code was proved for distinct arrays."""
    import cupy as cp

    for name, array in arrays.items():
        dtype, ndim = ARRAYS[name]
        if not isinstance(array, cp.ndarray):
            raise TypeError(f"{name}: a CuPy array on the GPU, not {type(array).__name__}")
        if str(array.dtype) != dtype or array.ndim != ndim:
            raise TypeError(f"{name}: {array.dtype} with {array.ndim} dimensions, but the "
                            f"kernels are written for {dtype} with {ndim} (emit again with "
                            f"--dtype {name}={array.dtype})")
        if not array.flags.c_contiguous:
            raise TypeError(f"{name}: not C-contiguous (cupy.ascontiguousarray makes it so)")
    for a, b in OVERLAPS:
        first, second = arrays[a], arrays[b]
        low = max(first.data.ptr, second.data.ptr)
        high = min(first.data.ptr + first.nbytes, second.data.ptr + second.nbytes)
        if low < high:
            raise ValueError(f"{a} and {b} share memory: this code was proved for distinct "
                             "arrays (run the original, or pass copies)")'''


# -- what a piece of code holds --------------------------------------------------------------
def _maps(item: Code) -> bool:
    """Whether a grid loop is in (or is) this code: then its loops above run on the host."""
    if isinstance(item, For):
        return bool(item.node.gpu) or any(_maps(c) for c in item.body)
    if isinstance(item, If):
        return any(_maps(c) for c in item.then + item.orelse)
    return False


def _marks(code: list[Code]) -> Iterator[Mark]:
    return (item for item in walk(code) if isinstance(item, Mark))


def _one_each(node: LoopNode) -> bool:
    """Whether a block loop has no more iterations than threads (the loop inside a tile of
    that many): each thread then runs at most one."""
    from loclab.transform.steps.unroll import trip_count

    values = trip_count(node)
    if values is None:
        return False
    iterations = -(-values // node.tile) if node.tile else values
    return iterations <= node.threads


def _innermost(item: For) -> bool:
    """Whether a loop holds no loop and stages no slice: the only loops emitted twice
    (``unswitched``), so that the code grows by one copy of a loop body, not by a copy per
    level of a nest (and no barrier is duplicated)."""
    return not any(isinstance(x, (For, Mark)) for x in walk(item.body))


def _whole_trip(item: For) -> tuple[int, Poly, list[Poly]] | None:
    """Where a loop's stop is the least of bounds one of which lies a constant number of
    iterations past its start (``min(K, kk + 16)``: the loop inside a tile): that number,
    that bound and the others."""
    if isinstance(item.start, Select) or isinstance(item.stop, Select) or item.step != 1:
        return None
    terms = item.stop.terms
    if len(terms) != 1 or terms[0][1] != 1 or len(terms[0][0]) != 1 \
            or not isinstance(terms[0][0][0], MinMax) or terms[0][0][0].function != "min":
        return None
    bounds = terms[0][0][0].args
    for bound in bounds:
        trip = (bound - item.start).constant_value()
        if trip is not None and trip > 0:
            return trip, bound, [other for other in bounds if other is not bound]
    return None


def _threads_inside(code: list[Code]) -> bool:
    return any(item.node.gpu.startswith("threadIdx") for item in fors(code))


def _calls(code: list[Code]) -> Iterator[Call]:
    return (item for item in walk(code) if isinstance(item, Call))


def _first_line(code: list[Code]) -> int:
    lines = [call.placed.unit.line for call in _calls(code)]
    return min(lines) if lines else 0


def _loop_names(code: list[Code], statements: dict[int, ast.stmt]) -> set[str]:
    """The loop variables a kernel declares: the tree's loops and loops kept as written."""
    names = {item.var for item in fors(code)}
    for statement in statements.values():
        names |= {n.target.id for n in ast.walk(statement)
                  if isinstance(n, ast.For) and isinstance(n.target, ast.Name)}
    return names


def _corners(ranges: list[tuple[str, tuple[Value, Value]]]) -> Iterator[dict[str, Value]]:
    """Every choice of the first or the last value of each of the variables."""
    if not ranges:
        yield {}
        return
    (var, (first, last)), rest = ranges[0], ranges[1:]
    for choice in dict.fromkeys((first, last)):
        for others in _corners(rest):
            yield {var: choice, **others}


def _symbols_of(value: Value) -> set[str]:
    if isinstance(value, Select):
        return (_condition_symbols(value.condition) | _symbols_of(value.then)
                | _symbols_of(value.otherwise))
    return {atom.name for atom in _atoms(value) if isinstance(atom, Symbol)}


def _atoms(p: Poly) -> Iterator[Any]:
    for monomial, _ in p.terms:
        for atom in monomial:
            yield atom
            for inner in getattr(atom, "args", ()) or ([atom.inner] if hasattr(atom, "inner")
                                                        else []):
                yield from _atoms(inner)


def _condition_symbols(cond: Any) -> set[str]:
    if hasattr(cond, "left"):
        return _symbols_of(cond.left) | _symbols_of(cond.right)
    return set().union(*(_condition_symbols(a) for a in cond.args))


def _symbols(code: list[Code]) -> set[str]:
    """Names the loop bounds and guards of the code read."""
    out: set[str] = set()
    for item in code:
        if isinstance(item, For):
            out |= _symbols_of(item.start) | _symbols_of(item.stop) | _symbols(item.body)
        elif isinstance(item, If):
            out |= _condition_symbols(item.condition) | _symbols(item.then + item.orelse)
    return out


def _assigned(statement: ast.stmt) -> set[str]:
    return {target for target, _ in _assignments(statement)}


def _assignments(statement: ast.stmt) -> Iterator[tuple[str, ast.expr]]:
    """(scalar, value) of every assignment to a name in a statement."""
    for node in ast.walk(statement):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    yield target.id, node.value
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            yield node.target.id, ast.BinOp(ast.Name(node.target.id, ast.Load()), node.op,
                                            node.value)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) \
                and node.value is not None:
            yield node.target.id, node.value


def _read(statement: ast.stmt) -> set[str]:
    """Names a statement reads (array names included; attribute bases such as ``math``
    excluded)."""
    bases = {id(n.value) for n in ast.walk(statement) if isinstance(n, ast.Attribute)}
    calls = {id(n.func) for n in ast.walk(statement) if isinstance(n, ast.Call)}
    return {n.id for n in ast.walk(statement) if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Load) and id(n) not in bases and id(n) not in calls}


def _builtins() -> set[str]:
    return {"True", "False", "None"}


def _subscript_targets(statement: ast.stmt) -> Iterator[ast.Subscript]:
    for node in ast.walk(statement):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
            yield node


def _base(node: ast.expr) -> str:
    while isinstance(node, ast.Subscript):
        node = node.value
    return node.id if isinstance(node, ast.Name) else ""


def _increment(target: ast.expr, value: ast.expr) -> ast.expr | None:
    """``v`` of ``X[..] = X[..] + v`` (or ``v + X[..]``), ``-v`` of ``X[..] = X[..] - v``."""
    if not isinstance(value, ast.BinOp) or type(value.op) not in BINARY:
        return None
    same = ast.dump(loaded(target))
    if ast.dump(value.left) == same and isinstance(value.op, (ast.Add, ast.Sub)):
        return value.right if isinstance(value.op, ast.Add) else ast.UnaryOp(
            ast.USub(), value.right)
    if ast.dump(value.right) == same and isinstance(value.op, ast.Add):
        return value.left
    return None


__all__ = ["CudaOutput", "array_types", "emit_cuda"]
