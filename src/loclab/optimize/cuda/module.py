"""A whole Python function for the GPU: one kernel per top-level nest, and a Python module that
launches them through CuPy on device arrays, in the function's own order and signature.

Code of the function outside its loops runs on the host as written (NumPy's allocations become
CuPy's); code there that reads or writes array elements, or a scalar a nest assigns and later
code reads, is refused with the line (the GPU's threads keep their scalars to themselves).
The module is self-contained: ``SOURCE`` (CUDA C), compiled by CuPy on first use for 32- or
64-bit indices (whichever the arrays need), the launch geometry computed from the sizes.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from loclab.errors import UsageError
from loclab.nest.ir import Loop
from loclab.nest.python import is_allocation
from loclab.optimize.cuda import chunks
from loclab.optimize.cuda.facts import assigned
from loclab.optimize.cuda.kernel import ROW_HELPERS, Kernel, KernelWriter
from loclab.optimize.cuda.mapping import Config, NestMapping
from loclab.optimize.cuda.mma import MMA_HELPER
from loclab.optimize.cuda.pipeline import PIPELINE_HELPERS
from loclab.transform.cuda_syntax import (HELPERS, LauncherNames, Translator, Typing, c_type,
                                         shape_of)
from loclab.transform.output import header

# the blocks along each axis of a grid that reduces scalars (by the grid's axes): about a
# thousand blocks in all, each thread's share over many iterations, one atomic per block
SUM_GRID = {1: 1024, 2: 32, 3: 10}
GRID_LIMITS = (2**31 - 1, 65535, 65535)
ALLOCATORS = {"empty", "zeros", "ones", "full"}


@dataclass(frozen=True)
class CudaFunction:
    """The function for the GPU: its kernels' text and the launcher module's text."""

    name: str
    kernels: tuple[Kernel, ...]
    source: str  # CUDA C
    module: str  # Python: SOURCE and the launching function

    def compile(self) -> object:
        """The launching function (CuPy compiles the kernels on its first call)."""
        namespace: dict[str, object] = {"__name__": "loclab_cuda"}
        exec(compile(self.module, f"<loclab cuda {self.name}>", "exec"), namespace)  # noqa: S102
        return namespace[self.name]


def emit_function(function: ast.FunctionDef, filename: str, line_offset: int,
                  mappings: Sequence[NestMapping], configs: Sequence[Config],
                  loops: Mapping[int, ast.For], sizes: Sequence[str],
                  arrays: Mapping[str, tuple[np.dtype, int]],
                  scalars: Mapping[str, np.dtype],
                  overlaps: Sequence[tuple[str, str]] = (), as_written: str = "") -> CudaFunction:
    """The CUDA function of ``function`` (its syntax), whose top-level nests run as
    ``mappings`` say with ``configs``; ``arrays`` are the array arguments' element types and
    ranks (what the kernels are written for), ``scalars`` the other arguments' types (sizes
    are integers); ``overlaps`` the pairs of arguments that may share memory: when they do,
    the function runs ``as_written`` (the original's source, with the imports it needs) on
    the host instead, its kernels being proved for distinct arrays."""
    def where(node: ast.AST) -> str:
        return f"{filename}:{getattr(node, 'lineno', 0) + line_offset}"

    names = LauncherNames.avoiding(function)

    dtypes = {name: np.dtype(dtype) for name, (dtype, _) in arrays.items()}
    ndims = {name: ndim for name, (_, ndim) in arrays.items()}
    element_types = dict(dtypes)
    by_line = {m.node.lineno: (m, c) for m, c in zip(mappings, configs)}
    kernels: list[Kernel] = []
    calls: list[str] = []
    assigned_in_nests: set[str] = set()
    body = function.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    # names the function assigns outside its loops alone (``n = A.shape[0]``, ``eps =
    # 0.1``; between the nests of a loop the host runs, ``mean = total / n``), and the sums
    # the grids read back: kernel arguments of the type of their value, passed as the host
    # has them
    hosted = [loop for node in body if isinstance(node, ast.For) for loop in ast.walk(node)
              if isinstance(loop, ast.For) and _hosted(loop, mappings)]
    on_host = [node for node in body if not isinstance(node, ast.For)] + [
        child for loop in hosted for child in loop.body if not isinstance(child, ast.For)]
    summed = {name for m in mappings for name, _ in m.sums}
    in_loops = assigned([node for node in body if isinstance(node, ast.For)
                         and not _hosted(node, mappings)] + [m.node for m in mappings]) \
        - summed
    host_typing = Typing(element_types, ndims, _compute_type(element_types), dict(scalars),
                         set(sizes))
    scalars = dict(scalars)
    for name, kind in _host_scalars(on_host, host_typing).items():
        if name not in in_loops and name not in arrays:
            scalars[name] = kind
    sizes = [size for size in sizes if size not in scalars]
    host_assigned = set(scalars)  # scalar arguments, then what the host statements assign
    entering: dict[str, np.dtype] = {}  # the types of scalars a kernel starts from

    def kernel_of(node: ast.stmt, host: Sequence[str]) -> str:
        """The kernel of the nest at ``node`` written, and the Python that launches it
        (``host``: the variables of the host loops around it, integer arguments)."""
        mapping, config = by_line[node.lineno]
        reads = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        # (a loop of this nest binds its own variable: ``for c in ...`` after ``c = ...``)
        bound = {n.target.id for n in ast.walk(node)
                 if isinstance(n, ast.For) and isinstance(n.target, ast.Name)}
        early = assigned_in_nests & reads - assigned([node]) - bound
        if early:
            raise UsageError(f"{where(node)}: {sorted(early)[0]} is assigned by an earlier "
                             "loop and read here: on the GPU each thread keeps its own")
        for copied in mapping.copies:  # read through a copy made just before the launch
            element_types[copied.name] = element_types[copied.array]
            ndims[copied.name] = ndims[copied.array]
        typing = Typing(element_types, ndims, _compute_type(element_types),
                        {n: t for n, t in scalars.items() if n not in sizes}, set())
        live_in = frozenset(host_assigned & assigned([node]) & reads - set(sizes))
        writer = KernelWriter(f"nest_{node.lineno + line_offset}", mapping, config,
                              typing, {s: _c_name(s) for s in [*sizes, *host]},
                              set(scalars) - set(sizes), dict(loops), where, live_in,
                              index_type=names.index_type)
        kernel = writer.write()
        entering.update({name: typing.scalars[name] for name in kernel.scalars
                         if name in live_in})
        kernels.append(kernel)
        sums = {name for name, _ in mapping.sums}  # read back: the host has their values
        assigned_in_nests.update(assigned([node]) - sums)
        host_assigned.update(sums)
        made = [f"{c.name} = {c.array}.copy()  # for "
                f"{', '.join(sorted(c.reads)) or 'every read of ' + c.array}: values from "
                "before the nest" for c in mapping.copies if c.name in kernel.arrays]
        return "\n".join([*made, _launch(kernel, names)])

    def host_loop(node: ast.For, outer: tuple[str, ...]) -> str:
        """A loop the host runs (``plan.host_nests``): each nest's launch, the statements
        between them, a host loop inside in turn (``outer``: the host loops around it)."""
        names = (*outer, node.target.id)  # type: ignore[attr-defined]
        steps = []
        for child in node.body:
            if isinstance(child, ast.For) and child.lineno in by_line:
                steps.append(kernel_of(child, names))
            elif isinstance(child, ast.For):
                steps.append(host_loop(child, names))
            else:
                steps.append(_host_statement(child, element_types, ndims, where,
                                             assigned_in_nests))
                host_assigned.update(assigned([child]))
        return f"for {names[-1]} in {ast.unparse(node.iter)}:\n" + "\n".join(
            "    " + line for step in steps for line in step.splitlines())

    for node in body:
        inside = [m for m in mappings if m.node is not node
                  and node.lineno <= m.node.lineno <= (node.end_lineno or node.lineno)]
        if isinstance(node, ast.For) and node.lineno in by_line and not inside:
            calls.append(kernel_of(node, ()))
        elif isinstance(node, ast.For) and isinstance(node.target, ast.Name) and inside:
            # a loop distributed into kernels (plan.distributed_nests), or one on the host
            # around its nests' kernels (plan.host_nests)
            if not inside[0].host:
                calls += [kernel_of(m.node, ()) for m in inside]
                continue
            calls.append(host_loop(node, ()))
        else:
            calls.append(_host_statement(node, element_types, ndims, where,
                                         assigned_in_nests))
            host_assigned.update(assigned([node]))
    tensor_cores = MMA_HELPER if any(k.tensor_cores for k in kernels) else ""
    copies = PIPELINE_HELPERS if any(k.pipelined for k in kernels) else ""
    source = HELPERS + ROW_HELPERS + tensor_cores + copies \
        + "\n\n".join(k.text for k in kernels) + "\n"
    module = _module_text(function, filename, kernels, source, calls, dtypes,
                          {**entering, **scalars}, overlaps, as_written, names)
    return CudaFunction(function.name, tuple(kernels), source, module)


def _hosted(node: ast.For, mappings: Sequence[NestMapping]) -> bool:
    """Whether ``node`` runs on the host around its nests' kernels (``plan.host_nests``)."""
    return any(loop.line == node.lineno for m in mappings for loop in m.host)


def _host_scalars(body: Sequence[ast.stmt], typing: Typing) -> dict[str, np.dtype]:
    """The names statements outside the loops assign (one name or a chain of names a
    statement, not an array allocation), each an int64 where the translator types its
    value as an integer (sizes, shapes, lengths, integer constants and names under integer
    arithmetic), else a float64
    (a float taken for an integer would be truncated; an integer taken for a float is
    exact). ``typing`` learns each name as it goes: a later value may read it."""
    translator = Translator(typing, lambda name, indices, t: "", lambda node: "")
    found: dict[str, np.dtype] = {}
    for node in body:
        if not (isinstance(node, ast.Assign) and all(isinstance(target, ast.Name)
                                                     for target in node.targets)) \
                or is_allocation(node.value):
            continue
        kind = translator.type_of(node.value)
        for name in (target.id for target in node.targets):  # ``a1 = a5 = k``: each
            whole = kind is not None and kind.kind in "iu" \
                and found.get(name, np.dtype(np.int64)).kind == "i"
            found[name] = typing.scalars[name] = np.dtype(np.int64 if whole else np.float64)
    return found


def _compute_type(arrays: Mapping[str, np.dtype]) -> np.dtype:
    floats = [d for d in arrays.values() if np.dtype(d).kind == "f"]
    return max(floats, key=lambda d: np.dtype(d).itemsize) if floats else np.dtype(np.float64)


def _c_name(size: str) -> str:
    """A size parameter's name in C: its own where it is a name (``len_`` too: the kernel's
    statements spell it so), else one made of it (``A.shape[0]`` -> ``A_shape_0``)."""
    if size.isidentifier():
        return size
    return "".join(c if c.isalnum() else "_" for c in size).strip("_")


def _host_statement(node: ast.stmt, arrays: dict[str, np.dtype], ndims: dict[str, int],
                    where: object, nests: set[str]) -> str:
    """A statement outside the loops, as the host runs it (NumPy allocations on the GPU)."""
    used = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    if used & nests:  # (a one-thread kernel's scalar too: its value stays on the device)
        raise UsageError(f"{where(node)}: {sorted(used & nests)[0]} is assigned inside a loop "
                         "and read after it: on the GPU each thread keeps its own")
    if isinstance(node, ast.Return):
        return ast.unparse(node)
    if _element_store(node, arrays, ndims):  # CuPy sets the element on the GPU, in stream order
        return ast.unparse(node)
    if isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets) \
            and _element_reads(node.value, ndims):  # ``alpha = -r[0]``: the value, on the host
        return ast.unparse(_ReadOnHost(ndims).visit(copy.deepcopy(node)))
    if any(isinstance(n, ast.Subscript) and shape_of(n) is None for n in ast.walk(node)):
        raise UsageError(f"{where(node)}: the CUDA emitter runs code outside the loops on the "
                         "host: it may read array elements, one at a time, and set them "
                         "from values, but not a part of an array")
    if isinstance(node, ast.Assign) and len(node.targets) == 1 \
            and isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.Call):
        call = node.value
        name = call.func.attr if isinstance(call.func, ast.Attribute) else ""
        if name in ALLOCATORS:
            dtype = np.dtype(np.float64)
            for keyword in call.keywords:
                if keyword.arg == "dtype":
                    dtype = np.dtype(ast.unparse(keyword.value).split(".")[-1])
            shape = call.args[0] if call.args else None
            ndim = len(shape.elts) if isinstance(shape, ast.Tuple) else 1
            arrays[node.targets[0].id] = dtype
            ndims[node.targets[0].id] = ndim
            args = ", ".join(ast.unparse(a) for a in call.args)
            return (f"{node.targets[0].id} = cp.{name}({args}, dtype=np.{dtype.name})")
    if isinstance(node, (ast.Assign, ast.AugAssign, ast.Pass)):
        return ast.unparse(node)
    raise UsageError(f"{where(node)}: the CUDA emitter does not run "
                     f"{type(node).__name__} outside the loops")


