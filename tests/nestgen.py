"""Random loop nests and a brute-force dependence oracle, for testing ``loclab.analyze``.

Two halves that share nothing with loclab, so that they can judge it:

* :func:`nests` is a hypothesis strategy for the source text of a function
  ``def f(A, B, C, N, M):`` (``X`` joins the arguments for non-affine nests) holding 1-3
  loops, 1-3 statements, ``if``/``else`` and affine or min/max bounds.  Every statement and
  every loop header has a line of its own, so a line names a statement or a loop.
* :func:`oracle` runs that text at concrete sizes with a small interpreter of its AST,
  records every memory access and derives the dependences by the definition of the
  ``loclab.analyze`` contract (scratch/analyze_api.md): all pairs of accesses to one
  location with at least one write, ordered by execution.

The oracle interprets the very text the analyzer reads (its :mod:`ast`), so the program
the analyzer sees and the program the oracle runs cannot drift apart, and hand-written
cases are plain source text too.  Locations are mathematical subscripts: ``A[-1]`` is its
own element, as in the analyzer's model, not Python's alias of the last one.
"""

from __future__ import annotations

import ast
import random
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import CodeType
from typing import Any, NamedTuple

from hypothesis import strategies as st

LOOP_VARS = ("i", "j", "k")  # the loop variable of depth d is LOOP_VARS[d]: siblings share it
SIZES = ("N", "M")
DATA_ARRAYS = ("A", "B", "C")
INDEX_ARRAY = "X"  # read-only, holds small random ints: the indirection of non-affine nests
SCALARS = ("s", "t")

Draw = Callable[[st.SearchStrategy[Any]], Any]
Location = tuple[str, tuple[int, ...]]  # (name, subscripts); a scalar has no subscripts


# --------------------------------------------------------------------------- generation


@dataclass(frozen=True)
class Affine:
    """``const + sum(coef * name)``: the stuff subscripts, bounds and conditions are made of."""

    terms: tuple[tuple[int, str], ...] = ()
    const: int = 0

    @property
    def names(self) -> frozenset[str]:
        return frozenset(name for _, name in self.terms)

    def shifted(self, delta: int) -> Affine:
        return replace(self, const=self.const + delta)

    def __str__(self) -> str:
        parts = [(coef < 0, name if abs(coef) == 1 else f"{abs(coef)} * {name}")
                 for coef, name in self.terms if coef]
        if self.const or not parts:
            parts.append((self.const < 0, str(abs(self.const))))
        (negative, text), rest = parts[0], parts[1:]
        return ("-" if negative else "") + text + "".join(
            f" {'-' if negative else '+'} {text}" for negative, text in rest)


@dataclass(frozen=True)
class Bound:
    """A loop bound: one affine expression, or ``min``/``max`` of several."""

    args: tuple[Affine, ...]
    fn: str = ""

    def shifted(self, delta: int) -> Bound:
        return replace(self, args=tuple(arg.shifted(delta) for arg in self.args))

    def __str__(self) -> str:
        return f"{self.fn}({', '.join(map(str, self.args))})" if self.fn else str(self.args[0])


@dataclass(frozen=True)
class Opaque:
    """A non-affine subscript (``i * j``, ``X[i]``): text that shifting leaves alone."""

    text: str
    names: frozenset[str]

    def shifted(self, delta: int) -> Opaque:
        return self

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class _Ref:
    """An array reference, kept so that later ones can be shifted copies of it."""

    name: str
    subscripts: tuple[Affine | Opaque, ...]

    @property
    def names(self) -> frozenset[str]:
        return frozenset().union(*(sub.names for sub in self.subscripts))


@dataclass
class _Budget:
    """What one nest may still spend while it is being drawn, and its fixed choices."""

    ranks: dict[str, int]
    nonaffine: bool
    statements: int
    loops: int
    refs: list[_Ref] = field(default_factory=list)

    def kinds(self, depth: int) -> list[str]:
        """What the next item of a body at ``depth`` loops may be (each holds a statement);
        a loop counts twice so that deep nests are common."""
        if self.statements < 1:
            return []
        kinds = ["stmt"] + (["if"] if depth else [])
        return kinds + (["loop"] * 2 if self.loops and depth < len(LOOP_VARS) else [])


_COEFS = (1, 1, 1, 1, -1, 2, -2)  # unit strides dominate, as they do in real code
_OFFSETS = (0, 0, 0, 1, -1, 2, -2, 3, -3)
_SHIFTS = (0, 0, 0, 1, -1, 2, -2)  # of a subscript copied from an earlier reference
_STEPS = (1, 1, 1, 2, 3, -1, -2)
_COMPARISONS = ("<", "<=", ">", ">=", "==", "!=")


def _affine_subscript(draw: Draw, loop_vars: tuple[str, ...]) -> Affine:
    """An affine subscript: mostly ``v + c``, sometimes two variables or ``N``."""
    count = min(len(loop_vars), draw(st.sampled_from((1, 1, 1, 2, 0))))
    names = draw(st.permutations(loop_vars))[:count]
    terms = [(draw(st.sampled_from(_COEFS)), name) for name in names]
    if draw(st.integers(0, 5)) == 0:
        terms.append((draw(st.sampled_from((1, -1))), "N"))
    return Affine(tuple(terms), draw(st.sampled_from(_OFFSETS)))


def _nonaffine_subscript(draw: Draw, loop_vars: tuple[str, ...]) -> Opaque:
    """A subscript an affine analysis cannot model exactly (``i % 3`` is quasi-affine)."""
    v, w = draw(st.sampled_from(loop_vars)), draw(st.sampled_from(loop_vars))
    index = _affine_subscript(draw, loop_vars)
    text = draw(st.sampled_from((f"{v} * {v}", f"{v} * {w}", f"{v} % 3",
                                 f"{INDEX_ARRAY}[{index}]")))
    return Opaque(text, frozenset({v, w} if "*" in text else {v} if "%" in text else index.names))


