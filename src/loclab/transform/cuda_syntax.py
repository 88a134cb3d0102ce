"""Python statements as CUDA C: the subset ``loclab analyze`` reads, typed the way a GPU
programmer would write them.

Types are concrete: an array's elements have its NumPy dtype; loop variables, sizes and integer
literals are ``long long`` (Python's integers, 64 bits); a float literal or a float argument
has the *compute type*, the widest float dtype among the arrays (``float`` when every float
array is float32: the arrays' own precision, not Python's float64); a local scalar has the
join of every type assigned to it (declared once, at the start of the thread, since Python's
scalars are function-wide). Python's semantics are kept where C's differ: ``//`` and ``%``
round toward minus infinity, ``/`` is true division, a subscript that may be negative counts
from the end of its dimension.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from loclab.errors import UsageError
from loclab.nest.python import base_name, callee

C_TYPES = {np.dtype(np.float32): "float", np.dtype(np.float64): "double",
           np.dtype(np.int64): "long long", np.dtype(np.int32): "int",
           np.dtype(np.int16): "short", np.dtype(np.int8): "signed char",
           np.dtype(np.uint64): "unsigned long long", np.dtype(np.uint32): "unsigned",
           np.dtype(np.uint16): "unsigned short", np.dtype(np.uint8): "unsigned char",
           np.dtype(np.bool_): "bool"}
INT = np.dtype(np.int64)
SPECIAL = {"inf": ("0x7f800000", "0x7ff0000000000000"),
           "-inf": ("(int)0xff800000", "(long long)0xfff0000000000000"),
           "nan": ("0x7fc00000", "0x7ff8000000000000")}
CONSTANTS = {"inf": math.inf, "pi": math.pi, "e": math.e, "nan": math.nan, "tau": math.tau}
BOOL = np.dtype(np.bool_)
BINARY = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.BitAnd: "&", ast.BitOr: "|",
          ast.BitXor: "^", ast.LShift: "<<", ast.RShift: ">>"}
COMPARE = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==",
           ast.NotEq: "!="}
# math and NumPy functions of floats with a CUDA overload of the same meaning
FLOAT_FUNCTIONS = {"sqrt": "sqrt", "exp": "exp", "log": "log", "log2": "log2",
                   "log10": "log10", "sin": "sin", "cos": "cos", "tan": "tan", "tanh": "tanh",
                   "floor": "floor", "ceil": "ceil", "fabs": "fabs", "hypot": "hypot",
                   "atan2": "atan2", "arctan2": "atan2", "pow": "pow", "power": "pow",
                   "exp2": "exp2", "expm1": "expm1", "log1p": "log1p", "cbrt": "cbrt",
                   "arcsin": "asin", "arccos": "acos", "arctan": "atan", "sinh": "sinh",
                   "cosh": "cosh", "fmin": "fmin", "fmax": "fmax", "copysign": "copysign",
                   "erf": "erf"}
CASTS = {"float": None, "int": INT, "float32": np.dtype(np.float32),
         "float64": np.dtype(np.float64), "int32": np.dtype(np.int32), "int64": INT,
         "uint32": np.dtype(np.uint32), "uint64": np.dtype(np.uint64), "bool": BOOL}
# How two partial results of a reduction combine, by the name of its helpers' suffix (a
# block's warps here; a row split's rows in optimize.cuda.kernel)
COMBINE = {"add": "{} + {}", "mul": "{} * {}", "min": "loclab_min({}, {})",
           "max": "loclab_max({}, {})", "and": "{} & {}", "or": "{} | {}", "xor": "{} ^ {}"}
HELPERS = """
template <typename A, typename B> __device__ __forceinline__ A loclab_floordiv(A a, B b) {
  A q = a / b; return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q; }
template <typename A, typename B> __device__ __forceinline__ A loclab_mod(A a, B b) {
  A r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }
template <typename A> __device__ __forceinline__ A loclab_fmod(A a, A b) {
  return a - floor(a / b) * b; }
template <typename A, typename B> __device__ __forceinline__ A loclab_min(A a, B b) {
  return b < a ? (A)b : a; }
template <typename A, typename B> __device__ __forceinline__ A loclab_max(A a, B b) {
  return a < b ? (A)b : a; }
