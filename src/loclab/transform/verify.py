"""Proof by execution: the original and the transformed function on the same inputs.

The inputs are loclab's (random, sized to fit every access) or the user's
(``loclab.transform.inputs``). Both functions get copies of the same inputs; every array
argument and the return value are compared afterwards: exactly, unless a parallel reduction
may combine its terms in another order, then within ``8 n eps`` of the largest value (``n``
the longest reordered sum). Numba code runs with bounds checks here, so that an index past
an array's end is an IndexError, never a write into memory that is not the array's.

A failure is blamed where it belongs: the original failing on loclab's inputs is loclab's
sizing or inputs the function cannot take (exit 2, pointing at ``--param`` and
``--inputs``); on the user's inputs it is the user's (exit 2); the transformed function
failing, or computing something else, where the original does not is a bug in loclab
(VerificationError, exit 1).
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from loclab.errors import LoclabError, UsageError
from loclab.nest.expr import Poly
from loclab.transform.inputs import (Supplier, argument_names, check_work, choose_sizes,
                                     instances, make_inputs, sizes_text, supplied_inputs,
                                     supplier_name, unsized_subscripts)

if TYPE_CHECKING:
    from loclab.transform import Transformed

# Plain Python runs about a million statement instances a second: the original is run as
# Python to verify, so sizes past this many instances would take hours.
MAX_PYTHON_INSTANCES = 10_000_000
PYTHON_INSTANCES_PER_SECOND = 1_000_000
# The C compiler's code runs a billion or so a second.
MAX_COMPILED_INSTANCES = 2**34
# Where a candidate differs past the tolerance of its reordered sums, the original runs again
# on inputs moved by one unit in the last place (random signs), this many times: an output
# element may then differ by this factor times the most any element of its group moved, the
# groups apart: those that lost a third of their digits to the moves (their array's scale
# times SENSITIVE_MOVE), and the others
SENSITIVITY_RUNS = 2
SENSITIVITY_FACTOR = 8
SENSITIVE_MOVE = float(np.finfo(np.float64).eps) ** (2 / 3)


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
    moved: float | None = None  # within what the original's outputs move (see sensitivity)

    def __str__(self) -> str:
        shape = " x ".join(map(str, self.shape)) or "scalar"
        if not self.ok:
            return f"{self.name} ({shape}): DIFFERS by {self.error:.3g}"
        if self.exact:
            return f"{self.name} ({shape}): equal"
        if self.moved is not None:
            return (f"{self.name} ({shape}): within {self.error:.2g}, where the original's "
                    f"own output moves by up to {self.moved:.2g} when its inputs move by one "
                    "unit in the last place (it amplifies rounding)")
        return (f"{self.name} ({shape}): within {self.error:.2g} (tolerance "
                f"{self.tolerance:.2g}, reordered reduction)")


@dataclass(frozen=True)
class Verification:
    sizes: dict[str, int]
    compared: tuple[Compared, ...]
    original: str = "run as Python"  # how the original ran

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.compared)

    def __str__(self) -> str:
        verdict = "verified" if self.ok else "FAILED"
        compared = "; ".join(str(c) for c in self.compared)
        return f"{verdict} at {sizes_text(self.sizes)}: {compared}"

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "sizes": dict(self.sizes), "original": self.original,
                "compared": [{"name": c.name, "shape": list(c.shape), "exact": c.exact,
                              "error": c.error if math.isfinite(c.error) else None,
                              "tolerance": c.tolerance, "ok": c.ok}
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
    return define_in({"__name__": "loclab_transform"}, source, origin, name, origin.filename)


def define_in(namespace: dict[str, Any], source: str, origin: Any, name: str,
              filename: str) -> Callable[..., Any]:
    """``_define`` into ``namespace`` (a module's, whose name it keeps), the text compiled
    as ``filename``'s: where a function compiled ahead is loaded from Numba's cache
    (``loclab.optimize.ahead``)."""
    namespace.update({k: v for k, v in (origin.module or {}).items() if k != "__name__"})
    try:
        exec(compile(source, filename, "exec"), namespace)  # noqa: S102
    except Exception as err:  # the user's module failing to import is their error
        raise UsageError(f"{origin.filename}: cannot run it to verify: "
                         f"{type(err).__name__}: {err}") from None
    target: Any = namespace
    for part in name.split("."):
        target = target[part] if isinstance(target, dict) else getattr(target, part)
    return target


class OriginalFailed(UsageError):
    """The original function raised on the inputs it was run on: loclab's (its sizing, or
    inputs the function cannot take) or the user's: not a bug in loclab (exit 2)."""


