"""What a function is run on to verify, tune and time it: its sizes and its arguments.

Sizes come from the caller (each a whole number of at least 1), else small defaults per size
(distinct primes from 37 down, odd and no multiple of any tile, shrunk until the nest runs
fewer than about 200,000 statement instances, so that the original runs in plain Python in
well under a second).

loclab's own arguments fit every access at those sizes: an array's extent per dimension is
its largest subscript plus one, from isl where the subscript is affine, else evaluated over the
loops' iterations (``A[i * i]``, ``A[i // 2]``, ``A[abs(i - 5)]``). A subscript that depends
on data cannot be evaluated before the run: an index array read directly there
(``A[idx[i]]``) holds integers within the extent it indexes; anything else (``A[idx[i] + 1]``)
is left to the run, whose bounds checks turn an index past the end into an error that names
it. Arrays only written are poisoned with NaN, so that an element the transformed version
forgets shows; others hold floats in [0.5, 1.5).

The user may supply the arguments instead (``--inputs MODULE.py::FUNC``): a function called
with the sizes as keyword arguments that returns the arguments (``INPUTS_CONTRACT``), for a
kernel that only runs on valid inputs (a Cholesky factorization needs a positive definite
matrix).

Before anything is allocated or run, the footprint (the bytes of all arrays, times the copies
a run keeps) is checked against the memory that is free and the work (statement instances)
against what the caller can run, so that a huge size is one line, not a MemoryError or a hang.
"""

from __future__ import annotations

import ast
import functools
import itertools
import math
import runpy
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from loclab.errors import UsageError

MAX_INSTANCES = 200_000
DEFAULT_SIZES = (37, 41, 43, 31, 29, 23, 19, 17, 13, 11, 7, 5)
SEED = 20261125
ELEMENT_BYTES = 8  # loclab's inputs: float64 and int64
# A subscript isl cannot bound is evaluated at every point of the box around the loops it
# uses, CHUNK_POINTS at a time, up to MOST_POINTS (a second or so).
CHUNK_POINTS = 1 << 20
MOST_POINTS = 1 << 26
INPUTS_CONTRACT = ("called with each size as a keyword argument (N=...), it returns the "
                   "function's arguments: a dict by parameter name (sizes among them may be "
                   "left out) or a tuple in parameter order")

Supplier = Callable[..., Any]


# -- sizes ------------------------------------------------------------------------------------
def sizes_text(sizes: Mapping[str, int]) -> str:
    """``N=37, M=41``, for messages."""
    return ", ".join(f"{k}={v}" for k, v in sizes.items()) or "no sizes"


def check_sizes(sizes: Mapping[str, Any]) -> None:
    """Every size a whole number of at least 1 (an empty loop verifies and times nothing; a
    negative size is a mistake)."""
    for name, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise UsageError(f"--param {name}={value}: a size is a whole number of at least 1")


def check_known(program: Any, sizes: Mapping[str, Any]) -> None:
    """Every size given is one of the function's: a size its loops use, or another of its
    scalar arguments (a bilinear resize's ``H``, used only to compute the row it reads)."""
    parameters = list(program.nest.parameters)
    others = [name for name in scalar_arguments(program) if name not in parameters]
    for name in sizes:
        if name in program.nest.derived:
            raise UsageError(f"--param {name}: {program.nest.name} computes {name} = "
                             f"{program.nest.derived[name]}: give the sizes it is computed "
                             "from instead")
    unknown = sorted(set(sizes) - set(parameters) - set(others))
    if unknown:
        raise UsageError(f"--param {unknown[0]}: {program.nest.name} has no size "
                         f"{unknown[0]} (its sizes: {', '.join(parameters) or 'none'}"
                         + (f"; its other scalar arguments: {', '.join(others)}"
                            if others else "") + ")")


def scalar_arguments(program: Any) -> list[str]:
    """The function's parameters that are not arrays (those its code uses), in order: a
    whole number given for one with ``--param`` is passed to it."""
    arguments = [v for v in program.nest.variables if v.is_argument]
    if not isinstance(program.syntax.function, ast.AST):  # C: the arguments its code uses
        return list(dict.fromkeys(v.name for v in arguments if not v.is_array))
    arrays = {v.name for v in arguments if v.is_array}
    return [name for name in argument_names(program) if name not in arrays]


