"""Atomic read-modify-write on array elements inside numba ``prange`` loops.

Numba has no CPU atomics (OpenMP's ``#pragma omp atomic``), so these intrinsics emit the
LLVM instruction directly: ``atomicrmw fadd`` for a float add (one ``lock cmpxchg`` loop or a
native instruction, whatever LLVM picks for the target). ``monotonic`` ordering suffices: each
update must be indivisible, but no other memory is published through it.
"""

from __future__ import annotations

from typing import Any

from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


@intrinsic
def atomic_add(typingctx: Any, array: types.Array, index: types.Integer,
               value: types.Number) -> Any:
    """``array[index] += value`` as one indivisible update; returns nothing.

    For 1-D float32/float64 and integer arrays; ``value`` is converted to the element type,
    ``index`` is not bounds-checked nor wrapped (callers test ``index < len(array)`` as the
    golden code does).
    """
    if not (isinstance(array, types.Array) and array.ndim == 1
            and isinstance(array.dtype, (types.Float, types.Integer))
            and isinstance(index, types.Integer) and isinstance(value, types.Number)):
        return None
    instruction = "fadd" if isinstance(array.dtype, types.Float) else "add"

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        array_type, index_type, value_type = signature.args
        array_value, index_value, added = args
        data = context.make_array(array_type)(context, builder, array_value)
        position = context.cast(builder, index_value, index_type, types.intp)
        pointer = cgutils.get_item_pointer(context, builder, array_type, data, [position])
        operand = context.cast(builder, added, value_type, array_type.dtype)
        builder.atomic_rmw(instruction, pointer, operand, "monotonic")
        return context.get_dummy_value()

    return types.void(array, index, value), codegen
