"""Python frontend: a function's ``ast`` to the loop-nest IR.

Supported: ``for v in range(...)`` (and numba's ``prange``), assignments, chained assignments
(``a = b = e``: ``e`` once, then ``a``, then ``b``) and augmented assignments to scalars and
subscripted arrays (``A[i][j]``, ``A[i, j]``), ``if``/``elif``/``else``, pure math calls, NumPy
allocations (``np.empty(...)``; inside a loop that is a fresh array per iteration). Functions
are the module's and its classes' (``Class.method``; ``self`` is an argument like any other).
Python scalars are function-wide: one location, whatever loop assigns them. Tuple
assignments (``n, m = A.shape``; ``a, b = e, f``; a swap) are read as one assignment a target,
``for i, v in enumerate(x)`` as a range loop, and ``if c: ...; continue`` in a loop as an
``if``/``else`` around the rest of the body. Anything else (while, break, other continues,
calls that may write, slices, unpacking of anything but a shape or a tuple, ``range(2.5)``)
is a one-line error with file:line:column.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from typing import Any

from loclab.nest.builder import NestBuilder
from loclab.nest.expr import BoolOp, Compare, Condition, Poly
from loclab.nest.ir import Access, Nest, Update
from loclab.nest.source import SourceLines

RANGE_FUNCTIONS = {"range", "prange"}
ALLOCATORS = {"empty", "zeros", "ones", "full", "empty_like", "zeros_like", "ones_like",
              "full_like"}
PURE_BUILTINS = {"abs", "min", "max", "float", "int", "round", "pow", "bool", "len"}
PURE_MODULES = {"math", "np", "numpy", "cmath"}
NUMPY_PURE = {"sqrt", "exp", "log", "log2", "log10", "abs", "fabs", "absolute", "sin", "cos",
              "tan", "tanh", "floor", "ceil", "minimum", "maximum", "power", "float32",
              "float64", "int32", "int64", "uint32", "uint64", "uint8", "int8", "int16",
              "float16", "hypot", "arctan2", "sign", "square", "fmin", "fmax", "isnan",
              "isinf", "where", "exp2", "expm1", "log1p", "cbrt", "arcsin", "arccos",
              "arctan", "sinh", "cosh"}
MATH_NAMES = {"sqrt", "exp", "log", "fabs", "sin", "cos", "tan", "floor", "ceil", "hypot",
              "tanh", "log2", "log10", "pow", "atan2", "fmin", "fmax", "copysign", "erf"}
UPDATE_OPS: dict[type, str] = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.BitAnd: "&",
                               ast.BitOr: "|", ast.BitXor: "^"}
COMMUTATIVE = {"+", "*", "&", "|", "^"}
COMPARE_OPS: dict[type, str] = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
                                ast.Eq: "==", ast.NotEq: "!="}
# a string literal or a comment, kept as written; or a backslash that continues a line
_CONTINUATION = re.compile(
    r"(?P<keep>'{3}(?:\\.|[^\\])*?'{3}|\"{3}(?:\\.|[^\\])*?\"{3}"
    r"|'(?:\\.|[^'\\\n])*'|\"(?:\\.|[^\"\\\n])*\"|#[^\r\n]*)"
    r"|\\(?:\r\n|\r|\n)", re.S)


def python_functions(source: str, filename: str) -> list[tuple[str, ast.FunctionDef]]:
    """(name, node) of the module's functions and of its classes' methods (``Class.method``,
    nested classes too), in source order (``filename`` only names syntax errors)."""
    from loclab.nest.builder import NestError

    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as err:
        raise NestError(f"{filename}:{err.lineno}:{err.offset}: invalid Python: {err.msg}") \
            from None
    except (RecursionError, MemoryError):  # CPython's parser gave up (on the worker's stack)
        raise NestError(f"{filename}: nested too deeply for Python's parser (expressions "
                        "thousands of levels deep)") from None
    _check_nesting(tree, filename)
    _UnpackTuples({n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}).visit(tree)
    _FoldContinues().visit(tree)
    found: list[tuple[str, ast.FunctionDef]] = []

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef):
                found.append((prefix + node.name, node))
            elif isinstance(node, ast.ClassDef):
                visit(node.body, f"{prefix}{node.name}.")

    visit(tree.body, "")
    return found


def python_function(source: str, filename: str, name: str,
                    line_offset: int = 0) -> ast.FunctionDef:
    """The function (or method, ``Class.method``) called ``name``; none, or several, is an
    error (as ``FILE::NAME`` is for every command)."""
    from loclab.nest.builder import pick_function

    named = python_functions(source, filename)
    return pick_function([node for _, node in named], [known for known, _ in named],
                         [f"{filename}:{node.lineno + line_offset}" for _, node in named],
                         name, filename)


def _check_nesting(tree: ast.Module, filename: str) -> None:
    """Refuse code nested deeper than the walks that read it follow (``MAX_NESTING``
    levels), naming where, before a walk fails without a place."""
    from loclab.nest.builder import nested_too_deep
    from loclab.nest.deep import MAX_NESTING

    pending: list[tuple[ast.AST, int]] = [(tree, 0)]
    while pending:
        node, depth = pending.pop()
        if depth > MAX_NESTING and isinstance(node, (ast.stmt, ast.expr)):  # not Load()
            raise nested_too_deep(f"{filename}:{node.lineno}:{node.col_offset + 1}",
                                  isinstance(node, ast.stmt))
        pending.extend((child, depth + 1) for child in ast.iter_child_nodes(node))


def build_python(lines: SourceLines, function: ast.FunctionDef, filename: str,
                 line_offset: int = 0, name: str | None = None) -> Nest:
    """The IR of one function of a file split into ``lines`` (lines shifted by
    ``line_offset``); ``name`` is its qualified name (``Class.method``)."""
    return _PythonNest(lines, function, filename, line_offset, name or function.name).build()


class _PythonNest:
    def __init__(self, lines: SourceLines, function: ast.FunctionDef, filename: str,
                 line_offset: int, name: str) -> None:
        self.lines = lines
        self.function = function
        self.offset = line_offset
        self.builder = NestBuilder(name, filename, "python", function.lineno + line_offset)
        self.assigned, self.mutable = _assigned_names(function)
        self.settled = _settled_names(function) - self.mutable
        self.known: dict[str, Poly] = {}  # settled names whose value is an index expression

    # -- helpers ----------------------------------------------------------------------------
    def line(self, node: ast.AST) -> int:
        return getattr(node, "lineno", 0) + self.offset

    def error(self, node: ast.AST, message: str) -> Exception:
        return self.builder.error(self.line(node), getattr(node, "col_offset", 0) + 1, message)

    def text(self, node: ast.AST) -> str:
        """The node as the user wrote it on one line: blanks collapsed, and no backslash
        where the user continued a line (``A[j] \\`` then ``+ 1`` is ``A[j] + 1``)."""
        segment = self.lines.segment(node) or ast.unparse(node)
        joined = _CONTINUATION.sub(lambda m: m["keep"] or " ", segment)
        return " ".join(joined.split())

    # -- walking ----------------------------------------------------------------------------
    def build(self) -> Nest:
        arguments = self.function.args.posonlyargs + self.function.args.args
        self.builder.arguments = {a.arg for a in arguments + self.function.args.kwonlyargs}
        # NumPy lets two array arguments be one array, or views of one (x[1:], x[:-1]),
        # and a global array be an argument too
        self.builder.undeclared_overlap = lambda name: "array"
        self.block(self.function.body, top=True)
        return self.builder.finish()

    def block(self, body: list[ast.stmt], top: bool = False) -> None:
        for index, node in enumerate(body):
            self.statement(node, top and index == len(body) - 1)

    def statement(self, node: ast.stmt, last_top: bool) -> None:
        if isinstance(node, ast.For):
            self.loop(node)
        elif isinstance(node, ast.If):
            self.branch(node)
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            self.assignment(node)
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            return  # docstring or a stray constant
        elif isinstance(node, ast.Pass):
            return
        elif isinstance(node, ast.Return) and last_top:
            if node.value is not None:
                values = node.value.elts if isinstance(node.value, ast.Tuple) \
                    else [node.value]  # ``return best, arg``: what each value reads
                reads = self.returned_arrays(node.value) or [
                    access for value in values for access in self.reads(value)]
                if reads:
                    self.builder.add_statement(self.line(node), node.col_offset + 1,
                                               self.text(node), reads)
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            raise self.error(node, f"call {self.text(node.value)} as a statement may write "
                             "its arguments; only assignments are supported")
        else:
            raise self.error(node, f"{_describe(node)} is not supported in a loop nest "
                             "(supported: for-range loops, assignments, if/else)")

    def loop(self, node: ast.For) -> None:
        if not isinstance(node.target, ast.Name):
            raise self.error(node, "the loop variable must be a plain name")
        call = node.iter
        if not (isinstance(call, ast.Call) and callee(call.func) in RANGE_FUNCTIONS
                and not call.keywords and 1 <= len(call.args) <= 3):
            raise self.error(node.iter, "only 'for v in range(...)' loops are supported")
        if node.orelse:
            raise self.error(node, "for ... else is not supported")
        args = call.args
        for position, arg in enumerate(args):
            if _non_integer(arg):
                role = "step" if position == 2 else "argument"
                raise self.error(arg, f"range() {role} {self.text(arg)} is not an integer")
        start_node = args[0] if len(args) >= 2 else None
        stop_node = args[1] if len(args) >= 2 else args[0]
        step, stride = 1, None
        if len(args) == 3:
            step_poly = self.index(args[2])
            value = step_poly.constant_value() if step_poly is not None else None
            if value == 0 or step_poly is None or node.target.id in step_poly.symbols() \
                    or not step_poly.is_affine():
                raise self.error(args[2], "the loop step must be a non-zero integer constant "
                                 "or a size")
            if value is None:  # a size: both signs are analyzed (analysis.counting_down)
                stride = step_poly
                self.builder.note(self.line(node), f"loop {node.target.id} steps by "
                                  f"{self.text(args[2])}: analyzed over every "
                                  f"{node.target.id} between its bounds (a superset of its "
                                  f"iterations), for {self.text(args[2])} >= 1 and, apart, "
                                  f"<= -1; range() refuses a step of 0")
            else:
                step = value
        start = self.bound(start_node) if start_node is not None else Poly.const(0)
        stop = self.bound(stop_node)
        for bound in (start_node, stop_node):
            if bound is not None:
                self.check_bound_reads(bound)
        self.builder.open_loop(node.target.id, start, stop, step, self.line(node),
                               node.col_offset + 1, f"for {node.target.id} in "
                               f"{self.text(node.iter)}", stride=stride,
                               signed=stride is None)
        self.block(node.body)
        self.builder.close_loop()

    def bound(self, node: ast.expr) -> Poly | None:
        poly = self.index(node)
        if poly is None:
            self.builder.note(self.line(node), f"loop bound {self.text(node)} depends on "
                              "data: treated as unbounded")
        return poly

    def check_bound_reads(self, node: ast.expr) -> None:
        """Bounds are evaluated once, before the loop: reading memory there is not modelled."""
        if self.reads(node):
            self.builder.note(self.line(node), f"memory read in loop bound {self.text(node)}"
                              " is not counted as an access")

    def branch(self, node: ast.If) -> None:
        condition = self.condition(node.test)
        reads = self.reads(node.test)
        text = self.text(node.test)
        test = self.builder.add_statement(self.line(node), node.col_offset + 1,
                                          f"if {text}", reads) if reads else None
        if condition is None:
            self.builder.note(self.line(node), f"condition {text} is not affine: the "
                              "statements it guards are treated as possibly executed")
        self.builder.push_guard(condition, text, test)
        self.block(node.body)
        if node.orelse:
            self.builder.flip_guard()
            self.block(node.orelse)
        self.builder.pop_guard()

    def assignment(self, node: ast.Assign | ast.AugAssign | ast.AnnAssign) -> None:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        value = node.value
        if value is None:
            return  # a bare annotation declares nothing we track
        for target in targets:
            if isinstance(target, (ast.Tuple, ast.List)):
                raise self.error(node, "tuple assignment is not supported; assign one name "
                                 "per statement")
            if isinstance(target, ast.Name) and target.id in self.builder.loop_vars:
                raise self.error(node, f"assignment to loop variable {target.id} is not "
                                 "supported")
        if isinstance(node, ast.Assign) and is_allocation(value):
            if len(targets) > 1:
                raise self.error(node, "a chained assignment of a new array gives it two "
                                 "names; aliasing is not supported")
            if isinstance(targets[0], ast.Name):
                self.allocation(targets[0].id, value, node)
                return
        self.settle(targets, value, node)
        update = self.update(node, targets[0], value) if len(targets) == 1 else None
        reads: list[Access] = []
        if isinstance(node, ast.AugAssign):
            reads.append(self.target_access(node.target, write=False))
        reads += self.reads(value)
        self.builder.add_statement(self.line(node), node.col_offset + 1, self.text(node),
                                   reads + self.stores(targets), update)

    def settle(self, targets: list[ast.expr], value: ast.expr, node: ast.stmt) -> None:
        """``k = LEN // 2`` before the loops, never assigned again: later subscripts and
        bounds read ``k`` as its value, not as an unknown size (``a[i + k]`` and ``a[i]``
        are then the two halves they are). A value that is no index expression (data, or
        arithmetic isl cannot hold) leaves ``k`` an unknown whose ties to the sizes are
        lost: what uses it is not exact."""
        if len(targets) != 1 or not isinstance(targets[0], ast.Name) \
                or targets[0].id not in self.settled or isinstance(node, ast.AugAssign):
            return
        known = len(self.builder.nest.parameters)
        poly = self.index(value)
        if poly is None or poly.symbols() & set(self.builder.nest.opaque):
            # the names of a value that is no index expression are no sizes either (deriche's
            # ``k = ... math.exp(-alpha) ...``: alpha is a float; adi's ``c = a`` after ``a =
            # -mul1 / 2.0``: a float too; one a bound or subscript uses is a size there)
            del self.builder.nest.parameters[known:]
            self.builder.opaque(targets[0].id, self.line(node))
            if _size_arithmetic(value, self.builder.arguments
                                | set(self.builder.nest.derived)):
                self.builder.nest.derived[targets[0].id] = ast.unparse(value)
        else:
            self.known[targets[0].id] = poly

    def stores(self, targets: list[ast.expr]) -> list[Access]:
        """The accesses of assigning ``a = b = e``'s value: left to right, as Python does,
        each target's subscript reads and then its write.

        The IR orders every read of a statement before its writes; a target whose subscript
        reads what an earlier target wrote (``k = A[k] = e``) would break that, so it is an
        error rather than a wrong answer.
        """
        accesses: list[Access] = []
        written: dict[str, Access] = {}
        for target in targets:
            for read in self.subscript_reads(target):
                if read.variable.key in written:
                    raise self.error(target, f"{self.text(target)} reads {read.text}, which "
                                     f"{written[read.variable.key].text} = ... assigns "
                                     "first in this chained assignment; write two statements")
                accesses.append(read)
            write = self.target_access(target, write=True)
            written[write.variable.key] = write
            accesses.append(write)
        return accesses

    def allocation(self, name: str, call: ast.Call, node: ast.stmt) -> None:
        shape = call.args[0] if call.args else None
        extents: tuple[Poly | None, ...] | None = None
        if shape is not None and not callee(call.func).endswith("_like"):
            items = shape.elts if isinstance(shape, (ast.Tuple, ast.List)) else [shape]
            extents = tuple(self.index(item) for item in items)
        self.builder.declare(name, is_array=True, line=self.line(node), extents=extents,
                             private=bool(self.builder.loop_vars))

    def update(self, node: ast.stmt, target: ast.expr, value: ast.expr) -> Update | None:
        """Recognize ``t op= e``, ``t = t op e``, ``t = e op t``, ``t = max(t, e)``, and the
        recurrence ``A[i] = A[i-1] op e`` (same array, other element)."""
        target_dump = ast.dump(target, annotate_fields=False).replace("Store()", "Load()")
        name = base_name(target)

        def match(expr: ast.expr) -> bool | None:
            """True: the target itself; False: another element of it; None: neither."""
            if ast.dump(expr, annotate_fields=False) == target_dump:
                return True
            if isinstance(expr, ast.Subscript) and isinstance(target, ast.Subscript) \
                    and base_name(expr) == name:
                return False
            return None

        if isinstance(node, ast.AugAssign):
            op = UPDATE_OPS.get(type(node.op))
            return None if op is None else Update(op, self.elsewhere(target, name, value))
        if isinstance(value, ast.BinOp) and type(value.op) in UPDATE_OPS:
            op = UPDATE_OPS[type(value.op)]
            operands = [(value.left, value.right)]
            if op in COMMUTATIVE:
                operands.append((value.right, value.left))
        elif (isinstance(value, ast.Call) and callee(value.func) in {"min", "max"}
              and len(value.args) == 2 and not value.keywords):
            op = callee(value.func)
            operands = [(value.args[0], value.args[1]), (value.args[1], value.args[0])]
        else:
            return None
        for mine, other in operands:
            found = match(mine)
            if found is not None:
                return Update(op, self.elsewhere(target, name, other), same_location=found)
        return None

    @staticmethod
    def elsewhere(target: ast.expr, name: str, other: ast.expr) -> bool:
        return name in _names(other) or (
            isinstance(target, ast.Subscript) and name in _names_in_subscripts(target))

    # -- accesses ---------------------------------------------------------------------------
    def target_access(self, target: ast.expr, write: bool) -> Access:
        if isinstance(target, ast.Name):
            variable = self.builder.variable(target.id, is_array=False,
                                             line=self.line(target),
                                             column=target.col_offset + 1)
            return self.builder.access(variable, write, [], target.id, self.line(target),
                                       target.col_offset + 1)
        if isinstance(target, ast.Subscript):
            return self.array_access(target, write)
        raise self.error(target, f"cannot assign to {self.text(target)}")

    def returned_arrays(self, value: ast.expr) -> list[Access]:
        """``return C`` (or ``return C, D``) of arrays: a read of every element of each (its
        final contents are what the caller gets: no step may treat them as dead after the
        loops); else nothing (the value is read as any expression)."""
        names = value.elts if isinstance(value, ast.Tuple) else [value]
        found = [self.builder.lookup(n.id) if isinstance(n, ast.Name) else None
                 for n in names]
        if not found or not all(v is not None and v.is_array for v in found):
            return []
        return [self.builder.access(v, False, [None] * len(v.extents or (None,)),
                                    self.text(n), self.line(n), n.col_offset + 1)
                for n, v in zip(names, found) if v is not None]

    def array_access(self, node: ast.Subscript, write: bool) -> Access:
        base, indices = self.flatten(node)
        variable = self.builder.variable(base.id, is_array=True, line=self.line(node),
                                         column=node.col_offset + 1)
        subscripts = [self.index(index) for index in indices]
        return self.builder.access(variable, write, subscripts, self.text(node),
                                   self.line(node), node.col_offset + 1)

    def flatten(self, node: ast.Subscript) -> tuple[ast.Name, list[ast.expr]]:
        """``A[i][j]`` and ``A[i, j]`` both give (A, [i, j])."""
        indices: list[ast.expr] = []
        current: ast.expr = node
        while isinstance(current, ast.Subscript):
            piece = current.slice
            items = piece.elts if isinstance(piece, ast.Tuple) else [piece]
            for item in items:
                if isinstance(item, ast.Slice):
                    raise self.error(item, f"slice in {self.text(node)}: whole-row or "
                                     "sliced accesses are not supported; write a loop")
            indices = list(items) + indices
            current = current.value
        if not isinstance(current, ast.Name):
            raise self.error(node, f"subscripted expression {self.text(current)} is not a "
                             "plain array name")
        return current, indices

    def subscript_reads(self, target: ast.expr) -> list[Access]:
        if not isinstance(target, ast.Subscript):
            return []
        _, indices = self.flatten(target)
        return [a for index in indices for a in self.reads(index)]

    def reads(self, node: ast.expr) -> list[Access]:
        """Every memory read in an expression, in evaluation order."""
        out: list[Access] = []
        self._collect(node, out)
        return out

    def _collect(self, node: ast.expr, out: list[Access]) -> None:
        if isinstance(node, ast.Subscript):
            if _is_shape(node):
                return
            base, indices = self.flatten(node)
            for index in indices:
                self._collect(index, out)
            out.append(self.array_access(node, write=False))
        elif isinstance(node, ast.Name):
            if node.id in self.builder.loop_vars or node.id not in self.assigned:
                return  # a loop variable, a size or a constant: not a memory location
            variable = self.builder.variable(node.id, is_array=False, line=self.line(node),
                                             column=node.col_offset + 1)
            out.append(self.builder.access(variable, False, [], node.id, self.line(node),
                                           node.col_offset + 1))
        elif isinstance(node, ast.Call):
            self.check_pure(node)
            if callee(node.func) == "len":
                return
            for arg in node.args:
                self._collect(arg, out)
        elif isinstance(node, (ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.IfExp)):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.expr):
                    self._collect(child, out)
        elif isinstance(node, (ast.Constant, ast.Attribute)):
            return
        else:
            raise self.error(node, f"expression {self.text(node)} is not supported")

    def check_pure(self, call: ast.Call) -> None:
        func = call.func
        name = callee(func)
        if isinstance(func, ast.Name) and (name in PURE_BUILTINS or name in MATH_NAMES):
            return
        if (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                and func.value.id in PURE_MODULES
                and (func.value.id in {"math", "cmath"} or name in NUMPY_PURE)):
            return
        raise self.error(call, f"call to {self.text(func)} may write its arguments; only "
                         "pure math functions are supported (math.*, abs, min, max, "
                         "np.sqrt, ...)")

    # -- index expressions ------------------------------------------------------------------
    def index(self, node: ast.expr) -> Poly | None:
        """An integer expression as a polynomial, or None when it depends on data."""
        if isinstance(node, ast.Constant) and isinstance(node.value, int) \
                and not isinstance(node.value, bool):
            return Poly.const(node.value)
        if isinstance(node, ast.Name):
            if node.id in self.builder.loop_vars:
                return Poly.symbol(node.id)
            if node.id in self.known:
                return self.known[node.id]
            if node.id in self.mutable:
                return None
            return self.builder.parameter(node.id)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            inner = self.index(node.operand)
            if inner is None:
                return None
            return -inner if isinstance(node.op, ast.USub) else inner
        if isinstance(node, ast.BinOp):
            return self.binary(node)
        if isinstance(node, ast.Call):
            return self.index_call(node)
        if _is_shape(node):
            return self.builder.parameter(self.text(node).replace(" ", ""))
        return None

    def binary(self, node: ast.BinOp) -> Poly | None:
        left, right = self.index(node.left), self.index(node.right)
        if left is None or right is None:
            return None
        if isinstance(node.op, ast.Add):
            return left + right
        if isinstance(node.op, ast.Sub):
            return left - right
        if isinstance(node.op, ast.Mult):
            return left * right
        divisor = right.constant_value()
        if divisor is None or divisor <= 0:
            return None
        if isinstance(node.op, ast.FloorDiv):
            return left.floordiv(divisor)
        if isinstance(node.op, ast.Mod):
            return left.mod(divisor)
        return None

    def index_call(self, node: ast.Call) -> Poly | None:
        name = callee(node.func)
        if name in {"min", "max"} and node.args and not node.keywords:
            args = [self.index(a) for a in node.args]
            if any(a is None for a in args):
                return None
            return Poly.minmax(name, args)  # type: ignore[arg-type]
        if name == "len" and len(node.args) == 1 and isinstance(node.args[0], ast.Name):
            return self.builder.parameter(f"len({node.args[0].id})")
        if name == "int" and len(node.args) == 1:
            return self.index(node.args[0])
        return None

    def condition(self, node: ast.expr) -> Condition | None:
        if isinstance(node, ast.BoolOp):
            parts = [self.condition(v) for v in node.values]
            if any(p is None for p in parts):
                return None
            return BoolOp("and" if isinstance(node.op, ast.And) else "or",
                          tuple(parts))  # type: ignore[arg-type]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            inner = self.condition(node.operand)
            return None if inner is None else BoolOp("not", (inner,))
        if isinstance(node, ast.Compare):
            known = len(self.builder.nest.parameters)
            operands = [self.index(x) for x in [node.left, *node.comparators]]
            if any(o is None for o in operands) or any(type(op) not in COMPARE_OPS
                                                      for op in node.ops):
                # a local read on the other side of data (``stddev[j] <= eps``) is no size
                # (an argument is: the bins of ``if key < H``)
                added = self.builder.nest.parameters[known:]
                del self.builder.nest.parameters[known:]
                self.builder.nest.parameters += [name for name in added
                                                 if name in self.builder.arguments]
                return None
            parts = tuple(Compare(COMPARE_OPS[type(op)], a, b)  # type: ignore[arg-type]
                          for op, a, b in zip(node.ops, operands, operands[1:]))
            return parts[0] if len(parts) == 1 else BoolOp("and", parts)
        return None


def _assigned_names(function: ast.FunctionDef) -> tuple[set[str], set[str]]:
    """(names assigned anywhere, names whose value may change while loops run).

    A name assigned once, outside every loop, is a size parameter where it appears in an
    index expression; a name assigned in a loop, or more than once, depends on data.
    """
    assigned: set[str] = set()
    mutable: set[str] = set()
    top_counts: Counter[str] = Counter()

    def visit(nodes: list[ast.stmt], in_loop: bool) -> None:
        for node in nodes:
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets = [node.target]
            for target in targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name) and isinstance(name.ctx, ast.Store):
                        assigned.add(name.id)
                        if in_loop or isinstance(node, ast.AugAssign):
                            mutable.add(name.id)
                        else:
                            top_counts[name.id] += 1
            if isinstance(node, ast.For):
                # after its loop a loop variable holds the last value: data, not a size
                mutable.update(n.id for n in ast.walk(node.target) if isinstance(n, ast.Name))
                visit(node.body, True)
                visit(node.orelse, True)
            elif isinstance(node, ast.If):
                visit(node.body, in_loop)
                visit(node.orelse, in_loop)

    visit(function.body, False)
    arguments = {a.arg for a in function.args.posonlyargs + function.args.args
                 + function.args.kwonlyargs}
    # reassigning an argument gives it two values (before and after): data, not a size
    mutable |= {name for name, count in top_counts.items() if count > 1 or name in arguments}
    return assigned, mutable


def _settled_names(function: ast.FunctionDef) -> set[str]:
    """Names assigned exactly once in the function, by a plain assignment in its top-level
    code (not in a loop or a branch): from there on they hold one value the analysis may
    know (:meth:`_PythonNest.settle`)."""
    counts: Counter[str] = Counter()
    for node in ast.walk(function):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            counts.update(n.id for t in targets for n in ast.walk(t)
                          if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
    top = {node.targets[0].id if isinstance(node, ast.Assign) else node.target.id
           for node in function.body
           if (isinstance(node, ast.Assign) and len(node.targets) == 1
               and isinstance(node.targets[0], ast.Name))
           or (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
               and node.value is not None)}
    return {name for name in top if counts[name] == 1}


SIZE_FUNCTIONS = {"min": min, "max": max, "abs": abs, "int": int}


def _size_arithmetic(value: ast.expr, names: set[str]) -> bool:
    """Whether ``value`` is integer arithmetic of ``names`` (the function's arguments and
    the sizes derived before) and integer constants: ``+ - * // %``, ``min``, ``max``,
    ``abs``, ``int`` (what ``transform.inputs.settled_sizes`` evaluates)."""
    for node in ast.walk(value):
        if isinstance(node, ast.Call):
            if not (isinstance(node.func, ast.Name) and node.func.id in SIZE_FUNCTIONS
                    and not node.keywords):
                return False
        elif isinstance(node, ast.Name):
            if node.id not in names and node.id not in SIZE_FUNCTIONS:
                return False
        elif isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, int):
                return False
        elif isinstance(node, ast.BinOp):
            if not isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod)):
                return False
        elif isinstance(node, ast.UnaryOp):
            if not isinstance(node.op, (ast.USub, ast.UAdd)):
                return False
        elif not isinstance(node, (ast.Load, ast.operator, ast.unaryop)):
            return False
    return True


def _non_integer(node: ast.expr) -> bool:
    """A constant or arithmetic that is not an integer: ``2.5``, ``N / 2``, ``"3"``."""
    if isinstance(node, ast.Constant):
        return not isinstance(node.value, int)
    if isinstance(node, ast.UnaryOp):
        return _non_integer(node.operand)
    if isinstance(node, ast.BinOp):
        return isinstance(node.op, ast.Div) or _non_integer(node.left) \
            or _non_integer(node.right)
    return False


def callee(func: ast.expr) -> str:
    """The name a call calls: ``f`` of ``f(...)`` and of ``np.f(...)`` ("" otherwise)."""
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


class _UnpackTuples(ast.NodeTransformer):
    """Tuple assignments and ``enumerate`` loops rewritten as what they do, one assignment a
    target (every reader of the function's syntax then sees them): ``n, m = A.shape`` as
    ``n = A.shape[0]; m = A.shape[1]``; ``a, b = e, f`` as ``a = e; b = f`` where ``e`` and
    ``f`` read neither name, else through fresh scalars that hold the values first, as Python
    does (a swap ``u[i], v[i] = v[i], u[i]``); ``for i, v in enumerate(x)`` as ``for i in
    range(len(x))`` with ``v = x[i]`` first in its body. What they add keeps the statement's
    line. Any other tuple assignment stays, for the frontend's error."""

    def __init__(self, taken: set[str]) -> None:
        self.taken = taken  # every name of the module: fresh ones avoid them

    def visit_Assign(self, node: ast.Assign) -> ast.AST | list[ast.stmt]:
        if len(node.targets) != 1 or not isinstance(node.targets[0], (ast.Tuple, ast.List)):
            return node
        targets = node.targets[0].elts
        if not targets or not all(isinstance(t, (ast.Name, ast.Subscript)) for t in targets):
            return node
        value = node.value
        if isinstance(value, ast.Attribute) and value.attr == "shape" \
                and isinstance(value.value, ast.Name):
            values: list[ast.expr] = [
                ast.Subscript(value=ast.Attribute(value=ast.Name(value.value.id, ast.Load()),
                                                  attr="shape", ctx=ast.Load()),
                              slice=ast.Constant(k), ctx=ast.Load())
                for k in range(len(targets))]
        elif isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(targets) \
                and not any(isinstance(e, ast.Starred) for e in value.elts):
            values = list(value.elts)
        else:
            return node
        written = {t.id for t in targets if isinstance(t, ast.Name)}
        read = {m.id for e in values for m in ast.walk(e) if isinstance(m, ast.Name)}
        if all(isinstance(t, ast.Name) for t in targets) and not written & read:
            return [_located(ast.Assign(targets=[_stored(t)], value=v), t)
                    for t, v in zip(targets, values)]
        held = [self.fresh(f"tuple{node.lineno}_{k}") for k in range(len(targets))]
        # (each statement at a column of its own: the value's, then the target's)
        return [_located(ast.Assign(targets=[ast.Name(h, ast.Store())], value=v), v)
                for h, v in zip(held, values)] + [
            _located(ast.Assign(targets=[_stored(t)], value=ast.Name(h, ast.Load())), t)
            for h, t in zip(held, targets)]

    def visit_For(self, node: ast.For) -> ast.For:
        self.generic_visit(node)
        target, call = node.target, node.iter
        if not (isinstance(target, ast.Tuple) and len(target.elts) == 2
                and all(isinstance(t, ast.Name) for t in target.elts)
                and isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
                and call.func.id == "enumerate" and len(call.args) == 1
                and not call.keywords and isinstance(call.args[0], ast.Name)):
            return node
        index, item = target.elts
        array = call.args[0].id
        node.target = _located(ast.Name(index.id, ast.Store()), index)
        node.iter = _located(ast.Call(func=ast.Name("range", ast.Load()), args=[ast.Call(
            func=ast.Name("len", ast.Load()), args=[ast.Name(array, ast.Load())],
            keywords=[])], keywords=[]), call)
        first = ast.Assign(targets=[ast.Name(item.id, ast.Store())], value=ast.Subscript(
            value=ast.Name(array, ast.Load()), slice=ast.Name(index.id, ast.Load()),
            ctx=ast.Load()))
        node.body = [_located(first, item), *node.body]
        return node

    def fresh(self, stem: str) -> str:
        name = stem
        while name in self.taken:
            name = "_" + name
        self.taken.add(name)
        return name


def _stored(target: ast.expr) -> ast.expr:
    """``target`` as the target of an assignment of its own."""
    if isinstance(target, ast.Name):
        return ast.Name(target.id, ast.Store())
    return ast.Subscript(value=target.value, slice=target.slice, ctx=ast.Store())


def _located(node: Any, at: ast.AST) -> Any:
    """``node`` and what it holds without a place at ``at``'s line and column, with no end
    (its text is then written from the syntax, not sliced from the file)."""
    for sub in ast.walk(node):
        if not hasattr(sub, "lineno") or sub is node:
            ast.copy_location(sub, at)
            sub.end_lineno = sub.end_col_offset = None
    return node


class _FoldContinues(ast.NodeTransformer):
    """``continue`` as the last statement of an ``if`` in a ``for`` loop's body, folded into
    the ``if``: ``if c: A; continue`` followed by ``B`` is ``if c: A`` else ``B`` (what runs
    is the same), so that the frontend, which reads no ``continue``, reads the loop; a
    ``continue`` ending the body itself is dropped. Any other ``continue`` stays, for the
    frontend's error."""

    def visit_For(self, node: ast.For) -> ast.For:
        self.generic_visit(node)
        node.body = _folded(node.body)
        return node


def _folded(body: list[ast.stmt]) -> list[ast.stmt]:
    """A loop body with its ``if ...: continue`` folded (see ``_FoldContinues``)."""
    if body and isinstance(body[-1], ast.Continue) and len(body) > 1:
        body = body[:-1]
    for index, node in enumerate(body):
        if isinstance(node, ast.If) and node.body and isinstance(node.body[-1], ast.Continue) \
                and not any(isinstance(n, ast.Continue) for s in node.orelse
                            for n in ast.walk(s)):
            rest = _folded(body[index + 1:])
            kept = node.body[:-1] or [ast.copy_location(ast.Pass(), node.body[-1])]
            folded = ast.If(test=node.test, body=kept, orelse=node.orelse + rest)
            ast.copy_location(folded, node)
            last = (folded.orelse or folded.body)[-1]  # the if now ends where the body did
            folded.end_lineno, folded.end_col_offset = last.end_lineno, last.end_col_offset
            return body[:index] + [folded]
    return body


def is_allocation(value: ast.expr) -> bool:
    """``np.zeros(...)`` and NumPy's other allocators: a new array, not a value."""
    return (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
            and isinstance(value.func.value, ast.Name)
            and value.func.value.id in {"np", "numpy"} and value.func.attr in ALLOCATORS)


def _is_shape(node: ast.expr) -> bool:
    """``A.shape[k]``: a size parameter."""
    return (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute)
            and node.value.attr == "shape" and isinstance(node.value.value, ast.Name)
            and isinstance(node.slice, ast.Constant))