def with_given(parameters: list[str], sizes: Mapping[str, int],
               given: Mapping[str, int]) -> dict[str, int]:
    """Every size the loops use, from ``sizes``, then the scalar arguments ``given`` that
    they do not use, and those chosen to compute a size from (``free_sizes``)."""
    return {**{p: sizes[p] for p in parameters},
            **{name: value for name, value in given.items() if name not in parameters},
            **{name: value for name, value in sizes.items() if name not in parameters}}


def choose_sizes(program: Any, given: dict[str, int],
                 fits: Callable[[dict[str, int]], bool] = lambda sizes: True) -> dict[str, int]:
    """Sizes for every parameter: the given ones, else defaults small enough to run fast
    (and, with ``fits``, that the function's declarations allow)."""
    given = _without_settled(program, given)
    check_known(program, given)
    check_sizes(given)
    parameters = list(program.nest.parameters)
    free = free_sizes(program, given)
    first = None
    # distinct sizes first (a mix-up of two shows); all alike where distinct ones leave a
    # statement that never runs (``range(H - K + 1)`` at K > H: nothing verified)
    for alike, start in itertools.product((False, True), range(len(DEFAULT_SIZES))):
        candidate = dict(given)
        for k, name in enumerate(free):
            candidate[name] = DEFAULT_SIZES[min(start + (0 if alike else k),
                                                len(DEFAULT_SIZES) - 1)]
        try:
            candidate = settled_sizes(program, candidate)
        except UsageError:
            continue
        if not free:
            return with_given(parameters, candidate, given)
        if instances(program, candidate) <= MAX_INSTANCES and fits(candidate):
            first = first or candidate
            if every_statement_runs(program, candidate):
                return with_given(parameters, candidate, given)
    return with_given(parameters, first or settled_sizes(program, candidate), given)


def every_statement_runs(program: Any, sizes: Mapping[str, int]) -> bool:
    """Whether each statement of ``program`` runs at least once at ``sizes`` (as far as
    isl sees: a condition on data may still skip it)."""
    import islpy as isl

    from loclab.deps.model import Model

    model = Model(program.nest, sizes)
    return all(not isl.Set(model.domain_set(statement)).is_empty()
               for statement in program.nest.statements)


def _without_settled(program: Any, given: dict[str, int]) -> dict[str, int]:
    """``given`` without the sizes the function computes where they hold what it computes
    (sizes settled already, passed on); one that does not is the caller's to refuse."""
    derived = program.nest.derived
    rest = {k: v for k, v in given.items() if k not in derived}
    settled = settled_sizes(program, rest) if derived else rest
    return {k: v for k, v in given.items() if k not in derived or settled.get(k) != v}


def free_sizes(program: Any, given: Mapping[str, int]) -> list[str]:
    """The sizes to choose where ``given`` leaves them: the loops' sizes but those the
    function computes (``Nest.derived``), and the scalar arguments those are computed
    from."""
    nest = program.nest
    inputs = [name for text in nest.derived.values()
              for name in _names_in(text) if name not in nest.derived]
    return [name for name in dict.fromkeys([*nest.parameters, *inputs])
            if name not in given and name not in nest.derived]


def settled_sizes(program: Any, sizes: Mapping[str, int]) -> dict[str, int]:
    """``sizes`` with each size the function computes from its scalar arguments
    (``Nest.derived``: ``M = N // S``) set to what it computes from them, where they are
    all in ``sizes``; a UsageError where that leaves a loop's size below 1."""
    from loclab.nest.python import SIZE_FUNCTIONS

    out = dict(sizes)
    for name, text in program.nest.derived.items():
        try:
            value = eval(compile(text, "<size>", "eval"),  # noqa: S307 - checked arithmetic
                         {"__builtins__": {}, **SIZE_FUNCTIONS}, dict(out))
        except Exception:  # (an input not known yet, a division by zero: left as it is)
            continue
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            if value < 1:
                shown = sizes_text({k: v for k, v in out.items() if k in _names_in(text)})
                raise UsageError(f"at {shown} the function computes {name} = {text} = "
                                 f"{value}: its loops would not run; choose sizes with "
                                 "--param")
            out[name] = int(value)
    return out


