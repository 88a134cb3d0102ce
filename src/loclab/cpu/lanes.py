"""Rows of array elements held in vector registers by Numba code: the type behind the
``hold`` step's emitted code (``transform.steps.hold``).

Why: a register tile of a product keeps a block of ``C`` in registers for the whole sum
along ``k`` (the lectures' register tiling; BLIS's micro-kernel). Written as scalars in
Numba, the block goes back to memory at each ``k`` (LLVM may not prove that no other access
meets it) or, held in many scalars, is not packed into vectors by LLVM's SLP vectorizer.
A :class:`Lanes` value is an LLVM vector (``<16 x float>``): a local variable of that type
is an SSA value, which the backend keeps in vector registers across a loop.

Every operation is the scalar code's operation lane by lane, with the scalar code's types
(NumPy's promotion: ``float32 * float64`` is ``float64``; a store rounds to the array's
type, as an assignment to an element does), so results are bit-identical to the loop they
replace. Numba's ``fastmath`` flags reach these instructions as they reach its own.

Only loads and stores of consecutive elements along an array's last axis: an array whose
last axis is not contiguous (a view) is read and written element by element, correct and
slow. Nothing is bounds-checked: the ``hold`` step's code calls these only where the
original loop reads and writes the same elements.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.core.datamodel import models
from numba.core.errors import TypingError
from numba.extending import intrinsic, overload, register_model
from numba.np.numpy_support import as_dtype, from_dtype

KINDS = (types.Float, types.Integer)  # element types a row of lanes may hold


class Lanes(types.Type):
    """``count`` elements of ``dtype`` in one LLVM vector."""

    def __init__(self, dtype: types.Type, count: int) -> None:
        self.dtype = dtype
        self.count = count
        super().__init__(name=f"Lanes({dtype}, {count})")


@register_model(Lanes)
class _LanesModel(models.PrimitiveModel):
    def __init__(self, dmm: Any, fe_type: Lanes) -> None:
        element = dmm.lookup(fe_type.dtype).get_value_type()
        super().__init__(dmm, fe_type, ir.VectorType(element, fe_type.count))


def _promoted(first: types.Type, second: types.Type) -> types.Type:
    """The type of ``first op second`` in Numba's scalar code (NumPy's promotion)."""
    return from_dtype(np.result_type(as_dtype(first), as_dtype(second)))


def _convert(context: Any, builder: Any, value: Any, source: types.Type,
             target: types.Type) -> Any:
    """A vector (or scalar) of ``source`` elements as ``target`` elements, as Numba's
    scalar casts convert: floats widened or rounded, integers to floats signed or not."""
    if source == target:
        return value
    to = context.get_value_type(target)
    if isinstance(value.type, ir.VectorType):
        to = ir.VectorType(to, value.type.count)
    if isinstance(source, types.Float) and isinstance(target, types.Float):
        wider = source.bitwidth < target.bitwidth
        return builder.fpext(value, to) if wider else builder.fptrunc(value, to)
    if isinstance(source, types.Integer) and isinstance(target, types.Float):
        return builder.sitofp(value, to) if source.signed else builder.uitofp(value, to)
    if isinstance(source, types.Float) and isinstance(target, types.Integer):
        return builder.fptosi(value, to) if target.signed else builder.fptoui(value, to)
    if source.bitwidth < target.bitwidth:
        return builder.sext(value, to) if source.signed else builder.zext(value, to)
    return builder.trunc(value, to) if source.bitwidth > target.bitwidth else value


def _first_element(context: Any, builder: Any, array_type: Any, array: Any,
                   index_type: Any, index: Any) -> tuple[Any, Any]:
    """The pointer to ``array[index]`` and the array's last stride."""
    data = context.make_array(array_type)(context, builder, array)
    count = len(index_type)
    indices = [context.cast(builder, builder.extract_value(index, d), index_type[d],
                            types.intp) for d in range(count)]
    pointer = cgutils.get_item_pointer2(context, builder, data.data,
                                        cgutils.unpack_tuple(builder, data.shape, count),
                                        cgutils.unpack_tuple(builder, data.strides, count),
                                        array_type.layout, indices)
    return pointer, builder.extract_value(data.strides, count - 1)


def _element_at(builder: Any, pointer: Any, stride: Any, lane: int) -> Any:
    """The pointer to the element ``lane`` places along the last axis from ``pointer``."""
    address = builder.add(builder.ptrtoint(pointer, stride.type),
                          builder.mul(stride, ir.Constant(stride.type, lane)))
    return builder.inttoptr(address, pointer.type)


def _check_index(array: Any, index: Any, name: str) -> None:
    if not isinstance(array, types.Array) or not isinstance(array.dtype, KINDS):
        raise TypingError(f"{name}: needs an array of numbers, got {array}")
    if not isinstance(index, types.BaseTuple) or len(index) != array.ndim \
            or not all(isinstance(t, types.Integer) for t in index):
        raise TypingError(f"{name}: needs {array.ndim} integer subscripts, got {index}")