def _subscript(draw: Draw, budget: _Budget, loop_vars: tuple[str, ...]) -> Affine | Opaque:
    if budget.nonaffine and loop_vars and draw(st.integers(0, 2)) == 0:
        return _nonaffine_subscript(draw, loop_vars)
    return _affine_subscript(draw, loop_vars)


def _array_ref(draw: Draw, budget: _Budget, loop_vars: tuple[str, ...]) -> str:
    """``A[i][j]`` or ``A[i, j]``; half the time a shifted copy of an earlier reference in
    scope (``A[i - 1][j + 1]`` after ``A[i][j]``): the stuff of carried dependences."""
    in_scope = [ref for ref in budget.refs if ref.names <= set(loop_vars + SIZES)]
    if in_scope and draw(st.booleans()):
        ref = draw(st.sampled_from(in_scope))
        shifts = [draw(st.sampled_from(_SHIFTS)) for _ in ref.subscripts]
        ref = replace(ref, subscripts=tuple(sub.shifted(delta)
                                            for sub, delta in zip(ref.subscripts, shifts)))
    else:
        name = draw(st.sampled_from(DATA_ARRAYS[:1] + DATA_ARRAYS))  # A twice: more dependences
        ref = _Ref(name, tuple(_subscript(draw, budget, loop_vars)
                               for _ in range(budget.ranks[name])))
    budget.refs.append(ref)
    subs = list(map(str, ref.subscripts))
    if len(subs) > 1 and draw(st.booleans()):
        return f"{ref.name}[{', '.join(subs)}]"
    return ref.name + "".join(f"[{sub}]" for sub in subs)


def _operand(draw: Draw, budget: _Budget, loop_vars: tuple[str, ...]) -> str:
    kind = draw(st.sampled_from(("array", "array", "array", "scalar", "value")))
    if kind == "array":
        return _array_ref(draw, budget, loop_vars)
    if kind == "scalar":
        return draw(st.sampled_from(SCALARS))
    return draw(st.sampled_from(loop_vars + ("2.0",)))


def _statement(draw: Draw, budget: _Budget, loop_vars: tuple[str, ...]) -> str:
    """One assignment: ``target op rhs`` with a scalar or array target and 0-3 operands."""
    budget.statements -= 1
    if draw(st.integers(0, 3)) == 0:
        target = draw(st.sampled_from(SCALARS))
    else:
        target = _array_ref(draw, budget, loop_vars)
    operands = [_operand(draw, budget, loop_vars) for _ in range(draw(st.integers(0, 3)))]
    joined = "".join(f"{draw(st.sampled_from((' + ', ' * ')))}{operand}"
                     for operand in operands[1:])
    rhs = operands[0] + joined if operands else "1.0"
    op = draw(st.sampled_from(('=', '=', '+=', '*=')))
    if op == "=" and draw(st.integers(0, 3)) == 0:
        target = _chained(draw, budget, loop_vars, target)
    return f"{target} {op} {rhs}"


def _chained(draw: Draw, budget: _Budget, loop_vars: tuple[str, ...], target: str) -> str:
    """``first = second`` for a chained assignment ``first = second = rhs``: Python assigns
    the value to ``first``, then to ``second``.  The two name different variables, so that
    one instance never writes one location twice (the oracle groups a line's writes)."""
    root = target.split("[")[0]
    others = [name for name in SCALARS if name != root]
    second = draw(st.sampled_from(others)) if draw(st.booleans()) else \
        _array_ref(draw, budget, loop_vars)
    if second.split("[")[0] == root:
        return target
    return f"{second} = {target}" if draw(st.booleans()) else f"{target} = {second}"


def _condition(draw: Draw, budget: _Budget, loop_vars: tuple[str, ...]) -> str:
    """``i > j``, ``i + 1 < N``, ...; in non-affine nests also ``X[i] > 0`` or ``i * j < N``."""
    if budget.nonaffine and draw(st.integers(0, 2)) == 0:
        v, w = draw(st.sampled_from(loop_vars)), draw(st.sampled_from(loop_vars))
        return draw(st.sampled_from((f"{INDEX_ARRAY}[{v}] > 0", f"{v} * {w} < N",
                                     f"{INDEX_ARRAY}[{v}] == {w}")))
    lhs = Affine(((1, draw(st.sampled_from(loop_vars))),), draw(st.sampled_from((0, 0, 1, -1))))
    other = draw(st.sampled_from(loop_vars + SIZES + ("",)))
    rhs = Affine(((1, other),) if other else (), draw(st.sampled_from((0, 0, 1, -1, 2))))
    return f"{lhs} {draw(st.sampled_from(_COMPARISONS))} {rhs}"


def _lower(draw: Draw, outer: tuple[str, ...]) -> Affine:
    """A lower bound: a constant or an outer variable plus a small constant."""
    terms = ((1, draw(st.sampled_from(outer))),) if outer and draw(st.booleans()) else ()
    return Affine(terms, draw(st.sampled_from((0, 0, 1, -1, 2))))


def _upper(draw: Draw, outer: tuple[str, ...]) -> Affine:
    """An upper bound: ``N``, ``M``, an outer variable (triangles) or ``N - i``, plus a
    small constant."""
    kinds = ("size", "size", "var", "size-var") if outer else ("size",)
    kind = draw(st.sampled_from(kinds))
    terms: list[tuple[int, str]] = []
    if kind != "var":
        terms.append((1, draw(st.sampled_from(SIZES))))
    if kind != "size":
        terms.append((1 if kind == "var" else -1, draw(st.sampled_from(outer))))
    return Affine(tuple(terms), draw(st.sampled_from((0, 0, 1, -1))))


def _bound(draw: Draw, make: Callable[[Draw, tuple[str, ...]], Affine],
           outer: tuple[str, ...], fn: str) -> Bound:
    first = make(draw, outer)
    second = make(draw, outer) if draw(st.integers(0, 3)) == 0 else first
    return Bound((first, second), fn) if second != first else Bound((first,))