def _names_in(text: str) -> list[str]:
    from loclab.nest.python import SIZE_FUNCTIONS

    return [node.id for node in ast.walk(ast.parse(text, mode="eval"))
            if isinstance(node, ast.Name) and node.id not in SIZE_FUNCTIONS]


def instances(program: Any, sizes: Mapping[str, int],
              statements: Sequence[Any] | None = None) -> int:
    """How many statement instances a run has at most (of ``statements`` alone, where
    given): per statement, the product over its loops of the most iterations a loop runs
    for any iterations of the loops around it (``_widest``; a window ``range(max(0, i - R),
    min(H, i + R + 1))`` counts 2 R + 1, not H; a triangle counts its square). Counting the
    points one by one is slower than the run."""
    import islpy as isl

    from loclab.deps.model import Model

    model = Model(program.nest, sizes)
    total = 0
    for statement in program.nest.statements if statements is None else statements:
        domain = isl.Set(model.domain_set(statement))
        if domain.is_empty():
            continue
        if not domain.is_bounded():
            return MAX_INSTANCES + 1
        volume = 1
        for dim in range(domain.dim(isl.dim_type.set)):
            volume *= _widest(domain, dim)
        total += volume
    return total


def check_work(program: Any, sizes: Mapping[str, int], most: int, how: str) -> int:
    """The statement instances of a run at ``sizes``; a UsageError where they are more than
    ``most`` (``how`` says how the run goes, for the message)."""
    work = instances(program, sizes)
    if work > most:
        raise UsageError(f"at {sizes_text(sizes)} the function runs about {work:.3g} statement "
                         f"instances {how}, more than the {most:.3g} loclab runs: choose "
                         "smaller sizes with --param")
    return work


def check_footprint(nbytes: int, sizes: Mapping[str, int], copies: int) -> None:
    """Refuse, before allocating them, arrays of ``nbytes`` that cannot fit in the memory
    that is free ``copies`` times over (the inputs and the copy each run gets)."""
    from loclab.hw.cpu import read_meminfo

    free = read_meminfo("MemAvailable")
    if free is not None and copies * nbytes > free:
        raise UsageError(f"at {sizes_text(sizes)} the function's arrays take "
                         f"{nbytes / 2**30:.3g} GiB ({copies} copies while it runs: "
                         f"{copies * nbytes / 2**30:.3g} GiB) and {free / 2**30:.3g} GiB of "
                         "memory is free: choose smaller sizes with --param")


# -- loclab's inputs --------------------------------------------------------------------------
def make_inputs(program: Any, sizes: dict[str, int], copies: int = 3) -> dict[str, Any]:
    """Random arguments that fit every access of the function at these sizes (at most
    ``copies`` of them alive at once, for the memory check)."""
    from loclab.deps.model import Model

    rng = np.random.default_rng(SEED)
    variables = {v.name: v for v in program.nest.variables if v.is_argument}
    largest = max(sizes.values(), default=8)
    reached = access_shapes(program, Model(program.nest, sizes), largest)
    shapes = _with_shapes({name: reached.get(variables[name].key, (largest,))
                           for name in argument_names(program)
                           if name not in sizes and name in variables
                           and variables[name].is_array}, sizes)
    check_footprint(ELEMENT_BYTES * sum(math.prod(shape) for shape in shapes.values()),
                    sizes, copies)
    bounds = index_bounds(program, {variables[name].key: shape
                                    for name, shape in shapes.items()})
    index_arrays = index_names(program)
    out: dict[str, Any] = {}
    for name in argument_names(program):
        if name in sizes:
            out[name] = sizes[name]
        elif name in shapes and name in index_arrays:
            top = max(1, bounds.get(name, largest))
            out[name] = rng.integers(0, top, size=shapes[name]).astype(np.int64)
        elif name in shapes and _only_written(program, variables[name]):
            out[name] = np.full(shapes[name], np.nan)
        elif name in shapes:
            out[name] = rng.uniform(0.5, 1.5, size=shapes[name])
        else:
            out[name] = float(rng.uniform(0.5, 1.5))
    return out