@intrinsic
def lanes_load(typingctx: Any, array: Any, index: Any, count: Any) -> Any:
    """``array[index]`` and the ``count - 1`` elements after it along the last axis."""
    if not isinstance(count, types.IntegerLiteral):
        return None
    _check_index(array, index, "lanes_load")
    result = Lanes(array.dtype, count.literal_value)

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        pointer, stride = _first_element(context, builder, sig.args[0], args[0],
                                         sig.args[1], args[1])
        vector = context.get_value_type(result)
        if sig.args[0].layout == "C":
            return builder.load(builder.bitcast(pointer, vector.as_pointer()),
                                align=sig.args[0].dtype.bitwidth // 8)
        value = ir.Constant(vector, ir.Undefined)
        for lane in range(result.count):
            element = builder.load(_element_at(builder, pointer, stride, lane))
            value = builder.insert_element(value, element, ir.Constant(ir.IntType(32), lane))
        return value

    return result(array, index, count), codegen


@intrinsic
def lanes_store(typingctx: Any, array: Any, index: Any, value: Any) -> Any:
    """``value``'s lanes into ``array[index]`` and the elements after it along the last
    axis, each rounded to the array's type as an assignment to an element is."""
    _check_index(array, index, "lanes_store")
    if not isinstance(value, Lanes):
        raise TypingError(f"lanes_store: needs lanes to store, got {value}")

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        pointer, stride = _first_element(context, builder, sig.args[0], args[0],
                                         sig.args[1], args[1])
        kind = sig.args[0].dtype
        vector = _convert(context, builder, args[2], value.dtype, kind)
        if sig.args[0].layout == "C":
            builder.store(vector, builder.bitcast(pointer, vector.type.as_pointer()),
                          align=kind.bitwidth // 8)
        else:
            for lane in range(value.count):
                builder.store(builder.extract_element(vector, ir.Constant(ir.IntType(32),
                                                                          lane)),
                              _element_at(builder, pointer, stride, lane))
        return context.get_dummy_value()

    return types.none(array, index, value), codegen


@intrinsic
def lanes_like(typingctx: Any, value: Any, like: Any) -> Any:
    """``value`` with ``like``'s element type: what storing an update into the held
    element and reading it back gives (a float64 sum into a float32 array is rounded at
    every step, as the loop it replaces rounds it)."""
    if not (isinstance(value, Lanes) and isinstance(like, Lanes)
            and value.count == like.count):
        raise TypingError(f"lanes_like: needs lanes of one count, got {value} and {like}")

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        return _convert(context, builder, args[0], value.dtype, like.dtype)

    return like(value, like), codegen


# not "/": Numba's scalar division by zero raises, a vector's would give infinity
_FLOAT_OPS = {"+": "fadd", "-": "fsub", "*": "fmul"}
_INTEGER_OPS = {"+": "add", "-": "sub", "*": "mul"}


def _binary(symbol: str) -> Any:
    """An intrinsic for ``first symbol second`` where one or both are lanes (a scalar is
    converted, then broadcast), in the promoted type, lane by lane."""

    def typer(typingctx: Any, first: Any, second: Any) -> Any:
        count = next(t.count for t in (first, second) if isinstance(t, Lanes))
        if any(isinstance(t, Lanes) and t.count != count for t in (first, second)):
            raise TypingError(f"lanes {symbol}: lanes of two counts, {first} and {second}")
        dtypes = [t.dtype if isinstance(t, Lanes) else t for t in (first, second)]
        if not all(isinstance(t, KINDS) for t in dtypes):
            raise TypingError(f"lanes {symbol}: needs numbers, got {first} and {second}")
        kind = _promoted(*dtypes)
        ops = _FLOAT_OPS if isinstance(kind, types.Float) else _INTEGER_OPS
        if symbol not in ops:
            raise TypingError(f"lanes {symbol}: not for {kind}")
        result = Lanes(kind, count)

        def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
            vector = context.get_value_type(result)
            operands = []
            for value, kind_of, dtype in zip(args, sig.args, dtypes):
                value = _convert(context, builder, value, dtype, kind)
                if not isinstance(kind_of, Lanes):
                    lone = builder.insert_element(ir.Constant(vector, ir.Undefined), value,
                                                  ir.Constant(ir.IntType(32), 0))
                    value = builder.shuffle_vector(
                        lone, ir.Constant(vector, ir.Undefined),
                        ir.Constant(ir.VectorType(ir.IntType(32), count), [0] * count))
                operands.append(value)
            return getattr(builder, ops[symbol])(*operands)

        return result(first, second), codegen

    typer.__name__ = f"lanes_{_FLOAT_OPS[symbol]}"
    return intrinsic(typer)


def _register(symbol: str, operation: Any) -> None:
    compute = _binary(symbol)

    @overload(operation)
    def _lanes_operation(first: Any, second: Any) -> Any:
        if not (isinstance(first, Lanes) or isinstance(second, Lanes)):
            return None

        def lanes_operation(first: Any, second: Any) -> Any:  # Numba asks the same names
            return compute(first, second)

        return lanes_operation


for _symbol, _operation in (("+", operator.add), ("-", operator.sub), ("*", operator.mul)):
    _register(_symbol, _operation)