def _loop_header(draw: Draw, var: str, outer: tuple[str, ...]) -> str:
    """``for var in range(...)``; a negative step runs from the upper bound down to the lower."""
    step = draw(st.sampled_from(_STEPS))
    low = _bound(draw, _lower, outer, "max")
    high = _bound(draw, _upper, outer, "min")
    start, stop = (low, high) if step > 0 else (high.shifted(-1), low.shifted(-1))
    if step != 1:
        return f"for {var} in range({start}, {stop}, {step}):"
    if start == Bound((Affine(),)) and draw(st.booleans()):
        return f"for {var} in range({stop}):"
    return f"for {var} in range({start}, {stop}):"


def _loop(draw: Draw, budget: _Budget, outer: tuple[str, ...], indent: str) -> list[str]:
    budget.loops -= 1
    var = LOOP_VARS[len(outer)]
    header = indent + _loop_header(draw, var, outer)
    return [header, *_body(draw, budget, outer + (var,), indent + "    ")]


def _if(draw: Draw, budget: _Budget, loop_vars: tuple[str, ...], indent: str) -> list[str]:
    lines = [f"{indent}if {_condition(draw, budget, loop_vars)}:",
             f"{indent}    {_statement(draw, budget, loop_vars)}"]
    if budget.statements and draw(st.booleans()):
        lines += [f"{indent}else:", f"{indent}    {_statement(draw, budget, loop_vars)}"]
    return lines


def _item(draw: Draw, budget: _Budget, kind: str, loop_vars: tuple[str, ...],
          indent: str) -> list[str]:
    if kind == "loop":
        return _loop(draw, budget, loop_vars, indent)
    if kind == "if":
        return _if(draw, budget, loop_vars, indent)
    return [indent + _statement(draw, budget, loop_vars)]


def _body(draw: Draw, budget: _Budget, loop_vars: tuple[str, ...], indent: str) -> list[str]:
    """A loop body: 1-3 items (statements, ifs, inner loops) in any order.

    The caller leaves at least one statement in the budget, so the first item always exists
    and no loop is empty; statements before and after inner loops make imperfect nests, two
    inner loops make siblings.
    """
    lines: list[str] = []
    for _ in range(draw(st.integers(1, 3))):
        kinds = budget.kinds(len(loop_vars))
        if not kinds:
            break
        lines += _item(draw, budget, draw(st.sampled_from(kinds)), loop_vars, indent)
    return lines


def _function_body(draw: Draw, budget: _Budget) -> list[str]:
    """An optional statement outside any loop, a loop nest, then optional siblings."""
    lines: list[str] = []
    if budget.statements > 1 and draw(st.integers(0, 3)) == 0:
        lines.append("    " + _statement(draw, budget, ()))
    lines += _loop(draw, budget, (), "    ")
    while (kinds := budget.kinds(0)) and draw(st.booleans()):
        lines += _item(draw, budget, draw(st.sampled_from(kinds)), (), "    ")
    return lines


@st.composite
def nests(draw: Draw, nonaffine: bool = False) -> str:
    """Source text of a random loop nest ``def f(A, B, C, N, M): ...``.

    With ``nonaffine`` some subscripts are ``i * j``, ``i % 3`` or ``X[i]`` and some
    conditions ``X[i] > 0``, where ``X`` is a read-only argument.
    """
    ranks = {name: draw(st.sampled_from((1, 1, 2, 2, 3))) for name in DATA_ARRAYS}
    budget = _Budget(ranks=ranks, nonaffine=nonaffine, statements=draw(st.integers(1, 3)),
                     loops=draw(st.sampled_from((1, 2, 2, 3, 3, 3))))
    arrays = DATA_ARRAYS + ((INDEX_ARRAY,) if nonaffine else ())
    lines = [f"def f({', '.join(arrays + SIZES)}):", *_function_body(draw, budget)]
    return "\n".join(lines) + "\n"


@st.composite
def war_nests(draw: Draw) -> str:
    """``def f(A, B, N)``: one or two loops (``j`` from 2 or from ``i + 1``) whose one or
    two statements write ``A`` and read ``A`` and ``B`` at shifted or swapped subscripts,
    every subscript inside ``[0, N)``: reads of values from before the loop beside reads of
    values the loop wrote, the mix a partial copy must tell apart."""
    depth = draw(st.integers(1, 2))
    names = ("i", "j")[:depth]

    def subscript() -> str:
        chosen = draw(st.permutations(names))
        return ", ".join(f"{v} + {draw(st.integers(-2, 2))}" for v in chosen)

    lines = ["def f(A, B, N):", "    for i in range(2, N - 2):"]
    if depth == 2:
        start = draw(st.sampled_from(("2", "i + 1")))
        lines.append(f"        for j in range({start}, N - 2):")
    indent = " " * (4 * (depth + 1))
    for _ in range(draw(st.integers(1, 2))):
        reads = [f"{draw(st.sampled_from(('A', 'A', 'B')))}[{subscript()}]"
                 for _ in range(draw(st.integers(1, 3)))]
        op = draw(st.sampled_from(("=", "+=")))
        lines.append(f"{indent}A[{subscript()}] {op} {' + '.join(reads)}")
    return "\n".join(lines) + "\n"


