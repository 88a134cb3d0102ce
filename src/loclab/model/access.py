"""One array access of a CUDA kernel, written as CUDA C text, evaluated for every thread of a block.

The lectures predict memory transactions and bank conflicts from nothing but the subscript of
an access and the block shape; this module turns the text (``a[(blockIdx.x*32 + threadIdx.y)*N
+ threadIdx.x]``) into that subscript: an array name and affine (or quasi-affine: ``/`` and
``%`` by constants) expressions over the thread and block indices, and then into the element
index each thread of the block reads. C's ``[][]``, ``+ - * / %``, parentheses and integer
literals are also Python syntax once ``threadIdx.x`` is read as an attribute, so the parser is
Python's ``ast``; the expressions are the loop-nest IR's polynomials (:mod:`loclab.nest.expr`),
so a product of indices is recognized, and refused, exactly as the dependence analysis does.

Both models (:mod:`.coalescing`, :mod:`.banks`) start from :func:`resolve`; the shared
validation (block shape, element size, parameters, bounds) lives here so that they report
the same problems with the same words.
"""

from __future__ import annotations

import ast
import keyword
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np

from loclab.errors import UsageError
from loclab.model.magnitude import check_magnitude, limit_text, too_large
# The block's check lives with the other size syntax, NumPy-free for the command line; it is
# imported here too (parse_block included) because the access models' callers find it here.
from loclab.model.text import AXES, Block, check_block, parse_block, parse_sizes, shape_text
from loclab.nest.expr import FloorDiv, Mod, Poly, Symbol

if TYPE_CHECKING:
    from loclab.model.banks import Banks
    from loclab.model.coalescing import Coalescing

WARP = 32
ELEM_BYTES = (1, 2, 4, 8, 16)
ELEM_NAMES = {1: "char", 2: "half/short", 4: "float/int", 8: "double/float2", 16: "float4"}

THREAD = tuple(f"threadIdx.{a}" for a in AXES)
BLOCK_INDEX = tuple(f"blockIdx.{a}" for a in AXES)
BLOCK_DIM = tuple(f"blockDim.{a}" for a in AXES)
BUILTINS = {"threadIdx", "blockIdx", "blockDim", "gridDim"}
ALIASES = {**{f"t{a}": f"threadIdx.{a}" for a in AXES}, **{f"b{a}": f"blockIdx.{a}" for a in AXES}}

# C names that are Python keywords (``in``, ``is``, ``from``...) are renamed before parsing.
KEYWORD_PREFIX = "__c_"
PYTHON_KEYWORD = re.compile(r"(?<![\w.])(" + "|".join(keyword.kwlist) + r")(?!\w)")
PYTHON_KEYWORD_BACK = re.compile(re.escape(KEYWORD_PREFIX) + r"(?=\w)")

Params = Mapping[str, int]


# -- shapes and options ---------------------------------------------------------------------
def parse_shape(text: str) -> tuple[int, ...]:
    """``"32x33"`` -> ``(32, 33)``: an array's shape, row-major, as declared in C."""
    return check_shape(parse_sizes(text, "shape", "32x33", 8))


def check_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
    """A shape whose elements an int64 offset can number (see :mod:`.magnitude`)."""
    if too_large(math.prod(shape)):
        raise UsageError(f"shape {shape_text(shape)} has {math.prod(shape):.3g} elements: "
                         f"too many (at most {limit_text()})")
    return shape


def parse_params(items: list[str]) -> dict[str, int]:
    """``["N=16384", "bx=5"]`` -> ``{"N": 16384, "blockIdx.x": 5}`` (see :func:`check_params`)."""
    values: dict[str, int] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not re.fullmatch(r"-?\d+", value.strip()):
            raise UsageError(f"bad parameter {item!r}: give NAME=INTEGER, like N=16384")
        if name.strip() in values:
            raise UsageError(f"parameter {name.strip()} given twice")
        values[name.strip()] = int(value)
    return check_params(values)


