"""Staged slices in shared memory: their layout, and the block's threads copying them.

A ``stage`` step's slice becomes a ``__shared__`` buffer sized by isl's largest slice (the
sizes projected out), in the buffer's order (a transposed slice column by column), its rows
padded where the warp model of bank conflicts (``shared_banks``) says a warp's reads take
fewer passes. The block's threads copy it with their reads coalesced: 16 bytes a thread
where a whole slice of 16-byte rows gives every thread whole vectors, element by element
(guarded at the last tile's edge) otherwise; now (between barriers) or in the background
(``cp.async``, into the second of two buffers: a double-buffered loop).
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Iterable
from dataclasses import replace

import numpy as np

from loclab.transform.buffers import BufferMarker
from loclab.transform.code import fors, walk
from loclab.transform.codegen import Code, For, Mark
from loclab.transform.cuda_syntax import Translator
from loclab.transform.emit_c import value as c_value
from loclab.transform.shared_banks import ThreadLoop, best_padding

# 16-byte vectors of an element type (a staged slice's rows read 16 bytes a thread)
VECTOR_TYPES = {"float32": "float4", "float64": "double2", "int32": "int4", "uint32": "uint4",
                "int64": "longlong2"}
# The emitted code's helpers for double-buffered staging
ASYNC_HELPERS = """// Double-buffered staging: copies into shared memory that run in the background (cp.async,
// sm_80 on; before that, plain copies), sent as a group and waited for before a barrier.
template <int BYTES> __device__ __forceinline__ void loclab_copy_async(void* to,
                                                                       const void* from) {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\\n" ::
               "r"((unsigned)__cvta_generic_to_shared(to)), "l"(from), "n"(BYTES));
#else
  struct Bytes { char b[BYTES]; };
  *(Bytes*)to = *(const Bytes*)from;
