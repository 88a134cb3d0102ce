"""The exact memory access trace of a loop nest at given sizes, built from loclab's IR.

A cache model needs what the hardware sees: every load and store, with its byte address, in
execution order. The IR already knows all of it for affine nests (loop bounds, guards and
subscripts as polynomials), so the trace is computed, not recorded: the instances of each
statement are enumerated loop by loop with NumPy (a loop's bounds evaluated on the arrays of
its outer loops' values), and the statements' instances are merged by their position in the
loop tree (schedule keys ``pos0, iter0, pos1, iter1, ..., pos_d``). That keeps traces of
tens of millions of accesses to seconds, where a Python interpreter would take minutes; a
longer one (``MAX_TRACE_ACCESSES``), or one whose numbers would leave int64, is refused
before its arrays are allocated.

Memory model: arrays are laid out one after another, each base aligned to 4096 bytes (a page,
as a large allocation is), row-major; an array's extents are its declared extents when the IR
knows them, otherwise the largest index each dimension reaches at these sizes (and a
dimension reaching below 0 starts at its smallest index, so every subscript is its own
element, as in the dependence analysis). Scalars are registers: they are not in the trace.
Within one statement instance the accesses follow the IR: reads, then the write(s).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Union

from loclab.errors import UsageError
from loclab.model.limits import MAX_TRACE_ACCESSES
from loclab.model.magnitude import check_magnitude, limit_text, too_large
from loclab.model.text import wrap
from loclab.nest.expr import BoolOp, Compare, Condition, FloorDiv, MinMax, Mod, Poly, Symbol
from loclab.nest.expr import condition_polys
from loclab.nest.ir import Access, Guard, Loop, Nest, Statement, Variable

if TYPE_CHECKING:
    import numpy as np

PAGE_BYTES = 4096
DEFAULT_ELEM_BYTES = 8

ElemBytes = Union[int, Mapping[str, int]]
Value = Any  # an int or an int64 NumPy array of per-instance values

_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
    "==": operator.eq, "!=": operator.ne}


@dataclass(frozen=True)
class ArrayLayout:
    """Where one array lives: ``address(index)`` is the byte address of an element."""

    name: str
    base: int
    elem_bytes: int
    extents: tuple[int, ...]
    origin: tuple[int, ...]  # the first index of each dimension: 0, or below where reached

    @property
    def size_bytes(self) -> int:
        count = 1
        for extent in self.extents:
            count *= extent
        return count * self.elem_bytes

    def address(self, index: tuple[int, ...]) -> int:
        """Row-major byte address of ``array[index]`` (a plain-Python mirror of the trace)."""
        linear = 0
        for value, first, extent in zip(index, self.origin, self.extents):
            linear = linear * extent + (value - first)
        return self.base + linear * self.elem_bytes

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "base": self.base, "size_bytes": self.size_bytes,
                "elem_bytes": self.elem_bytes, "extents": list(self.extents),
                "origin": list(self.origin)}


@dataclass
class Trace:
    """Byte addresses (int64) and write flags (bool) of every access, in execution order.

    ``layout`` maps array names to their place in memory, in address order; a trace made
    by hand (tests, other tools) may leave it empty.
    """

    addresses: "np.ndarray"
    writes: "np.ndarray"
    layout: dict[str, ArrayLayout] = field(default_factory=dict)
    function: str = ""
    params: dict[str, int] = field(default_factory=dict)
    scalars: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    def __len__(self) -> int:
        return int(self.addresses.shape[0])

    def to_json(self) -> dict[str, Any]:
        writes = int(self.writes.sum())
        return {"function": self.function, "params": dict(self.params), "accesses": len(self),
                "reads": len(self) - writes, "writes": writes,
                "arrays": [a.to_json() for a in self.layout.values()],
                "scalars": list(self.scalars), "notes": list(self.notes)}

    def lines(self) -> list[str]:
        data = self.to_json()
        sizes = ", ".join(f"{k}={v}" for k, v in self.params.items())
        out = [f"trace of {self.function or 'a nest'} at {sizes or 'no parameters'}: "
               f"{data['accesses']:,} accesses ({data['reads']:,} reads, "
               f"{data['writes']:,} writes)"]
        for array in self.layout.values():
            shape = " x ".join(map(str, array.extents))
            out.append(f"  {array.name}: {shape} x {array.elem_bytes} B at {array.base:#x} "
                       f"({array.size_bytes:,} B)")
        out += [f"  note: {note}" for note in self.notes]
        return [line for text in out for line in wrap(text)]


# --------------------------------------------------------------------------- evaluation


def eval_poly(poly: Poly, env: Mapping[str, Value]) -> Value:
    """``poly`` at the values in ``env`` (ints or arrays), exactly: ``//`` and ``%`` floor as
    Python's do (NumPy's integer ``//`` and ``%`` follow the same rule). A lone symbol is
    returned as it is in ``env`` (not copied): callers never write into the result."""
    total: Value = None
    for monomial, coeff in poly.terms:
        term: Value = None
        for atom in monomial:
            value = _eval_atom(atom, env)
            term = value if term is None else term * value
        term = coeff if term is None else term if coeff == 1 else term * coeff
        total = term if total is None else total + term
    return 0 if total is None else total


def _eval_atom(atom: Any, env: Mapping[str, Value]) -> Value:
    import numpy as np

    if isinstance(atom, Symbol):
        return env[atom.name]
    if isinstance(atom, FloorDiv):
        return np.floor_divide(eval_poly(atom.inner, env), atom.divisor)
    if isinstance(atom, Mod):
        return np.mod(eval_poly(atom.inner, env), atom.divisor)
    assert isinstance(atom, MinMax)
    combine = np.minimum if atom.function == "min" else np.maximum
    values = [eval_poly(arg, env) for arg in atom.args]
    result = values[0]
    for value in values[1:]:
        result = combine(result, value)
    return result


def eval_condition(cond: Condition, env: Mapping[str, Value]) -> Value:
    """A guard's truth per instance (a bool or a bool array)."""
    import numpy as np

    if isinstance(cond, Compare):
        return _COMPARE[cond.op](eval_poly(cond.left, env), eval_poly(cond.right, env))
    assert isinstance(cond, BoolOp)
    values = [eval_condition(arg, env) for arg in cond.args]
    if cond.op == "not":
        return np.logical_not(values[0])
    combine = np.logical_and if cond.op == "and" else np.logical_or
    result = values[0]
    for value in values[1:]:
        result = combine(result, value)
    return result


