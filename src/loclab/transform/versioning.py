"""Loop versioning: the transformed loops for arguments apart, the function as written
for arguments that share memory.

A recipe is proved for distinct arrays. Two arguments that may overlap
(:func:`loclab.deps.overlap.may_overlap`: NumPy arrays, which may be one array or views of
one) are checked when the function starts, as GCC and Clang check the pointers of a loop
they vectorize: if their memory spans meet, the original statements run in the original
order and the call computes what the original computes; otherwise the transformed loops run.
Both branches hold the same statements, so Numba compiles the one if it compiles the other.
The check is NumPy's ``may_share_memory`` (Numba lacks it: there, the same test on the
arrays' address spans), which may answer yes for interleaved views that never touch one
element: then the original runs, slower but right. C has no arrays' extents to ask: the
span of each array is what its accesses reach, bounded by isl over the loops and printed as
C (:func:`c_overlap_test`); an array whose span cannot be bounded is an error.
"""

from __future__ import annotations

import ast
import textwrap
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from loclab.nest.ir import Variable
    from loclab.transform.python_program import FunctionSyntax
    from loclab.transform.tree import Program

AS_WRITTEN_CHECK = "_loclab_overlap"

_SPANS = f'''\
@njit
def {AS_WRITTEN_CHECK}(x, y):
    """Whether two arrays' address spans meet (NumPy's may_share_memory; Numba lacks it)."""
    return _loclab_span(x, 0) < _loclab_span(y, 1) and _loclab_span(y, 0) < _loclab_span(x, 1)


@njit
def _loclab_span(x, end):
    """The first byte an array can touch (end 0), or one past its last (end 1)."""
    low = x.ctypes.data
    high = low + x.itemsize
    for k in range(x.ndim):
        if x.shape[k] == 0:
            return low
        step = (x.shape[k] - 1) * x.strides[k]
        if step < 0:
            low += step
        else:
            high += step
    return high if end else low
'''


def overlap_helper(numba: bool) -> list[str]:
    """The module lines that define the check (Numba), or none (NumPy's own)."""
    return _SPANS.rstrip("\n").split("\n") + ["", ""] if numba else []


def as_written_branch(syntax: "FunctionSyntax", pairs: list[tuple[str, str]],
                      numba: bool) -> str:
    """``if <a and b overlap>:`` then the original body, ending the call: the first
    statements of the transformed function, indented one level less than returned."""
    check = AS_WRITTEN_CHECK if numba else "np.may_share_memory"
    test = " or ".join(f"{check}({a}, {b})" for a, b in pairs)
    body = _original_body(syntax)
    lines = [f"if {test}:  # shared memory: run as written"]
    lines += [f"    {line}" if line.strip() else "" for line in body.split("\n")]
    if not isinstance(syntax.function.body[-1], ast.Return):
        lines.append("    return")
    return "\n".join(lines)


def _original_body(syntax: "FunctionSyntax") -> str:
    """The function's statements as the user wrote them (comments too), docstring left
    out, dedented."""
    statements = [node for node in syntax.function.body if node is not syntax.docstring]
    lines = syntax.source.split("\n")
    first = statements[0].lineno - 1
    last = syntax.function.end_lineno or len(lines)
    return textwrap.dedent("\n".join(lines[first:last])).rstrip()


def c_overlap_test(program: "Program", pairs: list[tuple["Variable", "Variable"]]) -> str:
    """The C condition under which two arrays of each pair may touch one byte: their
    accessed spans (from the lowest element any access reaches to one past the highest, as
    isl bounds the subscripts over the loops, flattened row-major) meet. The spans are
    expressions of the arguments, evaluated when the function starts; an array whose span
    loclab cannot bound (a subscript that depends on data, an unbounded loop, rows of
    unknown length) is an error naming it."""
    spans = {v.key: _c_span(program, v) for pair in pairs for v in pair}
    tests = []
    for first, second in pairs:
        (low_a, end_a), (low_b, end_b) = spans[first.key], spans[second.key]
        tests.append(f"({_byte(first, low_a)} < {_byte(second, end_b)}\n"
                     f"       && {_byte(second, low_b)} < {_byte(first, end_a)})")
    return "\n      || ".join(tests)


def _byte(variable: "Variable", offset: str) -> str:
    """``(const char *)a + (offset) * sizeof(*a)``: an element's address as bytes, whatever
    the element type (a char and a float array may share memory)."""
    stars = "*" * _rank(variable)
    scaled = offset if offset.isidentifier() or offset.isdigit() else f"({offset})"
    return f"(const char *){variable.name} + {scaled} * sizeof({stars}{variable.name})"


def _rank(variable: "Variable") -> int:
    return len(variable.extents) if variable.extents else 1


