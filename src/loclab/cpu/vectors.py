"""Explicit SIMD for numba kernels: a register block of a matrix product in vector registers
of the width the CPU has, whatever width LLVM's vectorizer would have picked.

LLVM vectorizes numba's loops at the width it prefers for the target, not the widest the CPU
has: on Intel's AVX-512 cores it prefers 256-bit vectors (its tuning flag ``prefer-256-bit``),
so a loop written for 16 float32 lanes runs on 8, with twice the instructions and half the
registers' worth of accumulators. That preference is process-wide (``NUMBA_CPU_FEATURES``,
read once when numba starts) and numba offers no per-function attribute. Vector types written
into the IR are not subject to it: the backend keeps a ``<16 x float>`` in one zmm register
wherever the CPU has AVX-512 (and splits it into halves or quarters where it has not: slower,
never wrong). So the block product below is emitted as vectors of ``lanes`` floats, with
``lanes`` chosen by the caller from the detected ISA. (loclab's own processes also turn the
preference off, ``loclab.cpu.vector_width``; the explicit vectors keep these kernels at full
width in any process.)
"""

from __future__ import annotations

from typing import Any

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.core.errors import TypingError
from numba.extending import intrinsic

from loclab.cpu.tiles import CACHE_LINE

FLOAT = ir.FloatType()
FLOAT_BYTES = 4


def aligned_float32(size: int, alignment: int = CACHE_LINE) -> np.ndarray:
    """A 1-D float32 array of ``size`` whose first element starts a cache line: a packed panel
    whose rows are whole multiples of the line then never straddles two lines in one vector
    load (NumPy guarantees 16 bytes)."""
    spare = alignment // FLOAT_BYTES
    buffer = np.empty(size + spare, np.float32)
    start = (-buffer.ctypes.data % alignment) // FLOAT_BYTES
    return buffer[start:start + size]


def _is_float32_array(value: Any, ndim: int) -> bool:
    return (isinstance(value, types.Array) and value.ndim == ndim and value.layout == "C"
            and value.dtype == types.float32)


@intrinsic
def fma_block(typingctx: Any, a: types.Array, a_start: types.Integer, b: types.Array,
              b_start: types.Integer, depth: types.Integer, c: types.Array, row: types.Integer,
              col: types.Integer, accumulate: types.Boolean, rows: types.IntegerLiteral,
              vectors: types.IntegerLiteral, lanes: types.IntegerLiteral) -> Any:
    """``c[row:row+rows, col:col+width] = (c[...] if accumulate else 0) + A_panel @ B_panel``
    with ``width = vectors * lanes``, the block held in ``rows * vectors`` vector registers.

    ``a[a_start:]`` holds the A panel k-major (``depth`` x ``rows``: ``a[a_start + kk*rows +
    i]``), ``b[b_start:]`` the B panel (``depth`` x ``width``); both 1-D C-contiguous
    float32. ``c`` is a 2-D C-contiguous float32 array. ``rows``, ``vectors`` and ``lanes`` are
    compile-time constants (closure variables or literals). Nothing is bounds-checked: the
    caller passes blocks that lie inside the arrays.

    Each step kk loads ``vectors`` vectors of the B panel's row kk, broadcasts each of the
    ``rows`` values of A's row kk and adds the products into the accumulators with
    ``llvm.fmuladd`` (one FMA where the CPU has them, a multiply and an add where not). Each
    element of the block is one chain of adds in the order of kk, started from C's value when
    ``accumulate``: a product of several depth blocks sums along k exactly in order.
    """
    literals = (rows, vectors, lanes)
    if not all(isinstance(value, types.IntegerLiteral) for value in literals):
        return None  # typing retries with the constants as literals
    if not (_is_float32_array(a, 1) and _is_float32_array(b, 1) and _is_float32_array(c, 2)):
        raise TypingError(f"fma_block: needs 1-D C-contiguous float32 panels and a 2-D "
                          f"C-contiguous float32 product, got {a}, {b}, {c}")
    r, v, n = rows.literal_value, vectors.literal_value, lanes.literal_value
    signature = types.none(a, a_start, b, b_start, depth, c, row, col, accumulate, rows,
                           vectors, lanes)

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        intp = context.get_value_type(types.intp)
        vector = ir.VectorType(FLOAT, n)

        def const(value: int) -> Any:
            return ir.Constant(intp, value)

        def cast(index: int) -> Any:
            return context.cast(builder, args[index], sig.args[index], types.intp)

        def at(data: Any, byte_offset: Any, kind: Any) -> Any:
            return cgutils.pointer_add(builder, data, byte_offset, kind.as_pointer())

        a_data = context.make_array(sig.args[0])(context, builder, args[0]).data
        b_data = context.make_array(sig.args[2])(context, builder, args[2]).data
        c_array = context.make_array(sig.args[5])(context, builder, args[5])
        c_pitch = builder.extract_value(c_array.strides, 0)
        a_base = builder.mul(cast(1), const(FLOAT_BYTES))
        b_base = builder.mul(cast(3), const(FLOAT_BYTES))
        row0, col0 = cast(6), cast(7)
        fmuladd = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(vector, [vector] * 3), f"llvm.fmuladd.v{n}f32")
        zero = ir.Constant(vector, [0.0] * n)
        broadcast = ir.Constant(ir.VectorType(ir.IntType(32), n), [0] * n)

        def c_vector(i: int, j: int) -> Any:
            offset = builder.add(builder.mul(builder.add(row0, const(i)), c_pitch),
                                 builder.mul(builder.add(col0, const(j * n)),
                                             const(FLOAT_BYTES)))
            return at(c_array.data, offset, vector)

        # One stack slot per accumulator: mem2reg turns them into registers.
        slots = [[cgutils.alloca_once_value(
            builder, builder.select(args[8], builder.load(c_vector(i, j), align=FLOAT_BYTES),
                                    zero)) for j in range(v)] for i in range(r)]
        with cgutils.for_range(builder, cast(4), intp=intp) as loop:
            b_row = builder.add(b_base, builder.mul(loop.index, const(v * n * FLOAT_BYTES)))
            b_vectors = [builder.load(at(b_data, builder.add(b_row, const(j * n * FLOAT_BYTES)),
                                         vector), align=FLOAT_BYTES) for j in range(v)]
            a_row = builder.add(a_base, builder.mul(loop.index, const(r * FLOAT_BYTES)))
            for i in range(r):
                value = builder.load(at(a_data, builder.add(a_row, const(i * FLOAT_BYTES)),
                                        FLOAT), align=FLOAT_BYTES)
                lone = builder.insert_element(ir.Constant(vector, ir.Undefined), value,
                                              ir.Constant(ir.IntType(32), 0))
                splat = builder.shuffle_vector(lone, ir.Constant(vector, ir.Undefined),
                                               broadcast)
                for j in range(v):
                    slot = slots[i][j]
                    builder.store(builder.call(fmuladd, [splat, b_vectors[j],
                                                         builder.load(slot)]), slot)
        for i in range(r):
            for j in range(v):
                builder.store(builder.load(slots[i][j]), c_vector(i, j), align=FLOAT_BYTES)
        return context.get_dummy_value()

    return signature, codegen
