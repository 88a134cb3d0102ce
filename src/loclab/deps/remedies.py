"""What removes the dependences a loop carries: the slides' recipes, checked exactly.

For a loop that is not parallel, its carried dependences are grouped by variable and each
group is matched against, in order:

- privatization (value-based, with isl's dataflow analysis): every read of the variable in an
  iteration of the loop gets its value from a write in the same iteration;
- a reduction: the variable is touched in the loop only by ``x op= e`` with one associative
  operator and ``x`` absent from ``e``; on one element per iteration of the outer loops that is
  a reduction, on data-dependent or varying elements a generalized reduction (atomics);
- a scan: ``A[i] = A[i-1] op e`` carried at distance one (or a scalar accumulator that other
  statements read), parallel only as a prefix scan;
- copying: only WAR dependences whose reads see values from before the loop; reading a copy
  made before the loop removes them. Only those reads need to: where other reads of the
  array see values the loop wrote (trmm's accumulator ``B[i, j]`` beside its ``B[k, j]``),
  they stay on the array and the copy serves the reads named.

A loop is parallel after the remedies only when every carried group has one.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING

from loclab.deps.dependences import Dependence, union_maps
from loclab.deps.model import Model
from loclab.nest.ir import Access, Loop, Node, Statement

if TYPE_CHECKING:
    import islpy as isl

ASSOCIATIVE = {"+", "-", "*", "min", "max", "&", "|", "^"}


@dataclass(frozen=True)
class Remedy:
    """One way to remove the dependences a loop carries on one variable."""

    kind: str  # "privatize", "expand", "reduction", "generalized reduction", "scan", "copy"
    variable: str  # the name as written
    op: str | None = None
    live_out: bool = False  # privatized values may be needed after the loop
    key: str = ""  # the variable's key (names may repeat in a function, keys do not)
    reads: tuple[str, ...] = ()  # copy: the reads that read the copy, as written (all: ())

    def label(self) -> str:
        if self.kind in {"privatize", "expand"}:
            suffix = " (copy out the last value written if it is used after the loop)" \
                if self.live_out else ""
            return f"{self.kind} {self.variable}{suffix}"
        if self.kind == "reduction":
            return f"reduction {self.op} on {self.variable}"
        if self.kind == "generalized reduction":
            return f"atomic updates on {self.variable} (generalized reduction {self.op})"
        if self.kind == "scan":
            return f"scan {self.op} on {self.variable} (parallel as a prefix scan)"
        if self.reads:
            return (f"copy {self.variable} before the loop and read {', '.join(self.reads)} "
                    "from the copy")
        return f"copy {self.variable} before the loop and read the copy"


class Remedies:
    """Finds remedies for the loops of one nest."""

    def __init__(self, model: Model, dependences: list[Dependence] | None = None) -> None:
        """``dependences``, the nest's memory-based ones where known, spare most loops isl's
        dataflow analysis (:meth:`_may_be_fed_in_iteration`)."""
        self.model = model
        self.dependences = dependences
        self._private: dict[tuple[int, str], bool] = {}
        self._flows: dict[tuple[tuple[int, ...], tuple[int, ...], frozenset[int]],
                          "isl.UnionFlow | None"] = {}

    def for_loop(self, loop: Loop, carried: list[Dependence]
                 ) -> tuple[list[Remedy], list[Dependence]]:
        """(remedies, dependences nothing removes) for a loop's carried dependences."""
        by_variable: dict[str, list[Dependence]] = {}
        for dependence in carried:
            by_variable.setdefault(dependence.variable, []).append(dependence)
        remedies: list[Remedy] = []
        unresolved: list[Dependence] = []
        for key, group in by_variable.items():
            remedy = self.remedy(loop, key, group)
            if remedy is None:
                unresolved += group
            else:
                remedies.append(remedy)
        return remedies, unresolved

    def remedy(self, loop: Loop, key: str, group: list[Dependence]) -> Remedy | None:
        """The first recipe that removes a loop's carried dependences on one variable."""
        found = self.privatization(loop, key) or self.reduction(loop, key, group) \
            or self.scan(loop, key, group)
        if found is None and all(d.kind == "WAR" for d in group):
            found = self.copy(loop, key, group)
        return None if found is None else replace(found, key=key)

    # -- the uses of a variable inside a loop -----------------------------------------------
    def uses(self, loop: Loop, key: str) -> list[tuple[Statement, Access]]:
        inside = {id(s) for s in loop.statements()}
        return [(s, a) for s, a in self.model.accesses.get(key, []) if id(s) in inside]

    def live_out(self, loop: Loop, key: str) -> bool:
        """An argument the caller may read, or read outside the loop where the value may
        come from inside it (value-based): after the loop, or before it in a later iteration
        of a loop around it, which sees what the previous iteration's loop left."""
        import islpy as isl

        uses = self.model.accesses.get(key, [])
        if uses[0][1].variable.is_argument:
            return True
        inside = {id(s) for s in loop.statements()}
        outside = [(s, a) for s, a in uses if id(s) not in inside and not a.write]
        if not outside:
            return False
        flow = self._flow([(s, a) for s, a in uses if a.write], outside)
        if flow is None:
            return True  # unknown: copying out is always correct
        ordinals = {s.ordinal for s in loop.statements()}
        return any(int(m.get_tuple_name(isl.dim_type.in_)[1:]) in ordinals
                   for m in union_maps(flow.get_may_dependence()))

    # -- privatization ----------------------------------------------------------------------
    def privatization(self, loop: Loop, key: str) -> Remedy | None:
        """``privatize x`` when a copy of the variable per iteration of ``loop`` (and of the
        loops around it) removes every dependence it carries between those iterations.

        The one privatization check of the analysis: loop verdicts, interchange (privatizing
        at the innermost loop of a band) and distribution (expanding) all ask it.
        """
        uses = self.model.accesses.get(key)
        if not uses or not self.privatizable(loop, key):
            return None
        return Remedy("privatize", uses[0][1].variable.name, live_out=self.live_out(loop, key),
                      key=key)

    def privatizable(self, loop: Loop, key: str) -> bool:
        """Every read inside the loop is fed by a write of the same iteration (value-based)."""
        if (id(loop), key) not in self._private:
            self._private[id(loop), key] = self._privatizable(loop, key)
        return self._private[id(loop), key]

    def _privatizable(self, loop: Loop, key: str) -> bool:
        uses = self.uses(loop, key)
        reads = [(s, a) for s, a in uses if not a.write]
        if not any(a.write for _, a in uses):
            return False
        if not reads:
            return True  # only writes: each iteration can write its own copy
        if not self._may_be_fed_in_iteration(loop, key, reads):
            return False
        writes = [(s, a) for s, a in self.model.accesses[key] if a.write]
        groups: dict[frozenset[int], list[tuple[Statement, Access]]] = {}
        for statement, access in reads:
            groups.setdefault(self._covering(statement, writes), []).append((statement, access))
        return all(self._fed_in_iteration(loop, self._flow(writes, group, covering))
                   for covering, group in groups.items())

    def _covering(self, read: Statement, writes: list[tuple[Statement, Access]]
                  ) -> frozenset[int]:
        """The writes (ids of their accesses) that surely run before ``read`` in each of its
        iterations though isl takes them as possibly skipped: in the same loops, earlier in
        the body, under no condition on data that ``read`` is not under too (``if r2 < cut:
        inv = 1 / r2; f = inv * ...``: where the read runs, the same test let the write
        run). For the reads that share them, isl's dataflow takes them as must-writes."""
        holding = self.model.opaque_guards(read)
        if not holding:
            return frozenset()
        return frozenset(id(a) for s, a in writes
                         if s.loops == read.loops and s.ordinal < read.ordinal
                         and not self.model.exact(s, a) and self.model.exact(s, a, holding))

    def _fed_in_iteration(self, loop: Loop, flow: "isl.UnionFlow | None") -> bool:
        """Whether every read of ``flow`` has a source, in the same iteration of ``loop``."""
        import islpy as isl

        if flow is None or not flow.get_may_no_source().is_empty():
            return False
        inside = {s.ordinal for s in loop.statements()}
        same = " and ".join(f"x{k} = y{k}" for k in range(loop.depth + 1))
        for dependence in union_maps(flow.get_may_dependence()):
            source = dependence.get_tuple_name(isl.dim_type.in_)
            sink = dependence.get_tuple_name(isl.dim_type.out)
            if int(source[1:]) not in inside:
                return False  # fed from before the loop
            xs = ", ".join(f"x{k}" for k in range(dependence.dim(isl.dim_type.in_)))
            ys = ", ".join(f"y{k}" for k in range(dependence.dim(isl.dim_type.out)))
            other = self.model.parsed(isl.Map, f"{self.model.header}{{ {source}[{xs}] -> "
                                      f"{sink}[{ys}] : not ({same}) }}")
            if not dependence.intersect(other).is_empty():
                return False  # fed from another iteration
        return True

    def _may_be_fed_in_iteration(self, loop: Loop, key: str,
                                 reads: list[tuple[Statement, Access]]) -> bool:
        """Whether each read that runs has, in its statement, a memory-based RAW dependence
        on the variable from a statement of the loop with '=' down to the loop: a write of
        the same iteration that may feed it. Where one has none, its values come from other
        iterations or from before the loop, and privatizing is ruled out without isl's
        dataflow analysis, the costliest step of an analysis; otherwise only that can tell.
        A read that never runs needs no source. Without the dependences, anything may be."""
        if self.dependences is None:
            return True
        inside = {id(s) for s in loop.statements()}
        levels = loop.depth + 1
        fed = {id(d.sink_statement) for d in self.dependences
               if d.kind == "RAW" and d.variable == key and id(d.source_statement) in inside
               and any(all(v == "=" for v in vector[:levels]) for vector in d.concrete)}
        return all(self.model.access_map(s, a).is_empty() for s, a in reads
                   if id(s) not in fed)

    def copy(self, loop: Loop, key: str, group: list[Dependence]) -> Remedy | None:
        """``copy``, when the reads the WAR dependences ``group`` start from read only values
        from before the loop; ``reads`` names them where other reads of the array do not."""
        reads = self.reads_from_before(loop, key)
        if not reads or any(d.source_access.text not in reads for d in group):
            return None
        every = {a.text for _, a in self.uses(loop, key) if not a.write}
        return Remedy("copy", group[0].array,
                      reads=() if every == reads else tuple(sorted(reads)))

    def reads_values_from_before(self, loop: Loop, key: str) -> bool:
        """No read in the loop sees a value written inside the loop."""
        uses = self.uses(loop, key)
        writes = [(s, a) for s, a in uses if a.write]
        reads = [(s, a) for s, a in uses if not a.write]
        if not reads:
            return False
        flow = self._flow(writes, reads)
        return flow is not None and bool(flow.get_may_dependence().is_empty())

    def reads_from_before(self, loop: Loop, key: str) -> set[str]:
        """The reads of the variable in the loop (as written) that see only values from
        before the loop: no write inside the loop reaches them (isl's dataflow, a read at
        a time). A read written like a write of the loop (the implicit read of ``x[i] +=``)
        is left out: an emitter redirects reads by what they look like, and that one it
        cannot tell from the write."""
        uses = self.uses(loop, key)
        writes = [(s, a) for s, a in uses if a.write]
        written = {a.text for _, a in writes}
        by_text: dict[str, list[tuple[Statement, Access]]] = {}
        for statement, access in uses:
            if not access.write:
                by_text.setdefault(access.text, []).append((statement, access))
        found: set[str] = set()
        for text, reads in by_text.items():
            if text in written:
                continue
            flow = self._flow(writes, reads)
            if flow is not None and flow.get_may_dependence().is_empty():
                found.add(text)
        return found

    def _flow(self, writes: list[tuple[Statement, Access]],
              reads: list[tuple[Statement, Access]],
              covering: frozenset[int] = frozenset()) -> "isl.UnionFlow | None":
        """isl's value-based dataflow from ``writes`` to ``reads`` (the writes in
        ``covering`` taken as must-writes: ``_covering``); None where isl fails (it does on
        some nests of strided loops), so that no remedy is claimed then. Computed once per
        set of accesses: the loops of a nest often ask the same."""
        key = (tuple(id(a) for _, a in writes), tuple(id(a) for _, a in reads), covering)
        if key not in self._flows:
            self._flows[key] = self._compute_flow(writes, reads, covering)
        return self._flows[key]

    def _compute_flow(self, writes: list[tuple[Statement, Access]],
                      reads: list[tuple[Statement, Access]],
                      covering: frozenset[int] = frozenset()) -> "isl.UnionFlow | None":
        import islpy as isl

        model = self.model

        def union(pairs: list[tuple[Statement, Access]]) -> "isl.UnionMap":
            result = model.parsed(isl.UnionMap, f"{model.header}{{ }}")
            for statement, access in pairs:
                result = result.union(isl.UnionMap.from_map(model.access_map(statement, access)))
            return result

        must = [(s, a) for s, a in writes if model.exact(s, a) or id(a) in covering]
        may = [(s, a) for s, a in writes if not model.exact(s, a) and id(a) not in covering]
        info = isl.UnionAccessInfo.from_sink(union(reads))
        info = info.set_must_source(union(must)).set_may_source(union(may))
        info = info.set_schedule_map(self.schedule)
        try:
            return info.compute_flow()
        except isl.Error as err:
            model.note(f"isl's dataflow analysis failed ({str(err).split(' in ')[0]}): "
                       "privatization and copying are not offered")
            return None

    @cached_property
    def schedule(self) -> "isl.UnionMap":
        """The 2d+1 schedule: program positions interleaved with loop counters."""
        import islpy as isl

        positions = _positions(self.model.nest.body)
        depth = max((len(s.loops) for s in self.model.nest.statements), default=0)
        result = isl.UnionMap(f"{self.model.header}{{ }}")
        for statement in self.model.nest.statements:
            coords: list[str] = []
            path = positions[id(statement)]
            for level, loop in enumerate(statement.loops):
                coords += [str(path[level]), ("" if loop.step > 0 else "-") + f"x{level}"]
            coords.append(str(path[len(statement.loops)]))
            coords += ["0"] * (2 * depth + 1 - len(coords))
            text = (f"{self.model.header}{{ {self.model.point(statement, 'x')} -> "
                    f"[{', '.join(coords)}] }}")
            result = result.union(isl.UnionMap(text))
        return result

    # -- reductions and scans ---------------------------------------------------------------
    def reduction(self, loop: Loop, key: str, group: list[Dependence]) -> Remedy | None:
        uses = self.uses(loop, key)
        statements = list({id(s): s for s, _ in uses}.values())
        op = reduction_operator(statements, key, [(d.source_access, d.sink_access)
                                                  for d in group])
        if op is None:
            return None
        name = uses[0][1].variable.name
        inner = {l.var for s in statements for l in s.loops if loop in l.enclosing}
        targets = {s.writes[0].text for s in statements}
        fixed = all(a.affine and not (_symbols(a) & inner) for _, a in uses
                    if a.text in targets)
        return Remedy("reduction" if fixed else "generalized reduction", name, op)

    def scan(self, loop: Loop, key: str, group: list[Dependence]) -> Remedy | None:
        uses = self.uses(loop, key)
        writers = {id(s): s for s, a in uses if a.write}
        if len(writers) != 1:
            return None
        writer = next(iter(writers.values()))
        update = writer.update
        if update is None or update.target_elsewhere or update.op not in ASSOCIATIVE:
            return None
        name = uses[0][1].variable.name
        op = "+" if update.op == "-" else update.op
        if update.same_location:
            # a scalar accumulator that other statements of the loop read: a scan
            readers = {id(s) for s, a in uses if not a.write and s is not writer}
            return Remedy("scan", name, op) if readers and not uses[0][1].subscripts else None
        level = loop.depth
        for dependence in group:
            if dependence.kind != "RAW" or dependence.source_statement is not writer \
                    or dependence.sink_statement is not writer:
                return None
            distance = dependence.distance
            expected = [0] * len(distance)
            expected[level] = abs(loop.step)
            if list(distance) != expected:
                return None
        return Remedy("scan", name, op)