@st.composite
def recurrence_nests(draw: Draw) -> str:
    """``def f(L, x, y, b, N)``: a loop over rows ``i`` that each need earlier rows (a
    triangular solve and its look-alikes): statements that write ``x[i]`` or ``y[i]``
    around one or two inner loops over ``j`` (from 0 to ``i``, from ``i + 1``, or over all
    ``N``: ``x[j]`` then meets ``x[i]``) that accumulate into ``x[i]`` or a scalar ``s``,
    or copy a row. Some have reductions a block's threads may share, some none."""
    lines = ["def f(L, x, y, b, N):", "    for i in range(N):"]
    if draw(st.booleans()):
        lines.append("        s = 0.0")
    else:
        lines.append("        s = b[i]")
    lines.append(f"        x[i] = {draw(st.sampled_from(('b[i]', 'b[i] + s', 'x[i] * 0.5')))}")
    for _ in range(draw(st.integers(1, 2))):
        bounds = draw(st.sampled_from(("i", "i + 1, N", "N", "i")))
        lines.append(f"        for j in range({bounds}):")
        kind = draw(st.sampled_from(("x", "x", "s", "y", "max")))
        read = draw(st.sampled_from(("x[j]", "y[j]", "b[j]")))
        if kind == "x":
            lines.append(f"            x[i] {draw(st.sampled_from(('-=', '+=')))} "
                         f"L[i, j] * {read}")
        elif kind == "s":
            lines.append(f"            s += L[i, j] * {read}")
        elif kind == "max":
            lines.append(f"            s = max(s, L[i, j] * {read})")
        else:
            lines.append(f"            y[j] = L[j, i] * {read}")
    last = draw(st.sampled_from(("x[i] = x[i] / (L[i, i] + N)", "y[i] = x[i] + s",
                                 "x[i] = x[i] - s")))
    lines.append(f"        {last}")
    return "\n".join(lines) + "\n"


@st.composite
def piece_nests(draw: Draw) -> str:
    """A loop over i holding a statement and two nests over j: atax's (which distributes into
    pieces), each part kept or replaced by a look-alike (three times in four kept), in one of
    a few orders: some distribute, some must not."""
    def part(canonical: str, *others: str) -> str:
        return canonical if draw(st.sampled_from([True, True, True, False])) else \
            draw(st.sampled_from(others))

    first = "        " + part("X[i] = 0.0", "Y[i] = 0.0", "X[i + 1] = Y[i]", "X[0] = X[i]")
    row = "        for j in range(M):\n            " + part(
        "X[i] += A[i, j] * Z[j]", "X[i + 1] += A[i, j] * Z[j]", "X[j] += A[i, j] * Z[j]",
        "X[i] += A[i, j] * Y[j]")
    column = "        for j in range(M):\n            " + part(
        "Y[j] += A[i, j] * X[i]", "Y[i] += A[i, j] * X[i]", "Y[j] = A[i, j] * Y[i]",
        "Y[j + 1] += A[i, j] * X[j]")
    parts = [first, row, column]
    order = draw(st.sampled_from([(0, 1, 2), (0, 1, 2), (1, 0, 2), (0, 2, 1), (2, 1, 0)]))
    return "def f(A, X, Y, Z, N, M):\n    for i in range(N):\n" + "".join(
        parts[k] + "\n" for k in order)


@st.composite
def array_reduction_nests(draw: Draw) -> str:
    """Two loops updating an array with one operator (``Y[j] += ...``, ``max``, ``*=``),
    sometimes under a guard, beside a scalar sum or a plain write, the outer loop counting
    down or by steps, the inner one triangular: reductions into arrays and their
    look-alikes (a target read elsewhere, two targets apart)."""
    outer = draw(st.sampled_from(["range(N)", "range(N - 1, -1, -1)", "range(1, N, 2)"]))
    inner = draw(st.sampled_from(["range(M)", "range(i)", "range(i + 1, M)"]))
    target = draw(st.sampled_from(["Y[j]", "Y[i]", "Y[j + 1]", "B[j, i % 2]", "B[0, j]"]))
    value = draw(st.sampled_from(["A[i, j]", "A[i, j] * Z[j]", "A[i, j] * Y[0]",
                                  "A[i, j] + Z[i]"]))
    update = draw(st.sampled_from([f"{target} += {value}", f"{target} -= {value}",
                                   f"{target} *= {value}",
                                   f"{target} = max({target}, {value})",
                                   f"{target} = min({value}, {target})"]))
    body = [f"        for j in {inner}:"]
    if draw(st.booleans()):
        body += ["            if A[i, j] > 0.5:", f"                {update}"]
    else:
        body.append(f"            {update}")
    beside = draw(st.sampled_from(["", "            s += A[i, j]", "            Z[i] = A[i, 0]"]))
    if beside:
        body.append(beside)
    return ("def f(A, B, Y, Z, N, M):\n    s = 0.0\n    for i in " + outer + ":\n"
            + "\n".join(body) + "\n    return s\n")


@st.composite
def contraction_nests(draw: Draw) -> str:
    """Three loops updating ``C`` with a product of two 2-D reads whose subscripts are drawn
    from the loops (matrix products and their transposes: ``A[j, k]`` down a column as
    ``j`` runs), the inner bound sometimes triangular, the operands sometimes ``C`` itself
    or an array written beside (look-alikes the packer must leave alone), a scaling loop
    before or a scaling after the sum (trmm's) or neither: contractions, packed or not."""
    order = draw(st.permutations(["i", "j", "k"]))
    inner = draw(st.sampled_from(["range(N)", "range(N)", f"range({order[0]} + 1)",
                                  f"range({order[1]}, N)", f"range({order[0]} + 1, N)"]))
    target = draw(st.sampled_from(["C[i, j]", "C[j, i]", "C[i, j]"]))
    pairs = ["i, k", "k, i", "j, k", "k, j"]
    left = draw(st.sampled_from(["A[" + p + "]" for p in pairs] + ["C[k, j]"]))
    right = draw(st.sampled_from(["B[" + p + "]" for p in pairs] + ["A[j, k]"]))
    update = f"{target} += alpha * {left} * {right}"
    lines = ["def f(A, B, C, alpha, N):"]
    if draw(st.booleans()):
        lines += ["    for i in range(N):", "        for j in range(N):",
                  "            C[i, j] *= 0.5"]
    lines += [f"    for {order[0]} in range(N):", f"        for {order[1]} in range(N):",
              f"            for {order[2]} in {inner}:", f"                {update}"]
    if draw(st.sampled_from([False, False, True])):
        lines.append(f"                B[{order[0]}, {order[2]}] = C[i, j]")
    if draw(st.booleans()):  # trmm's scaling after the sum: a band around one loop chain
        lines.append(f"            {target} = alpha * {target}")
    return "\n".join(lines) + "\n"