#endif
}
__device__ __forceinline__ void loclab_copies_sent() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\\n" ::);
#endif
}
__device__ __forceinline__ void loclab_copies_arrived() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group 0;\\n" ::);
#endif
}
"""


class Staging:
    """Writes the copies of a kernel's staged slices (``line``: the kernel's line writer)."""

    def __init__(self, line: Callable[[int, str], None], shape: list[int],
                 staged: dict[str, tuple[list[int], int]], dtypes: dict[str, np.dtype],
                 unsigned: set[str], translator: Translator, index_type: str = "I") -> None:
        self.line = line
        self.index_type = index_type  # the kernel's template parameter
        self.shape = shape  # the block's threads along x, y, z
        self.threads = math.prod(shape)
        self.staged = staged  # buffer -> (extents in the buffer's order, row padding)
        self.dtypes = dtypes
        self.unsigned = unsigned  # arrays whose subscripts are never negative
        self.translator = translator

    def fill(self, item: Mark, depth: int, slot: str | None) -> None:
        """Copy one iteration's slice into its buffer (``slot``: which of two, copied in
        the background; None: the only one, copied now). A whole slice whose rows start
        on 16 bytes, with whole vectors for every thread, is read 16 bytes a thread (a
        quarter of the loads to issue); any other (the last tile, a row stride not a
        multiple of 4, a slice smaller than the block's threads' vectors) an element a
        thread, guarded."""
        marker: BufferMarker = item.marker.payload
        name, source = marker.buffer.name, marker.buffer.variable.name
        extents = marker.in_array_order(self.staged[name][0])
        lows = marker.lows
        widths = []
        for k, low in enumerate(lows):
            self.line(depth, f"const {self.index_type} {low} = {c_value(item.values[f'lo{k}'])};")
            width = f"{name}_w{k}"
            self.line(depth, f"const int {width} = {c_value(item.values[f'hi{k}'])} - "
                             f"{low} + 1;")
            widths.append(width)
        vector = VECTOR_TYPES.get(str(self.dtypes[source]))
        lanes = 16 // self.dtypes[source].itemsize
        # only where every thread gets whole vectors: fewer threads loading 16 bytes than
        # all loading 4 was slower on an H200 (a 16 x 16 slice over 256 threads: 1.45x)
        if vector and extents[-1] % lanes == 0 and source in self.unsigned \
                and math.prod(extents) // lanes % self.threads == 0:
            rank = len(lows)
            aligned = [f"{width} == {extent}" for width, extent in zip(widths, extents)] + [
                f"{lows[-1]} % {lanes} == 0", f"((unsigned long long){source} & 15) == 0"] + (
                [f"{source}_n{rank - 1} % {lanes} == 0"] if rank > 1 else [])
            self.line(depth, f"if ({' && '.join(aligned)}) {{  // 16-byte loads")
            self.copy(marker, widths, depth + 1, (vector, lanes), slot)
            self.line(depth, "} else {")
            self.copy(marker, widths, depth + 1, None, slot)
            self.line(depth, "}")
        else:
            self.copy(marker, widths, depth, None, slot)

    def copy(self, marker: BufferMarker, widths: list[str], depth: int,
             vector: tuple[str, int] | None, slot: str | None) -> None:
        """The block's threads copying a slice: element ``f`` of the largest slice (or of
        its groups of ``lanes`` along rows, ``vector``) by thread ``f`` modulo the block,
        in 32-bit arithmetic over constant extents (shifts where they are powers of two);
        element by element, what lies past this slice's edge (the last tile) is skipped."""
        name, source = marker.buffer.name, marker.buffer.variable.name
        layout, pad = self.staged[name]  # the buffer's extents, its rows padded
        extents = marker.in_array_order(layout)  # the slice's, read along the array's rows
        lanes = vector[1] if vector else 1
        groups = extents[:-1] + [extents[-1] // lanes]
        thread = (f"(int)(threadIdx.x + {self.shape[0]} * (threadIdx.y + {self.shape[1]} "
                  "* threadIdx.z))")
        total = math.prod(groups)
        self.line(depth, "#pragma unroll")
        if total % self.threads == 0:  # a constant count: unrolled, the loads all in flight
            self.line(depth, f"for (int {name}_r = 0; {name}_r < {total // self.threads}; "
                             f"++{name}_r) {{")
            self.line(depth + 1, f"const int {name}_f = {thread} + {name}_r * {self.threads};")
        else:
            self.line(depth, f"for (int {name}_f = {thread}; {name}_f < {total}; "
                             f"{name}_f += {self.threads}) {{")
        rest = f"{name}_f"
        offsets = []
        for k in reversed(range(len(groups))):
            offset = f"{name}_o{k}"
            if k:
                self.line(depth + 1, f"const int {offset} = {rest} % {groups[k]};")
                rest = f"({rest} / {groups[k]})"
            else:
                self.line(depth + 1, f"const int {offset} = {rest};")
            offsets.insert(0, offset)
        if vector:
            self.line(depth + 1, f"const int {offsets[-1]}v = {offsets[-1]} * {lanes};")
            offsets[-1] += "v"
        def local(lane: int = 0) -> str:  # an element's place in the buffer
            stored = marker.in_buffer_order(offsets[:-1] + [
                f"{offsets[-1]} + {lane}" if lane else offsets[-1]])
            flat = stored[0]
            for k in range(1, len(stored)):
                width = layout[k] + (pad if k == len(stored) - 1 else 0)
                flat = f"({flat}) * {width} + {stored[k]}"
            return f"({slot}) * {buffer_size(layout, pad)} + {flat}" if slot else flat

        element = ast.Subscript(ast.Name(source, ast.Load()), ast.Tuple(
            [ast.BinOp(ast.Name(low, ast.Load()), ast.Add(), ast.Name(offset, ast.Load()))
             for low, offset in zip(marker.lows, offsets)], ast.Load()), ast.Load())
        translator = replace(self.translator, typing=replace(
            self.translator.typing, integers=self.translator.typing.integers | set(offsets)))
        read = translator.expr(element)
        size = self.dtypes[source].itemsize
        split = pad or marker.buffer.transposed  # rows off 16 bytes (a padded row's banks
        # differ), or a column: stored element by element
        if vector and slot is not None:
            for lane in ([0] if not split else range(lanes)):
                self.line(depth + 1, f"loclab_copy_async<{size * (1 if split else lanes)}>("
                                     f"&{name}[{local(lane)}], &{read} + {lane});")
        elif vector:
            self.line(depth + 1, f"const {vector[0]} {name}_v = "
                                 f"*reinterpret_cast<const {vector[0]}*>(&{read});")
            if split:
                for lane in range(lanes):
                    self.line(depth + 1, f"{name}[{local(lane)}] = {name}_v.{'xyzw'[lane]};")
            else:  # a 16-byte store: a quarter of a warp's 512 bytes a pass, no conflict
                self.line(depth + 1, f"*reinterpret_cast<{vector[0]}*>(&{name}[{local()}]) = "
                                     f"{name}_v;")
        else:
            inside = " && ".join(f"{offset} < {width}"
                                 for offset, width in zip(offsets, widths))
            store = f"loclab_copy_async<{size}>(&{name}[{local()}], &{read})" \
                if slot is not None else f"{name}[{local()}] = {read}"
            self.line(depth + 1, f"if ({inside}) {store};")
        self.line(depth, "}")


def shared_layout(marker: BufferMarker, reads: list[list[ast.expr]], items: list[Code],
              block: list[int], itemsize: int) -> tuple[list[int], int]:
    """A staged slice's extents in shared memory, and the padding of its rows: the one
    under which the first warp's reads take the fewest passes (shared_banks); where that
    model cannot evaluate a read, one element where a row spans the 32 banks a whole
    number of times (a column read by a warp would hit one bank 32 times)."""
    extents = marker.in_buffer_order([max(1, extent or 0)
                                      for extent in largest_slice(marker)])
    loops = [ThreadLoop(item.var, "xyz".index(item.node.gpu[-1]), item.step)
             for item in fors(items) if item.node.gpu.startswith("threadIdx")]
    pad = best_padding(reads, extents, itemsize, loops, block)
    if pad is None:
        pad = 1 if len(extents) > 1 and extents[-1] * itemsize % 128 == 0 else 0
    return extents, pad


def largest_slice(marker: BufferMarker) -> list[int | None]:
    """Per dimension, the widest slice at any point of the marker and any sizes (isl's
    maximum with the sizes projected out): a constant for a tile, None if it grows."""
    import islpy as isl

    out: list[int | None] = []
    functions = marker.marker.functions
    for k in range(marker.rank):
        width = isl.PwAff(functions[f"hi{k}"]).sub(isl.PwAff(functions[f"lo{k}"]))
        values = width.as_map().range()
        values = values.project_out(isl.dim_type.param, 0, values.dim(isl.dim_type.param))
        if not values.dim_has_upper_bound(isl.dim_type.set, 0):
            out.append(None)  # it grows with the sizes
            continue
        largest = values.dim_max(0)
        pieces = largest.get_pieces()
        constants = [aff.get_constant_val().to_python() for _, aff in pieces
                     if aff.is_cst()]
        out.append(max(constants) + 1 if pieces and len(constants) == len(pieces) else None)
    return out


def reads_of(buffer: str, statements: Iterable[ast.stmt]) -> list[list[ast.expr]]:
    """The subscripts of every read of a staged buffer in the statements."""
    return [list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
            for statement in statements for node in ast.walk(statement)
            if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load)
            and isinstance(node.value, ast.Name) and node.value.id == buffer]


def leading_marks(item: For) -> list[Mark]:
    """The slices a loop stages first thing in each iteration, where nothing else inside it
    stages one (its iterations then double-buffer them, ``pipelined``): none for a mapped
    loop, a single iteration, or a loop counting down."""
    if item.node.gpu or item.single or item.step <= 0:
        return []
    count = next((k for k, x in enumerate(item.body) if not isinstance(x, Mark)),
                 len(item.body))
    marks = [x for x in item.body[:count] if isinstance(x, Mark)]
    if any(isinstance(x, Mark) for x in walk(item.body[count:])):
        return []
    return marks


def buffer_size(extents: list[int], pad: int) -> int:
    """Elements of a staged buffer with rows padded by ``pad``."""
    return math.prod(extents[:-1]) * (extents[-1] + pad)