def verify(result: "Transformed", sizes: Mapping[str, int], *,
           inputs: Supplier | None = None, progress: Callable[[str], None] | None = None,
           most_instances: int | None = MAX_PYTHON_INSTANCES,
           compiled: Callable[..., Any] | None = None,
           checked: Callable[..., Any] | None = None,
           compiled_original: Callable[..., Any] | None = None) -> Verification:
    """Run the original and the transformed function on the same inputs (loclab's, or what
    ``inputs`` returns at these sizes) and compare every output: the transformed function
    with bounds checks (``bounds_checked``: its loops in order), then, where it runs loops
    in parallel, as it runs. Sizes past ``most_instances`` statement instances are refused
    (None: any); ``progress`` hears what runs where it takes more than about a second;
    ``compiled`` and ``checked``: the transformed function compiled already, as it runs and
    bounds-checked, where it was; ``compiled_original``: the original compiled (by Numba,
    with bounds checks), to run instead of as Python where the caller finds that too long
    (the result says which ran)."""
    if result.language == "c":
        from loclab.transform.verify_c import verify_c

        if inputs is not None:
            raise UsageError("--inputs: C functions are verified on loclab's inputs only")
        return verify_c(result, dict(sizes))
    if result.emit == "cuda":
        from loclab.transform.verify_cuda import verify_cuda

        return verify_cuda(result, sizes, inputs, most_instances)
    program = result.program
    chosen = choose_sizes(program, dict(sizes))
    how = "as Python (the original runs as written)"
    work = check_work(program, chosen, most_instances, how) if most_instances \
        else instances(program, chosen)
    if progress is not None and work > PYTHON_INSTANCES_PER_SECOND // 2:
        progress(f"verifying at {sizes_text(chosen)}: about {work:,} statement instances "
                 f"{how}, about {max(1, round(2 * work / PYTHON_INSTANCES_PER_SECOND))} s")
    arguments = (make_inputs(program, chosen) if inputs is None
                 else supplied_inputs(program, inputs, chosen))
    if compiled is None:
        compiled, made = _verified_functions(result)
        checked = checked or made
    checked = checked or bounds_checked(compiled)
    runs = [checked, *([compiled] if runs_in_parallel(compiled) else [])]
    reference = reference_run(compiled_original or compile_original(result), program,
                              arguments, chosen, inputs)
    verification = _compare_each(reference, runs, program, arguments, chosen, inputs)
    if compiled_original is not None:
        return replace(verification, original=(
            f"compiled with Numba, with bounds checks (as Python it would run {work:,} "
            "statement instances)"))
    if verification.ok or result.emit != "numba":
        return verification
    return _against_numba(result, verification, reference, runs, arguments, chosen, inputs)


def _compare_each(reference: Reference, runs: list[Callable[..., Any]], program: Any,
                  arguments: dict[str, Any], sizes: dict[str, int],
                  supplier: Supplier | None) -> Verification:
    """``compare_runs`` of each function in ``runs``, up to the first that fails."""
    for transformed in runs:
        verification = compare_runs(reference, transformed, program, arguments, sizes,
                                    supplier=supplier)
        if not verification.ok:
            break
    return verification


def _against_numba(result: "Transformed", failed: Verification, as_python: Reference,
                   runs: list[Callable[..., Any]], arguments: dict[str, Any],
                   sizes: dict[str, int], supplier: Supplier | None) -> Verification:
    """Numba output that differs from the original run as Python, compared again with the
    original compiled by Numba where that differs from Python too: Numba computes float32
    scalars and ``x ** n`` its own way (a ``float32 * 0.5`` in float64, a power by
    multiplications), and the transformed code runs under Numba, so the original's own
    difference is no bug of the transformation. ``failed`` stands where the original under
    Numba computes what Python does, or does not compile."""
    import numba

    try:
        original = bounds_checked(numba.njit(compile_original(result)))
        own = compare_runs(as_python, original, result.program, arguments, sizes, length=0,
                           supplier=supplier)
    except Exception:  # Numba refusing the original: Python's is the only reference
        return failed
    if own.ok:
        return failed
    as_numba = reference_run(original, result.program, arguments, sizes, supplier)
    verification = _compare_each(as_numba, runs, result.program, arguments, sizes, supplier)
    differences = "; ".join(str(c) for c in own.compared if not c.ok)
    return replace(verification, original=(
        f"compiled with Numba, with bounds checks: run as Python the original itself "
        f"computes otherwise ({differences}; float32 scalars, integer powers)"))