def _element_store(node: ast.stmt, arrays: Mapping[str, np.dtype],
                   ndims: Mapping[str, int]) -> bool:
    """Whether ``node`` sets array elements from constants, sizes, scalars and other
    elements (correlation's ``corr[M - 1, M - 1] = 1.0`` after its loops, durbin's ``y[0] =
    -r[0]``: CuPy computes the value on the GPU): every target a part of an array argument
    at subscripts that read no element."""
    targets = node.targets if isinstance(node, ast.Assign) else [node.target] \
        if isinstance(node, ast.AugAssign) else []
    if not targets or not all(isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name)
                              and t.value.id in arrays for t in targets):
        return False
    if any(isinstance(n, ast.Subscript) for t in targets for n in ast.walk(t.slice)):
        return False
    return _element_reads(node.value, ndims) is not None


def _element(node: ast.Subscript, ndims: Mapping[str, int]) -> bool:
    """Whether ``node`` is one element of an array (as many indices as dimensions)."""
    indices = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    return isinstance(node.value, ast.Name) and ndims.get(node.value.id) == len(indices)


def _element_reads(value: ast.expr, ndims: Mapping[str, int]) -> list[ast.Subscript] | None:
    """The array elements ``value`` reads; None where it reads a part of an array, or an
    element at a subscript that reads one."""
    found = [n for n in ast.walk(value) if isinstance(n, ast.Subscript) and shape_of(n) is None]
    if not all(_element(n, ndims) for n in found) or any(
            isinstance(m, ast.Subscript) for n in found for m in ast.walk(n.slice)):
        return None
    return found


