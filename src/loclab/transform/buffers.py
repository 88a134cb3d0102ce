"""Arrays read through a copy: the slice a loop reads, as isl computes it.

``stage(B, kk)`` copies, at the start of every iteration of ``kk``, the slice of ``B`` that
iteration reads (the slides' "remap read-only slices": ``A[ii:ii+R][kk:kk+T]``); ``copy(A,
i)`` copies, before the loop, everything the loop reads of ``A`` (WAR elimination). Either
way the slice is a box: per dimension, the smallest and largest subscript the reads take,
functions of the loops around that point, which isl computes exactly from the accesses and
the schedule. The copy is code at a *marker*, an extra point of the schedule, so that isl
places it at the right spot of the loops it generates (:mod:`loclab.transform.codegen`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from loclab.transform.codegen import Marker, Value, parameter_value
from loclab.transform.schedule import POSITION_STRIDE, Schedule
from loclab.transform.tree import Buffer, LoopNode, Program


@dataclass(eq=False)
class BufferMarker:
    """One buffer's marker: where the copy goes, and the names the emitted code uses."""

    buffer: Buffer
    marker: Marker
    path: list[LoopNode]  # the loops around the marker (codegen names them from this)
    rank: int
    schedule: Schedule

    @functools.cached_property
    def extents(self) -> list[Value]:
        """The largest slice per dimension, functions of the sizes (C declares the buffer
        with them): computed only for an emitter that asks, isl's maxima over every point
        of the marker being a good part of a register tile's emission."""
        functions = self.marker.functions
        return [_largest(self.schedule, functions[f"lo{k}"], functions[f"hi{k}"])
                for k in range(self.rank)]

    @functools.cached_property
    def bounded_extents(self) -> list[int | None]:
        """Per dimension, the largest slice at any sizes where that is a number (a tile's
        width: 64 even where the sizes are smaller), else None: the shape Numba allocates a
        staged buffer at reads as a number, where isl's largest slice over the sizes is a
        piecewise expression several lines long."""
        functions = self.marker.functions
        return [_bounded(functions[f"lo{k}"], functions[f"hi{k}"]) for k in range(self.rank)]

    @property
    def lows(self) -> list[str]:
        return [f"{self.buffer.name}_lo{k}" for k in range(self.rank)]

    @property
    def order(self) -> list[int]:
        """The array's dimensions in the buffer's order (reversed where it is transposed)."""
        dims = list(range(self.rank))
        return dims[::-1] if self.buffer.transposed else dims

    def in_buffer_order(self, items: list) -> list:
        """Per-dimension items of the array (subscripts, extents) in the buffer's order."""
        return [items[k] for k in self.order]

    def in_array_order(self, items: list) -> list:
        """Per-dimension items of the buffer (its extents) in the array's order."""
        out = list(items)
        for position, k in enumerate(self.order):
            out[k] = items[position]
        return out

    def covers(self, unit: object) -> bool:
        """Whether the unit's reads of the array go through this buffer."""
        return self.buffer.covers(unit)


def buffer_markers(program: Program, schedule: Schedule) -> list[BufferMarker]:
    return [_marker(program, schedule, buffer, number)
            for number, buffer in enumerate(program.buffers)]