def argument_names(program: Any) -> list[str]:
    """The function's parameters, in order (how its inputs, a dict by name, are passed)."""
    return [a.arg for a in program.syntax.function.args.args]


def _with_shapes(shapes: dict[str, tuple[int, ...]], sizes: Mapping[str, int]
                 ) -> dict[str, tuple[int, ...]]:
    """Sizes written ``len(A)`` or ``A.shape[k]`` are the arrays' own: make them agree."""
    for parameter, value in sizes.items():
        name, axis = parameter, -1
        if parameter.startswith("len(") and parameter.endswith(")"):
            name, axis = parameter[4:-1], 0
        elif ".shape[" in parameter:
            name, rest = parameter.split(".shape[")
            axis = int(rest.rstrip("]"))
        if name in shapes and 0 <= axis < len(shapes[name]):
            shapes[name] = shapes[name][:axis] + (value,) + shapes[name][axis + 1:]
    return shapes


def index_names(program: Any) -> set[str]:
    """Arrays whose values are used as subscripts (directly or through a scalar)."""
    function = program.syntax.function
    inside: set[str] = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Subscript):
            inside |= {n.id for n in ast.walk(node.slice) if isinstance(n, ast.Name)}
    scalars_from = _scalar_sources(program)
    names = set(inside)
    for name in inside:
        names |= scalars_from.get(name, set())
    return names


def _scalar_sources(program: Any) -> dict[str, set[str]]:
    """Per scalar the function assigns (``k = idx[i]``), the arrays its value reads."""
    sources: dict[str, set[str]] = {}
    function = program.syntax.function
    if not isinstance(function, ast.AST):  # C: its scalars are not followed
        return sources
    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            sources[node.targets[0].id] = {
                n.value.id for n in ast.walk(node.value)
                if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name)}
    return sources


def _only_written(program: Any, variable: Any) -> bool:
    accesses = [a for s in program.nest.statements for a in s.accesses if a.variable is variable]
    return bool(accesses) and all(a.write for a in accesses)


# -- how far the accesses reach ---------------------------------------------------------------
def access_shapes(program: Any, model: Any, largest: int) -> dict[str, tuple[int, ...]]:
    """Per argument array, the largest subscript plus one in each dimension (``largest``
    where the subscript depends on data)."""
    shapes: dict[str, list[int]] = {}
    for statement, access, dim, reach in _reaches(program, model):
        rank = len(access.subscripts)
        current = shapes.setdefault(access.variable.key, [0] * rank)
        if len(current) != rank:
            continue
        if reach is None:
            current[dim] = max(current[dim], largest)
            continue
        low, high = reach
        if low < 0:
            raise UsageError(f"{access.text} at line {statement.line} reads index {low} at "
                             f"{sizes_text(model.sizes)}; loclab takes subscripts as written "
                             "(no wrap-around): choose sizes with --param")
        current[dim] = max(current[dim], high + 1)
    return {key: tuple(max(1, d) for d in dims) for key, dims in shapes.items()}


def unsized_subscripts(program: Any, sizes: Mapping[str, int]) -> list[str]:
    """The accesses loclab could not size at ``sizes`` (their subscripts depend on data and
    are no plain read of an index array), each with where it is."""
    from loclab.deps.model import Model

    found: list[str] = []
    for statement, access, dim, reach in _reaches(program, Model(program.nest, sizes)):
        text = f"{access.text} ({_where(program, statement)})"
        if reach is None and _index_array(program, access, dim) is None and text not in found:
            found.append(text)
    return found


def index_bounds(program: Any, shapes: Mapping[str, tuple[int, ...]]) -> dict[str, int]:
    """Per index array read directly in a subscript (``A[idx[i]]``, or ``A[k]`` after
    ``k = idx[i]``), the smallest extent it indexes: its values stay below it."""
    bounds: dict[str, int] = {}
    for statement in program.nest.statements:
        for access in statement.accesses:
            shape = shapes.get(access.variable.key)
            for dim in range(len(access.subscripts)):
                source = _index_array(program, access, dim)
                if source is not None and shape is not None and dim < len(shape):
                    bounds[source] = min(bounds.get(source, shape[dim]), shape[dim])
    return bounds


