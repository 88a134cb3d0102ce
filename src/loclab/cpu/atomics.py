"""Atomic operations on array elements inside numba ``prange`` loops.

Numba has no CPU atomics (OpenMP's ``#pragma omp atomic``), so these intrinsics emit the
LLVM instructions directly: ``atomicrmw`` for a fetch-and-add (``lock xadd``, a ``lock
cmpxchg`` loop for floats, or a native instruction: whatever LLVM picks for the target),
``cmpxchg`` for a compare-and-swap, ``load atomic`` for a read that races with them (a plain
load racing with a store reads an undefined value in LLVM's memory model).

Every operation is ``monotonic``: each is indivisible and all threads agree on the order of
the values one element takes, but no other memory is published through it. The data-parallel
loops these serve publish their results through the join at the end of the ``prange`` loop,
never through an atomic, so they need no more (x86 emits the same instructions for every
ordering; weaker machines would add barriers for nothing). Do not build locks or flags that
guard other data from them.
"""

from __future__ import annotations

from typing import Any

from numba import types
from numba.core import cgutils
from numba.core.errors import TypingError
from numba.extending import intrinsic


def _element_pointer(context: Any, builder: Any, array_type: types.Array, array: Any,
                     index_type: types.Integer, index: Any) -> Any:
    """The address of ``array[index]``: not bounds-checked nor wrapped (negative indices are
    not counted from the end)."""
    data = context.make_array(array_type)(context, builder, array)
    position = context.cast(builder, index, index_type, types.intp)
    return cgutils.get_item_pointer(context, builder, array_type, data, [position])


def _check_integer_array(operation: str, array: Any, index: Any, writes: bool) -> None:
    """Refuse, with a message naming what is supported, what ``cmpxchg`` and ``load atomic``
    cannot do: they work on integers only (LLVM's ``cmpxchg`` takes no floats)."""
    if not (isinstance(array, types.Array) and array.ndim == 1
            and isinstance(array.dtype, types.Integer)):
        raise TypingError(f"{operation}: needs a 1-D array of integers (int32, uint32, int64, "
                          f"uint64, ...), got {array}")
    if writes and not array.mutable:
        raise TypingError(f"{operation}: the array is read-only")
    if not isinstance(index, types.Integer):
        raise TypingError(f"{operation}: the index must be an integer, got {index}")


@intrinsic
def atomic_add(typingctx: Any, array: types.Array, index: types.Integer,
               value: types.Number) -> Any:
    """``array[index] += value`` as one indivisible update; returns the element's value before
    the update (a fetch-and-add: concurrent callers get distinct old values, e.g. distinct
    positions in a shared buffer).

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
        pointer = _element_pointer(context, builder, array_type, array_value, index_type,
                                   index_value)
        operand = context.cast(builder, added, value_type, array_type.dtype)
        return builder.atomic_rmw(instruction, pointer, operand, "monotonic")

    return array.dtype(array, index, value), codegen


@intrinsic
def compare_and_swap(typingctx: Any, array: types.Array, index: types.Integer,
                     expected: types.Integer, desired: types.Integer) -> Any:
    """If ``array[index] == expected``, set it to ``desired``; either way return the value
    the element held, in one indivisible step. The caller won exactly when the result equals
    ``expected``; when it lost, the result is the element's current value, so a retry needs
    no fresh load.

    For 1-D writable arrays of integers (int32, uint32, int64, uint64, ...); ``expected`` and
    ``desired`` are converted to the element type; ``index`` is not bounds-checked.
    """
    _check_integer_array("compare_and_swap", array, index, writes=True)
    for name, operand in (("expected", expected), ("desired", desired)):
        if not isinstance(operand, types.Integer):
            raise TypingError(f"compare_and_swap: {name} must be an integer, got {operand}")

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        array_type, index_type, expected_type, desired_type = signature.args
        array_value, index_value, expected_value, desired_value = args
        pointer = _element_pointer(context, builder, array_type, array_value, index_type,
                                   index_value)
        element = array_type.dtype
        old = builder.cmpxchg(pointer,
                              context.cast(builder, expected_value, expected_type, element),
                              context.cast(builder, desired_value, desired_type, element),
                              "monotonic", "monotonic")
        return builder.extract_value(old, 0)

    return array.dtype(array, index, expected, desired), codegen


@intrinsic
def atomic_load(typingctx: Any, array: types.Array, index: types.Integer) -> Any:
    """``array[index]`` read in one piece while other threads may write it (a plain ``mov``
    on x86), for 1-D arrays of integers; ``index`` is not bounds-checked."""
    _check_integer_array("atomic_load", array, index, writes=False)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        array_type, index_type = signature.args
        pointer = _element_pointer(context, builder, array_type, args[0], index_type, args[1])
        return builder.load_atomic(pointer, "monotonic",
                                   context.get_abi_sizeof(context.get_data_type(
                                       array_type.dtype)))

    return array.dtype(array, index), codegen
