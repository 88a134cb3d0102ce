"""From a program to source text: schedule, isl's loops, storage, then one emitter."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from loclab.nest.ir import Variable
from loclab.transform.buffers import BufferMarker
from loclab.transform.codegen import Code, Codegen
from loclab.transform.schedule import Schedule
from loclab.transform.storage import Expansion, Placement, expansions, placements
from loclab.transform.tree import Program


@dataclass(frozen=True)
class Lowered:
    """A program lowered for an emitter: isl's code tree, where its private and expanded
    variables live, and the buffers its stage and copy steps fill."""

    program: Program
    code: list[Code]
    placements: dict[str, Placement]
    expansions: dict[str, Expansion]
    buffers: list[BufferMarker]


def lower(program: Program) -> Lowered:
    from loclab.transform.buffers import buffer_markers

    schedule = Schedule(program)
    markers = buffer_markers(program, schedule)
    code = Codegen(schedule, [m.marker for m in markers]).run()
    return Lowered(program, code, placements(program, schedule),
                   expansions(program, schedule), markers)


def emit_code(program: Program, emit: str,
              scalar_types: Mapping[str, str] | None = None,
              overlaps: list[tuple[Variable, Variable]] | None = None,
              as_written: Program | None = None,
              array_types: Mapping[str, str] | None = None) -> str:
    """``overlaps``: pairs of arrays that may share memory, which the code checks first,
    running as written when they do (``loclab.transform.versioning``; CUDA refuses to run
    instead); C needs the function as written (``as_written``, a program of no step) to emit
    that branch. ``array_types``: CUDA's element type of arrays (``emit_cuda.array_types``)."""
    lowered = lower(program)
    if emit == "cuda":
        from loclab.transform.emit_cuda import CudaOutput, array_types as typed, emit_cuda

        return emit_cuda(CudaOutput(program, typed(program, dict(array_types or {})),
                                    [(a.name, b.name) for a, b in overlaps or []],
                                    lowered.buffers, lowered.placements),
                         lowered.code)
    if emit in ("python", "numba"):
        from loclab.transform.emit_python import PythonOutput, emit_python

        return emit_python(PythonOutput(program, lowered.placements, lowered.expansions,
                                        emit == "numba", lowered.buffers,
                                        dict(scalar_types or {}),
                                        [(a.name, b.name) for a, b in overlaps or []]),
                           lowered.code)
    from loclab.transform.emit_c import emit_c

    if overlaps and as_written is not None:
        from loclab.transform.versioning import c_overlap_test

        return emit_c(lowered, (c_overlap_test(program, overlaps), lower(as_written)))
    return emit_c(lowered)