@st.composite
def inner_order_nests(draw: Draw) -> str:
    """doitgen's shape and its look-alikes: an outer loop over ``r`` holding a loop over
    ``p`` with a statement or none beside an inner loop over ``s`` (its bound sometimes
    triangular) that sums a product into a row, a scalar, or ``A`` itself, read down a
    column or along a row; the row written back after or not: inner nests to reorder under
    a parallel loop, or to leave alone."""
    inner = draw(st.sampled_from(["range(M)", "range(M)", "range(p)", "range(p, M)"]))
    target = draw(st.sampled_from(["T[p]", "T[p]", "B[r, p]", "T[s]", "A[r, p]"]))
    operand = draw(st.sampled_from(["C[s, p]", "C[p, s]", "C[s, p] * T[s]", "A[r, s]"]))
    before = draw(st.sampled_from([f"{target} = 0.0", "", "t = 1.0", f"{target} = A[r, p]"]))
    lines = ["def f(A, B, C, T, N, M):", "    t = 0.0", "    for r in range(N):",
             "        for p in range(M):"]
    if before:
        lines.append(f"            {before}")
    lines += [f"            for s in {inner}:", f"                {target} += A[r, s] * {operand}"]
    if before == "t = 1.0":
        lines.append("                t += C[s, p]")
    if draw(st.booleans()):
        lines += ["        for p in range(M):", "            A[r, p] = T[p]"]
    return "\n".join(lines + ["    return t"]) + "\n"


@st.composite
def stencil_nests(draw: Draw) -> str:
    """A time loop over one to three sweeps: loops over rows ``i`` (sometimes with a loop
    over ``j`` inside), each writing one of ``A``, ``B``, ``C`` from reads of them at offsets
    of -2 to 2 (jacobi's sweep and copy-back, seidel's update in place, heat's two arrays),
    sometimes a statement between the sweeps or a sum into ``S[0]`` across steps: nests that
    time tiling straightens with a shift and a skew, and look-alikes it must leave alone."""
    two_d = draw(st.booleans())
    lines = ["def f(A, B, C, S, N, M):", "    for t in range(M):"]
    for _ in range(draw(st.integers(1, 3))):
        target = draw(st.sampled_from(["A", "B", "C"]))
        low = draw(st.sampled_from([1, 1, 2]))
        lines.append(f"        for i in range({low}, N - 1):")
        indent = "            "
        if two_d:
            lines.append(f"{indent}for j in range(1, N - 1):")
            indent += "    "

        def ref(name: str) -> str:
            di = draw(st.integers(-2, 2))
            rows = f"i + {di}" if di else "i"
            if not two_d:
                return f"{name}[{rows}]"
            dj = draw(st.integers(-1, 1))
            return f"{name}[{rows}, {f'j + {dj}' if dj else 'j'}]"

        reads = [ref(draw(st.sampled_from(["A", "B", "C"])))
                 for _ in range(draw(st.integers(1, 3)))]
        written = f"{target}[i, j]" if two_d else f"{target}[i]"
        lines.append(f"{indent}{written} = 0.5 * ({' + '.join(reads)})")
        if draw(st.sampled_from([False] * 7 + [True])):
            lines.append(f"{indent}S[0] += {written}")
    if draw(st.sampled_from([False] * 5 + [True])):
        lines.insert(2, "        A[0" + (", 0" if two_d else "") + "] = B[1" +
                     (", 1" if two_d else "") + "]")
    return "\n".join(lines) + "\n"


@st.composite
def row_store_nests(draw: Draw) -> str:
    """``def f(A, B, P, Q, M, N)``: a loop over rows ``i`` whose thread walks a row ``j`` in
    sequence (a running value carried from column to column), storing into ``P`` (and
    sometimes ``Q``) at offsets of the row and column: stores a GPU kernel coalesces through
    a tile. Look-alikes it must leave to memory: a store under a condition, an array also
    read or stored twice, a column bound that moves with the row. A stored tile may take
    over the cells of a read one (``A[i, j]`` read, ``P[i, j]`` stored): look-alikes where
    that would lose a value read after the store (``after``)."""
    low = draw(st.sampled_from(["0", "1"]))
    lines = ["def f(A, B, P, Q, M, N):", f"    for i in range({low}, M - 1):",
             f"        acc = {draw(st.sampled_from(['0.0', 'B[i, 0]']))}"]
    bounds = draw(st.sampled_from(["N", "1, N - 1", "2, N", "i % 3, N", "N - 2"]))
    lines.append(f"        for j in range({bounds}):")
    lines.append(f"            acc = acc * {draw(st.sampled_from(['0.5', '-0.25']))} + "
                 f"{draw(st.sampled_from(['A[i, j]', 'A[i + 1, j - 1]', 'A[i, j] * B[i, j]']))}")

    def store(name: str) -> str:
        row = draw(st.sampled_from(["i", "i", "i + 1", "i - 1"]))
        column = draw(st.sampled_from(["j", "j", "j + 1", "j - 1"]))
        value = draw(st.sampled_from(["acc", "acc + B[i, j]", "2.0 * acc", "acc - A[i, j]"]))
        return f"{name}[{row}, {column}] = {value}"

    kind = draw(st.sampled_from(["plain", "plain", "two", "if", "read", "twice", "after"]))
    lines.append(f"            {store('P')}")
    if kind == "two":
        lines.append(f"            {store('Q')}")
    elif kind == "if":
        lines.append("            if acc > 0.0:")
        lines.append(f"                {store('Q')}")
    elif kind == "read":
        lines.append(f"            acc = acc + P[i, {draw(st.sampled_from(['j', 'j - 1']))}]")
    elif kind == "twice":
        lines.append(f"        {store('P').replace('j', '0')}")
    elif kind == "after":
        lines.append(f"            acc = acc + {draw(st.sampled_from(['A[i, j]', 'B[i, j]']))}")
    return "\n".join(lines) + "\n"


