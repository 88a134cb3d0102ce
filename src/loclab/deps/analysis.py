"""One function's analysis: dependences, loop verdicts, remedies, interchange, distribution.

:func:`analyze_nest` runs every step on a :class:`~loclab.nest.ir.Nest`; :class:`Analysis`
holds the answers with the ids users see (``L1``, ``S1``, ``D1``) and renders them as text
(:meth:`Analysis.explain`) or as the JSON of ``loclab analyze --json``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from loclab.deps.dependences import Dependence, compute_dependences
from loclab.deps.distribution import Piece, distribute
from loclab.deps.idioms import Idiom, find_idioms
from loclab.deps.interchange import CutBand, Interchange, cut_bands, interchanges
from loclab.deps.model import Model
from loclab.deps.overlap import Overlap, overlaps
from loclab.deps.remedies import Remedies, Remedy
from loclab.nest.ir import Loop, Nest, Statement


@dataclass
class LoopReport:
    """The verdict on one loop."""

    loop: Loop
    carried: list[Dependence]
    remedies: list[Remedy]
    unresolved: list[Dependence]
    overlaps: list[Overlap] = field(default_factory=list)  # overlaps that make it carry

    @property
    def id(self) -> str:
        return self.loop.id

    @property
    def var(self) -> str:
        return self.loop.var

    @property
    def line(self) -> int:
        return self.loop.line

    @property
    def depth(self) -> int:
        return self.loop.depth

    @property
    def parallel(self) -> bool:
        """A DOALL exactly as written, whatever the arguments are: it carries no
        memory-based dependence, and no overlap of arguments would make it carry one."""
        return not self.carried and not self.overlaps

    @property
    def parallel_if_distinct(self) -> bool:
        """A DOALL when the arguments that may overlap (``overlaps``) do not."""
        return not self.carried

    def remedy_for(self, key: str) -> Remedy | None:
        """What removes the dependences this loop carries on one variable (by key), if any."""
        if any(d.variable == key for d in self.unresolved):
            return None
        return next((r for r in self.remedies if r.key == key), None)

    @property
    def carries(self) -> list[str]:
        return [d.id for d in self.carried]

    @property
    def parallel_after(self) -> list[str]:
        """What makes it parallel (when the arguments that may overlap do not); empty when
        parallel already or when nothing does."""
        if self.parallel_if_distinct or self.unresolved:
            return []
        return [r.label() for r in self.remedies]

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "var": self.var, "file": self.loop.file, "line": self.line,
                "depth": self.depth, "parallel": self.parallel,
                "parallel_if_distinct": self.parallel_if_distinct,
                "overlaps": [list(o.names) for o in self.overlaps],
                "parallel_after": self.parallel_after,
                "carries": self.carries, "blocking": [d.id for d in self.unresolved]}


@dataclass
class StatementReport:
    statement: Statement

    @property
    def id(self) -> str:
        return self.statement.id

    @property
    def line(self) -> int:
        return self.statement.line

    @property
    def source(self) -> str:
        return self.statement.source

    @property
    def loops(self) -> list[str]:
        return [loop.id for loop in self.statement.loops]

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "file": self.statement.file, "line": self.line,
                "source": self.source, "loops": self.loops}


@dataclass
class Analysis:
    """Everything ``loclab analyze`` says about one function."""

    nest: Nest
    params: dict[str, int]
    dependences: list[Dependence]
    loops: list[LoopReport]
    statements: list[StatementReport]
    interchange_options: list[Interchange]
    pieces: list[Piece]
    notes: list[str] = field(default_factory=list)
    cut_bands: list[CutBand] = field(default_factory=list)  # orders not all listed
    overlaps: list[Overlap] = field(default_factory=list)  # arguments that may share memory
    assume_distinct: bool = False  # the user said no arguments overlap
    # loops that step by a size of unknown sign (Python's range(lo, hi, inc)): this analysis
    # assumes the sizes positive, counting_down is the one with them negative
    counting_down: "Analysis | None" = None
    # conditional reductions, arg-reductions, compactions, linear recurrences and
    # segmented scans (``deps.idioms``)
    idioms: list[Idiom] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.nest.name

    @property
    def filename(self) -> str:
        return self.nest.filename

    @property
    def interchanges(self) -> list[dict[str, Any]]:
        return [option.to_json() for option in self.interchange_options]

    @property
    def distribution(self) -> list[dict[str, Any]]:
        return [piece.to_json() for piece in self.pieces]

    @property
    def reductions(self) -> list[dict[str, Any]]:
        """Reductions, generalized reductions and scans, per loop that carries them."""
        return [{"loop": report.id, "variable": remedy.variable, "kind": remedy.kind,
                 "op": remedy.op}
                for report in self.loops for remedy in report.remedies
                if remedy.kind in {"reduction", "generalized reduction", "scan"}]

    def loop(self, ref: str) -> LoopReport:
        """A loop report by id (``L2``) or, when unambiguous, by variable name."""
        matches = [r for r in self.loops if ref in {r.id, r.var}]
        if len(matches) != 1:
            raise KeyError(f"{ref!r} names {len(matches)} loops")
        return matches[0]

    def to_json(self) -> dict[str, Any]:
        return {
            "function": self.name, "file": self.filename, "line": self.nest.line,
            "language": self.nest.language, "params": dict(self.params),
            "parameters": list(self.nest.parameters),
            "loops": [r.to_json() for r in self.loops],
            "statements": [s.to_json() for s in self.statements],
            "dependences": [d.to_json() for d in self.dependences],
            "interchanges": self.interchanges,
            "distribution": self.distribution,
            "reductions": self.reductions,
            "idioms": [idiom.to_json() for idiom in self.idioms],
            "aliasing": self.aliasing(),
            "strides": self.strides(),
            "notes": list(self.notes) + [cut.text() for cut in self.cut_bands],
        }

    def strides(self) -> dict[str, Any] | None:
        """Loops that step by a size: the sign assumed, and the verdicts with the other one
        where the code leaves it open (``strides`` in JSON; None without such loops)."""
        loops = [loop for loop in self.nest.loops if loop.stride is not None]
        if not loops:
            return None
        assumed = [f"{loop.stride} {'>= 1' if loop.step > 0 else '<= -1'}" for loop in loops]
        down = self.counting_down
        return {"assumed": assumed, "counting_down": None if down is None else {
            "assumed": [f"{loop.stride} <= -1" for loop in loops if not loop.signed],
            "loops": [r.to_json() for r in down.loops],
            "dependences": [d.to_json() for d in down.dependences]}}

    def aliasing(self) -> dict[str, Any]:
        """What the verdicts assume about arguments sharing memory (``aliasing`` in JSON)."""
        if self.assume_distinct:
            assumption = "arguments assumed distinct (assume_distinct): no two share memory"
        elif self.overlaps:
            assumption = ("dependences, interchanges and distribution are those of distinct "
                          "arrays; a loop is parallel whatever the arguments are, "
                          "parallel_if_distinct when the may_overlap pairs do not overlap")
        else:
            assumption = "no two arrays written here can share memory"
        return {"assume_distinct": self.assume_distinct, "assumption": assumption,
                "may_overlap": [o.to_json() for o in self.overlaps]}

    def explain(self) -> str:
        from loclab.deps.explain import explain

        return explain(self)


def analyze_nest(nest: Nest, params: Mapping[str, int] | None = None,
                 assume_distinct: bool = False) -> Analysis:
    """``assume_distinct``: the user vouches that no two arguments share memory. A loop that
    steps by a size whose sign the code leaves open is analyzed counting up, and again
    counting down (``Analysis.counting_down``)."""
    analysis = _analyze_nest(nest, params, assume_distinct)
    unsigned = [loop for loop in nest.loops if not loop.signed]
    if unsigned:
        for loop in unsigned:
            loop.step = -loop.step
        try:
            analysis.counting_down = _analyze_nest(nest, params, assume_distinct)
        finally:
            for loop in unsigned:
                loop.step = -loop.step
    return analysis


def _analyze_nest(nest: Nest, params: Mapping[str, int] | None,
                  assume_distinct: bool) -> Analysis:
    model = Model(nest, params)
    dependences = compute_dependences(model)
    shared = [] if assume_distinct else overlaps(model)
    remedies = Remedies(model, dependences)
    reports: list[LoopReport] = []
    privatized: dict[int, dict[str, Remedy]] = {}
    for loop in nest.loops:
        carried = [d for d in dependences if d.carrier is loop]
        found, unresolved = remedies.for_loop(loop, carried)
        reports.append(LoopReport(loop, carried, found, unresolved,
                                  [o for o in shared if loop in o.carriers]))
        privatized[id(loop)] = {key: remedy for key in dict.fromkeys(d.variable for d in carried)
                                if (remedy := remedies.privatization(loop, key)) is not None}
    pieces = distribute(nest, dependences, privatized)
    orders = interchanges(nest, dependences, remedies.privatization)
    return Analysis(nest=nest, params=dict(model.sizes), dependences=dependences,
                    loops=reports, statements=[StatementReport(s) for s in nest.statements],
                    interchange_options=orders, pieces=pieces, notes=model.notes,
                    cut_bands=cut_bands(nest, dependences), overlaps=shared,
                    assume_distinct=assume_distinct,
                    idioms=find_idioms(nest, lambda loop, key: remedies.privatization(
                        loop, key) is not None))