def canonical(text: str) -> str:
    """An expression as Python prints it (blanks and redundant parentheses aside): what an
    ``Access.text`` of this frontend and a node of the same function's syntax are compared
    by."""
    return ast.unparse(ast.parse(text, mode="eval"))


def serves(reads: frozenset[str], node: ast.expr) -> bool:
    """Whether a copy that serves the reads ``reads`` (as ``Access.text``; empty: every
    read of its array) serves the read ``node`` of the same function's syntax."""
    return not reads or ast.unparse(node) in {canonical(text) for text in reads}


def update_increment(node: ast.AugAssign | ast.Assign) -> tuple[str, ast.expr] | None:
    """(sign, value) of ``X[..] += v``, ``X[..] -= v``, ``X[..] = X[..] + v``, ``X[..] =
    v + X[..]`` or ``X[..] = X[..] - v``; None for any other update."""
    if isinstance(node, ast.AugAssign):
        if isinstance(node.op, (ast.Add, ast.Sub)):
            return "-" if isinstance(node.op, ast.Sub) else "", node.value
        return None
    target, value = ast.unparse(node.targets[0]), node.value
    if not isinstance(value, ast.BinOp) or not isinstance(value.op, (ast.Add, ast.Sub)):
        return None
    if ast.unparse(value.left) == target:
        return "-" if isinstance(value.op, ast.Sub) else "", value.right
    if isinstance(value.op, ast.Add) and ast.unparse(value.right) == target:
        return "", value.left
    return None