def _c_span(program: "Program", variable: "Variable") -> tuple[str, str]:
    """(lowest flattened element offset any access of ``variable`` reaches, one past the
    highest), as C. A subscript is split into pieces by the sizes that multiply loop
    variables (``j * rowsA + i``: ``j`` at stride ``rowsA``, ``i`` at 1, as the model
    delinearizes it); each piece is bounded by isl over the loops, and the offset by the
    sum of the pieces' bounds times their strides (sizes are not negative)."""
    import islpy as isl

    from loclab.errors import UsageError

    model = program.model
    uses = model.accesses.get(variable.key, [])
    rank = len(uses[0][1].subscripts) if uses else 1
    where = f"{program.nest.filename}:{program.nest.line}"
    remedy = "declare them restrict, or pass --assume-distinct"
    if rank > 1 and (variable.extents is None or len(variable.extents) != rank
                     or any(e is None for e in variable.extents[1:])):
        raise UsageError(f"{where}: {variable.name} has rows of unknown length: loclab cannot "
                         "bound its memory to check it against the arrays it may share "
                         f"memory with; {remedy}")
    dims = _strides(variable, rank)
    loop_vars = {loop.var for loop in program.nest.loops}
    bounds: dict[tuple[int, tuple[str, ...]], list[Any]] = {}  # (dim, stride) -> [low, high]
    for statement, access in uses:
        domain = model.domain(statement, "x")
        coords = ", ".join(f"x{k}" for k in range(len(statement.loops)))
        seen: set[tuple[int, tuple[str, ...]]] = set()
        for k, subscript in enumerate(access.subscripts):
            pieces = _pieces(subscript, model.fixed, loop_vars)
            if pieces is None:
                raise UsageError(f"{where}: {access.text} depends on data: loclab cannot bound "
                                 f"the memory of {variable.name} to check it against the "
                                 f"arrays it may share memory with; {remedy}")
            for stride, piece in pieces.items():
                text = model.render(piece, statement, "x")
                inner = f"exists ({coords} : {domain} and v = {text})" if coords \
                    else f"{domain} and v = {text}"
                values = isl.Set(f"{model.header}{{ [v] : {inner} }}")
                if values.is_empty():
                    continue
                try:
                    low, high = values.dim_min(0), values.dim_max(0)
                except isl.Error:
                    raise UsageError(f"{where}: the loops around {access.text} are unbounded: "
                                     f"loclab cannot bound the memory of {variable.name}; "
                                     f"{remedy}") from None
                _widen(bounds, (k, stride), low, high)
                seen.add((k, stride))
        zero = isl.PwAff(f"{model.header}{{ [(0)] }}")
        for key in set(bounds) - seen:  # a piece this access lacks is 0 in it
            _widen(bounds, key, zero, zero)
    if not bounds:
        return "0", "0"  # never accessed: an empty span
    low = _sum(model, dims, bounds, 0)
    end = _sum(model, dims, bounds, 1)
    return low, _plus_one(end)


def _plus_one(text: str) -> str:
    """``text + 1``, folding a trailing constant (``n - 1`` + 1 is ``n``)."""
    import re

    match = re.fullmatch(r"(.*\S) ([-+]) (\d+)", text)
    if match is None:
        return "1" if text == "0" else f"{text} + 1"
    value = int(match[3]) * (1 if match[2] == "+" else -1) + 1
    if value == 0:
        return match[1]
    return f"{match[1]} {'+' if value > 0 else '-'} {abs(value)}"


def _pieces(subscript: Any, fixed: Any, loop_vars: set[str]) -> dict[tuple[str, ...], Any] | None:
    """A subscript's affine pieces by the sizes that multiply them (None: not boundable)."""
    from loclab.deps.model import _split_by_strides

    if subscript is None:
        return None
    poly = subscript.substitute(fixed)
    if poly.is_affine():
        return {(): poly}
    return _split_by_strides(poly, loop_vars)


def _widen(bounds: dict, key: tuple, low: Any, high: Any) -> None:
    if key not in bounds:
        bounds[key] = [low, high]
    else:
        bounds[key] = [bounds[key][0].union_min(low), bounds[key][1].union_max(high)]


def _sum(model: Any, dims: list[str], bounds: dict, side: int) -> str:
    """The flattened offset's bound: every piece's bound times its stride, summed."""
    terms = []
    for (k, stride), values in sorted(bounds.items()):
        value = _c_expr(model, values[side])
        if value == "0":
            continue
        factors = [f for f in (dims[k], *stride) if f != "1"]
        terms.append(" * ".join([value if not factors else f"({value})", *factors]))
    return " + ".join(terms) or "0"


def _strides(variable: "Variable", rank: int) -> list[str]:
    """Row-major strides in elements, as C (the declared extents of the inner dimensions)."""
    strides = ["1"]
    for extent in reversed((variable.extents or ())[1:]):
        inner = f"({extent.render()})"  # type: ignore[union-attr]
        strides.insert(0, inner if strides[0] == "1" else f"{inner} * {strides[0]}")
    return strides[-rank:]


def _c_expr(model: Any, value: Any) -> str:
    """A piecewise bound of isl as C over the user's names (loclab's min/max macros)."""
    import re

    import islpy as isl

    build = isl.AstBuild.from_context(isl.Set(f"{model.header}{{ : }}"))
    text = build.expr_from_pw_aff(value.coalesce()).to_C_str()
    names = model.user_names()
    text = re.sub(r"\b(p\d+)\b", lambda m: names.get(m.group(1), m.group(1)), text)
    return re.sub(r"\b(min|max|floord)\(", r"loclab_\1(", text)
