"""Proof by execution: the original and the transformed function on the same random inputs.

Sizes come from the caller, else small defaults per size (distinct primes from 37 down, odd
and no multiple of any tile, shrunk until the nest runs fewer than about 200,000 statement
instances, so that the original runs in plain Python in well under a second). Every array
argument is made to fit every affine access at those sizes (its extent per dimension is the
largest subscript plus one, from isl); an array used in subscripts holds integers, others
floats in [0.5, 1.5); an array the function only writes is poisoned with NaN, so that an
element the transformed version forgets shows. Both functions get copies of the same inputs;
every array argument and the return value are compared afterwards: exactly, unless a parallel
reduction may combine its terms in another order, then within ``8 n eps`` of the largest
value (``n`` the longest reordered sum).
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from loclab.errors import LoclabError, UsageError

if TYPE_CHECKING:
    from loclab.transform import Transformed

MAX_INSTANCES = 200_000
DEFAULT_SIZES = (37, 41, 43, 31, 29, 23, 19, 17, 13, 11, 7, 5)
SEED = 20261125


class VerificationError(LoclabError):
    """The transformed function computed something else (a bug: exit 1)."""

    exit_code = 1


@dataclass(frozen=True)
class Compared:
    name: str
    shape: tuple[int, ...]
    exact: bool
    error: float  # the largest absolute difference
    tolerance: float
    ok: bool

    def __str__(self) -> str:
        shape = " x ".join(map(str, self.shape)) or "scalar"
        if not self.ok:
            return f"{self.name} ({shape}): DIFFERS by {self.error:.3g}"
        if self.exact:
            return f"{self.name} ({shape}): equal"
        return (f"{self.name} ({shape}): within {self.error:.2g} (tolerance "
                f"{self.tolerance:.2g}, reordered reduction)")


@dataclass(frozen=True)
class Verification:
    sizes: dict[str, int]
    compared: tuple[Compared, ...]

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.compared)

    def __str__(self) -> str:
        sizes = ", ".join(f"{k}={v}" for k, v in self.sizes.items()) or "no sizes"
        verdict = "verified" if self.ok else "FAILED"
        return f"{verdict} at {sizes}: " + "; ".join(str(c) for c in self.compared)

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "sizes": dict(self.sizes),
                "compared": [{"name": c.name, "shape": list(c.shape), "exact": c.exact,
                              "error": c.error, "tolerance": c.tolerance, "ok": c.ok}
                             for c in self.compared]}


def compile_original(result: "Transformed") -> Callable[..., Any]:
    return _define(result.origin.source, result.origin, result.origin.function)


def compile_transformed(result: "Transformed") -> Callable[..., Any]:
    if result.language != "python":
        raise UsageError("compile() runs Python and Numba output; C is compiled by verify()")
    return _define(result.source, result.origin, result.name.split(".")[-1])


def _define(source: str, origin: Any, name: str) -> Callable[..., Any]:
    """Run a module's text (the original's globals first, when known) and take a function
    (a method ``Class.method`` from its class)."""
    namespace: dict[str, Any] = dict(origin.module or {})
    namespace["__name__"] = "loclab_transform"
    try:
        exec(compile(source, origin.filename, "exec"), namespace)  # noqa: S102
    except Exception as err:  # the user's module failing to import is their error
        raise UsageError(f"{origin.filename}: cannot run it to verify: "
                         f"{type(err).__name__}: {err}") from None
    target: Any = namespace
    for part in name.split("."):
        target = target[part] if isinstance(target, dict) else getattr(target, part)
    return target


def verify(result: "Transformed", sizes: dict[str, int]) -> Verification:
    if result.language == "c":
        from loclab.transform.verify_c import verify_c

        return verify_c(result, sizes)
    program = result.program
    chosen = choose_sizes(program, sizes)
    return compare_runs(compile_original(result), compile_transformed(result), program,
                        make_inputs(program, chosen), chosen)


def compare_runs(original: Callable[..., Any], transformed: Callable[..., Any], program: Any,
                 inputs: dict[str, Any], sizes: dict[str, int],
                 length: int | None = None) -> Verification:
    """Run both functions on their own copies of ``inputs`` and compare every array argument
    and the return value (a reordered reduction within its tolerance; ``length``: the
    longest chain of float operations the transformed code may round differently, where
    that is not only the program's reordered reductions)."""
    chosen = dict(sizes)
    expected_args = _copies(inputs)
    actual_args = _copies(inputs)
    expected = _call(original, program, expected_args, "the original")
    actual = _call(transformed, program, actual_args, "the transformed function")
    length = reordered_length(program, chosen) if length is None else length
    compared = [compare_outputs(name, expected_args[name], actual_args[name], length)
                for name in expected_args if isinstance(expected_args[name], np.ndarray)]
    if expected is not None or actual is not None:
        compared.append(compare_outputs("return value", np.asarray(expected, dtype=float),
                                 np.asarray(actual, dtype=float), length))
    return Verification(chosen, tuple(compared))


def argument_names(program: Any) -> list[str]:
    """The function's parameters, in order (how its inputs, a dict by name, are passed)."""
    return [a.arg for a in program.syntax.function.args.args]


def _call(function: Callable[..., Any], program: Any, args: dict[str, Any],
          who: str) -> Any:
    try:
        with printing_to_stderr():
            return function(*[args[n] for n in argument_names(program)])
    except Exception as err:
        raise VerificationError(f"{who} failed at these sizes: {type(err).__name__}: "
                                f"{err}") from None


@contextlib.contextmanager
def printing_to_stderr() -> Iterator[None]:
    """What the user's code prints while it is verified goes to stderr: stdout carries the
    transformed code or the JSON."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _copies(inputs: dict[str, Any]) -> dict[str, Any]:
    return {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in inputs.items()}


def compare_outputs(name: str, expected: np.ndarray, actual: np.ndarray, length: int) -> Compared:
    if expected.shape != actual.shape:
        return Compared(name, tuple(expected.shape), True, math.inf, 0.0, False)
    same_nan = np.array_equal(np.isnan(expected), np.isnan(actual)) \
        if expected.dtype.kind == "f" else True
    if not same_nan:
        return Compared(name, tuple(expected.shape), True, math.inf, 0.0, False)
    finite = np.nan_to_num(expected.astype(float)), np.nan_to_num(actual.astype(float))
    error = float(np.max(np.abs(finite[0] - finite[1]), initial=0.0))
    if length == 0 or expected.dtype.kind != "f":
        return Compared(name, tuple(expected.shape), True, error, 0.0, error == 0.0)
    scale = float(np.max(np.abs(finite[0]), initial=0.0))
    tolerance = 8 * length * np.finfo(expected.dtype).eps * max(scale, 1.0)
    return Compared(name, tuple(expected.shape), error == 0.0, error, tolerance,
                    error <= tolerance)


def reordered_length(program: Any, sizes: dict[str, int]) -> int:
    """The longest sum a parallel or vectorized reduction may reorder (0: nothing
    reordered)."""
    longest = 0
    for node in program.loops():
        if (node.parallel or node.vectorized) and node.reductions:
            longest = max(longest, max(sizes.values(), default=1) ** max(1, _depth(node)))
    return longest


def _depth(node: Any) -> int:
    return 1 + max((_depth(c) for c in node.body if hasattr(c, "body")), default=0)


# -- sizes and inputs -------------------------------------------------------------------------
def choose_sizes(program: Any, given: dict[str, int],
                 fits: Callable[[dict[str, int]], bool] = lambda sizes: True) -> dict[str, int]:
    """Sizes for every parameter: the given ones, else defaults small enough to run fast
    (and, with ``fits``, that the function's declarations allow)."""
    parameters = list(program.nest.parameters)
    unknown = sorted(set(given) - set(parameters))
    if unknown:
        raise UsageError(f"--param {unknown[0]}: {program.nest.name} has no size "
                         f"{unknown[0]} (sizes: {', '.join(parameters) or 'none'})")
    for name, value in given.items():
        if value < 0:
            raise UsageError(f"--param {name}={value}: sizes are never negative")
    free = [p for p in parameters if p not in given]
    for start in range(len(DEFAULT_SIZES)):
        candidate = dict(given)
        for k, name in enumerate(free):
            candidate[name] = DEFAULT_SIZES[min(start + k, len(DEFAULT_SIZES) - 1)]
        if not free or (instances(program, candidate) <= MAX_INSTANCES and fits(candidate)):
            return {p: candidate[p] for p in parameters}
    return {p: candidate[p] for p in parameters}


def instances(program: Any, sizes: dict[str, int]) -> int:
    """How many statement instances a run has at most: per statement, the volume of the box
    around its iteration domain (counting the points one by one is slower than the run)."""
    import islpy as isl

    from loclab.deps.model import Model

    model = Model(program.nest, sizes)
    total = 0
    for statement in program.nest.statements:
        domain = isl.Set(model.domain_set(statement))
        if domain.is_empty():
            continue
        if not domain.is_bounded():
            return MAX_INSTANCES + 1
        volume = 1
        for dim in range(domain.dim(isl.dim_type.set)):
            low = _extreme(domain, dim, minimum=True)
            high = _extreme(domain, dim, minimum=False)
            volume *= (high - low + 1) if low is not None and high is not None else 1
        total += volume
    return total


def make_inputs(program: Any, sizes: dict[str, int]) -> dict[str, Any]:
    """Random arguments that fit every access of the function at these sizes."""
    from loclab.deps.model import Model

    model = Model(program.nest, sizes)
    rng = np.random.default_rng(SEED)
    names = [a.arg for a in program.syntax.function.args.args]
    variables = {v.name: v for v in program.nest.variables if v.is_argument}
    index_arrays = _index_names(program)
    largest = max(sizes.values(), default=8)
    shapes = access_shapes(program, model, largest)
    out: dict[str, Any] = {}
    for name in names:
        if name in sizes:
            out[name] = sizes[name]
        elif name in variables and variables[name].is_array:
            shape = shapes.get(variables[name].key, (largest,))
            if name in index_arrays:
                out[name] = rng.integers(0, max(1, largest), size=shape).astype(np.int64)
            elif _only_written(program, variables[name]):
                out[name] = np.full(shape, np.nan)
            else:
                out[name] = rng.uniform(0.5, 1.5, size=shape)
        else:
            out[name] = float(rng.uniform(0.5, 1.5))
    return _with_shapes(program, out, sizes)


def _with_shapes(program: Any, inputs: dict[str, Any], sizes: dict[str, int]) -> dict[str, Any]:
    """Sizes written ``len(A)`` or ``A.shape[k]`` are the arrays' own: make them agree."""
    for parameter, value in sizes.items():
        if parameter.startswith("len(") and parameter[4:-1] in inputs:
            array = inputs[parameter[4:-1]]
            inputs[parameter[4:-1]] = _resized(array, 0, value)
        elif ".shape[" in parameter:
            name, rest = parameter.split(".shape[")
            if name in inputs:
                inputs[name] = _resized(inputs[name], int(rest.rstrip("]")), value)
    return inputs


def _resized(array: np.ndarray, axis: int, length: int) -> np.ndarray:
    if axis >= array.ndim:
        return array
    shape = list(array.shape)
    if shape[axis] >= length:
        return np.take(array, range(length), axis=axis).copy()
    shape[axis] = length
    grown = np.resize(array, shape)
    return grown


def access_shapes(program: Any, model: Any, largest: int) -> dict[str, tuple[int, ...]]:
    """Per argument array, the largest subscript plus one in each dimension."""
    import islpy as isl

    shapes: dict[str, list[int]] = {}
    for statement in program.nest.statements:
        for access in statement.accesses:
            variable = access.variable
            if not (variable.is_array and variable.is_argument):
                continue
            rank = len(access.subscripts)
            current = shapes.setdefault(variable.key, [0] * rank)
            if len(current) != rank:
                continue
            relation = isl.Map(model.access_relation(statement, access)).range()
            for dim in range(rank):
                if not relation.is_bounded() and access.subscripts[dim] is None:
                    current[dim] = max(current[dim], largest)
                    continue
                low = _extreme(relation, dim, minimum=True)
                high = _extreme(relation, dim, minimum=False)
                if low is None or high is None:
                    current[dim] = max(current[dim], largest)
                    continue
                if low < 0:
                    raise UsageError(f"{access.text} at line {statement.line} reads index "
                                     f"{low} at these sizes; loclab takes subscripts as "
                                     "written (no wrap-around): choose sizes with --param")
                current[dim] = max(current[dim], high + 1)
    return {key: tuple(max(1, d) for d in dims) for key, dims in shapes.items()}


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


def _index_names(program: Any) -> set[str]:
    """Arrays whose values are used as subscripts (directly or through a scalar)."""
    import ast

    function = program.syntax.function
    inside: set[str] = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Subscript):
            inside |= {n.id for n in ast.walk(node.slice) if isinstance(n, ast.Name)}
    scalars_from: dict[str, set[str]] = {}
    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            scalars_from[node.targets[0].id] = {
                n.value.id for n in ast.walk(node.value)
                if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name)}
    names = set(inside)
    for name in inside:
        names |= scalars_from.get(name, set())
    return names


def _only_written(program: Any, variable: Any) -> bool:
    accesses = [a for s in program.nest.statements for a in s.accesses if a.variable is variable]
    return bool(accesses) and all(a.write for a in accesses)