def check_elem_bytes(elem_bytes: int) -> int:
    if elem_bytes not in ELEM_BYTES:
        raise UsageError(f"element size {elem_bytes} bytes: give one of "
                         f"{', '.join(map(str, ELEM_BYTES))}")
    return elem_bytes


def check_params(params: Params) -> dict[str, int]:
    """Parameters by their canonical names (``bx`` -> ``blockIdx.x``), integers only.

    Thread indices and ``blockDim`` come from the block shape: a value for them would
    silently disagree with it, so it is refused."""
    values: dict[str, int] = {}
    for name, value in params.items():
        key = ALIASES.get(name, name)
        if key in THREAD or key in BLOCK_DIM:
            raise UsageError(f"{name} comes from the block shape, not from a parameter")
        base, _, member = key.partition(".")
        if not (re.fullmatch(r"[A-Za-z_]\w*", base) and (not member or
                                                       (base in BUILTINS and member in AXES))):
            raise UsageError(f"bad parameter name {name!r}")
        if not isinstance(value, int) or isinstance(value, bool):
            raise UsageError(f"parameter {name} = {value!r} is not an integer")
        if too_large(value):
            raise UsageError(f"parameter {name} = {value:.3g} is too large (numbers in "
                             f"indices must stay below {limit_text()})")
        values[key] = value
    return values


# -- parsing --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Access:
    """``array[s0][s1]...``: the subscripts as polynomials over canonical variable names."""

    text: str
    array: str
    subscripts: tuple[Poly, ...]


def parse_access(text: str, constants: Params | None = None) -> Access:
    """Parse CUDA C access text; names with a value in ``constants`` become those values.

    Known values are folded in while parsing because ``/`` and ``%`` need a constant divisor
    (``tid / W`` with ``W`` a parameter) and the polynomial keeps only constant divisors."""
    source = text.strip().rstrip(";").strip()
    if "//" in source or "/*" in source:
        # Python would read ``//`` as floor division; in CUDA C it starts a comment.
        raise UsageError(f"{source}: {'//' if '//' in source else '/*'} starts a comment in "
                         "CUDA C: write / for integer division, without comments")
    try:
        tree = ast.parse(PYTHON_KEYWORD.sub(KEYWORD_PREFIX + r"\1", source), mode="eval").body
    except SyntaxError as error:
        raise UsageError(f"cannot parse access {_shortened(source)!r}: {error.msg}") from None
    except RecursionError:
        raise UsageError(_too_deep(source)) from None
    subscripts: list[ast.expr] = []
    while isinstance(tree, ast.Subscript):
        if isinstance(tree.slice, (ast.Tuple, ast.Slice)):
            raise UsageError(f"{source}: write one subscript per pair of brackets, like a[i][j]")
        subscripts.insert(0, tree.slice)
        tree = tree.value
    if not isinstance(tree, ast.Name) or not subscripts:
        raise UsageError(f"{source}: expected an array access like a[threadIdx.x]")
    values = constants or {}
    try:
        polys = tuple(_poly(s, source, values) for s in subscripts)
    except RecursionError:
        raise UsageError(_too_deep(source)) from None
    return Access(source, _c_name(tree.id), polys)


def _shortened(text: str, most: int = 60) -> str:
    """The start of a long text, for an error line that stays one line."""
    return text if len(text) <= most else text[:most - 3] + "..."


def _too_deep(source: str) -> str:
    """Python's parser and :func:`_poly` recurse once a term: thousands of them exhaust the
    stack, which is bad input (no kernel's access has them), not a bug."""
    return (f"access {_shortened(source)!r} ({len(source):,} characters) is too long or too "
            "deeply nested to read: write the access as the kernel does")