class _ReadOnHost(ast.NodeTransformer):
    """Each element read as a host value (``r[0]`` -> ``r[0].item()``: CuPy copies it once
    the kernels before it have run), for a scalar the host passes to the kernels."""

    def __init__(self, ndims: Mapping[str, int]) -> None:
        self.ndims = ndims

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        if shape_of(node) is not None or not _element(node, self.ndims):
            return node
        return ast.Call(ast.Attribute(node, "item", ast.Load()), [], [])


def _launch(kernel: Kernel, names: LauncherNames) -> str:
    """Python lines that size the grid from the sizes and launch ``kernel``."""
    lines = []
    grid = ["1", "1", "1"]
    block = [str(kernel.lanes), str(kernel.rows), "1"]
    for axis in kernel.axes:
        lines.append(f"first_{axis.var} = {axis.first}")
        lines.append(f"count_{axis.var} = {axis.count}")
        span = axis.block * axis.tile
        limit = SUM_GRID[len(kernel.axes)] if kernel.sums else GRID_LIMITS[axis.axis]
        grid[axis.axis] = f"min(max(1, -(-count_{axis.var} // {span})), {limit})"
        block[axis.axis] = str(axis.block)
    args = []
    ix = names.index_type
    for array in kernel.arrays:
        args.append(array)
        args.append(f"*({ix}(n) for n in {array}.shape)")
    args += [f"{ix}({size})" for size in kernel.sizes]
    args += [f"_{s}_type({s})" for s in kernel.scalars]
    args += [f"{name}_sum" for name, _, _ in kernel.sums]
    if kernel.chunks > 1:  # blocks sharing each grid iteration along x (``cuda.chunks``)
        grid[0] = str(kernel.chunks)
        args += chunks.arguments(len(kernel.parts))
    for axis in kernel.axes:
        args += [f"{ix}(first_{axis.var})", f"{ix}(count_{axis.var})"]
    empty = " or ".join(f"count_{a.var} <= 0" for a in kernel.axes) or "False"
    lines.append(f"if not ({empty}):")
    # a scalar the grid reduces: one copy on the GPU, from its value, read back after
    lines += [f"    {name}_sum = cp.full(1, {name}, dtype=np.{dtype})"
              for name, _, dtype in kernel.sums]
    if kernel.chunks > 1:
        lines += chunks.allocations(kernel.parts, [f"count_{a.var}" for a in kernel.axes],
                                    kernel.chunks, "    ")
    shared = f", {kernel.dynamic_shared}" if kernel.dynamic_shared else ""
    lines.append(f"    _kernel({kernel.name!r}, {names.index}{shared})(")
    lines.append(f"        ({', '.join(grid)}),")
    lines.append(f"        ({', '.join(block)}),")
    lines.append("        (" + ",\n         ".join(args) + ",)"
                 + (f", shared_mem={kernel.dynamic_shared})" if shared else ")"))
    lines += [f"    {name} = {name}_sum[0].item()" for name, _, _ in kernel.sums]
    return "\n".join(lines)