# the functions verified lately, by text and original (kept alive while here): a result
# verified at several sizes is compiled once
_VERIFIED: OrderedDict[tuple[str, int], tuple[Any, Callable[..., Any], Callable[..., Any]]] \
    = OrderedDict()
VERIFIED_KEPT = 8


def _verified_functions(result: "Transformed") -> tuple[Callable[..., Any], Callable[..., Any]]:
    """``result``'s function and its ``bounds_checked`` copy, made once for its text and
    original."""
    key = (result.source, id(result.origin))
    if key not in _VERIFIED:
        function = compile_transformed(result)
        _VERIFIED[key] = (result.origin, function, bounds_checked(function))
        while len(_VERIFIED) > VERIFIED_KEPT:
            _VERIFIED.popitem(last=False)
    _VERIFIED.move_to_end(key)
    _, function, checked = _VERIFIED[key]
    return function, checked


def bounds_checked(function: Callable[..., Any]) -> Callable[..., Any]:
    """A Numba function compiled again with bounds checks: an index past an array's end
    raises IndexError instead of reading or writing memory that is not the array's (plain
    Python checks its own; anything else is returned as it is). Its parallel loops run in
    order: Numba checks no index inside a loop it runs in parallel (numba#9380)."""
    options = getattr(function, "targetoptions", None)
    if options is None or not hasattr(function, "py_func"):
        return function
    import numba

    kept = {k: v for k, v in options.items()
            if k not in {"nopython", "boundscheck", "parallel"}}
    return numba.njit(boundscheck=True, **kept)(function.py_func)


def runs_in_parallel(function: Callable[..., Any]) -> bool:
    """Whether a Numba function runs its ``prange`` loops in parallel."""
    return bool(getattr(function, "targetoptions", {}).get("parallel"))


@dataclass(frozen=True)
class Reference:
    """The original's outputs on its own copies of some inputs: run once, then what every
    candidate run on the same inputs is compared with (a tuner's trials, a verification
    after them): the original at the sizes timed takes seconds where a candidate takes
    milliseconds on a GPU."""

    arguments: dict[str, Any]  # every argument after the original's call
    returned: Any
    inputs: Mapping[str, Any] | None = None  # what it ran on (before the call)
    original: Callable[..., Any] | None = None  # what ran: to run it again (sensitivity)
    moved: dict[str, np.ndarray] = field(default_factory=dict)  # filled by sensitivity


def reference_run(original: Callable[..., Any], program: Any, inputs: Mapping[str, Any],
                  sizes: Mapping[str, int], supplier: Supplier | None = None) -> Reference:
    """The original run on copies of ``inputs``; where it fails, the inputs do not suit it
    (``original_failed``, blamed on ``supplier`` where given)."""
    arguments = _copies(dict(inputs))
    try:
        returned = run(original, program, arguments)
    except Exception as err:
        raise original_failed(err, program, dict(sizes), supplier) from None
    return Reference(arguments, returned, inputs, original)


def sensitivity(reference: Reference, program: Any) -> dict[str, np.ndarray]:
    """How far each float output of the original moves, element by element, when its float
    inputs move by one unit in the last place (the most over ``SENSITIVITY_RUNS`` random
    moves): a computation that amplifies rounding (Gram-Schmidt's columns past the matrix's
    rank, a recurrence that grows) cannot be checked closer than that, whatever runs it.
    Computed once, on first need; empty where the original cannot run again."""
    if reference.moved or reference.original is None or reference.inputs is None:
        return reference.moved
    rng = np.random.default_rng(0)
    outputs = {**{name: value for name, value in reference.arguments.items()
                  if isinstance(value, np.ndarray) and value.dtype.kind == "f"},
               "return value": reference.returned}
    for _ in range(SENSITIVITY_RUNS):
        nudged = {name: _nudged(value, rng) for name, value in reference.inputs.items()}
        try:
            returned = run(reference.original, program, nudged)
        except Exception:  # (it fails on inputs a unit away: no measure of its own)
            return reference.moved
        for name, expected in outputs.items():
            again = returned if name == "return value" else nudged[name]
            if expected is None or again is None or np.shape(expected) != np.shape(again):
                continue
            moved = np.abs(np.nan_to_num(np.asarray(expected, dtype=float))
                           - np.nan_to_num(np.asarray(again, dtype=float)))
            reference.moved[name] = np.maximum(reference.moved.get(name, moved), moved)
    return reference.moved