def reduction_operator(statements: list[Statement], key: str,
                       carried: list[tuple[Access, Access]]) -> str | None:
    """The operator when every statement of a loop that touches the variable is an update
    ``x op= e`` with one associative operator, and the dependences the loop carries on it
    (``carried``: pairs of accesses) join only the updates' targets: other elements of the
    array may be read in ``e`` where the loop never makes them meet the target (a
    triangular solve's ``x[i] -= L[i, j] * x[j]``, ``j < i``), so that partial results
    combined after the loop are what each iteration would have seen."""
    ops: set[str] = set()
    targets: set[str] = set()
    for statement in statements:
        mine = [a for a in statement.accesses if a.variable.key == key]
        if not mine:
            continue
        update = statement.update
        if (update is None or not update.same_location or update.op not in ASSOCIATIVE
                or statement.writes[0].variable.key != key):
            return None
        ops.add("+" if update.op == "-" else update.op)
        targets.add(statement.writes[0].text)
        if not update.target_elsewhere and len(mine) != 2:
            return None
    if len(ops) != 1 or any(a.text not in targets or b.text not in targets
                            for a, b in carried):
        return None
    return ops.pop()


def _symbols(access: Access) -> set[str]:
    return set().union(*(s.symbols() for s in access.subscripts if s is not None))


def _positions(body: list[Node], prefix: tuple[int, ...] = ()) -> dict[int, tuple[int, ...]]:
    """Child indices from the function body down to every statement."""
    out: dict[int, tuple[int, ...]] = {}
    for index, node in enumerate(body):
        if isinstance(node, Loop):
            out.update(_positions(node.body, prefix + (index,)))
        else:
            out[id(node)] = prefix + (index,)
    return out