def _reaches(program: Any, model: Any) -> Iterator[tuple[Any, Any, int, tuple[int, int] | None]]:
    """(statement, access, dimension, (lowest, highest) index or None where it depends on
    data) for every dimension of every access to an argument array."""
    import islpy as isl

    for statement in program.nest.statements:
        for access in statement.accesses:
            variable = access.variable
            if not (variable.is_array and variable.is_argument):
                continue
            relation = isl.Map(model.access_relation(statement, access)).range()
            for dim in range(len(access.subscripts)):
                low = _extreme(relation, dim, minimum=True)
                high = _extreme(relation, dim, minimum=False)
                if low is None or high is None:
                    yield statement, access, dim, _evaluated_reach(program, model, statement,
                                                                   access, dim)
                else:
                    yield statement, access, dim, (low, high)


def _widest(domain: Any, dim: int) -> int:
    """The most values set dimension ``dim`` of ``domain`` (bounded, parameters fixed) takes
    for one point of the dimensions before it: the largest of its upper bound less its lower
    bound, both as functions of those dimensions; where isl cannot say, its whole range."""
    import islpy as isl

    inner = domain.project_out(isl.dim_type.set, dim + 1,
                               domain.dim(isl.dim_type.set) - dim - 1)
    outer = inner.move_dims(isl.dim_type.param, inner.dim(isl.dim_type.param),
                            isl.dim_type.set, 0, dim)
    try:
        widest = outer.dim_max(0).sub(outer.dim_min(0)).max_val()
        if widest.is_int():
            return int(widest.to_python()) + 1
    except isl.Error:  # (an unbounded or empty piece: the whole range below)
        pass
    low = _extreme(domain, dim, minimum=True)
    high = _extreme(domain, dim, minimum=False)
    return high - low + 1 if low is not None and high is not None else 1


def _extreme(relation: Any, dim: int, minimum: bool) -> int | None:
    import islpy as isl

    projected = relation.project_out(isl.dim_type.set, dim + 1,
                                     relation.dim(isl.dim_type.set) - dim - 1)
    projected = projected.project_out(isl.dim_type.set, 0, dim)
    if projected.is_empty() or not projected.is_bounded():
        return None
    value = projected.lexmin() if minimum else projected.lexmax()
    point = value.sample_point()
    return int(point.get_coordinate_val(isl.dim_type.set, 0).to_python())


def _where(program: Any, statement: Any) -> str:
    return f"{Path(statement.file or program.nest.filename).name}:{statement.line}"


def _subscript(program: Any, model: Any, access: Any, dim: int) -> ast.expr | None:
    """A subscript as a Python expression: the frontend's polynomial where it read one (any
    language; the sizes put in), else the text as written (Python only)."""
    from loclab.nest.expr import Poly

    poly = access.subscripts[dim]
    if poly is not None:
        fixed = poly.substitute({k: Poly.const(v) for k, v in model.sizes.items()})
        return ast.parse(fixed.render(), mode="eval").body
    if program.nest.language != "python":
        return None
    nodes = _subscript_nodes(access.text)
    return nodes[dim] if nodes is not None and len(nodes) == len(access.subscripts) else None


def _subscript_nodes(text: str) -> list[ast.expr] | None:
    """The subscripts of ``A[i, j]`` or ``A[i][j]``, outermost dimension first."""
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        return None
    nodes: list[ast.expr] = []
    while isinstance(node, ast.Subscript):
        inner = node.slice
        nodes[:0] = list(inner.elts) if isinstance(inner, ast.Tuple) else [inner]
        node = node.value
    return nodes or None


def _index_array(program: Any, access: Any, dim: int) -> str | None:
    """The index array a subscript reads directly (``idx[i]``, or ``k`` after ``k =
    idx[i]``), if that is all it is."""
    if access.subscripts[dim] is not None:
        return None
    nodes = _subscript_nodes(access.text)
    if nodes is None or len(nodes) != len(access.subscripts):
        return None
    node = nodes[dim]
    if isinstance(node, ast.Name):
        sources = _scalar_sources(program).get(node.id, set())
        return next(iter(sources)) if len(sources) == 1 else None
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
        return node.value.id
    return None