# --------------------------------------------------------------------------- domains


@dataclass
class _Domain:
    """The instances of the loops around a point of the loop tree, in execution order.

    ``values`` holds each loop variable's value per instance; ``keys`` the schedule keys so
    far (a position in a body is one int for all instances, an iteration number an array);
    ``applied`` the guards already filtered on; ``magnitudes`` a bound on each loop
    variable's absolute value (see :mod:`loclab.model.magnitude`).
    """

    size: int
    values: dict[str, Value]
    keys: list[Value]
    applied: frozenset[int] = frozenset()
    magnitudes: dict[str, int] = field(default_factory=dict)

    def select(self, mask: "np.ndarray") -> "_Domain":
        return _Domain(int(mask.sum()), {k: v[mask] for k, v in self.values.items()},
                       [k if isinstance(k, int) else k[mask] for k in self.keys], self.applied,
                       self.magnitudes)

    def take(self, index: "np.ndarray") -> dict[str, Value]:
        return {k: v[index] for k, v in self.values.items()}


class _Tracer:
    """One nest at one set of sizes: enumerates statement instances and their subscripts."""

    def __init__(self, nest: Nest, params: Mapping[str, int]) -> None:
        self.nest = nest
        self.params = dict(params)
        self.statements: list[tuple[Statement, _Domain, list[tuple[Access, list[Value]]]]] = []
        self.accesses = 0

    def where(self, node: Loop | Statement) -> str:
        return f"{node.file or self.nest.filename}:{node.line}"

    def run(self) -> None:
        self._body(self.nest.body, _Domain(1, {}, []))

    def _body(self, body: list[Loop | Statement], domain: _Domain) -> None:
        for position, node in enumerate(body):
            if isinstance(node, Loop):
                if _touches_memory(node.statements()):
                    self._body(node.body, self._expand(domain, node, position))
            elif _array_accesses(node):
                self._statement(node, domain, position)

    def _env(self, domain: _Domain) -> dict[str, Value]:
        return {**self.params, **domain.values}

    def _bounded(self, poly: Poly, domain: _Domain, node: Loop | Statement) -> int:
        """A bound on ``poly``'s magnitude over ``domain``, checked (before NumPy evaluates
        it in int64) to stay below the index limit."""
        magnitudes = {**{k: abs(v) for k, v in self.params.items()}, **domain.magnitudes}
        return check_magnitude(poly, magnitudes, self.where(node))

    def _check_size(self, count: float, what: str, node: Loop | Statement) -> None:
        """Refuse, before allocating it, a trace longer than loclab traces."""
        if count > MAX_TRACE_ACCESSES:
            sizes = ", ".join(f"{k}={v}" for k, v in self.params.items())
            raise UsageError(f"{self.where(node)}: cannot trace {self.nest.name} at {sizes}: "
                             f"{what} {count:,.0f} times, more than the "
                             f"{MAX_TRACE_ACCESSES:,} accesses loclab traces: give smaller "
                             "sizes")

    def _guarded(self, domain: _Domain, guards: tuple[Guard, ...],
                 node: Loop | Statement) -> _Domain:
        """``domain`` less the instances that the guards not yet applied exclude."""
        import numpy as np

        for guard in guards:
            if id(guard) in domain.applied:
                continue
            if guard.condition is None:
                what = f"loop {node.var}" if isinstance(node, Loop) else node.source
                raise UsageError(f"{self.where(node)}: cannot trace {what}: its guard "
                                 f"`{guard.text}` depends on data")
            for poly in condition_polys(guard.condition):
                self._bounded(poly, domain, node)
            truth = np.broadcast_to(eval_condition(guard.condition, self._env(domain)),
                                    (domain.size,))
            domain = domain.select(truth != guard.negated)
            domain.applied = domain.applied | {id(guard)}
        return domain

    def _expand(self, outer: _Domain, loop: Loop, position: int) -> _Domain:
        """The instances of ``loop`` (and its outer loops): each outer instance repeated
        once per iteration, the loop's bounds evaluated per outer instance."""
        import numpy as np

        outer = self._guarded(outer, loop.guards, loop)
        env = self._env(outer)
        bounds, largest = [], 0
        for side, poly in (("start", loop.start), ("stop", loop.stop)):
            if poly is None:
                raise UsageError(f"{self.where(loop)}: cannot trace loop {loop.var}: its {side} "
                                 "depends on data")
            largest = max(largest, self._bounded(poly, outer, loop))
            bounds.append(np.broadcast_to(eval_poly(poly, env), (outer.size,)))
        start, stop = bounds
        counts = np.maximum(0, -np.floor_divide(start - stop, loop.step))
        self._check_size(float(counts.sum(dtype=np.float64)), f"loop {loop.var} runs", loop)
        owner = np.repeat(np.arange(outer.size), counts)
        firsts = np.cumsum(counts) - counts
        iteration = np.arange(owner.size, dtype=np.int64) - np.repeat(firsts, counts)
        values = outer.take(owner)
        values[loop.var] = start[owner] + loop.step * iteration
        keys = [k if isinstance(k, int) else k[owner] for k in outer.keys]
        # A value of the loop lies between its start and its stop, a step past at most.
        magnitudes = {**outer.magnitudes, loop.var: largest + abs(loop.step)}
        return _Domain(int(owner.size), values, keys + [position, iteration], outer.applied,
                       magnitudes)

    def _statement(self, statement: Statement, domain: _Domain, position: int) -> None:
        import numpy as np

        guarded = self._guarded(domain, statement.guards, statement)
        domain = _Domain(guarded.size, guarded.values, guarded.keys + [position],
                         magnitudes=guarded.magnitudes)
        self.accesses += domain.size * len(_array_accesses(statement))
        self._check_size(self.accesses, "its statements access memory", statement)
        env = self._env(domain)
        accesses = []
        for access in _array_accesses(statement):
            subscripts = []
            for poly in access.subscripts:
                if poly is None:
                    raise UsageError(f"{self.where(statement)}: cannot trace {access.text}: "
                                     "its subscript depends on data")
                self._bounded(poly, domain, statement)
                subscripts.append(np.broadcast_to(eval_poly(poly, env), (domain.size,)))
            accesses.append((access, subscripts))
        self.statements.append((statement, domain, accesses))


