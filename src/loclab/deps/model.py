"""The polyhedral model of a nest: iteration domains and access relations as isl text.

Each statement instance is a point ``S[x0, x1, ...]`` (one coordinate per enclosing loop).
Every name isl reads is generated here (statements ``S3``, variables ``M0``, sizes ``p0``,
loop coordinates ``x0``/``y0``): the user's names may be any identifier (``Ä``, ``mod``,
``p0``), which isl's parser would reject or misread, and they reach only the output.
Its domain comes from the loop bounds, strides and affine conditions; an access maps it to an
array element. Fixed sizes (``params``) are substituted first, so ``A[i*W + j]`` with ``W=8``
is affine; with ``W`` symbolic the subscript is delinearized to ``A[i][j]`` when isl proves
``0 <= j < W``. Anything isl cannot represent is dropped from the constraints, which only
adds dependences (safe) and is listed in :attr:`Model.notes`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from functools import cached_property
from typing import TYPE_CHECKING, TypeVar

from loclab.nest.expr import Poly, Symbol, condition_polys, render_condition, \
    substitute_condition
from loclab.nest.ir import Access, Guard, Loop, Nest, Statement, Variable

if TYPE_CHECKING:
    import islpy as isl

Parsed = TypeVar("Parsed", "isl.Set", "isl.Map", "isl.UnionMap")


class Model:
    def __init__(self, nest: Nest, params: Mapping[str, int] | None = None) -> None:
        self.nest = nest
        # sizes the nest never mentions are ignored (a file's functions share --param)
        self.sizes = {name: int(value) for name, value in (params or {}).items()
                      if name in nest.parameters}
        self.fixed = {name: Poly.const(value) for name, value in self.sizes.items()}
        self.notes: list[str] = list(nest.notes)
        self.symbolic = [p for p in nest.parameters if p not in self.fixed]
        self._param_names = {p: f"p{k}" for k, p in enumerate(self.symbolic)}
        self._tuple_names: dict[str, str] = {}
        self.subscripts: dict[int, tuple[Poly | None, ...]] = {}
        self._domains: dict[tuple[int, str], str] = {}
        self._parsed: dict[tuple[type, str], object] = {}
        self._exact: dict[tuple[int, int, frozenset[int]], bool] = {}
        self._rendered: dict[tuple[Poly, int, str], str | None] = {}
        self._prepare_subscripts()

    # -- naming -----------------------------------------------------------------------------
    @property
    def header(self) -> str:
        return f"[{', '.join(self.isl_parameters)}] -> "

    @property
    def isl_parameters(self) -> list[str]:
        """isl's names of the symbolic sizes (``p0``, ...), in the order of ``symbolic``."""
        return list(self._param_names.values())

    def user_names(self) -> dict[str, str]:
        """The user's name of each isl parameter name (``p0`` -> ``N``)."""
        return {isl_name: user for user, isl_name in self._param_names.items()}

    def namer(self, statement: Statement, role: str) -> Callable[[str], str]:
        loops = {loop.var: f"{role}{k}" for k, loop in enumerate(statement.loops)}

        def name(symbol: str) -> str:
            return loops.get(symbol) or self._param_names[symbol]

        return name

    def tuple_name(self, variable: Variable) -> str:
        """isl's name for a variable's elements: ``M`` and a number, never the user's name."""
        return self._tuple_names.setdefault(variable.key, f"M{len(self._tuple_names)}")

    def point(self, statement: Statement, role: str) -> str:
        coords = ", ".join(f"{role}{k}" for k in range(len(statement.loops)))
        return f"S{statement.ordinal}[{coords}]"

    def render(self, poly: Poly | None, statement: Statement, role: str) -> str | None:
        """isl text of an expression at a statement, or None when isl cannot express it.
        Rendered once per model: every pair of accesses asks for its subscripts again."""
        if poly is None:
            return None
        key = (poly, id(statement), role)
        if key not in self._rendered:
            self._rendered[key] = self._render(poly, statement, role)
        return self._rendered[key]

    def _render(self, poly: Poly, statement: Statement, role: str) -> str | None:
        poly = poly.substitute(self.fixed)
        if not poly.is_affine():
            return None
        return poly.render(self.namer(statement, role), isl=True)

    # -- isl objects ------------------------------------------------------------------------
    def parsed(self, kind: type[Parsed], text: str) -> Parsed:
        """isl's object for a text, parsed once per model: parsing, not isl's operations, is
        most of an analysis' time, and the same texts (a statement's domain, the equal
        subscripts of two accesses, the elements of an access) come back for many pairs of
        accesses and many loops. isl objects are values (every operation returns a new
        one), so sharing them is safe."""
        key = (kind, text)
        if key not in self._parsed:
            self._parsed[key] = kind(text)
        return self._parsed[key]  # type: ignore[return-value]

    def domain_of(self, statement: Statement) -> "isl.Set":
        """A statement's domain (:meth:`domain_set`) as an isl set."""
        import islpy as isl

        return self.parsed(isl.Set, self.domain_set(statement))

    def access_map(self, statement: Statement, access: Access) -> "isl.Map":
        """An access relation (:meth:`access_relation`) as an isl map: the elements parsed
        (the text is shorter, and often the same for several accesses), the statement's
        domain added by isl."""
        import islpy as isl

        text = self._access_text(statement, access,
                                 self._element_constraints(statement, access))
        return self.parsed(isl.Map, text).intersect_domain(self.domain_of(statement))

    # -- domains ----------------------------------------------------------------------------
    def domain(self, statement: Statement, role: str) -> str:
        """Constraints (isl text) on the instances of a statement (built once per role)."""
        key = (statement.ordinal, role)
        if key not in self._domains:
            self._domains[key] = self._build_domain(statement, role)
        return self._domains[key]

    def _build_domain(self, statement: Statement, role: str) -> str:
        return self.constraints(statement, statement.loops, statement.guards, role)

    def constraints(self, statement: Statement, loops: tuple[Loop, ...],
                    guards: tuple[Guard, ...], role: str) -> str:
        """isl text for the iterations of ``loops`` (the outermost of the statement's) where
        ``guards`` hold: the statement's domain when they are all of its loops and guards,
        the domain of a block around it (``loclab.transform``'s opaque units) when fewer."""
        parts: list[str] = []
        for depth, loop in enumerate(loops):
            parts += self._loop_constraints(loop, statement, role, f"{role}{depth}")
        for guard in guards:
            if guard.condition is None:
                continue
            condition = substitute_condition(guard.condition, self.fixed)
            if not all(p.is_affine() for p in condition_polys(condition)):
                self.note(f"condition {guard.text} is not affine: treated as possibly true")
                continue
            text = render_condition(condition, self.namer(statement, role), isl=True)
            parts.append(f"not ({text})" if guard.negated else f"({text})")
        return " and ".join(parts) or "true"

    def _loop_constraints(self, loop: Loop, statement: Statement, role: str,
                          var: str) -> list[str]:
        start = self.render(loop.start, statement, role)
        stop = self.render(loop.stop, statement, role)
        for bound, text in ((loop.start, start), (loop.stop, stop)):
            if bound is not None and text is None:
                self.note(f"loop {loop.var}: bound {bound} is not affine: treated as "
                           "unbounded")
        parts: list[str] = []
        low, high = (">=", "<") if loop.step > 0 else ("<=", ">")
        if start is not None:
            parts.append(f"{var} {low} {start}")
            if abs(loop.step) > 1:
                parts.append(f"exists (e_{var} : {var} = {start} + {loop.step}*e_{var})")
        if stop is not None:
            parts.append(f"{var} {high} {stop}")
        if loop.stride is not None:  # a size: its sign as assumed; its multiples are lost
            stride = self.render(loop.stride, statement, role)
            if stride is not None:
                parts.append(f"{stride} >= 1" if loop.step > 0 else f"{stride} <= -1")
        return parts

    def domain_set(self, statement: Statement) -> str:
        return (f"{self.header}{{ {self.point(statement, 'x')} : "
                f"{self.domain(statement, 'x')} }}")

    # -- accesses ---------------------------------------------------------------------------
    def access_relation(self, statement: Statement, access: Access) -> str:
        """isl text ``{ S[x] -> A[...] }`` (unknown subscripts unconstrained)."""
        parts = [self.domain(statement, "x")] + self._element_constraints(statement, access)
        return self._access_text(statement, access, parts)

    def _element_constraints(self, statement: Statement, access: Access) -> list[str]:
        """isl text of the element an instance touches: a subscript's value, or for an
        unknown one of a declared array, its bounds."""
        parts: list[str] = []
        extents = self._extents(statement, access, "x")
        for k, (sub, extent) in enumerate(zip(self.subscripts[id(access)], extents)):
            text = self.render(sub, statement, "x")
            if text is not None:
                parts.append(f"a{k} = {text}")
            elif extent is not None:
                parts.append(f"0 <= a{k} < {extent}")
        return parts

    def _access_text(self, statement: Statement, access: Access, parts: list[str]) -> str:
        outs = ", ".join(f"a{k}" for k in range(len(self.subscripts[id(access)])))
        return (f"{self.header}{{ {self.point(statement, 'x')} -> "
                f"{self.tuple_name(access.variable)}[{outs}] : "
                f"{' and '.join(parts) or 'true'} }}")

    def same_location(self, first: tuple[Statement, Access],
                      second: tuple[Statement, Access]) -> list[str]:
        (s1, a1), (s2, a2) = first, second
        subs1, subs2 = self.subscripts[id(a1)], self.subscripts[id(a2)]
        if len(subs1) != len(subs2):
            self.note(f"{a1.variable.name} is used with {len(subs1)} and {len(subs2)} "
                       "subscripts: any two of its accesses may overlap")
            return []
        parts: list[str] = []
        extents1, extents2 = self._extents(s1, a1, "x"), self._extents(s2, a2, "y")
        for e1, e2, x1, x2 in zip(subs1, subs2, extents1, extents2):
            t1, t2 = self.render(e1, s1, "x"), self.render(e2, s2, "y")
            if t1 is not None and t2 is not None:
                parts.append(f"{t1} = {t2}")
            elif t1 is not None and x2 is not None:
                parts.append(f"0 <= {t1} < {x2}")  # the unknown side stays in bounds
            elif t2 is not None and x1 is not None:
                parts.append(f"0 <= {t2} < {x1}")
        return parts

    def _extents(self, statement: Statement, access: Access, role: str) -> list[str | None]:
        """Declared sizes per dimension (isl text), for bounding unknown subscripts.

        An unknown subscript of a declared array is assumed in bounds (C makes anything
        else undefined); without a declaration it may be any index.
        """
        dims = self.subscripts[id(access)]
        declared = access.variable.extents
        fresh = len(access.variable.scope)
        if declared is None or len(dims) != fresh + len(declared):
            return [None] * len(dims)
        return [None] * fresh + [self.render(e, statement, role) for e in declared]

    def exact(self, statement: Statement, access: Access,
              holding: frozenset[int] = frozenset()) -> bool:
        """Whether isl saw this access exactly (affine subscripts, affine domain: every
        condition around it affine once the fixed sizes are in, ``i * i < N`` is not), the
        guards whose ids are in ``holding`` known to hold (those isl takes as possibly true:
        ``opaque_guards``). Asked for every pair of accesses, so answered once per access."""
        key = (id(statement), id(access), holding)
        if key not in self._exact:
            self._exact[key] = self._is_exact(statement, access, holding)
        return self._exact[key]

    def opaque_guards(self, statement: Statement) -> frozenset[int]:
        """The ids of the guards around ``statement`` that isl takes as possibly true: a
        condition on data (``if d < cut``), or not affine once the fixed sizes are in."""
        return frozenset(id(guard) for guard in statement.guards
                         if guard.condition is None or not all(
                             p.substitute(self.fixed).is_affine()
                             for p in condition_polys(guard.condition)))

    def _is_exact(self, statement: Statement, access: Access, holding: frozenset[int]) -> bool:
        guards = [g for g in statement.guards if id(g) not in holding]
        # a loop bound may read an unknown size (``M = N // S; for i in range(M)``): for
        # each value it may have, the loop runs exactly its range, as with a size argument;
        # a subscript or a condition that reads one is not exact
        polys = [s for s in self.subscripts[id(access)] if s is not None] \
            + [p for guard in guards if guard.condition is not None
               for p in condition_polys(guard.condition)]
        if any(p.symbols() & set(self.nest.opaque) for p in polys):
            return False
        return (self.opaque_guards(statement) <= holding
                and all(self.render(s, statement, "x") is not None
                        for s in self.subscripts[id(access)])
                and all(self.render(b, statement, "x") is not None
                        for loop in statement.loops for b in (loop.start, loop.stop)))

    # -- subscripts -------------------------------------------------------------------------
    @cached_property
    def accesses(self) -> dict[str, list[tuple[Statement, Access]]]:
        """Every access, per variable key, in program order."""
        found: dict[str, list[tuple[Statement, Access]]] = {}
        for statement in self.nest.statements:
            for access in statement.accesses:
                found.setdefault(access.variable.key, []).append((statement, access))
        return found

    def _prepare_subscripts(self) -> None:
        """Substitute fixed sizes, then delinearize flattened dimensions where provable."""
        for uses in self.accesses.values():
            rows = [[None if s is None else s.substitute(self.fixed) for s in a.subscripts]
                    for _, a in uses]
            ranks = {len(r) for r in rows}
            if len(ranks) == 1:
                rank = ranks.pop()
                for position in reversed(range(rank)):
                    column = [r[position] for r in rows]
                    if all(p is None or p.is_affine() for p in column):
                        continue
                    split = self._delinearize(uses, column)
                    for row, pieces in zip(rows, split):
                        row[position:position + 1] = pieces
            for (_, access), row in zip(uses, rows):
                self.subscripts[id(access)] = tuple(row)

    def _delinearize(self, uses: list[tuple[Statement, Access]],
                     column: list[Poly | None]) -> list[list[Poly | None]]:
        """Split ``i*W + j`` into ``[i, j]`` for every access, or give up (unknown)."""
        name = uses[0][1].variable.name
        loop_vars = {loop.var for loop in self.nest.loops}
        pieces = [_split_by_strides(p, loop_vars) if p is not None else None for p in column]
        chain = _stride_chain([p for p in pieces if p is not None])
        if chain is None or any(p is None for p in pieces):
            self.note(f"could not delinearize the subscripts of {name}: that dimension is "
                       "treated as unknown")
            return [[None] for _ in column]
        split = [[p.get(key, Poly.const(0)) for key in reversed(chain)]  # type: ignore[union-attr]
                 for p in pieces]
        extents = [Poly.symbol(_added_size(chain[k], chain[k + 1]))
                   for k in range(len(chain) - 1)]
        for (statement, access), dims in zip(uses, split):
            inner = list(reversed(dims))[:-1]  # dimensions that must stay within an extent
            for expr, extent in zip(inner, extents):
                if not self._within(statement, expr, extent):
                    self.note(f"could not prove 0 <= {expr} < {extent} in {access.text}: "
                               f"the flattened subscripts of {name} are treated as unknown")
                    return [[None] for _ in column]
        self.note(f"{name}: flattened subscripts delinearized ({uses[0][1].text} as "
                   f"{name}[{']['.join(str(d) for d in split[0])}])")
        return split  # type: ignore[return-value]

    def _within(self, statement: Statement, expr: Poly, extent: Poly) -> bool:
        import islpy as isl

        text, bound = self.render(expr, statement, "x"), self.render(extent, statement, "x")
        if text is None or bound is None:
            return False
        outside = isl.Set(f"{self.header}{{ {self.point(statement, 'x')} : "
                          f"{self.domain(statement, 'x')} and not (0 <= {text} < {bound}) }}")
        return bool(outside.is_empty())

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)