def _evaluated_reach(program: Any, model: Any, statement: Any, access: Any,
                     dim: int) -> tuple[int, int] | None:
    """The lowest and highest value of a subscript isl cannot bound, evaluated at every
    point of the box around the loops it uses (a superset of the iterations: safe); None
    where it depends on data or on a loop whose bounds do."""
    import islpy as isl

    expression = _subscript(program, model, access, dim)
    if expression is None:
        return None
    names = {n.id for n in ast.walk(expression) if isinstance(n, ast.Name)}
    domain = isl.Set(model.domain_set(statement))
    if domain.is_empty():
        return None
    loops = {loop.var: depth for depth, loop in enumerate(statement.loops)}
    ranges: dict[str, tuple[int, int]] = {}
    for name in sorted(names & set(loops)):
        low = _extreme(domain, loops[name], minimum=True)
        high = _extreme(domain, loops[name], minimum=False)
        if low is None or high is None:
            return None
        ranges[name] = (low, high)
    points = math.prod(high - low + 1 for low, high in ranges.values())
    if points > MOST_POINTS:
        raise UsageError(f"{_where(program, statement)}: loclab cannot bound {access.text} "
                         f"at {sizes_text(model.sizes)} (it would evaluate the subscript at "
                         f"{points:.3g} points): choose smaller sizes with --param")
    constants = {name: float(value) for name, value in model.sizes.items()
                 if name.isidentifier() and name not in ranges}
    return _range_over_box(expression, ranges, constants)


def _range_over_box(expression: ast.expr, ranges: Mapping[str, tuple[int, int]],
                    constants: Mapping[str, float]) -> tuple[int, int] | None:
    """The lowest and highest value of ``expression`` with each loop variable over its range
    (float64: exact below 2^53, far past any array that fits in memory), a chunk of the
    first variable at a time; None where it reads anything else or is not finite."""
    names = list(ranges)
    axes = [np.arange(low, high + 1, dtype=np.float64) for low, high in ranges.values()]
    rest = math.prod(len(axis) for axis in axes[1:])
    step = max(1, CHUNK_POINTS // max(rest, 1))
    low, high = math.inf, -math.inf
    for start in range(0, len(axes[0]) if axes else 1, step):
        values: dict[str, Any] = dict(constants)
        for k, (name, axis) in enumerate(zip(names, axes)):
            part = axis[start:start + step] if k == 0 else axis
            values[name] = part.reshape([-1 if j == k else 1 for j in range(len(axes))])
        with np.errstate(all="ignore"):
            result = _evaluate(expression, values)
        if result is None or not np.all(np.isfinite(result)):
            return None
        low, high = min(low, float(np.min(result))), max(high, float(np.max(result)))
    return math.floor(low), math.floor(high)


def _minimum(*args: Any) -> Any:
    return functools.reduce(np.minimum, args)


def _maximum(*args: Any) -> Any:
    return functools.reduce(np.maximum, args)


_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: np.add, ast.Sub: np.subtract, ast.Mult: np.multiply, ast.Div: np.true_divide,
    ast.FloorDiv: np.floor_divide, ast.Mod: np.mod, ast.Pow: np.power,
    ast.LShift: lambda a, b: a * np.power(2.0, b),
    ast.RShift: lambda a, b: np.floor_divide(a, np.power(2.0, b))}
_CALLS: dict[str, Callable[..., Any]] = {"abs": np.abs, "int": np.trunc, "min": _minimum,
                                         "max": _maximum}