template <typename A> __device__ __forceinline__ A loclab_abs(A a) { return a < 0 ? -a : a; }
// floats: the sign bit cleared, a free operand modifier where the value is used (a compare
// and a select fewer per use), and abs(-0.0) is +0.0 as in Python
__device__ __forceinline__ float loclab_abs(float a) { return fabsf(a); }
__device__ __forceinline__ double loclab_abs(double a) { return fabs(a); }
template <typename T> __device__ __forceinline__ T loclab_lanes_add(T v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o); return v; }
template <typename T> __device__ __forceinline__ T loclab_lanes_mul(T v) {
  for (int o = 16; o > 0; o >>= 1) v *= __shfl_xor_sync(0xffffffffu, v, o); return v; }
template <typename T> __device__ __forceinline__ T loclab_lanes_min(T v) {
  for (int o = 16; o > 0; o >>= 1) v = loclab_min(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v; }
template <typename T> __device__ __forceinline__ T loclab_lanes_max(T v) {
  for (int o = 16; o > 0; o >>= 1) v = loclab_max(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v; }
template <typename T> __device__ __forceinline__ T loclab_lanes_and(T v) {
  for (int o = 16; o > 0; o >>= 1) v &= __shfl_xor_sync(0xffffffffu, v, o); return v; }
template <typename T> __device__ __forceinline__ T loclab_lanes_or(T v) {
  for (int o = 16; o > 0; o >>= 1) v |= __shfl_xor_sync(0xffffffffu, v, o); return v; }
template <typename T> __device__ __forceinline__ T loclab_lanes_xor(T v) {
  for (int o = 16; o > 0; o >>= 1) v ^= __shfl_xor_sync(0xffffffffu, v, o); return v; }
__device__ __forceinline__ long long loclab_wrap(long long index, long long extent) {
  return index < 0 ? index + extent : index; }
__device__ __forceinline__ void loclab_atomic_add(float* p, double v) {
  atomicAdd(p, (float)v); }
__device__ __forceinline__ void loclab_atomic_add(double* p, double v) { atomicAdd(p, v); }
__device__ __forceinline__ void loclab_atomic_add(int* p, long long v) {
  atomicAdd(p, (int)v); }
__device__ __forceinline__ void loclab_atomic_add(unsigned* p, long long v) {
  atomicAdd(p, (unsigned)v); }
__device__ __forceinline__ void loclab_atomic_add(long long* p, long long v) {
  atomicAdd((unsigned long long*)p, (unsigned long long)v); }
__device__ __forceinline__ void loclab_atomic_add(unsigned long long* p, long long v) {
  atomicAdd(p, (unsigned long long)v); }
""" + "".join(
    # A scalar's min or max across a grid (``NestMapping.sums``): CUDA's own for integers,
    # a compare-and-swap of the bits for floating point (written only where ``v`` wins, as
    # Python's ``max(s, v)`` keeps ``s`` unless ``v > s``).
    f"""template <typename T> __device__ __forceinline__ void loclab_atomic_{op}(T* p, T v) {{
  atomic{op.capitalize()}(p, v); }}
""" + "".join(f"""__device__ __forceinline__ void loclab_atomic_{op}({real}* p, {real} v) {{
  {bits}* a = ({bits}*)p;
  {bits} seen = *a;
  while ({test.format(to_real + '(seen)', 'v')}) {{
    const {bits} was = atomicCAS(a, seen, ({bits}){to_bits}(v));
    if (was == seen) break;
    seen = was; }} }}
""" for real, bits, to_real, to_bits in (
        ("float", "int", "__int_as_float", "__float_as_int"),
        ("double", "unsigned long long", "__longlong_as_double", "__double_as_longlong")))
    for op, test in (("max", "{} < {}"), ("min", "{1} < {0}"))) + "".join(
    # A block's lanes (a block per grid iteration): each warp combines its lanes by shuffles,
    # warp 0's lane 0 ... of each warp leaves its part in shared memory, every thread combines
    # the parts in warp order. The first barrier keeps the parts of a previous call safe
    # until every thread has read them. Called by every thread of the block alike.
    f"""template <typename T> __device__ __forceinline__ T loclab_block_{name}(T v) {{
  __shared__ T part[32];
  v = loclab_lanes_{name}(v);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;
  __syncthreads();
  v = part[0];
  for (int w = 1; w < (int)(blockDim.x >> 5); ++w) v = {combine.format("v", "part[w]")};
  return v; }}
""" for name, combine in COMBINE.items()) + """\
template <int W> __device__ __forceinline__ unsigned loclab_group_mask() {
  const unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  return (0xffffffffu >> (32 - W)) << (t & 31u & ~(unsigned)(W - 1)); }
""" + "".join(
    # A group of W lanes of a warp (W a power of two below 32, the block's x extent: a short
    # loop split by fewer lanes than a warp, several grid iterations a warp): shuffles among
    # the group's lanes alone, whose mask lets the warp's other groups be elsewhere (a grid
    # iteration past the end).
    f"""template <int W, typename T> __device__ __forceinline__ T loclab_group_{name}(T v) {{
  const unsigned mask = loclab_group_mask<W>();
  for (int o = W / 2; o > 0; o >>= 1) v = {combine.format("v", "__shfl_xor_sync(mask, v, o)")};
  return v; }}
""" for name, combine in COMBINE.items())


def c_type(dtype: np.dtype) -> str:
    try:
        return C_TYPES[np.dtype(dtype)]
    except KeyError:
        raise UsageError(f"arrays of {np.dtype(dtype)} have no CUDA type here") from None


def _known(kind: np.dtype | None, default: np.dtype) -> np.dtype:
    """``kind`` unless unknown (never ``kind or default``: a plain dtype is falsy)."""
    return default if kind is None else kind


def join(a: np.dtype | None, b: np.dtype | None) -> np.dtype | None:
    """The type of ``a op b``: the wider float, else the wider integer (None: not known)."""
    if a is None or b is None:
        return b if a is None else a  # (a dtype is falsy: len() of a plain dtype is 0)
    return np.promote_types(a, b) if a.kind == b.kind or BOOL in (a, b) else (
        a if a.kind == "f" else b)


@dataclass
class Typing:
    """What the translator knows of every name: arrays' dtypes and shapes (ndim), local
    scalars' types, loop variables and size parameters (integers)."""

    arrays: Mapping[str, np.dtype]
    ndims: Mapping[str, int]
    compute: np.dtype  # the type of float literals and float arguments
    scalars: dict[str, np.dtype] = field(default_factory=dict)
    integers: set[str] = field(default_factory=set)  # loop variables and sizes

    def of_name(self, name: str) -> np.dtype | None:
        if name in self.integers:
            return INT
        return self.scalars.get(name)


@dataclass
class Translator:
    """Expressions and statements to C text. ``subscript`` writes an array element (the
    kernel's flattening, staging and wrap rules); ``rename`` maps a scalar to its name in
    this copy of the code (register tiling's copies)."""

    typing: Typing
    subscript: Callable[[str, list[ast.expr], "Translator"], str]
    where: Callable[[ast.AST], str]  # file:line of a node, for errors
    rename: Mapping[str, str] = field(default_factory=dict)
    values: Mapping[str, str] = field(default_factory=dict)  # names replaced by C text
    # In a subscript, integers keep the launch's index type (32 bits where every array
    # and size fits); elsewhere integer arithmetic is 64-bit, as Python's is unbounded.
    index: bool = False
    # subscripts read from another array, by id of the node (reads a copy made before the
    # kernel serves: ``KernelWriter`` of the GPU optimizer)
    redirected: Mapping[int, str] = field(default_factory=dict)

    def error(self, node: ast.AST, what: str) -> UsageError:
        return UsageError(f"{self.where(node)}: the CUDA emitter does not translate {what}")

    # -- types ----------------------------------------------------------------------------
    def type_of(self, node: ast.expr) -> np.dtype | None:
        t = self.typing
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool):
                return BOOL
            return INT if isinstance(node.value, int) else t.compute
        if isinstance(node, ast.Name):
            return t.of_name(node.id)
        if isinstance(node, ast.Attribute) and node.attr in CONSTANTS:
            return t.compute
        if isinstance(node, ast.Subscript):
            return INT if shape_of(node) is not None else t.arrays.get(_base(node))
        if isinstance(node, ast.BinOp):
            if isinstance(node.op, ast.Div):
                found = join(self.type_of(node.left), self.type_of(node.right))
                return found if found is not None and found.kind == "f" else t.compute
            return join(self.type_of(node.left), self.type_of(node.right))
        if isinstance(node, ast.UnaryOp):
            return BOOL if isinstance(node.op, ast.Not) else self.type_of(node.operand)
        if isinstance(node, (ast.Compare, ast.BoolOp)):
            return BOOL
        if isinstance(node, ast.IfExp):
            return join(self.type_of(node.body), self.type_of(node.orelse))
        if isinstance(node, ast.Call):
            name = callee(node.func) or "?"
            if name in CASTS:
                return _known(CASTS[name], t.compute)
            if name == "len":
                return INT
            args = [self.type_of(a) for a in node.args]
            if name in {"abs", "absolute", "min", "max", "minimum", "maximum"}:
                found = None
                for a in args:
                    found = join(found, a)
                return found
            if name in {"floor", "ceil"} and node.func.__class__ is ast.Attribute \
                    and _module_of(node) == "math":
                return INT
            found = next((a for a in args if a is not None and a.kind == "f"), None)
            return _known(found, t.compute)
        return None

    def float_literal(self, value: float) -> str:
        text = repr(float(value))
        single = self.typing.compute == np.dtype(np.float32)
        if text in SPECIAL:  # NVRTC has no math.h: the bits of infinity and NaN
            bits = SPECIAL[text][0 if single else 1]
            return (f"__int_as_float({bits})" if single else
                    f"__longlong_as_double({bits}LL)")
        return text + ("f" if single else "")

    # -- expressions ----------------------------------------------------------------------
    def expr(self, node: ast.expr) -> str:
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool):
                return "true" if node.value else "false"
            if isinstance(node.value, int):  # in a subscript, the launch's index type
                return str(node.value) if self.index and abs(node.value) < 2**31 \
                    else f"{node.value}LL"
            if isinstance(node.value, float):
                return self.float_literal(node.value)
            raise self.error(node, f"the constant {node.value!r}")
        if isinstance(node, ast.Attribute) and node.attr in CONSTANTS:
            return self.float_literal(CONSTANTS[node.attr])
        if isinstance(node, ast.Name):
            if node.id in self.values:
                return self.values[node.id]
            if node.id not in self.rename and self.typing.of_name(node.id) is None:
                raise self.error(node, f"{node.id}: not an argument, a size or a variable "
                                       "the function assigns")
            return self.rename.get(node.id, node.id)
        if isinstance(node, ast.Subscript):
            shape = shape_of(node)
            if shape is not None:
                return f"{shape[0]}_n{shape[1]}"
            return self.subscript(self.redirected.get(id(node), _base(node)), _indices(node),
                                  self)
        if isinstance(node, ast.BinOp):
            return self.binary(node)
        if isinstance(node, ast.UnaryOp):
            operand = self.expr(node.operand)
            op = {ast.USub: "-", ast.UAdd: "+", ast.Not: "!", ast.Invert: "~"}[type(node.op)]
            return f"({op}{operand})"
        if isinstance(node, ast.Compare):
            parts = []
            left = node.left
            for op, right in zip(node.ops, node.comparators):
                if type(op) not in COMPARE:
                    raise self.error(node, f"the comparison {type(op).__name__}")
                parts.append(f"({self.expr(left)} {COMPARE[type(op)]} {self.expr(right)})")
                left = right
            return "(" + " && ".join(parts) + ")"
        if isinstance(node, ast.BoolOp):
            op = " && " if isinstance(node.op, ast.And) else " || "
            return "(" + op.join(self.expr(v) for v in node.values) + ")"
        if isinstance(node, ast.IfExp):
            return (f"({self.expr(node.test)} ? {self.expr(node.body)} : "
                    f"{self.expr(node.orelse)})")
        if isinstance(node, ast.Call):
            return self.call(node)
        raise self.error(node, type(node).__name__)

    def binary(self, node: ast.BinOp) -> str:
        left, right = self.expr(node.left), self.expr(node.right)
        kind = self.type_of(node)
        if not self.index and kind is not None and kind.kind in "iu":
            left = f"((long long)({left}))"
        if type(node.op) in BINARY:
            return f"({left} {BINARY[type(node.op)]} {right})"
        if isinstance(node.op, ast.Div):
            cast = c_type(_known(kind, self.typing.compute))
            return f"(({cast})({left}) / ({cast})({right}))"
        if isinstance(node.op, ast.FloorDiv):
            if kind is not None and kind.kind == "f":
                return f"floor({left} / {right})"
            return f"loclab_floordiv({left}, {right})"
        if isinstance(node.op, ast.Mod):
            if kind is not None and kind.kind == "f":
                cast = c_type(kind)
                return f"loclab_fmod(({cast})({left}), ({cast})({right}))"
            return f"loclab_mod({left}, {right})"
        if isinstance(node.op, ast.Pow):
            power = node.right
            if isinstance(power, ast.Constant) and isinstance(power.value, int) \
                    and 1 <= power.value <= 4:
                return "(" + " * ".join([left] * power.value) + ")"
            cast = c_type(kind if kind is not None and kind.kind == "f"
                          else self.typing.compute)
            return f"pow(({cast})({left}), ({cast})({right}))"
        raise self.error(node, f"the operator {type(node.op).__name__}")

    def call(self, node: ast.Call) -> str:
        name = callee(node.func) or "?"
        if name == "len" and len(node.args) == 1 and isinstance(node.args[0], ast.Name):
            return f"{node.args[0].id}_n0"
        if node.keywords:
            raise self.error(node, f"keyword arguments to {name}()")
        args = [self.expr(a) for a in node.args]
        if name in CASTS:
            target = _known(CASTS[name], self.typing.compute)
            return f"(({c_type(target)})({args[0]}))"
        if name in {"abs", "absolute", "fabs"} and len(args) == 1:
            return f"loclab_abs({args[0]})"
        if name in {"min", "max", "minimum", "maximum"} and len(args) >= 2:
            helper = "loclab_min" if name in {"min", "minimum"} else "loclab_max"
            kind = c_type(_known(self.type_of(node), self.typing.compute))
            text = f"(({kind})({args[0]}))"
            for arg in args[1:]:
                text = f"{helper}({text}, ({kind})({arg}))"
            return text
        if name in {"square"} and len(args) == 1:
            return f"({args[0]} * {args[0]})"
        if name in FLOAT_FUNCTIONS:
            kind = _known(self.type_of(node), self.typing.compute)
            cast = c_type(kind if kind.kind == "f" else self.typing.compute)
            text = f"{FLOAT_FUNCTIONS[name]}(" + ", ".join(f"({cast})({a})" for a in args) + ")"
            if name in {"floor", "ceil"} and kind == INT:
                return f"((long long){text})"
            return text
        raise self.error(node, f"the call {name}()")