def _array_accesses(statement: Statement) -> list[Access]:
    return [a for a in statement.accesses if a.variable.is_array]


def _touches_memory(statements: list[Statement]) -> bool:
    return any(_array_accesses(s) for s in statements)


# --------------------------------------------------------------------------- parameters


def _traced_symbols(nest: Nest) -> set[str]:
    """Every symbol the trace evaluates: bounds and guards of loops that hold array
    accesses, guards and subscripts of statements that make them."""
    polys: list[Poly | None] = []
    for loop in nest.loops:
        if _touches_memory(loop.statements()):
            polys += [loop.start, loop.stop]
            polys += [p for g in loop.guards if g.condition for p in condition_polys(g.condition)]
    for statement in nest.statements:
        accesses = _array_accesses(statement)
        if accesses:
            polys += [p for a in accesses for p in a.subscripts]
            polys += [p for g in statement.guards if g.condition
                      for p in condition_polys(g.condition)]
    return set().union(*(p.symbols() for p in polys if p is not None))


def _check_params(nest: Nest, params: Mapping[str, int]) -> dict[str, int]:
    loop_vars = {loop.var for loop in nest.loops}
    unknown = [name for name in params if name not in nest.parameters]
    if unknown:
        known = ", ".join(nest.parameters) or "none"
        raise UsageError(f"{nest.name} has no parameter {', '.join(unknown)} "
                         f"(parameters: {known})")
    missing = sorted(_traced_symbols(nest) - loop_vars - set(params))
    if missing:
        raise UsageError(f"cannot trace {nest.name}: give a value for "
                         f"{', '.join(missing)} (e.g. {missing[0]}=64)")
    bad = [f"{k}={v!r}" for k, v in params.items() if not isinstance(v, int) or
           isinstance(v, bool)]
    if bad:
        raise UsageError(f"parameter values must be integers: {', '.join(bad)}")
    large = [f"{k}={v:.3g}" for k, v in params.items() if too_large(v)]
    if large:
        raise UsageError(f"parameter values too large to trace: {', '.join(large)} (numbers "
                         f"in indices must stay below {limit_text()})")
    return dict(params)


