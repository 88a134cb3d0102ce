"""Time tiling of a time-iterated stencil: ``for t: nest; nest; ...`` whose arrays are past
the L2 (issue 33, after Pluto).

Parallel sweeps bring every array from memory (or the last-level cache) once per time step.
Time tiling runs ``T`` steps over a few rows before moving on, so that the rows stay in the
L2 between steps:

1. the outer loops of the nests in ``t``'s body are **fused**, each shifted so that no
   dependence inside one step runs backwards (jacobi's second sweep one row behind the
   first: it reads the first sweep's rows ``i - 1 .. i + 1``);
2. the fused loop is **skewed** by ``t`` so that no dependence between steps runs backwards
   (row ``i`` of step ``t + 1`` reads rows up to ``i + 2`` of step ``t``: ``i + 2*t``);
3. the band ``(t, i)`` is **tiled**: ``T`` steps over ``R = ratio * T`` rows of the
   skewed space (about ``R + factor * T`` rows of the arrays), ``R`` as many rows as fit
   half the L2;
4. the tiles run in **wavefronts**: the tile loop of ``i``, skewed by ``ratio`` times the
   tile loop of ``t`` (a tile's wave is the sum of its two tile indices), leads, and the
   tiles of one wave run in parallel (each needs only tiles of earlier waves).

The shifts and the skew factor are the smallest that make every dependence's offset
non-negative, found on the dependence relations with isl; the transformer proves each step
again. Inner loops (``j``) are not fused: each stays a unit-stride loop the compiler
vectorizes (fused, the second sweep's read of the first's ``j - 1`` would be a dependence
inside it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from loclab.nest.ir import Loop
from loclab.optimize.locality import Reuse
from loclab.optimize.planner import (Context, Decision, NestPlan, TiledBand, bounds_name,
                                     label)
from loclab.optimize.tiles import TILE_SIZES, TileChoice
from loclab.model.cache import format_bytes
from loclab.transform.recipe import make_step

if TYPE_CHECKING:
    import islpy as isl

    from loclab.deps.dependences import Use
    from loclab.nest.ir import Access

LARGEST_OFFSET = 4  # shifts and skew factors tried: a stencil's reach is a few rows
RATIOS = tuple(2 ** k for k in range(11))  # a tile's rows over its steps: 1 to 1,024
# a fused innermost loop's sweeps kept a multiple of this many iterations apart: the second
# reads what the first wrote 8 iterations before, which LLVM's vectorizer allows; one apart,
# heat-1d's fused loop stayed scalar (73 ms a thread against the sweeps' 46), and 9 apart
# too (445 ms on 2 threads against 213 at 8 and 16)
LANES = 8
WAVE_TILES = 4  # tiles a full wave should hold per thread: fewer left threads idle


@dataclass(frozen=True)
class TimeTiling:
    """How a time loop's nests become one tileable band."""

    time: Loop
    nests: tuple[Loop, ...]  # the outer loop of each nest in the time loop's body
    shifts: tuple[int, ...]  # each nest's shift in the fused loop (the first's is 0)
    factor: int  # the skew of the fused loop by the time loop
    spread: int = 0  # shifts after a dependence a multiple of this, at least (``LANES``)