def _module_of(node: ast.Call) -> str:
    func = node.func
    return func.value.id if isinstance(func, ast.Attribute) \
        and isinstance(func.value, ast.Name) else ""


def _base(node: ast.Subscript) -> str:
    """The array a subscript reads: ``A`` of ``A[i, j]`` and of ``A[i][j]``."""
    name = base_name(node)
    if not name:
        raise UsageError("only subscripts of named arrays are translated")
    return name


def _indices(node: ast.Subscript) -> list[ast.expr]:
    """The subscripts, outermost dimension first, of ``A[i, j]`` or ``A[i][j]``."""
    out: list[ast.expr] = []
    current: ast.expr = node
    while isinstance(current, ast.Subscript):
        index = current.slice
        out[:0] = list(index.elts) if isinstance(index, ast.Tuple) else [index]
        current = current.value
    return out


def subscript_parts(node: ast.Subscript) -> tuple[str, list[ast.expr]]:
    return _base(node), _indices(node)


def shape_of(node: ast.expr) -> tuple[str, int] | None:
    """(array, dimension) of ``A.shape[d]``, else None."""
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) \
            and node.value.attr == "shape" and isinstance(node.value.value, ast.Name) \
            and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, int):
        return node.value.value.id, node.slice.value
    return None


@dataclass(frozen=True)
class LauncherNames:
    """The names the module gives what it adds to the user's function: the index type (the
    kernels' template parameter, and its NumPy type in the launcher), the C type's name the
    kernels are instantiated for, and the largest extent; each unlike every name of the
    function (a size called ``I``, as in a mode product ``for i in range(I)``, is the
    user's). Both CUDA emitters use them."""

    index_type: str = "I"
    index: str = "index"
    largest: str = "largest"

    @classmethod
    def avoiding(cls, function: ast.FunctionDef) -> "LauncherNames":
        taken = {n.id for n in ast.walk(function) if isinstance(n, ast.Name)}
        taken |= {a.arg for a in ast.walk(function) if isinstance(a, ast.arg)}

        def free(name: str) -> str:
            while name in taken:
                name += "_"
            return name

        return cls(free("I"), free("index"), free("largest"))