def _marker(program: Program, schedule: Schedule, buffer: Buffer,
            number: int) -> BufferMarker:
    model = program.model
    loop = buffer.loop
    around = program.path(loop)
    path = around + [loop] if buffer.kind == "stage" else around
    name = f"M{number}"
    zs = [f"z{k}" for k in range(len(path))]
    head = f"{name}[{', '.join(zs)}]"
    positions = _positions(program, loop)
    times: list[str] = [str(positions[0])]
    for level, z in enumerate(zs):
        times += [z, str(positions[level + 1]) if level + 1 < len(positions) else "0"]
    if buffer.kind == "copy":
        times[-1] = str(positions[len(path)] - 1)  # just before the loop
    else:
        times[-1] = "0"  # the start of each iteration, before every child
    times += ["0"] * (schedule.depth - len(times))
    found = [(schedule.by_unit[id(u)], s, a) for u in loop.units() for s in u.statements
             for a in s.accesses if a.variable is buffer.variable and not a.write
             and buffer.serves(a.text)]
    rank = len(found[0][2].subscripts)
    domains: list[str] = []
    functions: dict[str, list[str]] = {}
    # Under the loops a GPU block's threads run, the slice is the block's: what the
    # iterations of every loop from the outermost of them down to the staged loop read (the
    # same slice for every thread, which copy it together).
    first = next((k for k, node in enumerate(path) if node.gpu.startswith("threadIdx")),
                 len(path))
    shared = [first <= k < len(path) - 1 for k in range(len(path))]
    for placed, statement, access in found:
        coords = ", ".join(f"x{k}" for k in range(len(statement.loops)))
        domain = " and ".join([model.domain(statement, "x"), *placed.unit.restriction])
        values = [f"{z} = {schedule.value(node, placed.unit)}" for z, node in zip(zs, path)]
        where = " and ".join([*values, domain])
        domains.append(f"{head} : exists ({coords} : {where})")
        frees = [f"w{k}" for k, free in enumerate(shared) if free]
        block = " and ".join([*(f"w{k} = {value.split(' = ', 1)[1]}" if free else value
                                for k, (value, free) in enumerate(zip(values, shared))),
                              domain])
        for k, subscript in enumerate(access.subscripts):
            text = model.render(subscript, statement, "x")
            functions.setdefault(f"v{k}", []).append(
                f"{head} -> [v] : exists ({', '.join([coords, *frees])} : v = {text} and "
                f"{block})")
    domain = f"{model.header}{{ {'; '.join(domains)} }}"
    bounds = _bounds(model.header, functions)
    marker = Marker(name, domain, f"{model.header}{{ {head} -> [{', '.join(times)}] }}",
                    bounds)
    result = BufferMarker(buffer, marker, path, rank, schedule)
    marker.payload = result
    return result


def _bounds(header: str, functions: dict[str, list[str]]) -> dict[str, str]:
    """Per dimension ``lo{k}`` and ``hi{k}``: the least and largest subscript, as functions."""
    import islpy as isl

    out: dict[str, str] = {}
    for key, pieces in functions.items():
        relation = isl.Map(f"{header}{{ {'; '.join(pieces)} }}")
        k = key[1:]
        out[f"lo{k}"] = str(relation.lexmin_pw_multi_aff().get_pw_aff(0))
        out[f"hi{k}"] = str(relation.lexmax_pw_multi_aff().get_pw_aff(0))
    return out


def _largest(schedule: Schedule, low: str, high: str) -> Value:
    """The largest extent ``high - low + 1`` of a slice over every point of its marker, a
    function of the sizes (C declares the buffer with it, once, before the copies)."""
    import islpy as isl

    from loclab.transform.storage import single

    width = isl.PwAff(high).sub(isl.PwAff(low))
    values = isl.Set(str(width.as_map().range()))
    largest = values.dim_max(0).add_constant_val(isl.Val.int_from_si(values.get_ctx(), 1))
    return parameter_value(schedule, str(single(largest, schedule.model.header)))


def _bounded(low: str, high: str) -> int | None:
    """The largest ``high - low + 1`` over every point and every value of the sizes, where
    it is bounded."""
    import islpy as isl

    widths = isl.Set(str(isl.PwAff(high).sub(isl.PwAff(low)).as_map().range()))
    widths = widths.project_out(isl.dim_type.param, 0, widths.dim(isl.dim_type.param))
    if widths.is_empty():
        return None
    largest = widths.dim_max_val(0)
    return largest.to_python() + 1 if largest.is_int() else None


def _positions(program: Program, loop: LoopNode) -> list[int]:
    """The position of each loop on the path to ``loop`` (and of ``loop``) among siblings."""
    out: list[int] = []
    body = program.body
    for node in program.path(loop) + [loop]:
        index = next(k for k, child in enumerate(body) if child is node)
        out.append(POSITION_STRIDE * index + 1)
        body = node.body
    return out