def _nudged(value: Any, rng: np.random.Generator) -> Any:
    """A copy of an input with its floats one unit in the last place up or down."""
    if isinstance(value, np.ndarray):
        if value.dtype.kind != "f":
            return value.copy()
        signs = rng.choice(np.array([-1.0, 1.0], dtype=value.dtype), value.shape)
        return value * (1 + np.finfo(value.dtype).eps * signs)
    if isinstance(value, float):
        return value * (1 + float(np.finfo(np.float64).eps))
    return value


def _within_moves(compared: Compared, expected: Any, actual: Any, moved: np.ndarray
                  ) -> Compared:
    """``compared`` accepted where every element differs by no more than the tolerance or
    ``SENSITIVITY_FACTOR`` times the most the original's own output moved in the element's
    group, whichever is larger: the sensitive elements (those the original's own moves cost a
    third of their digits, a condition past 1e5: Gram-Schmidt's columns past the rank lose
    all of them) and the others (durbin's first twenty coefficients at N = 30 on random
    inputs, which lose up to five). (Each element against its own move would be a lottery: two random moves
    of a noise column leave some of its elements nearly where they were; a bar at the
    tolerance, which long sums raise but nothing amplifies, is one too. Apart, the first
    group's noise does not loosen the second's bar.)"""
    expected, actual = np.asarray(expected, dtype=float), np.asarray(actual, dtype=float)
    if expected.shape != actual.shape or expected.shape != moved.shape or not np.array_equal(
            np.isnan(expected), np.isnan(actual)):
        return compared
    scale = max(float(np.max(np.abs(np.nan_to_num(expected)), initial=0.0)), 1.0)
    sensitive = moved > SENSITIVE_MOVE * scale
    allowed = np.full(expected.shape, compared.tolerance)
    for group in (sensitive, ~sensitive):
        if group.any():
            allowed[group] = max(compared.tolerance,
                                 SENSITIVITY_FACTOR * float(moved[group].max()))
    difference = np.abs(np.nan_to_num(expected) - np.nan_to_num(actual))
    if not np.all(difference <= allowed):
        return compared
    return replace(compared, ok=True, moved=float(np.max(moved, initial=0.0)))


def compare_runs(original: Callable[..., Any] | Reference, transformed: Callable[..., Any],
                 program: Any, inputs: dict[str, Any], sizes: dict[str, int],
                 length: int | None = None, supplier: Supplier | None = None
                 ) -> Verification:
    """Run both functions on their own copies of ``inputs`` (the original: or its
    ``Reference`` on these inputs, run before) and compare every array argument and the
    return value (a reordered reduction within its tolerance; ``length``: the longest chain
    of float operations the transformed code may round differently, where that is not only
    the program's reordered reductions). ``supplier``: where the inputs came from (None:
    loclab), for the message where the original fails on them."""
    chosen = dict(sizes)
    reference = original if isinstance(original, Reference) else reference_run(
        original, program, inputs, chosen, supplier)
    actual_args = _copies(inputs)
    try:
        actual = run(transformed, program, actual_args)
    except Exception as err:
        raise VerificationError(f"the transformed function fails where the original does "
                                f"not (a bug in loclab: please report it): "
                                f"{describe(err)}") from None
    length = reordered_length(program, chosen) if length is None else length
    expected_args, expected = reference.arguments, reference.returned
    compared = [compare_outputs(name, expected_args[name], actual_args[name], length)
                for name in expected_args if isinstance(expected_args[name], np.ndarray)]
    if expected is not None or actual is not None:
        compared.append(compare_outputs("return value", np.asarray(expected, dtype=float),
                                 np.asarray(actual, dtype=float), length))
    if length and not all(c.ok for c in compared):  # rounding reordered, and amplified?
        moved = sensitivity(reference, program)
        outputs = {**expected_args, "return value": expected}, {**actual_args,
                                                                "return value": actual}
        compared = [c if c.ok or c.name not in moved else
                    _within_moves(c, outputs[0][c.name], outputs[1][c.name], moved[c.name])
                    for c in compared]
    return Verification(chosen, tuple(compared))