def _evaluate(node: ast.expr, values: Mapping[str, Any]) -> Any:
    """An integer expression over NumPy arrays; None where it reads anything but the names
    in ``values`` (memory, a scalar the loop computes) or uses an operation not listed."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return float(node.value)
    if isinstance(node, ast.Name):
        return values.get(node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        operand = _evaluate(node.operand, values)
        return None if operand is None else (-operand if isinstance(node.op, ast.USub)
                                             else operand)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left, values), _evaluate(node.right, values)
        return None if left is None or right is None else _BINARY[type(node.op)](left, right)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
            and node.func.id in _CALLS and not node.keywords and node.args:
        args = [_evaluate(arg, values) for arg in node.args]
        return None if any(a is None for a in args) else _CALLS[node.func.id](*args)
    return None


# -- the user's inputs ------------------------------------------------------------------------
def load_inputs(spec: str) -> Supplier:
    """The function ``--inputs MODULE.py::FUNC`` names, its module run as a script."""
    from loclab.transform.verify import printing_to_stderr

    path, sep, name = spec.partition("::")
    if not sep or not name or not path.endswith(".py"):
        raise UsageError(f"--inputs {spec}: expected MODULE.py::FUNCTION")
    if not Path(path).is_file():
        raise UsageError(f"--inputs {spec}: no such file: {path}")
    try:
        with printing_to_stderr():
            namespace = runpy.run_path(path, run_name="loclab_inputs")
    except Exception as err:  # the user's module failing to run is their error
        raise UsageError(f"--inputs {spec}: cannot run {path}: {type(err).__name__}: "
                         f"{_first_line(err)}") from None
    function = namespace.get(name)
    if not callable(function):
        raise UsageError(f"--inputs {spec}: {path} defines no function {name}")
    return function


def supplier_name(supplier: Supplier) -> str:
    """``file.py::name`` of a supplier, for messages."""
    code = getattr(supplier, "__code__", None)
    name = getattr(supplier, "__name__", type(supplier).__name__)
    return f"{Path(code.co_filename).name}::{name}" if code is not None else name


def supplied_inputs(program: Any, supplier: Supplier, sizes: Mapping[str, int],
                    copies: int = 3) -> dict[str, Any]:
    """The arguments ``supplier`` returns at ``sizes`` (see ``INPUTS_CONTRACT``), checked:
    every parameter once, sizes that are parameters equal to the sizes, arrays as NumPy
    arrays (``copies`` of them fitting in memory). Sizes written ``len(A)`` or
    ``A.shape[k]`` are the arrays' own: not passed."""
    from loclab.transform.verify import printing_to_stderr

    label = f"--inputs {supplier_name(supplier)}"
    names = argument_names(program)
    try:
        with printing_to_stderr():
            returned = supplier(**{k: v for k, v in sizes.items()
                                   if k.isidentifier() and k not in program.nest.derived})
    except Exception as err:  # the user's function: their error, in one line
        raise UsageError(f"{label} failed at {sizes_text(sizes)}: {type(err).__name__}: "
                         f"{_first_line(err)}") from None
    if isinstance(returned, Mapping):
        arguments = {**{k: v for k, v in sizes.items() if k in names}, **returned}
    elif isinstance(returned, (tuple, list)) and len(returned) == len(names):
        arguments = dict(zip(names, returned))
    else:
        raise UsageError(f"{label} returned {type(returned).__name__}: {INPUTS_CONTRACT} "
                         f"({', '.join(names)})")
    _check_supplied(program, arguments, sizes, label)
    check_footprint(sum(a.nbytes for a in arguments.values() if isinstance(a, np.ndarray)),
                    sizes, copies)
    return {name: arguments[name] for name in names}


def _check_supplied(program: Any, arguments: Mapping[str, Any], sizes: Mapping[str, int],
                    label: str) -> None:
    names = argument_names(program)
    for name in arguments:
        if name not in names:
            raise UsageError(f"{label} returned {name}, which is no parameter of "
                             f"{program.nest.name} ({', '.join(names)})")
    for name in names:
        if name not in arguments:
            raise UsageError(f"{label} returned no {name}: {INPUTS_CONTRACT}")
        if name in sizes and arguments[name] != sizes[name]:
            raise UsageError(f"{label} returned {name}={arguments[name]!r} at "
                             f"{sizes_text(sizes)}")
    arrays = {v.name for v in program.nest.variables if v.is_argument and v.is_array}
    for name in names:
        if name in arrays and not isinstance(arguments[name], np.ndarray):
            raise UsageError(f"{label} returned {name} as {type(arguments[name]).__name__}: "
                             "arrays are NumPy arrays")


def _first_line(err: BaseException) -> str:
    return (str(err).splitlines() or [""])[0]