def _module_text(function: ast.FunctionDef, filename: str, kernels: Sequence[Kernel],
                 source: str, calls: Sequence[str], dtypes: Mapping[str, np.dtype],
                 scalars: Mapping[str, np.dtype], overlaps: Sequence[tuple[str, str]],
                 as_written: str, launcher: LauncherNames) -> str:
    args = [a.arg for a in function.args.args]
    checks = "\n".join(
        f"    _check({name!r}, {name}, np.{np.dtype(dtype).name})"
        for name, dtype in dtypes.items() if name in args)
    shared = [f"_shared({x}, {y})" for x, y in overlaps if x in args and y in args]
    if shared:
        checks += (f"\n    if {' or '.join(shared)}:  # shared memory: as written, on the host"
                   f"\n        return _on_host(_as_written, ({', '.join(args)},))")
    names = ", ".join(repr(k.name) for k in kernels)
    body = "\n".join("    " + line for call in calls for line in call.splitlines())
    sizes = [f"{a}.size" for a in args if a in dtypes] + [
        a for a in args if a not in dtypes]
    scalar_types = "\n".join(
        f"_{k}_type = np.{np.dtype(scalars[k]).name}" for k in sorted(
            {s for kernel in kernels for s in kernel.scalars}))
    apart = _AS_WRITTEN.format(original=as_written) if shared else ""
    first = header("python", f"{Path(filename).name}::{function.name}",
                   "its loop nests as CUDA kernels", tool="optimize")
    return f'''{first}
"""{function.name} of {filename} for the GPU (loclab optimize --target gpu).

Call it with CuPy arrays (C-contiguous, of the dtypes below): every top-level loop nest is a
kernel of SOURCE, launched in the function's order.
"""
import cupy as cp
import numpy as np

SOURCE = r"""{source}"""
_KERNELS = ({names}{',' if len(kernels) == 1 else ''})
_MODULES = {{}}
{scalar_types}


def _kernel(name, index, dynamic_shared=0):
    if index not in _MODULES:
        _MODULES[index] = cp.RawModule(code=SOURCE, options=("-std=c++17",),
                                       name_expressions=[f"{{k}}<{{index}}>" for k in _KERNELS])
    kernel = _MODULES[index].get_function(f"{{name}}<{{index}}>")
    if dynamic_shared:  # past the 48 KiB a launch gets without asking
        kernel.max_dynamic_shared_size_bytes = dynamic_shared
    return kernel


def _check(name, array, dtype):
    if not isinstance(array, cp.ndarray) or array.dtype != dtype \\
            or not array.flags.c_contiguous:
        raise TypeError(f"{{name}}: a C-contiguous CuPy array of {{np.dtype(dtype).name}} "
                        f"expected (the kernels were written for it)")
{apart}

def {function.name}({", ".join(args)}):
{checks}
    {launcher.largest} = max([{", ".join(sizes) or "0"}, 0])
    {launcher.index} = "int" if {launcher.largest} < 2**30 else "long long"  # (sums fit)
    {launcher.index_type} = np.int32 if {launcher.index} == "int" else np.int64
{body}
'''