def run(function: Callable[..., Any], program: Any, args: Mapping[str, Any]) -> Any:
    """Call ``function`` with ``args`` (by parameter name), what it prints on stderr; what it
    raises, raised (Numba's parallel code wraps it in a SystemError: unwrapped)."""
    try:
        with printing_to_stderr():
            return function(*[args[n] for n in argument_names(program)])
    except SystemError as err:
        raise unwrapped(err) from None


def unwrapped(err: BaseException) -> BaseException:
    """What Numba's parallel code raised, where it wraps it in a SystemError ("returned a
    result with an exception set")."""
    if isinstance(err, SystemError) and isinstance(err.__cause__, Exception):
        return err.__cause__
    return err


def describe(err: BaseException) -> str:
    """An exception in one line, its type named."""
    err = unwrapped(err)
    return f"{type(err).__name__}: {(str(err).splitlines() or [''])[0]}"


def original_failed(err: BaseException, program: Any, sizes: Mapping[str, int],
                    supplier: Supplier | None) -> OriginalFailed:
    """The error for the original failing on its inputs, blamed where it belongs."""
    err = unwrapped(err)
    at = sizes_text(sizes)
    if supplier is not None:
        return OriginalFailed(f"the original fails on the inputs from --inputs "
                              f"{supplier_name(supplier)} at {at}: {describe(err)}")
    failed = f"the original fails on loclab's random inputs at {at}: {describe(err)}"
    if isinstance(err, IndexError):
        unsized = unsized_subscripts(program, sizes)
        blame = (f"loclab could not size {', '.join(unsized)}, which depend on data"
                 if unsized else "loclab sized the arrays wrong (a bug in loclab)")
        return OriginalFailed(f"{failed}: {blame}: give sizes with --param or the inputs "
                              "with --inputs MODULE.py::FUNC")
    return OriginalFailed(f"{failed}: it may need valid inputs: give them with --inputs "
                          "MODULE.py::FUNC")


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


def _copies(inputs: Mapping[str, Any]) -> dict[str, Any]:
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
    tolerance = float(8 * length * np.finfo(expected.dtype).eps * max(scale, 1.0))
    return Compared(name, tuple(expected.shape), error == 0.0, error, tolerance,
                    error <= tolerance)


def reordered_length(program: Any, sizes: dict[str, int]) -> int:
    """The longest sum a parallel or vectorized reduction may reorder (0: nothing
    reordered); under ``fastmath()``, the longest chain of updates of one element
    (``update_chain``)."""
    longest = 0
    if program.fast_math:
        return update_chain(program.nest, sizes)
    for node in program.loops():
        if (node.parallel or node.vectorized) and node.reductions:
            longest = max(longest, max(sizes.values(), default=1) ** max(1, _depth(node)))
    return longest


def update_chain(nest: Any, sizes: dict[str, int]) -> int:
    """The most float operations that may end in one element of a variable in the original
    nest, which ``fastmath()`` lets the compiler fuse and reorder: for each statement that
    writes it, its accesses times the largest size to the power of the loops around it that
    its subscripts do not name (every loop, for a scalar or a subscript loclab cannot read),
    summed over those statements. For ``C[i, j] += A[i, k] * B[k, j]``: 3 K; the bound of
    the tiled code's loops would be N^6, a tolerance past the values themselves.)"""
    top = max(sizes.values(), default=1)
    chains: dict[str, int] = {}
    for statement in nest.statements:
        for write in statement.writes:
            named = _named_symbols(write)
            free = sum(1 for loop in statement.loops if named is None or loop.var not in named)
            key = write.variable.key
            chains[key] = chains.get(key, 0) + len(statement.accesses) * top ** free
    return max(chains.values(), default=1)


def dataflow_chain(nest: Any, sizes: Mapping[str, int]) -> int | None:
    """The longest of ``variable_chains`` (None where it is None)."""
    chains = variable_chains(nest, sizes)
    return None if chains is None else max(chains.values(), default=1)