def _poly(node: ast.expr, text: str, constants: Mapping[str, int]) -> Poly:
    """A subscript expression as a polynomial; anything but integer arithmetic is refused."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return Poly.const(node.value)
    if isinstance(node, (ast.Name, ast.Attribute)):
        name = _variable(node, text)
        return Poly.const(constants[name]) if name in constants else Poly.symbol(name)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _poly(node.operand, text, constants)
        return -inner if isinstance(node.op, ast.USub) else inner
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult)):
        left, right = _poly(node.left, text, constants), _poly(node.right, text, constants)
        return left + right if isinstance(node.op, ast.Add) else \
            left - right if isinstance(node.op, ast.Sub) else left * right
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Div, ast.FloorDiv, ast.Mod)):
        left, right = _poly(node.left, text, constants), _poly(node.right, text, constants)
        divisor = right.constant_value()
        if divisor is None:
            raise UsageError(f"{text}: {_unparse(node)} divides by {right}: give "
                             f"{', '.join(sorted(right.symbols()))} a value")
        if divisor <= 0:
            raise UsageError(f"{text}: {_unparse(node)} divides by {divisor}: only positive "
                             "divisors are modeled")
        return left.mod(divisor) if isinstance(node.op, ast.Mod) else left.floordiv(divisor)
    if isinstance(node, ast.Call):
        raise UsageError(f"{text}: unknown function {_unparse(node.func)}(): subscripts are "
                         "integer arithmetic on indices and sizes")
    raise UsageError(f"{text}: unsupported in a subscript: {_unparse(node)}")


def _c_name(name: str) -> str:
    return name.removeprefix(KEYWORD_PREFIX)


def _unparse(node: ast.expr) -> str:
    """A node as the user wrote it (C names that are Python keywords restored)."""
    return PYTHON_KEYWORD_BACK.sub("", ast.unparse(node))


def _variable(node: ast.Name | ast.Attribute, text: str) -> str:
    """The canonical name of ``N``, ``tx`` or ``threadIdx.x``."""
    if isinstance(node, ast.Name):
        if node.id in BUILTINS:
            raise UsageError(f"{text}: {node.id} needs a member: {node.id}.x, .y or .z")
        return ALIASES.get(node.id, _c_name(node.id))
    if isinstance(node.value, ast.Name) and node.value.id in BUILTINS and node.attr in AXES:
        return f"{node.value.id}.{node.attr}"
    raise UsageError(f"{text}: unknown member {_unparse(node)}: use threadIdx, blockIdx, "
                     "blockDim or gridDim with .x, .y or .z")


# -- evaluation for every thread ------------------------------------------------------------
@dataclass(frozen=True)
class Subscripts:
    """An access evaluated for every thread of a block (thread ids linearized x fastest)."""

    access: Access
    block: Block
    params: dict[str, int]
    assumed: tuple[str, ...]
    threads: np.ndarray  # (3, n): threadIdx.x, .y, .z of each thread id
    values: np.ndarray  # (subscripts, n): each subscript's value for each thread

    def linear(self, shape: tuple[int, ...] | None) -> np.ndarray:
        """Each thread's element offset from the array's start, row-major in ``shape``.

        A single subscript is already linear (a flattened global array); several need the
        shape. Every index is checked: a model of an out-of-bounds access would be fiction."""
        count = len(self.access.subscripts)
        if shape is not None:
            check_shape(shape)
        if shape is not None and count not in (1, len(shape)):
            raise UsageError(f"{self.access.text}: {count} subscripts on an array of shape "
                             f"{shape_text(shape)}")
        if shape is None and count > 1:
            raise UsageError(f"{self.access.text}: {count} subscripts: give the shape of "
                             f"{self.access.array}")
        dims = (math.prod(shape),) if shape is not None and count == 1 else shape
        for axis, index in enumerate(self.values):
            limit = None if dims is None else dims[axis]
            bad = (index < 0) if limit is None else (index < 0) | (index >= limit)
            if bad.any():
                self._out_of_bounds(int(np.argmax(bad)), axis, limit)
        strides = [math.prod(dims[k + 1:]) for k in range(count)] if dims else [1]
        return np.asarray(strides, dtype=np.int64) @ self.values

    def _out_of_bounds(self, thread: int, axis: int, limit: int | None) -> None:
        index = [str(v) for v in self.values[:, thread]]
        where = "".join(f"[{v}]" for v in index)
        allowed = "must not be negative" if limit is None else f"is outside 0..{limit - 1}"
        raise UsageError(f"{self.access.text}: thread {self.thread_name(thread)} reads "
                         f"{self.access.array}{where}: index {index[axis]} {allowed}")

    def thread_name(self, thread: int) -> str:
        """``(x,y,z)`` of a thread id, as the lectures name threads."""
        return "(" + ",".join(str(int(v)) for v in self.threads[:, thread]) + ")"

    @property
    def warp_ids(self) -> np.ndarray:
        return np.arange(self.threads.shape[1]) // WARP


def resolve(text: str, block: tuple[int, ...], params: Params) -> Subscripts:
    """Parse ``text`` with the block's sizes and the parameters, then evaluate it per thread.

    Every free name but the thread and block indices needs a value; block indices default
    to 0 (the first block: every block of a regular grid moves the same amount of data) and
    the result says so. A product of indices is not affine: no model of this kind applies."""
    block = check_block(tuple(block))
    given = check_params(params)
    access = parse_access(text, {**given, **dict(zip(BLOCK_DIM, block))})
    names = set().union(*(s.symbols() for s in access.subscripts))
    missing = sorted(names - set(THREAD) - set(BLOCK_INDEX))
    if missing:
        raise UsageError(f"{access.text}: give values to {', '.join(missing)} (as parameters)")
    given_text = ", ".join(f"{k}={v}" for k, v in given.items())
    where = f"{access.text} at {given_text}" if given_text else access.text
    for subscript in access.subscripts:
        term = _non_affine_term(subscript)
        if term is not None:
            raise UsageError(f"{access.text} is not affine: {term}")
        check_magnitude(subscript, _magnitudes(block), where)
    defaults = sorted(names & set(BLOCK_INDEX))
    assumed = tuple(f"{name} = 0 (not given)" for name in defaults)
    threads = thread_indices(block)
    env = {**dict(zip(THREAD, threads)), **{name: np.zeros(1, np.int64) for name in defaults}}
    values = np.stack([_evaluate(s, env, access.text) for s in access.subscripts])
    return Subscripts(access, block, given, assumed, threads, values)


def _magnitudes(block: Block) -> dict[str, int]:
    """The largest value of each index an evaluated subscript can still hold: a thread
    index below its block side, a block index 0 (a given one is a constant by now)."""
    return {**{name: side - 1 for name, side in zip(THREAD, block)},
            **dict.fromkeys(BLOCK_INDEX, 0)}


def thread_indices(block: Block) -> np.ndarray:
    """(3, n) threadIdx of thread ids 0..n-1: x fastest, as the hardware forms warps."""
    tid = np.arange(math.prod(block), dtype=np.int64)
    return np.stack([tid % block[0], tid // block[0] % block[1], tid // (block[0] * block[1])])


def _non_affine_term(poly: Poly) -> str | None:
    """The first product of variables in ``poly`` (inside ``/`` and ``%`` too), or None."""
    for monomial, _ in poly.terms:
        if len(monomial) > 1:
            return "*".join(str(Poly.atom(a)) for a in monomial)
        for atom in monomial:
            if isinstance(atom, (FloorDiv, Mod)):
                inner = _non_affine_term(atom.inner)
                if inner is not None:
                    return inner
    return None


def _evaluate(poly: Poly, env: Mapping[str, np.ndarray], text: str) -> np.ndarray:
    """The polynomial's value for every thread (numpy broadcasting over thread arrays)."""
    total = np.zeros(env[THREAD[0]].shape, dtype=np.int64)
    for monomial, coeff in poly.terms:
        term = np.int64(coeff)
        for atom in monomial:
            term = term * _atom_value(atom, env, text)
        total = total + term
    return total


