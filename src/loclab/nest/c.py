"""C frontend: pycparser's syntax tree (``loclab.nest.cunit``) to the loop-nest IR.

Supported: ``for (int i = lo; i < hi; i++)`` in its usual spellings (``<=``, ``>``, ``>=``,
``i += c``, ``i--``), assignments, compound and chained assignments (``a = b = e`` stores
``b`` then ``a``, one statement), ``x++``, declarations (a variable declared inside a loop
body is a fresh location per iteration, as C scoping says), ``if``/``else``, casts, ``?:``,
pure math calls. The file is preprocessed first (macros expanded, the user's headers read,
system headers left out); ``#pragma omp`` is ignored; where a function holds a ``#pragma
scop`` region only that region is analyzed (declarations before it still count). C's ``/``
and ``%`` truncate toward zero, so index expressions using them are treated as non-affine.
Every line and column is the user's: the preprocessor's output is mapped back.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from loclab.nest.builder import NestBuilder, NestError
from loclab.nest.cunit import CUnit, has_scop, is_pragma
from loclab.nest.expr import BoolOp, Compare, Condition, Poly
from loclab.nest.ir import Access, Nest, Update
from loclab.nest.preprocess import looks_like_macro, strip_preprocessor

__all__ = ["build_c", "strip_preprocessor"]

PURE_FUNCTIONS = {"sqrt", "sqrtf", "fsqrt", "fabs", "fabsf", "abs", "exp", "expf", "log",
                  "logf", "sin", "sinf", "cos", "cosf", "tan", "tanf", "tanh", "tanhf",
                  "pow", "powf", "fmin", "fminf", "fmax", "fmaxf", "min", "max", "MIN",
                  "MAX", "floor", "floorf", "ceil", "ceilf", "hypot", "hypotf", "log2",
                  "log2f", "exp2", "exp2f", "rsqrt", "rsqrtf", "erf", "erff"}
UPDATE_OPS = {"+=": "+", "-=": "-", "*=": "*", "&=": "&", "|=": "|", "^=": "^"}
BINARY_UPDATE = {"+": "+", "-": "-", "*": "*", "&": "&", "|": "|", "^": "^"}
COMMUTATIVE = {"+", "*", "&", "|", "^"}
COMPARISONS = {"<", "<=", ">", ">=", "==", "!="}
_SPLICE = re.compile(r"\\[ \t]*\n")  # a line continued by a backslash (blanks after it too)
_UNSUPPORTED = {"While": "a while loop", "DoWhile": "a do-while loop", "Break": "break",
                "Continue": "continue", "Goto": "goto", "Switch": "switch", "Label": "a label",
                "Case": "case", "Default": "default", "ExprList": "a comma expression",
                "Asm": "inline assembly"}


def build_c(function: Any, unit: CUnit, note: str | None = None) -> Nest:
    """The IR of one function of a parsed file; ``note`` joins the nest's notes."""
    nest = _CNest(function, unit).build()
    if note:
        nest.notes.insert(0, note)
    return nest


@functools.cache
def _generator() -> Any:
    """pycparserext's C generator (it knows the GNU nodes), writing ``-1`` and ``!x`` as
    pycparser does rather than ``- 1`` (it keeps the space only where ``- -x`` needs one)."""
    from pycparserext.ext_c_generator import GnuCGenerator

    class Generator(GnuCGenerator):  # type: ignore[misc]
        def visit_UnaryOp(self, n: Any) -> str:
            text: str = super().visit_UnaryOp(n)
            rest = text[len(n.op) + 1:]
            if n.op in {"-", "+", "!", "~", "*", "&"} and text.startswith(n.op + " ") \
                    and not rest.startswith(n.op):
                return n.op + rest
            return text

    return Generator()


def _slice_statement(lines: list[str], line: int, column: int, closing: str) -> str | None:
    """The original text from (line, column) to ``closing`` at bracket depth 0, its lines
    spliced where they end in a backslash (as C's translation phase 2 splices them)."""
    if not 1 <= line <= len(lines):
        return None
    text = "\n".join(lines[line - 1:line + 20])[column - 1:]
    text = _SPLICE.sub("", text)
    depth = 0
    for index, char in enumerate(text):
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
            if depth == 0 and closing == ")" and char == ")":
                return " ".join(text[:index + 1].split())
            if depth == 0 and closing == "]" and char == "]" \
                    and not text[index + 1:].lstrip().startswith("["):
                return " ".join(text[:index + 1].split())
        elif char == ";" and depth == 0 and closing == ";":
            return " ".join(text[:index].split())
    return None