@st.composite
def grid_sum_nests(draw: Draw) -> str:
    """``def f(A, x, out, N, M)``: a scalar ``s`` reduced over one or two loops (``+=``,
    ``-=``, ``s = max(s, ...)``, ``min``; sometimes under a condition, sometimes with a
    second scalar or an element ``out[1]`` reduced beside it), started from a constant or
    an element, stored after the loops; sometimes inside a loop of steps whose body also
    runs statements between nests (``s = 0.0``, a mean of the sum the next nest reads)."""
    op = draw(st.sampled_from(["+=", "-=", "max", "min"]))
    value = draw(st.sampled_from(["A[i, j] * x[j]", "A[i, j]", "abs(A[i, j] - x[i])"]))
    two = draw(st.booleans())
    steps = draw(st.sampled_from([False, False, True]))
    pad = "        " if steps else "    "
    lines = ["def f(A, x, out, N, M):"]
    if steps:
        lines.append("    for t in range(3):")
    lines.append(f"{pad}s = {draw(st.sampled_from(['0.0', 'x[0]', '1.5']))}")
    lines.append(f"{pad}for i in range(N):")
    inner = pad + "    "
    if two:
        lines.append(f"{inner}for j in range(M):")
        inner += "    "
    else:
        value = value.replace("j", "i")
    if draw(st.booleans()):
        lines.append(f"{inner}if x[i] > 0.3:")
        inner += "    "
    if op in ("+=", "-="):
        lines.append(f"{inner}s {op} {value}")
    else:
        lines.append(f"{inner}s = {op}(s, {value})")
    if draw(st.booleans()):
        lines.append(f"{inner}out[1] = max(out[1], {value})")
    lines.append(f"{pad}out[0] = s")
    if steps:
        lines.append(f"{pad}m = s / N")
        lines.append(f"{pad}for i in range(N):")
        lines.append(f"{pad}    x[i] = x[i] * 0.5 + m")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- interpreter


@dataclass(frozen=True)
class Access:
    """One memory access of one statement instance."""

    line: int  # the statement's line (an ``if`` line for reads in its condition)
    loops: tuple[int, ...]  # header lines of the enclosing loops, outermost first
    iteration: tuple[int, ...]  # the values of their variables
    order: tuple[int, ...]  # value times the sign of the step: grows as execution goes on
    location: Location
    write: bool
    text: str = ""  # the access as Python prints it (``A[i + 1, j]``; "" for index arrays)


class _Loop(NamedTuple):
    """An enclosing loop while the interpreter runs its body."""

    line: int
    var: str
    sign: int  # +1 counting up, -1 counting down


def index_value(seed: int, name: str, index: tuple[int, ...]) -> int:
    """What read-only array ``name`` holds at ``index`` in the run filled by ``seed``: an int
    in 0..3, so that indirect subscripts collide often."""
    return random.Random(f"{seed}:{name}:{index}").randint(0, 3)


class _IndexArray:
    """A read-only array filled by :func:`index_value`; reading it is an access."""

    def __init__(self, name: str, seed: int, record: Callable[[Location, bool], None]) -> None:
        self._name, self._seed, self._record = name, seed, record

    def __getitem__(self, key: int | tuple[int, ...]) -> int:
        index = key if isinstance(key, tuple) else (key,)
        self._record((self._name, index), False)
        return index_value(self._seed, self._name, index)


def _root_name(node: ast.expr) -> str | None:
    """The array a subscript chain indexes: ``A`` of ``A[i][j]``."""
    while isinstance(node, ast.Subscript):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


class _Interpreter:
    """Executes the language of :func:`nests` (for/range, if/else, (augmented) assignments).

    Values are never computed: subscripts of affine nests do not depend on data, and the
    only data subscripts may read are the read-only index arrays.
    """

    def __init__(self, func: ast.FunctionDef, sizes: Mapping[str, int], seed: int) -> None:
        written = {_root_name(t) for t in _targets(func) if isinstance(t, ast.Subscript)}
        arrays = {_root_name(n) for n in ast.walk(func) if isinstance(n, ast.Subscript)}
        self._loop_vars = {n.target.id for n in ast.walk(func) if isinstance(n, ast.For)}
        self._namespace: dict[str, Any] = {"__builtins__": {}, "min": min, "max": max, **sizes}
        self._namespace.update({name: _IndexArray(name, seed, self._record)
                                for name in arrays - written if name})
        self._code: dict[ast.expr, CodeType] = {}
        self._loops: list[_Loop] = []
        self._line = 0
        self.trace: list[Access] = []

    def run(self, body: Sequence[ast.stmt]) -> None:
        for node in body:
            self._line = node.lineno
            if isinstance(node, ast.For):
                self._for(node)
            elif isinstance(node, ast.If):
                self.run(node.body if self._eval(node.test) else node.orelse)
            elif isinstance(node, (ast.Assign, ast.AugAssign)):
                self._statement(node)
            elif isinstance(node, ast.Pass):  # a temporary written into its uses
                continue
            else:
                raise ValueError(f"line {node.lineno}: the oracle cannot run {ast.unparse(node)}")

    def _for(self, node: ast.For) -> None:
        call = node.iter
        if not (isinstance(call, ast.Call) and ast.unparse(call.func) == "range"
                and isinstance(node.target, ast.Name) and not node.orelse):
            raise ValueError(f"line {node.lineno}: only `for v in range(...)` loops")
        args = [self._eval(arg) for arg in call.args]
        step = args[2] if len(args) == 3 else 1
        self._loops.append(_Loop(node.lineno, node.target.id, 1 if step > 0 else -1))
        for value in range(*args):
            self._namespace[node.target.id] = value
            self.run(node.body)
        self._loops.pop()

    def _statement(self, node: ast.Assign | ast.AugAssign) -> None:
        """Reads first (the target's too for ``op=``), then the writes, left to right as
        Python assigns the targets of ``a = b = rhs``."""
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if isinstance(node, ast.AugAssign):
            self._reads(node.target)
        self._reads(node.value)
        for target in targets:
            self._record(self._location(target), True, ast.unparse(target))

    def _reads(self, node: ast.AST) -> None:
        if isinstance(node, (ast.Subscript, ast.Name)):
            if self._is_memory(node):
                self._record(self._location(node), False, ast.unparse(node))
            return
        for child in ast.iter_child_nodes(node):
            self._reads(child)

    def _is_memory(self, node: ast.Subscript | ast.Name) -> bool:
        """Array elements and scalars are memory; loop variables and sizes are not."""
        return isinstance(node, ast.Subscript) or not (
            node.id in self._loop_vars or node.id in self._namespace)

    def _location(self, node: ast.expr) -> Location:
        """``A[i][j]`` and ``A[i, j]`` name the same element; a bare name is a scalar."""
        subscripts: list[int] = []
        while isinstance(node, ast.Subscript):
            parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            subscripts[:0] = [self._eval(part) for part in parts]
            node = node.value
        if not isinstance(node, ast.Name):
            raise ValueError(f"line {self._line}: cannot locate {ast.unparse(node)}")
        return node.id, tuple(subscripts)

    def _eval(self, node: ast.expr) -> Any:
        """Python's own meaning of an integer expression (``range`` arguments, subscripts)."""
        if node not in self._code:
            self._code[node] = compile(ast.Expression(body=node), "<nest>", "eval")
        return eval(self._code[node], self._namespace)  # noqa: S307 - our own expressions

    def _record(self, location: Location, write: bool, text: str = "") -> None:
        iteration = tuple(self._namespace[loop.var] for loop in self._loops)
        self.trace.append(Access(
            line=self._line, loops=tuple(loop.line for loop in self._loops), iteration=iteration,
            order=tuple(v * loop.sign for v, loop in zip(iteration, self._loops)),
            location=location, write=write, text=text))