def _elem_bytes_of(elem_bytes: ElemBytes, arrays: list[str], declared: set[str]
                   ) -> dict[str, int]:
    """Per traced array its element size; a size for a name that is no array of the nest is
    an error (a typo would silently leave the default)."""
    if isinstance(elem_bytes, Mapping):
        unknown = [name for name in elem_bytes if name not in declared]
        if unknown:
            raise UsageError(f"elem_bytes names no array of the nest: {', '.join(unknown)} "
                             f"(arrays: {', '.join(sorted(declared))})")
        sizes = {name: elem_bytes.get(name, DEFAULT_ELEM_BYTES) for name in arrays}
    else:
        sizes = {name: elem_bytes for name in arrays}
    for name, size in sizes.items():
        if not isinstance(size, int) or isinstance(size, bool) or size <= 0:
            raise UsageError(f"element size of {name} must be a positive integer, "
                             f"not {size!r}")
    return sizes


# --------------------------------------------------------------------------- layout


def _reach(tracer: _Tracer) -> tuple[dict[str, Variable], dict[str, list[tuple[int, int]]]]:
    """Per array (in order of first access): its variable and the smallest and largest
    index each dimension reaches."""
    variables: dict[str, Variable] = {}
    reach: dict[str, list[tuple[int, int]]] = {}
    for statement, domain, accesses in tracer.statements:
        if domain.size == 0:
            continue
        for access, subscripts in accesses:
            name = access.variable.name
            span = [(int(s.min()), int(s.max())) for s in subscripts]
            if name in reach and len(reach[name]) != len(span):
                raise UsageError(f"{tracer.where(statement)}: cannot trace {access.text}: "
                                 f"{name} is indexed with {len(span)} and "
                                 f"{len(reach[name])} subscripts")
            old = reach.get(name, span)
            reach[name] = [(min(a[0], b[0]), max(a[1], b[1])) for a, b in zip(old, span)]
            variables.setdefault(name, access.variable)
    return variables, reach


