"""From a program to source text: schedule, isl's loops, storage, then one emitter."""

from __future__ import annotations

from collections.abc import Mapping

from loclab.transform.codegen import Codegen
from loclab.transform.schedule import Schedule
from loclab.transform.storage import expansions, placements
from loclab.nest.ir import Variable
from loclab.transform.tree import Program


def emit_code(program: Program, emit: str,
              scalar_types: Mapping[str, str] | None = None,
              overlaps: list[tuple[Variable, Variable]] | None = None,
              as_written: Program | None = None) -> str:
    """``overlaps``: pairs of arrays that may share memory, which the code checks first,
    running as written when they do (``loclab.transform.versioning``); C needs the function
    as written (``as_written``, a program of no step) to emit that branch."""
    from loclab.transform.buffers import buffer_markers

    schedule = Schedule(program)
    markers = buffer_markers(program, schedule)
    code = Codegen(schedule, [m.marker for m in markers]).run()
    placed = placements(program)
    shapes = expansions(program, schedule)
    if emit in ("python", "numba"):
        from loclab.transform.emit_python import PythonOutput, emit_python

        return emit_python(PythonOutput(program, placed, shapes, emit == "numba", markers,
                                        dict(scalar_types or {}),
                                        [(a.name, b.name) for a, b in overlaps or []]), code)
    from loclab.transform.emit_c import emit_c

    if overlaps and as_written is not None:
        from loclab.transform.versioning import c_overlap_test

        return emit_c(program, code, placed, shapes, markers,
                      (c_overlap_test(program, overlaps), _c_pieces(as_written)))
    return emit_c(program, code, placed, shapes, markers)


def _c_pieces(program: Program) -> tuple:
    """What emit_c needs to emit ``program`` (the function as written): its code tree,
    storage and buffers."""
    from loclab.transform.buffers import buffer_markers

    schedule = Schedule(program)
    markers = buffer_markers(program, schedule)
    code = Codegen(schedule, [m.marker for m in markers]).run()
    return program, code, placements(program), expansions(program, schedule), markers