def update_extremum(node: ast.stmt) -> tuple[str, ast.expr] | None:
    """(op, value) of ``X[..] = max(X[..], v)`` or ``min(v, X[..])`` (op ``max``, ``min``);
    None for any other statement."""
    if not (isinstance(node, ast.Assign) and len(node.targets) == 1
            and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name)
            and node.value.func.id in ("max", "min") and len(node.value.args) == 2
            and not node.value.keywords):
        return None
    target = ast.unparse(node.targets[0])
    first, second = node.value.args
    if ast.unparse(first) == target:
        return node.value.func.id, second
    if ast.unparse(second) == target:
        return node.value.func.id, first
    return None


def base_name(target: ast.expr) -> str:
    """The array a subscript chain indexes: ``A`` of ``A[i][j]`` ("" if not a name)."""
    while isinstance(target, ast.Subscript):
        target = target.value
    return target.id if isinstance(target, ast.Name) else ""


def _names(node: ast.expr) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _names_in_subscripts(node: ast.Subscript) -> set[str]:
    names: set[str] = set()
    current: ast.expr = node
    while isinstance(current, ast.Subscript):
        names |= _names(current.slice)
        current = current.value
    return names


def _describe(node: ast.stmt) -> str:
    names = {ast.While: "a while loop", ast.Break: "break", ast.Continue: "continue",
             ast.Return: "return inside the nest", ast.With: "with",
             ast.Try: "try", ast.FunctionDef: "a nested function", ast.Raise: "raise",
             ast.Assert: "assert", ast.Delete: "del", ast.Global: "global",
             ast.Nonlocal: "nonlocal", ast.Import: "import", ast.ImportFrom: "import"}
    return names.get(type(node), type(node).__name__)