def _targets(func: ast.FunctionDef) -> Iterator[ast.expr]:
    for node in ast.walk(func):
        if isinstance(node, ast.Assign):
            yield from node.targets
        elif isinstance(node, ast.AugAssign):
            yield node.target


def parse(source: str) -> ast.FunctionDef:
    """The one function the source defines (after its imports: code the transformer
    printed)."""
    (func,) = [node for node in ast.parse(source).body
               if not isinstance(node, (ast.Import, ast.ImportFrom))]
    if not isinstance(func, ast.FunctionDef):
        raise ValueError("the source must define one function")
    return func


def trace(source: str, sizes: Mapping[str, int], seed: int = 0) -> list[Access]:
    """Every memory access of one run, in execution order; ``seed`` fills the index arrays."""
    func = parse(source)
    interpreter = _Interpreter(func, sizes, seed)
    interpreter.run(func.body)
    return interpreter.trace


# --------------------------------------------------------------------------- dependences


class Dep(NamedTuple):
    """A dependence as the tests compare them: concrete direction vector, lines for ids."""

    source: int  # line of the statement that executes first
    sink: int
    kind: str  # "RAW" | "WAR" | "WAW"
    array: str
    vector: tuple[str, ...]  # over the loops enclosing both statements, outermost first

    def __str__(self) -> str:
        return (f"line {self.source} -> line {self.sink} {self.kind} {self.array} "
                f"({', '.join(self.vector)})")


@dataclass(frozen=True)
class Truth:
    """What the oracle knows about one run."""

    deps: frozenset[Dep]
    carried: frozenset[int]  # header lines of the loops that carry a dependence
    loops: tuple[int, ...]  # header lines of all loops, in source order
    statements: tuple[int, ...]  # lines of all statements (and memory-reading conditions)

    @property
    def parallel(self) -> dict[int, bool]:
        """Per loop line, whether it is a DOALL as written: it carries nothing."""
        return {line: line not in self.carried for line in self.loops}


class _Group(NamedTuple):
    """The accesses to one location by one statement, of one kind."""

    line: int
    write: bool
    loops: tuple[int, ...]


_SIGN = {-1: ">", 0: "=", 1: "<"}
_FLIP = {"<": ">", "=": "=", ">": "<"}
_Points = frozenset[tuple[int, ...]]


class _SignVectors:
    """The set of ``sign(q - p)`` over ``p`` in P, ``q`` in Q, by recursion on the first
    coordinate with a cache: the sets of tails repeat across rows, so scalars touched by
    every iteration of a nest cost far less than all pairs."""

    def __init__(self) -> None:
        self._cache: dict[tuple[_Points, _Points], frozenset[tuple[str, ...]]] = {}

    def __call__(self, p: _Points, q: _Points) -> frozenset[tuple[str, ...]]:
        if (p, q) not in self._cache:
            self._cache[p, q] = self._compute(p, q)
        return self._cache[p, q]

    def _compute(self, p: _Points, q: _Points) -> frozenset[tuple[str, ...]]:
        if () in p:
            return frozenset({()})
        out: set[tuple[str, ...]] = set()
        for head_p, tails_p in _split(p).items():
            for head_q, tails_q in _split(q).items():
                sign = _SIGN[(head_q > head_p) - (head_q < head_p)]
                out.update((sign, *tail) for tail in self(tails_p, tails_q))
        return frozenset(out)


def _split(points: _Points) -> dict[int, _Points]:
    heads: dict[int, set[tuple[int, ...]]] = defaultdict(set)
    for point in points:
        heads[point[0]].add(point[1:])
    return {head: frozenset(tails) for head, tails in heads.items()}