class _CNest:
    def __init__(self, function: Any, unit: CUnit) -> None:
        from pycparser import c_ast
        from pycparserext.ext_c_parser import FuncDeclExt

        self.unit = unit
        self.ast = c_ast
        self.function_types = (c_ast.FuncDecl, FuncDeclExt)
        self.generator = _generator()
        self.function = function
        self.file, line, _ = unit.locate(function.coord)
        self.builder = NestBuilder(function.decl.name, self.file, "c", line)
        self.assigned: set[str] = set()
        self.mutable = self._mutable_names()
        self.settled = self._settled_names()
        self.mutable -= self.settled
        self.known: dict[str, Poly] = {}  # settled names whose value is an index expression
        # with a #pragma scop region, only the region is analyzed (as PET extracts scops)
        self.active = not has_scop(function.body)
        self.scops: list[tuple[int, int]] = []  # (first, last line) of each region

    # -- helpers ----------------------------------------------------------------------------
    def place(self, node: Any) -> tuple[str, int, int]:
        """(file, line, column) of a node in the user's text."""
        return self.unit.locate(getattr(node, "coord", None))

    def where(self, node: Any) -> tuple[int, int]:
        return self.place(node)[1:]

    def error(self, node: Any, message: str) -> NestError:
        file, line, column = self.place(node)
        macro = self.unit.macro(getattr(node, "coord", None))
        if macro and macro not in message:
            message += f" (in the expansion of macro {macro})"
        return self.builder.error(line, column, message, filename=file)

    def text(self, node: Any) -> str:
        return " ".join(self.generator.visit(node).split())

    def original(self, node: Any, closing: str = ";") -> str:
        """The statement as the user wrote it (pycparser's regenerated text adds parens)."""
        file, line, column = self.place(node)
        return _slice_statement(self.unit.lines(file), line, column, closing) \
            or self.text(node)

    def call_error(self, call: Any, statement: bool) -> NestError:
        """A call that may write; a name that looks like a macro nobody defined says so."""
        name = call.name.name if isinstance(call.name, self.ast.ID) else ""
        if name and name not in self.unit.declared and looks_like_macro(name):
            return self.macro_error(call, self.original(call, closing=")"), name)
        if statement:
            return self.error(call, f"call {self.text(call)} as a statement may write its "
                              "arguments; only assignments are supported")
        return self.error(call, f"call to {self.text(call.name)} may write its arguments; "
                          "only pure math functions are supported")

    def macro_error(self, node: Any, text: str, name: str) -> NestError:
        return self.error(node, f"{text}: {name} looks like a macro that loclab could not "
                          "expand (defined in none of the files it read"
                          f"{self.unit.source.missing_hint()}): give the directory of the "
                          "header that defines it with -I DIR, or define it with -D")

    def check_declarator(self, decl: Any) -> None:
        """``DATA_TYPE POLYBENCH_1D(x, N, n)`` with ``POLYBENCH_1D`` undefined parses as a
        function declarator with an identifier list, which C allows only where a function
        is defined: it is a macro that was not expanded, not a declaration of ``x``."""
        args = decl.type.args
        if args is not None and any(isinstance(p, self.ast.ID) for p in args.params):
            text = f"{decl.name}({', '.join(self.text(p) for p in args.params)})"
            raise self.macro_error(decl, text, decl.name)

    # -- walking ----------------------------------------------------------------------------
    def build(self) -> Nest:
        self.builder.undeclared_overlap = self.global_overlap
        params = self.function.decl.type.args
        for param in (params.params if params else []):
            if isinstance(param, self.ast.Decl):
                self.declare(param, private=False, argument=True)
        self.compound(self.function.body, top=True)
        if self.scops:  # a region never closed runs to the end of the function
            spans = ", ".join(f"{a}-{b}" if b > a else f"{a}-end" for a, b in self.scops)
            self.builder.note(self.scops[0][0], f"only the #pragma scop region (lines {spans}) "
                              "is analyzed")
        return self.builder.finish()

    def compound(self, node: Any, top: bool = False) -> None:
        self.builder.push_scope()
        items = node.block_items or []
        for index, item in enumerate(items):
            if is_pragma(item, "scop") or is_pragma(item, "endscop"):
                self.scop_pragma(item)
            elif self.active:
                self.statement(item, top and index == len(items) - 1)
            else:
                self.outside(item)
        self.builder.pop_scope()

    def scop_pragma(self, pragma: Any) -> None:
        line = self.where(pragma)[0]
        opening = is_pragma(pragma, "scop")
        if opening and not self.active:
            self.scops.append((line, line))
        elif not opening and self.active and self.scops:
            self.scops[-1] = (self.scops[-1][0], line)
        self.active = opening

    def outside(self, node: Any) -> None:
        """Code outside the scop regions: declarations still declare; a loop or branch that
        holds a region is entered without being analyzed (its variables are then fixed)."""
        a = self.ast
        if isinstance(node, a.Decl):
            self.declare_only(node)
        elif isinstance(node, a.DeclList):
            for decl in node.decls:
                self.declare_only(decl)
        elif isinstance(node, a.Compound) and has_scop(node):
            self.compound(node)
        elif isinstance(node, (a.For, a.While, a.DoWhile)) and has_scop(node):
            self.builder.note(self.where(node)[0], "this loop holds a #pragma scop region but "
                              "is outside it: its variables are fixed values in the region")
            self.outside(node.stmt)
        elif isinstance(node, a.If) and has_scop(node):
            for branch in (node.iftrue, node.iffalse):
                if branch is not None:
                    self.outside(branch)

    def declare_only(self, decl: Any) -> None:
        if isinstance(decl.type, self.function_types):
            self.check_declarator(decl)
        else:
            self.declare(decl)
            if decl.init is not None:
                self.settle(decl.name, decl.init)

    def statement(self, node: Any, last_top: bool = False) -> None:
        a = self.ast
        file = self.place(node)[0]
        if file != self.file:
            self.builder.note(0, f"code included from {file}: its statements' lines are lines "
                              f"of {file}")
        if isinstance(node, a.Compound):
            self.compound(node)
        elif isinstance(node, a.For):
            self.loop(node)
        elif isinstance(node, a.If):
            self.branch(node)
        elif isinstance(node, a.Assignment):
            self.assignment(node)
        elif isinstance(node, a.UnaryOp) and node.op in {"p++", "++", "p--", "--"}:
            self.increment(node)
        elif isinstance(node, a.Decl):
            self.declaration(node)
        elif isinstance(node, a.DeclList):
            for decl in node.decls:
                self.declaration(decl)
        elif isinstance(node, (a.EmptyStatement, a.Pragma)):
            return
        elif isinstance(node, a.Return) and last_top:
            reads = self.reads(node.expr) if node.expr is not None else []
            if reads:
                file, line, column = self.place(node)
                self.builder.add_statement(line, column, self.original(node), reads, file=file)
        elif isinstance(node, a.FuncCall):
            raise self.call_error(node, statement=True)
        else:
            kind = _UNSUPPORTED.get(type(node).__name__, type(node).__name__)
            if isinstance(node, a.Return):
                kind = "return inside the nest"
            raise self.error(node, f"{kind} is not supported in a loop nest (supported: "
                             "for loops, assignments, declarations, if/else)")

    def global_overlap(self, name: str) -> str | None:
        """A file-scope array's overlap class: its element type (a pointer argument of that
        type may point into it); "any" where the file does not declare it."""
        for ext in self.unit.tree.ext:
            if isinstance(ext, self.ast.Decl) and ext.name == name:
                return element_class(ext.type, self.ast, argument=False) or "any"
        return "any"

    def declare(self, decl: Any, private: bool = True, argument: bool = False) -> None:
        a = self.ast
        line = self.where(decl)[0]
        kind = decl.type
        overlap = element_class(kind, a, argument=True) if argument else None
        if isinstance(kind, self.function_types):
            self.check_declarator(decl)
        if isinstance(kind, (a.ArrayDecl, a.PtrDecl)):
            extents: list[Poly | None] = []
            while isinstance(kind, a.ArrayDecl):
                extents.append(self.index(kind.dim) if kind.dim is not None else None)
                kind = kind.type
            known = tuple(extents) if extents and not isinstance(kind, a.PtrDecl) else None
            self.builder.declare(decl.name, is_array=True, line=line, extents=known,
                                 private=private and bool(self.builder.loop_vars),
                                 argument=argument, overlap_class=overlap)
        else:
            self.builder.declare(decl.name, is_array=False, line=line,
                                 private=private and bool(self.builder.loop_vars),
                                 argument=argument)

    def declaration(self, decl: Any) -> None:
        if isinstance(decl.type, self.ast.PtrDecl) and decl.init is not None:
            raise self.error(decl, f"pointer {decl.name} initialized here would alias an "
                             "array; aliasing is not supported")
        if isinstance(decl.type, self.function_types):
            self.check_declarator(decl)
            return
        self.declare(decl)
        if decl.init is None:
            return
        if isinstance(decl.init, self.ast.InitList):
            raise self.error(decl, "initializer lists are not supported")
        self.settle(decl.name, decl.init)
        accesses = self.stored(*self.chain(decl.init))
        write = self.target_access(self.ast.ID(decl.name, coord=decl.coord), write=True)
        file, line, column = self.place(decl)
        self.builder.add_statement(line, column, self.text(decl).rstrip(";"),
                                   accesses + [write], file=file)

    def loop(self, node: Any) -> None:
        var, start = self.loop_start(node)
        amount = self.loop_step(node, var)
        step, stride = amount.constant_value(), None
        if step is None:  # a size: its sign is the one the condition needs to end
            step, stride = self.stride_sign(node, var, amount), amount
        stop = self.loop_stop(node, var, step)
        file, line, column = self.place(node)
        self.builder.push_scope()
        self.builder.open_loop(var, start, stop, step, line, column,
                               self.original(node, closing=")"), file=file, stride=stride)
        self.statement(node.stmt)
        self.builder.close_loop()
        self.builder.pop_scope()

    def loop_start(self, node: Any) -> tuple[str, Poly | None]:
        a = self.ast
        init = node.init
        if isinstance(init, a.DeclList) and len(init.decls) == 1 and init.decls[0].init:
            return init.decls[0].name, self.bound(init.decls[0].init)
        if isinstance(init, a.Assignment) and init.op == "=" and isinstance(init.lvalue, a.ID):
            return init.lvalue.name, self.bound(init.rvalue)
        raise self.error(node, "the loop must start with 'int i = ...' or 'i = ...'")

    def loop_step(self, node: Any, var: str) -> Poly:
        """What ``var`` grows by each iteration: a non-zero constant, or a size."""
        a = self.ast
        nxt = node.next
        step: Poly | None = None
        if isinstance(nxt, a.UnaryOp) and isinstance(nxt.expr, a.ID) and nxt.expr.name == var:
            step = Poly.const(1 if "++" in nxt.op else -1) if nxt.op in {
                "p++", "++", "p--", "--"} else None
        elif isinstance(nxt, a.Assignment) and isinstance(nxt.lvalue, a.ID) \
                and nxt.lvalue.name == var:
            if nxt.op in {"+=", "-="}:
                amount = self.index(nxt.rvalue)
                step = None if amount is None else (amount if nxt.op == "+=" else -amount)
            elif nxt.op == "=" and isinstance(nxt.rvalue, a.BinaryOp) \
                    and nxt.rvalue.op in {"+", "-"} and isinstance(nxt.rvalue.left, a.ID) \
                    and nxt.rvalue.left.name == var:
                amount = self.index(nxt.rvalue.right)
                step = None if amount is None else (amount if nxt.rvalue.op == "+"
                                                    else -amount)
        if step is None or step.constant_value() == 0 or var in step.symbols() \
                or not step.is_affine():
            raise self.error(node, f"the loop must step {var} by a non-zero constant or a "
                             f"size ({var}++, {var} += 2, {var}--, {var} += inc)")
        return step

    def stride_sign(self, node: Any, var: str, amount: Poly) -> int:
        """The sign a symbolic step must have for ``i < n`` (or ``i > n``) to end; the
        assumption is a note, and a step of 0 the degenerate case it is."""
        cond = node.cond
        op = cond.op if isinstance(cond, self.ast.BinaryOp) else ""
        if isinstance(cond, self.ast.BinaryOp) and isinstance(cond.right, self.ast.ID) \
                and cond.right.name == var:
            op = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}.get(op, op)
        if op not in {"<", "<=", ">", ">="}:
            raise self.error(node, f"a loop that steps {var} by {amount} needs a condition "
                             f"{var} < bound or {var} > bound (its sign)")
        upward = op in {"<", "<="}
        self.builder.note(self.where(node)[0], f"loop {var} steps by {amount}: analyzed for "
                          f"{amount} {'>= 1' if upward else '<= -1'}, over every {var} between "
                          f"its bounds (a superset of its iterations); with {amount} = 0 it "
                          "would never end")
        return 1 if upward else -1

    def loop_stop(self, node: Any, var: str, step: int) -> Poly | None:
        a = self.ast
        cond = node.cond
        if not (isinstance(cond, a.BinaryOp) and cond.op in COMPARISONS - {"=="}):
            raise self.error(node, f"the loop condition must compare {var} with a bound")
        op, bound = cond.op, cond.right
        if not (isinstance(cond.left, a.ID) and cond.left.name == var):
            if isinstance(cond.right, a.ID) and cond.right.name == var:
                op = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "!=": "!="}[op]
                bound = cond.left
            else:
                raise self.error(cond, f"the loop condition must compare {var} with a bound")
        limit = self.bound(bound)
        upward = {"<": 0, "<=": 1}
        downward = {">": 0, ">=": -1}
        if op == "!=" and abs(step) == 1:
            return limit
        offset = upward.get(op) if step > 0 else downward.get(op)
        if offset is None:
            raise self.error(cond, f"the condition {self.text(cond)} does not match the step "
                             f"of {var}")
        return None if limit is None else limit + Poly.const(offset)

    def bound(self, node: Any) -> Poly | None:
        poly = self.index(node)
        if poly is None:
            self.builder.note(self.where(node)[0], f"loop bound {self.text(node)} depends on "
                              "data or uses C division: treated as unbounded")
        return poly

    def branch(self, node: Any) -> None:
        condition = self.condition(node.cond)
        reads = self.reads(node.cond)
        text = self.text(node.cond)
        file, line, column = self.place(node)
        test = self.builder.add_statement(line, column, self.original(node, closing=")"),
                                          reads, file=file) if reads else None
        if condition is None:
            self.builder.note(line, f"condition {text} is not affine: the statements it "
                              "guards are treated as possibly executed")
        self.builder.push_guard(condition, text, test)
        self.statement(node.iftrue)
        if node.iffalse is not None:
            self.builder.flip_guard()
            self.statement(node.iffalse)
        self.builder.pop_guard()

    def settle(self, name: str, value: Any) -> None:
        """``int k = LEN / 2;`` (or ``k = 1;``) in the function's top-level code, the only
        assignment of ``k``: later subscripts and bounds read ``k`` as its value, not as an
        unknown size. A value that is no index expression leaves uses of ``k`` unknown."""
        if name not in self.settled or self.builder.loop_vars:
            return
        poly = self.index(value)
        if poly is not None:
            self.known[name] = poly
        else:
            self.mutable.add(name)

    def assignment(self, node: Any) -> None:
        steps, value = self.chain(node)
        if len(steps) == 1 and node.op == "=" and isinstance(node.lvalue, self.ast.ID):
            self.settle(node.lvalue.name, value)
        update = self.update(node) if len(steps) == 1 else None
        file, line, column = self.place(node)
        self.builder.add_statement(line, column, self.original(node),
                                   self.stored(steps, value), update, file=file)

    def chain(self, node: Any) -> tuple[list[Any], Any]:
        """The assignments of ``a = b = e`` (outermost first) and the value ``e``."""
        steps: list[Any] = []
        while isinstance(node, self.ast.Assignment):
            steps.append(node)
            node = node.rvalue
        return steps, node

    def stored(self, steps: list[Any], value: Any) -> list[Access]:
        """The accesses of ``a = b = e``: the reads, then the stores, ``b`` first.

        C sequences every store after the value computations of both operands, so every
        read (``e``, subscripts, the targets of ``op=``) comes before the stores, and ``a``
        gets ``b``'s new value without reading ``b`` again.
        """
        for step in steps:
            target = step.lvalue
            if isinstance(target, self.ast.ID) and target.name in self.builder.loop_vars:
                raise self.error(step, f"assignment to loop variable {target.name} is not "
                                 "supported")
        reads = [self.target_access(s.lvalue, write=False) for s in steps if s.op != "="]
        reads += self.reads(value)
        writes = [self.target_access(s.lvalue, write=True) for s in reversed(steps)]
        for step in steps:
            reads += self.subscript_reads(step.lvalue)
        return reads + writes

    def increment(self, node: Any) -> None:
        target = node.expr
        if isinstance(target, self.ast.ID) and target.name in self.builder.loop_vars:
            raise self.error(node, f"assignment to loop variable {target.name} is not "
                             "supported")
        read = self.target_access(target, write=False)
        write = self.target_access(target, write=True)
        file, line, column = self.place(node)
        self.builder.add_statement(line, column, self.original(node),
                                   [read] + self.subscript_reads(target) + [write],
                                   Update("+", self.target_in(target, node.expr)), file=file)

    def update(self, node: Any) -> Update | None:
        """``t op= e``, ``t = t op e``, ``t = max(t, e)``, or ``A[i] = A[i-1] op e``."""
        a = self.ast
        target = node.lvalue
        if node.op != "=":
            op = UPDATE_OPS.get(node.op)
            return None if op is None else Update(op, self.target_in(target, node.rvalue))
        value = node.rvalue
        if isinstance(value, a.BinaryOp) and value.op in BINARY_UPDATE:
            op = BINARY_UPDATE[value.op]
            operands = [(value.left, value.right)]
            if op in COMMUTATIVE:
                operands.append((value.right, value.left))
        elif (isinstance(value, a.FuncCall) and isinstance(value.name, a.ID)
              and value.name.name.lower() in {"min", "max", "fmin", "fmax", "fminf", "fmaxf"}
              and value.args is not None and len(value.args.exprs) == 2):
            op = "min" if "min" in value.name.name.lower() else "max"
            left, right = value.args.exprs
            operands = [(left, right), (right, left)]
        else:
            return None
        for mine, other in operands:
            if self.text(mine) == self.text(target):
                return Update(op, self.target_in(target, other))
            if isinstance(mine, a.ArrayRef) and isinstance(target, a.ArrayRef) \
                    and self.flatten(mine)[0].name == self.flatten(target)[0].name:
                return Update(op, self.target_in(target, other), same_location=False)
        return None

    def target_in(self, target: Any, other: Any) -> bool:
        base, indices = self.flatten(target) if isinstance(target, self.ast.ArrayRef) \
            else (target, [])
        name = base.name
        names = self.names(other) | {n for i in indices for n in self.names(i)}
        return name in names

    def names(self, node: Any) -> set[str]:
        found: set[str] = set()

        def visit(n: Any) -> None:
            if isinstance(n, self.ast.ID):
                found.add(n.name)
            for _, child in n.children():
                visit(child)

        visit(node)
        return found

    # -- accesses ---------------------------------------------------------------------------
    def flatten(self, node: Any) -> tuple[Any, list[Any]]:
        a = self.ast
        indices: list[Any] = []
        current = node
        while isinstance(current, a.ArrayRef):
            if isinstance(current.subscript, a.ExprList):
                raise self.error(current, f"comma in subscript {self.text(current)}: C reads "
                                 "only the last expression; write X[i][k]")
            indices.insert(0, current.subscript)
            current = current.name
        if not isinstance(current, a.ID):
            raise self.error(node, f"subscripted expression {self.text(current)} is not a "
                             "plain array name")
        return current, indices

    def target_access(self, target: Any, write: bool) -> Access:
        a = self.ast
        line, column = self.where(target)
        if isinstance(target, a.ID):
            variable = self.builder.variable(target.name, is_array=False, line=line,
                                             column=column)
            return self.builder.access(variable, write, [], target.name, line, column)
        if isinstance(target, a.ArrayRef):
            return self.array_access(target, write)
        raise self.error(target, f"cannot assign to {self.text(target)} (pointer "
                         "arithmetic and dereferences are not supported)")

    def array_access(self, node: Any, write: bool) -> Access:
        base, indices = self.flatten(node)
        line, column = self.where(node)
        variable = self.builder.variable(base.name, is_array=True, line=line, column=column)
        text = self.original(node, closing="]")
        if not text.startswith(base.name):  # written inside a macro: as pycparser reads it
            text = self.text(node)
        return self.builder.access(variable, write, [self.index(i) for i in indices], text,
                                   line, column)

    def subscript_reads(self, target: Any) -> list[Access]:
        if not isinstance(target, self.ast.ArrayRef):
            return []
        return [r for index in self.flatten(target)[1] for r in self.reads(index)]

    def reads(self, node: Any) -> list[Access]:
        out: list[Access] = []
        self._collect(node, out)
        return out

    def _collect(self, node: Any, out: list[Access]) -> None:
        a = self.ast
        if isinstance(node, a.ArrayRef):
            for index in self.flatten(node)[1]:
                self._collect(index, out)
            out.append(self.array_access(node, write=False))
        elif isinstance(node, a.ID):
            if node.name in self.builder.loop_vars or (self.builder.lookup(node.name) is None
                                                       and node.name not in self.assigned):
                return  # loop variable, macro or global constant: not tracked memory
            variable = self.builder.lookup(node.name)
            if variable is not None and variable.is_array:
                raise self.error(node, f"array {node.name} used as a value (pointer "
                                 "arithmetic and aliasing are not supported)")
            line, column = self.where(node)
            variable = self.builder.variable(node.name, is_array=False, line=line,
                                             column=column)
            out.append(self.builder.access(variable, False, [], node.name, line, column))
        elif isinstance(node, a.FuncCall):
            name = node.name.name if isinstance(node.name, a.ID) else ""
            if name not in PURE_FUNCTIONS:
                raise self.call_error(node, statement=False)
            for arg in (node.args.exprs if node.args else []):
                self._collect(arg, out)
        elif isinstance(node, a.Assignment) or (isinstance(node, a.UnaryOp)
                                                and node.op in {"p++", "++", "p--", "--"}):
            raise self.error(node, f"assignment inside an expression ({self.text(node)}) is "
                             "not supported")
        elif isinstance(node, a.UnaryOp) and node.op in {"&", "*"}:
            raise self.error(node, f"{self.text(node)}: pointers are not supported")
        elif isinstance(node, (a.BinaryOp, a.UnaryOp, a.TernaryOp, a.Cast)):
            for _, child in node.children():
                if not isinstance(child, a.Typename):
                    self._collect(child, out)
        elif isinstance(node, a.Constant):
            return
        else:
            raise self.error(node, f"expression {self.text(node)} is not supported")

    # -- index expressions ------------------------------------------------------------------
    def index(self, node: Any) -> Poly | None:
        a = self.ast
        if isinstance(node, a.Constant):
            return _int_constant(node.value)
        if isinstance(node, a.ID):
            if node.name in self.builder.loop_vars:
                return Poly.symbol(node.name)
            if node.name in self.known:
                return self.known[node.name]
            if node.name in self.mutable or node.name in self.settled:
                return None  # mutable, or settled later: its value where used is unknown
            return self.builder.parameter(node.name)
        if isinstance(node, a.Cast):
            return self.index(node.expr)
        if isinstance(node, a.UnaryOp) and node.op in {"-", "+"}:
            inner = self.index(node.expr)
            return None if inner is None else (-inner if node.op == "-" else inner)
        if isinstance(node, a.BinaryOp) and node.op in {"+", "-", "*", "/", "%"}:
            left, right = self.index(node.left), self.index(node.right)
            if left is None or right is None:
                return None
            if node.op in {"/", "%"}:
                return _constant_division(node.op, left, right)
            return {"+": left + right, "-": left - right, "*": left * right}[node.op]
        if isinstance(node, a.FuncCall) and isinstance(node.name, a.ID) \
                and node.name.name.lower() in {"min", "max"} and node.args:
            args = [self.index(x) for x in node.args.exprs]
            if any(x is None for x in args):
                return None
            return Poly.minmax(node.name.name.lower(), args)  # type: ignore[arg-type]
        return None

    def condition(self, node: Any) -> Condition | None:
        a = self.ast
        if isinstance(node, a.BinaryOp) and node.op in {"&&", "||"}:
            left, right = self.condition(node.left), self.condition(node.right)
            if left is None or right is None:
                return None
            return BoolOp("and" if node.op == "&&" else "or", (left, right))
        if isinstance(node, a.UnaryOp) and node.op == "!":
            inner = self.condition(node.expr)
            return None if inner is None else BoolOp("not", (inner,))
        if isinstance(node, a.BinaryOp) and node.op in COMPARISONS:
            left, right = self.index(node.left), self.index(node.right)
            if left is None or right is None:
                return None
            return Compare(node.op, left, right)
        return None

    def _settled_names(self) -> set[str]:
        """Names assigned once in the function, by ``int k = e;`` or ``k = e;`` among its
        top-level statements (not in a loop or a branch): from there on one value."""
        a = self.ast
        once = {name for name in self.assigned if name not in self._assigned_twice}
        found: set[str] = set()
        for item in self.function.body.block_items or []:
            decls = item.decls if isinstance(item, a.DeclList) else [item]
            for decl in decls:
                if isinstance(decl, a.Decl) and decl.init is not None \
                        and not isinstance(decl.type, (a.ArrayDecl, a.PtrDecl)):
                    found.add(decl.name)
            if isinstance(item, a.Assignment) and item.op == "=" \
                    and isinstance(item.lvalue, a.ID) \
                    and not isinstance(item.rvalue, a.Assignment):
                found.add(item.lvalue.name)
        return found & once

    def _mutable_names(self) -> set[str]:
        """Names assigned inside a loop or more than once: their values depend on data."""
        a = self.ast
        counts: dict[str, int] = {}
        in_loop: set[str] = set()
        plain: set[str] = set()  # assigned, not initialized in a declaration
        loop_vars: set[str] = set()

        def visit(node: Any, depth: int) -> None:
            names: list[str] = []
            if isinstance(node, a.For):
                init = node.init
                if isinstance(init, a.DeclList):
                    loop_vars.update(d.name for d in init.decls)
                elif isinstance(init, a.Assignment) and isinstance(init.lvalue, a.ID):
                    loop_vars.add(init.lvalue.name)
                if node.stmt is not None:
                    visit(node.stmt, depth + 1)
                return
            if isinstance(node, a.Assignment) and isinstance(node.lvalue, a.ID):
                names.append(node.lvalue.name)
                plain.add(node.lvalue.name)
            elif isinstance(node, a.UnaryOp) and node.op in {"p++", "++", "p--", "--"} \
                    and isinstance(node.expr, a.ID):
                names.append(node.expr.name)
            elif isinstance(node, a.Decl) and node.init is not None:
                names.append(node.name)
            for name in names:
                counts[name] = counts.get(name, 0) + 1
                if depth:
                    in_loop.add(name)
            for _, child in node.children():
                visit(child, depth)

        visit(self.function.body, 0)
        self.assigned = set(counts)
        self._assigned_twice = {name for name, count in counts.items() if count > 1} \
            | in_loop | loop_vars
        # a name assigned outside a declaration (a parameter, a global) had another value
        # before: only a local initialized once, outside loops, is a fixed size
        return (in_loop | plain | {n for n, c in counts.items() if c > 1}) - loop_vars


