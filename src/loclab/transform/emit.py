"""From a program to source text: schedule, isl's loops, storage, then one emitter."""

from __future__ import annotations

from collections.abc import Mapping

from loclab.transform.codegen import Codegen
from loclab.transform.schedule import Schedule
from loclab.transform.storage import expansions, placements
from loclab.transform.tree import Program


def emit_code(program: Program, emit: str,
              scalar_types: Mapping[str, str] | None = None) -> str:
    from loclab.transform.buffers import buffer_markers

    schedule = Schedule(program)
    markers = buffer_markers(program, schedule)
    code = Codegen(schedule, [m.marker for m in markers]).run()
    placed = placements(program)
    shapes = expansions(program, schedule)
    if emit in ("python", "numba"):
        from loclab.transform.emit_python import PythonOutput, emit_python

        return emit_python(PythonOutput(program, placed, shapes, emit == "numba", markers,
                                        dict(scalar_types or {})), code)
    from loclab.transform.emit_c import emit_c

    return emit_c(program, code, placed, shapes, markers)