def variable_chains(nest: Any, sizes: Mapping[str, int]) -> dict[str, int] | None:
    """The most float operations that may end in one element of each variable (by key),
    following the values through the variables they are computed from: a variable's own
    chain (summed over the statements that write it: a statement that does not read it,
    its accesses; one that updates the element it writes, its accesses times the trip
    counts of the loops around it that the subscripts do not name; one that reads other
    elements of it, times every loop's) plus the longest chain among the other variables
    those statements read. A scalar assigned from scratch at the top of a loop's body
    (``acc = 0.0``, reading no ``acc``, under no condition) starts again in every
    iteration of the loops around that assignment: those loops are not in the chain of the
    updates after it (the coalescing lesson's ``acc`` chains one row's columns, not the
    whole matrix). None where values flow around a cycle of variables (a time loop's
    arrays), which this does not bound.

    Why: the GPU's rounding tolerance was the largest size to the power of the nest's depth,
    at full sizes 10^12 operations for a row walk of a million rows: for float32 a tolerance
    past the values themselves, which no wrong kernel could fail."""
    own: dict[str, int] = {}
    reads: dict[str, set[str]] = {}
    top = max(sizes.values(), default=1)
    for statement in nest.statements:
        restarted = _restarted_loops(nest, statement)
        for write in statement.writes:
            key = write.variable.key
            own[key] = own.get(key, 0) + len(statement.accesses) * _own_chain(
                statement, write, restarted.get(key, ()), sizes, top)
            reads.setdefault(key, set()).update(
                r.variable.key for r in statement.reads if r.variable.key != key)
    chains: dict[str, int] = {}

    def chain(key: str, path: frozenset[str]) -> int | None:
        if key in path:
            return None
        if key not in chains:
            longest = 0
            for other in reads.get(key, ()):
                if other in own:
                    found = chain(other, path | {key})
                    if found is None:
                        return None
                    longest = max(longest, found)
            chains[key] = own[key] + longest
        return chains[key]

    found = {key: chain(key, frozenset()) for key in own}
    return None if None in found.values() else found  # type: ignore[return-value]


def _own_chain(statement: Any, write: Any, restarted: tuple[Any, ...],
               sizes: Mapping[str, int], top: int) -> int:
    """How many instances of ``statement`` may chain into one element ``write`` stores: 1
    where it does not read that variable; the instances the loops not named by the
    subscripts (nor ``restarted``, for a scalar) run, where it reads back that element; all
    of them where it reads another element."""
    own = [r for r in statement.reads if r.variable.key == write.variable.key]
    if not own:
        return 1
    named = _named_symbols(write)
    other = named is None or any(r.subscripts != write.subscripts for r in own)
    count = 1
    for loop in statement.loops:
        if other or (loop.var not in (named or set()) and loop not in restarted):
            count *= _trip_bound(loop, sizes, top)
    return count


def _named_symbols(write: Any) -> set[str] | None:
    """The symbols ``write``'s subscripts read (the loops that move the element it
    stores); None where loclab cannot read a subscript."""
    if any(subscript is None for subscript in write.subscripts):
        return None
    return set().union(*(subscript.symbols() for subscript in write.subscripts))


def _restarted_loops(nest: Any, statement: Any) -> dict[str, tuple[Any, ...]]:
    """For each scalar ``statement`` writes: the loops around an earlier assignment that
    sets it from scratch in the same loop body or one around it, unconditionally."""
    out: dict[str, tuple[Any, ...]] = {}
    for earlier in nest.statements:
        if earlier.ordinal >= statement.ordinal or earlier.guards \
                or statement.loops[:len(earlier.loops)] != earlier.loops:
            continue
        read = {r.variable.key for r in earlier.reads}
        for write in earlier.writes:
            key = write.variable.key
            if not write.variable.is_array and key not in read \
                    and len(earlier.loops) > len(out.get(key, ())):
                out[key] = earlier.loops
    return out


def _trip_bound(loop: Any, sizes: Mapping[str, int], top: int) -> int:
    """The loop's trip count where its bounds are sizes and constants; else ``top``."""
    if loop.start is None or loop.stop is None or loop.stride is not None \
            or not (loop.start.symbols() | loop.stop.symbols()) <= set(sizes):
        return top
    values = {name: Poly.const(value) for name, value in sizes.items()}
    start = loop.start.substitute(values).constant_value()
    stop = loop.stop.substitute(values).constant_value()
    if start is None or stop is None:
        return top
    return max(1, -(-abs(stop - start) // abs(loop.step)))


def _depth(node: Any) -> int:
    return 1 + max((_depth(c) for c in node.body if hasattr(c, "body")), default=0)