def _atom_value(atom: Symbol | FloorDiv | Mod, env: Mapping[str, np.ndarray],
                text: str) -> np.ndarray:
    """A symbol's values, or C's ``/`` / ``%``: equal to Python's floor versions only on
    non-negative values, which is therefore checked rather than assumed."""
    if isinstance(atom, Symbol):
        return env[atom.name]
    inner = _evaluate(atom.inner, env, text)
    if (inner < 0).any():
        raise UsageError(f"{text}: {atom.inner} is negative for some thread; C's / and % "
                         "round toward zero there: only non-negative values are modeled")
    return inner // atom.divisor if isinstance(atom, FloorDiv) else inner % atom.divisor


def distinct_rows(*columns: np.ndarray) -> np.ndarray:
    """The distinct rows of the columns side by side: "which sectors does each warp touch"
    and "which words does each bank serve" are both distinct (group, key) pairs."""
    return np.unique(np.stack(columns, axis=1), axis=0)


def plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def describe_block(block: Block) -> str:
    """``block 32x8x1: 8 warps``, the way both models introduce a result."""
    warps = -(-math.prod(block) // WARP)
    return f"block {shape_text(block)}: {plural(warps, 'warp')}"


# -- accesses that case studies declare -----------------------------------------------------
@dataclass(frozen=True)
class DeclaredAccess:
    """A kernel's main access as a case study declares it, to predict beside a measurement."""

    text: str
    space: Literal["global", "shared"]
    elem_bytes: int
    shape: tuple[int | str, ...] | None = None  # a side may be an expression: "TILE + PAD"
    note: str = ""
    write: bool = False  # a store (profilers count loads and stores apart)
    # How many times the access runs in one launch, over all threads: an expression in the
    # same names (template arguments, the case's dimensions), e.g. "rows*cols" or
    # "m*n*k/4". With the sectors per request it gives the bytes the access moves.
    count: str | None = None
    # ``count`` is for a whole run, over all its launches of the kernel (a pass per chunk
    # whose share only the run knows), not for one launch.
    count_per_run: bool = False
    # The distinct elements the access reads in a launch, where the others only hit the
    # cache (x of a matrix-vector product, read by every row): an expression like ``count``.
    footprint: str | None = None

    def executions(self, params: Params) -> int | None:
        """``count`` evaluated at ``params`` (None where the access declares none)."""
        return None if self.count is None else evaluate_constant(self.count, params)

    def footprint_bytes(self, params: Params) -> int | None:
        """``footprint`` in bytes at ``params`` (None where the access declares none)."""
        return None if self.footprint is None else \
            evaluate_constant(self.footprint, params) * self.elem_bytes

    def predict(self, block: tuple[int, ...], params: Params) -> Coalescing | Banks:
        """Sectors per request for a global access, bank conflicts for a shared one."""
        # The models import this module, so they are imported here, when first used.
        shape = None if self.shape is None else evaluate_sides(self.shape, params)
        if self.space == "global":
            from loclab.model.coalescing import coalescing
            return coalescing(self.text, block, self.elem_bytes, params, shape)
        if self.space == "shared":
            if shape is None:
                raise UsageError(f"{self.text}: a __shared__ access needs the array's shape")
            from loclab.model.banks import bank_conflicts
            return bank_conflicts(self.text, shape, block, self.elem_bytes, params)
        raise UsageError(f"{self.text}: space {self.space!r} is neither global nor shared")


def evaluate_constant(text: str, params: Params) -> int:
    """The value of an expression in the parameters (an array side such as ``TILE + PAD``)."""
    value = parse_access(f"side[{text}]", params).subscripts[0].constant_value()
    if value is None:
        raise UsageError(f"{text}: give values to its names (as parameters)")
    return value


def evaluate_sides(sides: tuple[int | str, ...], params: Params) -> tuple[int, ...]:
    """A shape or block whose sides may be expressions (``("TILE", "TILE + PAD")``)."""
    return tuple(side if isinstance(side, int) else evaluate_constant(side, params)
                 for side in sides)