def _declared(variable: Variable, params: Mapping[str, int]) -> list[int | None]:
    """The declared extents that the parameters alone fix (None where unknown)."""
    extents = variable.extents or ()
    return [int(eval_poly(e, params)) if e is not None and e.symbols() <= set(params)
            else None for e in extents]


def _layout(tracer: _Tracer, elem_bytes: ElemBytes
            ) -> tuple[dict[str, ArrayLayout], list[str]]:
    variables, reach = _reach(tracer)
    sizes = _elem_bytes_of(elem_bytes, list(reach),
                           {v.name for v in tracer.nest.variables if v.is_array})
    layout: dict[str, ArrayLayout] = {}
    notes: list[str] = []
    base = 0
    for name, span in reach.items():
        declared = _declared(variables[name], tracer.params)
        if len(declared) != len(span):
            declared = [None] * len(span)
        origin = tuple(min(0, low) for low, _ in span)
        extents = tuple(max(d or 0, high + 1) - first
                        for d, (_, high), first in zip(declared, span, origin))
        if any(d is not None and (first < 0 or high >= d)
               for d, (_, high), first in zip(declared, span, origin)):
            notes.append(f"{name} is indexed beyond its declared extents: laid out "
                         f"with {' x '.join(map(str, extents))}")
        elif any(first < 0 for first in origin):  # Python would wrap it around; C would not
            below = ", ".join(str(first) for first in origin)
            notes.append(f"{name} is indexed below 0 (down to [{below}]): taken as written, "
                         f"its first element laid out at that index, not wrapped around")
        layout[name] = ArrayLayout(name, base, sizes[name], extents, origin)
        base += -(-layout[name].size_bytes // PAGE_BYTES) * PAGE_BYTES
        if too_large(base):
            raise UsageError(f"cannot trace {tracer.nest.name}: its arrays span {base:.3g} "
                             f"bytes at these sizes, more than the {limit_text()} loclab "
                             "addresses")
    return layout, notes


# --------------------------------------------------------------------------- assembly


def _addresses(array: ArrayLayout, subscripts: list[Value]) -> "np.ndarray":
    """Row-major byte addresses, computed in place on one fresh array (the trace's largest
    temporaries are these)."""
    import numpy as np

    linear = np.array(subscripts[0], dtype=np.int64)
    if array.origin[0]:
        linear -= array.origin[0]
    for value, first, extent in zip(subscripts[1:], array.origin[1:], array.extents[1:]):
        linear *= extent
        linear += value
        if first:
            linear -= first
    linear *= array.elem_bytes
    linear += array.base
    return linear


def _instance_order(domains: list[_Domain]) -> "np.ndarray":
    """The instances of all statements (concatenated) in execution order: schedule keys
    packed into one int64 when they fit (else a lexsort of the columns); a stable sort
    then merges the statements' runs, each already sorted."""
    import numpy as np

    depth = max(len(d.keys) for d in domains)
    radices = [max(_key_max(d, level) for d in domains) + 1 for level in range(depth)]
    if sum(max(1, (r - 1).bit_length()) for r in radices) <= 62:
        packed = np.concatenate([_packed(d, radices) for d in domains])
        return np.argsort(packed, kind="stable")
    columns = [np.concatenate([np.broadcast_to(_key(d, level), (d.size,)) for d in domains])
               for level in range(depth)]
    return np.lexsort(columns[::-1])


def _key(domain: _Domain, level: int) -> Value:
    """A domain's schedule key at ``level``; 0 past its depth (statements of different depth
    differ at a position before that)."""
    return domain.keys[level] if level < len(domain.keys) else 0


def _key_max(domain: _Domain, level: int) -> int:
    key = _key(domain, level)
    return key if isinstance(key, int) else int(key.max()) if domain.size else 0


def _packed(domain: _Domain, radices: list[int]) -> "np.ndarray":
    """The mixed-radix number of each instance's schedule keys (constants folded first)."""
    import numpy as np

    packed = np.zeros(domain.size, dtype=np.int64)
    constant = 0
    for level, radix in enumerate(radices):
        packed *= radix
        constant *= radix
        key = _key(domain, level)
        if isinstance(key, int):
            constant += key
        else:
            packed += key
    packed += constant
    return packed


def _assemble(tracer: _Tracer, layout: dict[str, ArrayLayout]
              ) -> tuple["np.ndarray", "np.ndarray"]:
    """Addresses and write flags of all accesses: per statement an (instances x accesses)
    block, the blocks interleaved by the instances' execution order."""
    import numpy as np

    blocks = []
    for _, domain, accesses in tracer.statements:
        if domain.size == 0:
            continue
        addresses = np.empty((domain.size, len(accesses)), dtype=np.int64)
        for column, (access, subscripts) in enumerate(accesses):
            addresses[:, column] = _addresses(layout[access.variable.name], subscripts)
        blocks.append((domain, addresses, np.array([a.write for a, _ in accesses])))
    if not blocks:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=bool)
    if len(blocks) == 1:
        _, addresses, writes = blocks[0]
        return addresses.ravel(), np.tile(writes, addresses.shape[0])
    order = _instance_order([domain for domain, _, _ in blocks])
    widths = np.concatenate([np.full(d.size, a.shape[1]) for d, a, _ in blocks])
    sorted_starts = np.cumsum(widths[order]) - widths[order]
    starts = np.empty_like(sorted_starts)
    starts[order] = sorted_starts
    out = np.empty(int(widths.sum()), dtype=np.int64)
    flags = np.empty(out.size, dtype=bool)
    first = 0
    for domain, addresses, writes in blocks:
        where = starts[first:first + domain.size, None] + np.arange(addresses.shape[1])
        out[where] = addresses
        flags[where] = writes
        first += domain.size
    return out, flags


def trace_nest(nest: Nest, params: Mapping[str, int], elem_bytes: ElemBytes = 8) -> Trace:
    """Every array access of ``nest`` run at ``params``, in execution order.

    ``elem_bytes`` is one element size for all arrays, or a size per array name (others
    take 8). Raises :class:`UsageError` where the trace depends on data (a subscript, bound
    or guard the IR could not express) or a parameter value is missing.
    """
    tracer = _Tracer(nest, _check_params(nest, params))
    tracer.run()
    layout, notes = _layout(tracer, elem_bytes)
    addresses, writes = _assemble(tracer, layout)
    scalars = tuple(dict.fromkeys(a.variable.name for s in nest.statements for a in s.accesses
                                  if not a.variable.is_array))
    if scalars:
        notes.insert(0, f"scalars are registers, not in the trace: {', '.join(scalars)}")
    return Trace(addresses, writes, layout, nest.name, dict(params), scalars, tuple(notes))