RESTRICT = {"restrict", "__restrict", "__restrict__"}
# pointers to these may point at any object (C's rule for character types; void has none)
ANY_OBJECT = {"char", "void"}


def element_class(kind: Any, ast: Any, argument: bool) -> str | None:
    """The overlap class of an array or pointer declarator (``Variable.overlap_class``):
    the element type's name, "any" for char and void, None for a ``restrict`` parameter
    (``float *restrict a``, ``float a[restrict n]``), which shares memory with nothing the
    function reaches otherwise."""
    qualifiers: list[str] = []
    while isinstance(kind, (ast.ArrayDecl, ast.PtrDecl)):
        qualifiers += (kind.dim_quals if isinstance(kind, ast.ArrayDecl) else kind.quals) or []
        kind = kind.type
    if argument and RESTRICT & set(qualifiers):
        return None
    names = getattr(getattr(kind, "type", None), "names", None) or []
    names = [n for n in names if n not in {"signed", "unsigned", "const", "volatile"}]
    if len(names) > 1 and "int" in names:  # long int is long
        names.remove("int")
    if not names or set(names) & ANY_OBJECT:
        return "any"
    return " ".join(names)


def _constant_division(op: str, left: Poly, right: Poly) -> Poly | None:
    """``a / b`` or ``a % b`` of two constants as C computes them (truncating toward
    zero); anything else None (C's division of a negative value is not a floor)."""
    a, b = left.constant_value(), right.constant_value()
    if a is None or not b:
        return None
    quotient = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
    return Poly.const(quotient if op == "/" else a - b * quotient)


def _int_constant(text: str) -> Poly | None:
    cleaned = text.rstrip("uUlL")
    try:
        return Poly.const(int(cleaned, 0))
    except ValueError:
        return None  # a float or character constant