_AS_WRITTEN = '''

{original}


def _shared(x, y):
    """Whether two arrays' bytes meet (both are C-contiguous: their spans are their bytes)."""
    return x.data.ptr < y.data.ptr + y.nbytes and y.data.ptr < x.data.ptr + x.nbytes


def _on_host(function, args):
    """``function`` run on host copies of the CuPy arrays among ``args``, one copy per
    allocation, so that views of one array stay views of one; the allocations are then
    copied back. What the original computes, slowly: the kernels are proved for distinct
    arrays only."""
    copies = {{}}
    hosted = []
    for value in args:
        if isinstance(value, cp.ndarray):
            memory = value.data.mem
            if memory.ptr not in copies:
                whole = cp.ndarray((memory.size,), np.uint8,
                                   memptr=cp.cuda.MemoryPointer(memory, 0))
                copies[memory.ptr] = (whole, cp.asnumpy(whole))
            value = np.ndarray(value.shape, value.dtype, buffer=copies[memory.ptr][1],
                               offset=value.data.ptr - memory.ptr, strides=value.strides)
        hosted.append(value)
    result = function(*hosted)
    for whole, host in copies.values():
        whole.set(host)
    return result
'''


def loops_by_id(function: ast.FunctionDef, loops: Sequence[Loop],
                line_offset: int) -> dict[int, ast.For]:
    """Each original loop's ``ast.For``, by ``id(Loop)`` (matched by line and column)."""
    nodes = {(n.lineno + line_offset, n.col_offset + 1): n for n in ast.walk(function)
             if isinstance(n, ast.For)}
    return {id(loop): nodes[(loop.line, loop.column)] for loop in loops}


__all__ = ["CudaFunction", "c_type", "emit_function", "loops_by_id"]