def _common(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    """How many loops (the same header, not just the same variable) enclose both."""
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def _first(a: _Group, b: _Group) -> bool:
    """Whether ``a`` runs first when all common loops are at the same iteration: program
    order, and within one statement instance the reads before the write."""
    return (a.line, a.write) < (b.line, b.write)


def _pair_vectors(a: _Group, pa: set[tuple[int, ...]], b: _Group, pb: set[tuple[int, ...]],
                  signs: _SignVectors) -> Iterator[tuple[_Group, _Group, tuple[str, ...]]]:
    """(source, sink, vector) of every dependence between two groups of one location."""
    n = _common(a.loops, b.loops)
    vectors = signs(frozenset(x[:n] for x in pa), frozenset(x[:n] for x in pb))
    for vector in vectors:
        lead = next((sign for sign in vector if sign != "="), "=")
        if a == b:  # one access of one statement: each pair of distinct instances once
            if lead == "<":
                yield a, b, vector
        elif lead == "<" or (lead == "=" and _first(a, b)):
            yield a, b, vector
        else:
            yield b, a, tuple(_FLIP[sign] for sign in vector)


def _kind(source: _Group, sink: _Group) -> str:
    return "WAW" if source.write and sink.write else "RAW" if source.write else "WAR"


def dependences(accesses: Iterable[Access]) -> tuple[frozenset[Dep], frozenset[int]]:
    """All dependences of a trace, and the lines of the loops that carry one."""
    locations: dict[Location, dict[_Group, set[tuple[int, ...]]]] = defaultdict(
        lambda: defaultdict(set))
    for access in accesses:
        locations[access.location][_Group(access.line, access.write, access.loops)].add(
            access.order)
    deps: set[Dep] = set()
    carried: set[int] = set()
    signs = _SignVectors()
    for (array, _), groups in locations.items():
        items = list(groups.items())
        for x, (a, pa) in enumerate(items):
            for b, pb in items[x:]:
                if not (a.write or b.write):
                    continue
                for source, sink, vector in _pair_vectors(a, pa, b, pb, signs):
                    deps.add(Dep(source.line, sink.line, _kind(source, sink), array, vector))
                    if "<" in vector:
                        carried.add(source.loops[vector.index("<")])
    return frozenset(deps), frozenset(carried)


def oracle(source: str, sizes: Mapping[str, int], seed: int = 0) -> Truth:
    """The exact dependences of ``source`` run at ``sizes`` (index arrays filled by ``seed``)."""
    func = parse(source)
    deps, carried = dependences(trace(source, sizes, seed))
    nodes = list(ast.walk(func))
    return Truth(deps=deps, carried=carried,
                 loops=tuple(sorted(n.lineno for n in nodes if isinstance(n, ast.For))),
                 statements=tuple(sorted(n.lineno for n in nodes if _is_statement(n))))


def _is_statement(node: ast.AST) -> bool:
    """Assignments, and conditions that read memory (``if X[i] > 0:``): what has accesses."""
    if isinstance(node, ast.If):
        return any(isinstance(child, ast.Subscript) for child in ast.walk(node.test))
    return isinstance(node, (ast.Assign, ast.AugAssign))


@st.composite
def strip_nests(draw: Draw) -> str:
    """symm's and Gram-Schmidt's shape and look-alikes: a loop over ``j`` (alone, or inside
    a sequential ``k``, or with ``i`` outside it) whose body is statements around a loop
    over ``i`` that reads and writes down columns (``A[i, j]``), a scalar set before it and
    used after it or not; sometimes ``j`` carries a dependence (``A[i, j - 1]``): loops to
    run in strips with ``j`` sunk innermost, or to leave alone. Or lu's row update: under a
    sequential ``k``, ``for j: for i:`` statements alone that read down columns."""
    if draw(st.integers(0, 3)) == 0:
        return draw(row_update_nests())
    outer = draw(st.sampled_from(["", "k", "k"]))
    low = draw(st.sampled_from(["0", "k + 1"])) if outer else "0"
    inner = draw(st.sampled_from(["range(N)", "range(k)"])) if outer else "range(N)"
    row = "k" if outer else "0"
    pre = draw(st.sampled_from(["", f"B[{row}, j] = 0.0", "t = 0.0"]))
    body = draw(st.lists(st.sampled_from([
        f"B[{row}, j] += A[i, j] * C[i, {row}]", "t += A[i, j] * A[i, j]",
        f"A[i, j] -= C[i, {row}] * B[{row}, j]", "A[i, j] += A[i, j - 1]",
        "D[i, j] = A[i, j] + t"]), min_size=1, max_size=2))
    post = draw(st.sampled_from(["", "s[j] = t", f"B[{row}, j] = B[{row}, j] * 0.5 + t"]))
    lines = ["def f(A, B, C, D, s, N, M):"]
    indent = "    "
    if outer:
        lines.append(f"{indent}for k in range(N):")
        indent += "    "
    lines.append(f"{indent}for j in range({low}, M):")
    indent += "    "
    if "t" in " ".join([*body, post]) and pre != "t = 0.0":
        pre = "t = 0.0"  # (a scalar the loop carries otherwise: nothing parallel)
    if pre:
        lines.append(f"{indent}{pre}")
    lines.append(f"{indent}for i in {inner}:")
    lines += [f"{indent}    {statement}" for statement in body]
    if post:
        lines.append(f"{indent}{post}")
    return "\n".join(lines) + "\n"


@st.composite
def row_update_nests(draw: Draw) -> str:
    """lu's second loop and look-alikes: a sequential ``k`` (row ``k`` reads rows written
    before it), a ``j`` over the row (from ``k`` or from 0), a sum over ``i`` into the row's
    element that reads down a column (``A[i, j]``), sometimes from the element before it
    (``j`` carries a dependence then), sometimes a second statement beside it."""
    low = draw(st.sampled_from(["0", "k"]))
    inner = draw(st.sampled_from(["range(k)", "range(N)", "range(k + 1, N)"]))
    body = draw(st.lists(st.sampled_from([
        "A[k, j] -= A[k, i] * A[i, j]", "B[k, j] += C[k, i] * A[i, j]",
        "B[k, j] += A[i, j] * A[i, j - 1]", "A[k, j] += A[i, j - 1]",
        "D[i, j] = A[i, j] + B[k, j]"]), min_size=1, max_size=2, unique=True))
    lines = ["def f(A, B, C, D, s, N, M):", "    for k in range(N):",
             f"        for j in range({low}, M):", f"            for i in {inner}:"]
    lines += [f"                {statement}" for statement in body]
    return "\n".join(lines) + "\n"
