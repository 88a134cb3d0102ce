"""Register tiles held in vector lanes: a tiled band's innermost strip of results kept in
vector registers for the whole run of the loop around it (``transform.steps.hold``), the
BLIS micro-kernel written as steps.

The planner's register tile (``planner.jammed_loops``: unroll-and-jam by 4 of the two loops
nearest the innermost) leaves the results in memory: each jammed copy loads and stores its
row of ``C`` at every iteration of ``k``. Here the band ``(..., i, k, j)`` becomes
``stripmine(j, W)``, ``interchange(k, jv)``, ``unroll(i, R, jam=True)``, ``hold(k)``: an
``R`` x ``W`` block of ``C`` in ``R * W / lanes`` vector registers for a run of ``k``, one
vector of ``B`` and ``R`` values of ``A`` per ``k``. ``W`` is two vectors of the CPU's
width (32 float32 or 16 float64 lanes with 512-bit vectors), ``R`` 8 where there are 32
vector registers (AVX-512), else 4: 16 or 8 of them hold the block, the rest the operands.
Measured on the lectures' MMM (1024^3, float32, 2 cores of an AVX-512 EPYC, 2026-12-01):
the 4 x 4 jammed tile 20.0 ms, held 8 x 32 5.4 ms, 4 x 16 21.4 ms, 8 x 16 9.9 ms, 4 x 32
9.9 ms; NumPy's BLAS 8.4 ms.

Offered before the plan it comes from, which stays (the search measures both); the
transformer refuses ``hold`` where something other than the held updates touches their
arrays, and the plan then falls back as any other does. A packed plan holds its block too:
``hold`` follows the ``stage`` steps and reads a packed panel as the run reads it, along a
row of the buffer (syrk's ``A[j, k]``). Rows of a triangle (trmm's ``k`` from ``i + 1``,
syrk's ``j`` up to ``i``) are jammed as well: each run is held where its start finds isl's
guards true throughout it, and runs as written on the diagonal.
"""

from __future__ import annotations

from dataclasses import replace

from loclab.cpu.vector_width import features_in_use, vector_bits
from loclab.optimize.locality import array_accesses, stride
from loclab.optimize.planner import Context, Decision, NestPlan, jammed_loops
from loclab.transform.recipe import make_step

VECTORS = 2  # vectors a held row spans
WIDE_ROWS, NARROW_ROWS = 8, 4  # rows held with 32 vector registers (AVX-512), with 16


def with_held(context: Context, plans: list[NestPlan]) -> list[NestPlan]:
    """``plans`` with, before each register-tiled one whose band ends in a loop a sum runs
    along and a vector loop, the same plan holding its results in vector lanes."""
    out: list[NestPlan] = []
    offered: set[tuple[object, ...]] = set()
    for plan in plans:
        held = _held(context, plan)
        if held is not None and held.key not in offered:  # a plan and its fallback: once
            offered.add(held.key)
            out.append(held)
        out.append(plan)
    return out


def lane_shape(element_bytes: int) -> tuple[int, int]:
    """(rows, lanes) of a held block on this CPU for elements of ``element_bytes``."""
    bits = vector_bits(features_in_use()) or 256
    rows = WIDE_ROWS if bits >= 512 else NARROW_ROWS
    return rows, VECTORS * bits // 8 // element_bytes


def _held(context: Context, plan: NestPlan) -> NestPlan | None:
    """The plan with its register tile held in lanes, or None where its band is not
    ``(..., i, k, j)`` with the written elements moving with ``j`` alone along a row and
    not with ``k``, and ``i`` a loop whose copies share a read of ``j``'s row."""
    band = plan.band
    if band is None or not (plan.registers or plan.packs) or len(band.loops) < 3:
        return None
    order = band.loops
    inner, run = order[-1], order[-2]
    # the band's statements (a distributed nest's others lie in loops apart from it), none
    # in a loop below it
    statements = [s for s in plan.top.statements() if set(order) <= set(s.loops)]
    if not statements or any(len(s.loops) != len(order) for s in statements):
        return None
    accesses = array_accesses(context.model, statements)
    for access in accesses:
        if access.access.write and (access.subscripts is None
                                    or stride(access.subscripts, run.var) != "invariant"
                                    or stride(access.subscripts, inner.var) != "unit"):
            return None
    # a loop whose copies run different ranges of the strip or of the run (a triangle's
    # rows) puts guards inside the run: held where the run's start finds them all true
    jammed = [loop for loop, _ in jammed_loops(accesses, order, guarded=True)
              if loop is not run]
    if not jammed:
        return None
    rows, lanes = lane_shape(context.element_bytes)
    strip = f"{inner.var}_lanes"
    name = plan.name
    steps = (
        Decision(make_step("stripmine", name(inner), lanes, strip),
                 f"{inner.var} in strips of {lanes} lanes ({VECTORS} vectors)"),
        Decision(make_step("interchange", name(run), strip),
                 f"a run of {run.var} inside each strip"),
        Decision(make_step("unroll", name(jammed[0]), rows, keywords=[("jam", True)]),
                 f"{rows} rows of {jammed[0].var} share each vector read along "
                 f"{inner.var}"),
        Decision(make_step("hold", name(run)),
                 f"register tiling in vector lanes: a {rows} x {lanes} block of results "
                 f"held in registers for each run of {run.var}"))
    return replace(plan, registers=steps)