def _split_by_strides(poly: Poly, loop_vars: set[str]) -> dict[tuple[str, ...], Poly] | None:
    """Group monomials by their stride parameters (sizes multiplying a loop variable)."""
    strides = {a.name for m, _ in poly.terms if any(isinstance(a, Symbol) and a.name in
                                                    loop_vars for a in m)
               for a in m if isinstance(a, Symbol) and a.name not in loop_vars}
    groups: dict[tuple[str, ...], Poly] = {}
    for monomial, coeff in poly.terms:
        key = tuple(sorted(a.name for a in monomial if isinstance(a, Symbol)
                           and a.name in strides))
        rest = Poly.const(coeff)
        for atom in monomial:
            if not (isinstance(atom, Symbol) and atom.name in strides):
                rest = rest * Poly.atom(atom)
        groups[key] = groups.get(key, Poly.const(0)) + rest
    if any(not g.is_affine() for g in groups.values()):
        return None
    return groups


def _stride_chain(pieces: list[dict[tuple[str, ...], Poly]]) -> list[tuple[str, ...]] | None:
    """Keys ordered innermost first, each adding one size: () < (W,) < (M, W) ..., or the
    same size again: () < (K,) < (K, K) (im2col's row ``(c * K + ki) * K + kj``)."""
    keys = sorted({k for p in pieces for k in p} | {()}, key=len)
    for shorter, longer in zip(keys, keys[1:]):
        if len(longer) != len(shorter) + 1 or Counter(shorter) - Counter(longer):
            return None
    return keys if len(keys) > 1 else None


def _added_size(shorter: tuple[str, ...], longer: tuple[str, ...]) -> str:
    """The one size ``longer`` multiplies by beyond ``shorter`` (``_stride_chain``)."""
    (added,) = (Counter(longer) - Counter(shorter)).elements()
    return added
