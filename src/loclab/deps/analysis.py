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
from loclab.deps.interchange import CutBand, Interchange, cut_bands, interchanges
from loclab.deps.model import Model
from loclab.deps.remedies import Remedies, Remedy
from loclab.nest.ir import Loop, Nest, Statement


@dataclass
class LoopReport:
    """The verdict on one loop."""

    loop: Loop
    carried: list[Dependence]
    remedies: list[Remedy]
    unresolved: list[Dependence]

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
        """A DOALL exactly as written: it carries no memory-based dependence."""
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
        """What makes it parallel; empty when parallel already or when nothing does."""
        if self.parallel or self.unresolved:
            return []
        return [r.label() for r in self.remedies]

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "var": self.var, "file": self.loop.file, "line": self.line,
                "depth": self.depth, "parallel": self.parallel, "parallel_after": self.parallel_after,
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
            "dependences": [_dependence_json(d) for d in self.dependences],
            "interchanges": self.interchanges,
            "distribution": self.distribution,
            "reductions": self.reductions,
            "notes": list(self.notes) + [cut.text() for cut in self.cut_bands],
        }

    def explain(self) -> str:
        from loclab.deps.explain import explain

        return explain(self)


def _dependence_json(d: Dependence) -> dict[str, Any]:
    return {"id": d.id, "kind": d.kind, "array": d.array, "source": d.source,
            "sink": d.sink, "direction": list(d.direction), "distance": list(d.distance),
            "carried_by": d.carried_by, "loops": [l.id for l in d.loops], "exact": d.exact,
            "source_access": d.source_access.text, "sink_access": d.sink_access.text}


def analyze_nest(nest: Nest, params: Mapping[str, int] | None = None) -> Analysis:
    model = Model(nest, params)
    dependences = compute_dependences(model)
    remedies = Remedies(model, dependences)
    reports: list[LoopReport] = []
    privatized: dict[int, dict[str, Remedy]] = {}
    for loop in nest.loops:
        carried = [d for d in dependences if d.carrier is loop]
        found, unresolved = remedies.for_loop(loop, carried)
        reports.append(LoopReport(loop, carried, found, unresolved))
        privatized[id(loop)] = {key: remedy for key in dict.fromkeys(d.variable for d in carried)
                                if (remedy := remedies.privatization(loop, key)) is not None}
    pieces = distribute(nest, dependences, privatized)
    orders = interchanges(nest, dependences, remedies.privatization)
    return Analysis(nest=nest, params=dict(model.sizes), dependences=dependences,
                    loops=reports, statements=[StatementReport(s) for s in nest.statements],
                    interchange_options=orders, pieces=pieces, notes=model.notes,
                    cut_bands=cut_bands(nest, dependences))