def time_tiling(context: Context, top: Loop) -> TimeTiling | None:
    """The fusion shifts and skew factor that make ``top``'s steps one tileable band; None
    where ``top`` is no time loop of stencil sweeps (it is parallel or counts down, its body
    holds a statement, a nest's loop has a step, a loop's range moves with it, a step
    writes elsewhere than the step before, or some dependence reaches too far)."""
    nests = tuple(node for node in top.body if isinstance(node, Loop))
    if context.report(top).parallel or top.step < 1 or top.stride is not None \
            or not nests or len(nests) < len(top.body) \
            or any(nest.step != 1 or nest.stride is not None for nest in nests) \
            or any(bounds_name(loop, top.var) for loop in context.analysis.nest.loops
                   if top in loop.enclosing and loop is not top) \
            or any(_moves_with(access, top) for nest in nests
                   for statement in nest.statements() for access in statement.writes):
        return None
    deltas = nest_deltas(context, top, nests)
    # fused innermost (sweeps of one loop each), a value one sweep writes and the next reads
    # an iteration later is a dependence inside the vector loop: kept lanes apart
    spread = LANES if not any(isinstance(c, Loop) for nest in nests for c in nest.body) else 0
    shifts = [0]
    for b in range(1, len(nests)):
        # within a step, each nest at least as far behind every nest before it as its
        # dependences on that nest reach back
        needed = [_smallest(lambda k: never_below(deltas, a, b, 0, k), LARGEST_OFFSET)
                  for a in range(b)]
        if None in needed:
            return None
        shift = max(shifts[a] + k for a, k in enumerate(needed))  # type: ignore[operator]
        after = [shifts[a] for a in range(b) if (a, b) in deltas]
        if spread and after:  # a multiple of the lanes: 8 vectorized, 9 did not
            shift = -(-max(shift, max(after) + 1) // spread) * spread
        shifts.append(shift)
    factor = _smallest(lambda f: all(
        never_below(deltas, a, b, f, shifts[b] - shifts[a], across=True)
        for a in range(len(nests)) for b in range(len(nests))), LARGEST_OFFSET + shifts[-1])
    if factor is None:
        return None
    return TimeTiling(top, nests, tuple(shifts), factor, spread)


def _moves_with(write: "Access", top: Loop) -> bool:
    """Whether a write's element moves with ``top``'s variable (gemm's row ``C[i, j]`` in
    the ``i`` loop, or a subscript the analysis cannot read): each step of a time loop
    writes the same arrays over again."""
    return any(subscript is None or top.var in subscript.symbols()
               for subscript in write.subscripts)


def _smallest(holds: Callable[[int], bool], largest: int) -> int | None:
    return next((k for k in range(largest + 1) if holds(k)), None)


Deltas = dict[tuple[int, int], "isl.Set"]


def nest_deltas(context: Context, top: Loop | None, nests: tuple[Loop, ...]) -> Deltas:
    """For each pair of nests (the source's, the sink's), the set of ``[dt, di]`` between
    instances that depend on each other: the difference of their steps of the time loop
    ``top`` (0 where there is none: nests of the function's body) and of their values of
    the nest's outer loop."""
    inside = {id(s): k for k, nest in enumerate(nests) for s in nest.statements()}
    out: Deltas = {}
    for first, second, relation in context.relations:
        a, b = (inside.get(id(use[0])) for use in (first, second))
        if a is None or b is None:  # a statement outside the nests: no step moves it
            continue
        delta = _delta(context, top, (nests[a], nests[b]), first, second, relation)
        out[(a, b)] = out[(a, b)].union(delta) if (a, b) in out else delta
    return out


def _delta(context: Context, top: Loop | None, outers: tuple[Loop, Loop], first: "Use",
           second: "Use", relation: "isl.Map") -> "isl.Set":
    """``[dt, di]`` of one dependence relation's instance pairs."""
    import islpy as isl

    xs = [f"x{k}" for k in range(len(first[0].loops))]
    ys = [f"y{k}" for k in range(len(second[0].loops))]
    dt = f"{ys[top.depth]} - {xs[top.depth]}" if top is not None else "0"
    di = f"{ys[outers[1].depth]} - {xs[outers[0].depth]}"
    pairs = isl.Map(f"{context.model.header}{{ [[{', '.join(xs)}] -> [{', '.join(ys)}]] -> "
                    f"[dt, di] : dt = {dt} and di = {di} }}")
    bare = relation.reset_tuple_id(isl.dim_type.in_).reset_tuple_id(isl.dim_type.out)
    return bare.wrap().apply(pairs)


def never_below(deltas: Deltas, a: int, b: int, factor: int, shift: int,
                 across: bool = False) -> bool:
    """Whether every dependence from nest ``a`` to nest ``b`` has ``di + shift + factor*dt
    >= 0``: within one step (``dt = 0``), or across steps (``dt >= 1``)."""
    import islpy as isl

    delta = deltas.get((a, b))
    if delta is None:
        return True
    steps = "dt >= 1" if across else "dt = 0"
    backwards = isl.Set(f"{{ [dt, di] : {steps} and di + {shift} + {factor}*dt < 0 }}")
    return delta.intersect(backwards.align_params(delta.get_space())).is_empty()


def time_tiled_plans(context: Context, top: Loop) -> tuple[list[NestPlan], str | None]:
    """The time-tiled plan of ``top`` where its steps can be one tileable band and the
    arrays they sweep are past the L2 (within it, parallel sweeps keep them there); and,
    where they can but are not, a note that says why not."""
    tiling = time_tiling(context, top)
    if tiling is None:
        return [], None
    working = _working_set(context, tiling)
    if working <= context.l2_bytes:
        return [], (f"time tiling of {label(top)} not tried: its steps sweep "
                    f"{format_bytes(working)}, within the {format_bytes(context.l2_bytes)} L2")
    first = tiling.nests[0]
    rows = context.extents.get(label(first))
    if rows is not None and rows < TILE_SIZES[0] * RATIOS[0]:  # (a colour loop of 2)
        return [], (f"time tiling of {label(top)} not tried: the loop it would tile with, "
                    f"{label(first)}, runs {rows} iterations a step, fewer than the "
                    f"smallest tile's {TILE_SIZES[0] * RATIOS[0]}")
    choice, ratio = _tile(context, tiling, working)
    if not ratio:
        return [], (f"time tiling of {label(top)} not tried: a tile of {choice.tile} steps "
                    f"over {choice.tile} rows touches {format_bytes(choice.footprint_bytes)}, "
                    f"past half the {format_bytes(context.l2_bytes)} L2")
    fused = first.var
    lanes = (f" ahead; a multiple of {tiling.spread}, to keep the sweeps' dependences out "
             "of the fused loop's vector lanes (it is the innermost)") \
        if tiling.spread else " that far ahead"
    before = [Decision(make_step("fuse", label(first), label(nest), shift),
                       f"the sweep at line {nest.line} joins {fused}'s loop "
                       + (f"{shift} {'row' if shift == 1 else 'rows'} behind: its reads "
                          f"of the sweeps before it reach{lanes}" if shift else
                          "in step: it reads nothing the sweeps before it write further "
                          "on"))
              for nest, shift in zip(tiling.nests[1:], tiling.shifts[1:])]
    skew = [Decision(
        make_step("skew", label(first), label(top), tiling.factor),
        f"{fused} + {tiling.factor}*{top.var}: the fused loop's iteration in step "
        f"{top.var} + 1 reads what step {top.var}'s wrote up to {tiling.factor} iterations "
        f"ahead; skewed, no dependence runs backwards and ({top.var}, {fused}) can be "
        f"tiled: the steps sweep {format_bytes(working)}, past the "
        f"{format_bytes(context.l2_bytes)} L2, and a tile keeps its rows there for its "
        "steps")] if tiling.factor else []  # no step reads ahead of the one before: no skew
    band = TiledBand((top, first), choice, Reuse((), tuple(
        (array, top.var) for array in _arrays(tiling))), ratios=(1, ratio))
    why = (f"the tiles of one wave ({fused}'s tile loop skewed by {top.var}'s) need only "
           "tiles of earlier waves")
    return [NestPlan(top, "time-tiled", tuple(before + skew), band, parallel=((top, why),),
                     wavefront=(top, first))], None


def _arrays(tiling: TimeTiling) -> list[str]:
    return sorted({a.variable.name for nest in tiling.nests for s in nest.statements()
                   for a in s.accesses if a.variable.is_array})


def _working_set(context: Context, tiling: TimeTiling) -> int:
    """Bytes of the arrays one step sweeps: each array as many elements as the most
    instances a step's nest touching it runs."""
    elements: dict[str, int] = {}
    for nest in tiling.nests:
        for statement in nest.statements():
            count = 1
            for loop in statement.loops[tiling.time.depth + 1:]:
                count *= max(context.extents.get(label(loop), 1), 1)
            for access in statement.accesses:
                if access.variable.is_array:
                    key = access.variable.key
                    elements[key] = max(elements.get(key, 0), count)
    return sum(elements.values()) * context.element_bytes


def _tile(context: Context, tiling: TimeTiling, working: int) -> tuple[TileChoice, int]:
    """The tile of the time loop and the ratio of the fused loop's tile to it. A tile of
    ``T`` steps over ``R`` rows of the skewed space touches about ``R + factor * T`` rows of
    every array: the largest ``T`` that leaves each thread ``WAVE_TILES`` tiles in a full
    wave (a wave holds one tile per ``T`` steps: heat-1d's 1,200 steps in 3 tiles of 512
    kept one of 2 threads idle a wave in three) and for which some ``R = T * ratio`` fits
    half the L2, with the largest such ratio (rows of a few bytes, heat-1d's, want tiles
    far longer than they are deep). Ratio 0 where even the smallest tile is past half the
    L2 (heat-3d's planes: its rows would not stay there, and the sweeps ran 2.6 times
    faster than its tiles on the 16-core host)."""
    rows = max(context.extents.get(label(tiling.nests[0]), 1), 1)
    row_bytes = working / rows
    steps = max(context.extents.get(label(tiling.time), 1), 1)
    half = context.l2_bytes // 2

    def footprint(tile: int, ratio: int) -> int:
        return int((tile * ratio + tiling.factor * tile) * row_bytes)

    def ratios(tile: int) -> list[int]:
        return [r for r in RATIOS if footprint(tile, r) <= half and tile * r <= rows]

    smallest = TILE_SIZES[0]
    if not ratios(smallest):
        return TileChoice(smallest, "L2", context.l2_bytes, footprint(smallest, 1)), 0
    shared = [t for t in TILE_SIZES if steps // t >= WAVE_TILES * context.threads]
    tile = next((t for t in reversed(shared) if ratios(t)), smallest)
    larger = any(ratios(t) for t in TILE_SIZES if t > tile)
    return (TileChoice(tile, "L2", context.l2_bytes, footprint(tile, ratios(tile)[-1]),
                       context.threads if larger else 0), ratios(tile)[-1])
