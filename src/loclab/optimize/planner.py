"""From a nest's dependence analysis to recipes: what the lectures teach a student to decide by
hand, loop nest by loop nest, each decision with its reason.

For every top-level loop of the function the planner proposes plans from the most ambitious
to the least, and the builder (``loclab.optimize.build``) keeps the first one every step of
which the transformer proves legal:

0. ``distributed``: a band perfect but for statements around one loop chain (the lectures'
   golden MMM, 2mm's ``tmp[i, j] = 0.0``), its scalars expanded and the band distributed,
   so that the chain joins the band in a better order, tiled (``distributed_plans``);
1. ``tiled``: the perfect band at the top put in the legal order whose innermost accesses are
   unit-stride (and whose outermost loop is parallel), tiled where a tile keeps reused or
   strided data in cache (tile size from the cache model, ``loclab.optimize.tiles``), its
   outermost parallel loop (its tile loop) run in parallel;
2. ``reordered``: the same order, untiled;
3. ``as written``: the outermost loop of each path that is parallel, or becomes parallel
   through privatization, expansion, a reduction or atomic updates (a generalized reduction),
   run in parallel;
4. ``sequential``: nothing is parallel; the reasons are the dependences that block each loop.

``loclab.optimize.pieces`` adds, after the distributed plans, one that distributes a nest
into pieces each run in parallel its own way (atax's column update interchanged);
``loclab.optimize.timetile`` puts a time-tiled plan for a time loop of stencil sweeps before
them all, and ``loclab.optimize.fusion`` a plan that fuses the next nest, which consumes what
this one produces, into this one.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING

from loclab.deps.analysis import Analysis, LoopReport
from loclab.deps.interchange import Interchange, perfect_bands
from loclab.deps.model import Model
from loclab.deps.remedies import Remedy
from loclab.nest.expr import Poly
from loclab.nest.ir import Loop, Nest, Statement, loops_around_all
from loclab.optimize.locality import (ArrayAccess, Reuse, array_accesses, band_reuse,
                                      order_score, stride)
from loclab.optimize.tiles import TileChoice, choose_tile, panel
from loclab.transform.recipe import Step, make_step

if TYPE_CHECKING:
    import islpy as isl

    from loclab.deps.dependences import Use
    from loclab.optimize.packing import Pack

LEVELS = ("time-tiled", "fused", "distributed", "tiled", "reordered", "as written", "in lanes",
          "sequential")
# Remedies the transformer applies with a step before ``parallel``; reductions and atomic
# updates are ``parallel``'s own; a scan is not a DOALL loop at all.
STEP_REMEDIES = {"privatize", "expand", "copy"}
UNPARALLEL = {"scan"}
# A loop run in parallel inside sequential loops forks and joins the threads at each of its
# starts: about 1 us with 2 of Numba's threads for an empty loop, 8 us for a sum into an
# element (cholesky's), more with 16 threads, where a statement instance takes about a
# nanosecond. Below this many statement instances a start, the threads cost more than they
# save (cholesky's k sums in parallel: 30 times slower than in order on 2 cores).
FORK_JOIN_INSTANCES = 1 << 14


def label(loop: Loop) -> str:
    """How a recipe names an original loop: unambiguous in any function."""
    return f"{loop.var}@{loop.line}"


@dataclass(frozen=True)
class Decision:
    """One step of a plan (None: a decision that needs no step) and why."""

    step: Step | None
    reason: str


@dataclass(frozen=True)
class TiledBand:
    """A band to tile, its loops in their new order, and what the model chose."""

    loops: tuple[Loop, ...]
    choice: TileChoice
    reuse: Reuse
    names: tuple[tuple[str, str], ...] = ()  # a loop's name in the recipe, where not label()
    # the loop whose tile loop leads the tile loops (the parallel one, where the band's
    # outermost carries a dependence: trmm's jj outside ii and kk); None: the band's order
    lead: Loop | None = None
    # each loop's tile as a multiple of the tuned one (none: all equal): a time-tiled
    # band's rows, many times its steps where a row is short (heat-1d's tiles of 64 steps
    # over 16,384 points)
    ratios: tuple[int, ...] = ()
    # each loop's tile where the model fixes it (0: the tuned one): a register-tiled band's
    # vector loop and panel (``tiles.panel``), and why
    fixed: tuple[int, ...] = ()
    panel: str = ""

    @property
    def key(self) -> str:
        """The band's name among the tuned parameters: its outermost original loop."""
        return label(self.loops[0])

    def sizes(self, tile: int) -> dict[Loop, int]:
        """Each loop's tile where the band's tuned tile is ``tile``."""
        ratios = dict(zip(self.loops, self.ratios))
        fixed = dict(zip(self.loops, self.fixed))
        return {loop: fixed.get(loop) or tile * ratios.get(loop, 1) for loop in self.loops}

    def step(self, tile: int) -> Step:
        names = dict(self.names)
        sizes = self.sizes(tile)
        loops = self.loops if self.lead is None else (
            self.lead, *(loop for loop in self.loops if loop is not self.lead))
        return make_step("tile", keywords=[(names.get(label(loop), label(loop)), sizes[loop])
                                           for loop in loops])


@dataclass(frozen=True)
class NestPlan:
    """One way to optimize one top-level loop nest.

    The recipe is ``before`` (privatize, expand, permute), the band's tile step, ``after``
    (copies, which must follow every loop move), the register tiles and vector lanes, the
    ``packs`` (``stage`` steps), then ``parallel`` on each loop of ``parallel`` (on its tile
    loop where the band is tiled)."""

    top: Loop
    level: str
    before: tuple[Decision, ...] = ()
    band: TiledBand | None = None
    after: tuple[Decision, ...] = ()
    parallel: tuple[tuple[Loop, str], ...] = ()  # (loop, why it may run in parallel)
    sequential: tuple[str, ...] = ()  # why the other loops stay sequential
    # A loop's name in the recipe where ``label`` would name several loops (a distributed
    # nest's copies are named by a statement inside them: ``i@10``).
    names: tuple[tuple[str, str], ...] = ()
    registers: tuple[Decision, ...] = ()  # unroll-and-jam of the tile's loops (after tiling)
    lanes: tuple[Decision, ...] = ()  # vectorize the innermost loops that carry a sum
    # parallel loops whose reductions into arrays use a copy per thread, not atomic updates
    copies: tuple[Loop, ...] = ()
    # parallel loops whose iterations hold different work (``uneven_work``; a tile loop's
    # tiles, or rows of their own: ``with_cyclic``), each with the slots its iterations are
    # dealt into in turn (``parallel(ii, cyclic=N)``; N the threads)
    cyclic: tuple[tuple[Loop, int], ...] = ()
    packs: tuple["Pack", ...] = ()  # reads packed tile by tile (``stage`` steps)
    # time tiling (``loclab.optimize.timetile``): the time loop and the fused loop, whose
    # tile loops become a wavefront once the band is tiled (the fused loop's tile loop
    # skewed by the time loop's and put outside it); the time loop's tile loop runs in
    # parallel
    wavefront: tuple[Loop, Loop] | None = None
    # producer/consumer fusion (``loclab.optimize.fusion``): the next top loop, fused into
    # this one by a step of ``before``; nothing is planned for it once this plan is kept
    absorbs: Loop | None = None

    def name(self, loop: Loop) -> str:
        return dict(self.names).get(label(loop), label(loop))

    @property
    def key(self) -> tuple[object, ...]:
        """What makes two plans the same recipe."""
        return (tuple(d.step for d in self.before), self.band and self.band.loops,
                tuple(d.step for d in self.after), tuple(loop for loop, _ in self.parallel),
                tuple(d.step for d in self.registers), tuple(d.step for d in self.lanes),
                self.copies, tuple((p.array, p.loop) for p in self.packs), self.wavefront,
                self.absorbs, self.cyclic)

    def fallbacks(self) -> list["NestPlan"]:
        """This plan, then the same without its register tiles, without its vector lanes,
        without both: where the transformer refuses one of those steps the rest still
        holds."""
        return [self, replace(self, registers=()), replace(self, lanes=()),
                replace(self, registers=(), lanes=())]


@dataclass
class Context:
    """What the planner reads for every nest of the function."""

    analysis: Analysis
    model: Model
    extents: Mapping[str, int]  # iterations at the tuning sizes, by variable and by label
    element_bytes: int
    l1_bytes: int
    l2_bytes: int
    threads: int = 1  # the parallel loop's tiles should give each a share
    reports: dict[int, LoopReport] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.reports = {id(report.loop): report for report in self.analysis.loops}

    def report(self, loop: Loop) -> LoopReport:
        return self.reports[id(loop)]

    @cached_property
    def relations(self) -> list[tuple["Use", "Use", "isl.Map"]]:
        """The function's dependence relations (``dependences.dependence_relations``),
        computed once for every plan that reads them (time tiling, fusion)."""
        from loclab.deps.dependences import dependence_relations

        return list(dependence_relations(self.model))

    def carries(self, loop: Loop, statements: Collection[Statement],
                ignored: Collection[str] = ()) -> bool:
        """Whether ``loop`` carries a dependence between two instances of ``statements``
        (a nest distribution leaves beside others: it is parallel if not), dependences on
        the variables ``ignored`` (scalars expanded over the loop) left out."""
        import islpy as isl

        from loclab.deps.dependences import deltas

        inside = {id(s) for s in statements}
        depth = loop.depth
        names = ", ".join(f"d{k}" for k in range(depth + 1))
        moved = isl.Set(f"{{ [{names}] : d{depth} < 0 or d{depth} > 0 }}")
        for (first, access), (second, _), relation in self.relations:
            if id(first) not in inside or id(second) not in inside \
                    or access.variable.name in ignored:
                continue
            delta = deltas(relation, depth + 1)
            if not delta.intersect(moved.align_params(delta.get_space())).is_empty():
                return True
        return False


def loop_extents(analysis: Analysis, sizes: Mapping[str, int]) -> dict[str, int]:
    """Each loop variable's iteration count at ``sizes`` (the largest size where a bound is
    not a constant there: a triangular loop, a data-dependent one): by variable, the most
    of the loops that share it; by label (``i@5``), each loop's own."""
    values = {name: Poly.const(value) for name, value in sizes.items()}
    largest = max(sizes.values(), default=1)
    extents: dict[str, int] = {}
    for loop in analysis.nest.loops:
        start = loop.start.substitute(values).constant_value() if loop.start else None
        stop = loop.stop.substitute(values).constant_value() if loop.stop else None
        count = (-(-(stop - start) // abs(loop.step)) if start is not None
                 and stop is not None else largest)
        extents[loop.var] = max(extents.get(loop.var, 0), max(count, 1))
        extents[label(loop)] = max(count, 1)
    return extents


def top_loops(analysis: Analysis) -> list[Loop]:
    return [node for node in analysis.nest.body if isinstance(node, Loop)]


def privatize_step(nest: Nest, name: str, within: Loop, parallel: Loop | None = None
                   ) -> Step:
    """``privatize(name)``: private to the innermost loop around its uses, those inside
    ``within`` where other nests use the scalar too (deriche's ``ym1``, each of four
    nests' running value), a loop the step then names. An array is private to the loop
    run in ``parallel`` instead, where given: a copy per iteration of that loop, not one
    allocated per iteration of the loops inside it (doitgen's scratch row ``total``: one
    per ``r``, not per ``r, q``)."""
    if parallel is not None and any(v.name == name and v.is_array for v in nest.variables):
        return make_step("privatize", name, label(parallel))
    uses = [s for s in nest.statements if any(a.variable.name == name for a in s.accesses)]
    inside = [s for s in uses if within in s.loops]
    if len(inside) == len(uses) or not inside:
        return make_step("privatize", name)
    return make_step("privatize", name, label(loops_around_all(inside)[-1]))


def _remedy_step(nest: Nest, remedy: Remedy, loop: Loop) -> Step | None:
    if remedy.kind == "privatize":
        return privatize_step(nest, remedy.variable, loop, loop)
    if remedy.kind in ("expand", "copy"):
        return make_step(remedy.kind, remedy.variable, label(loop))
    return None


def _carried_text(report: LoopReport, variable: str) -> str:
    """The dependences ``report``'s loop carries on one variable: 'D1 WAW, D3 RAW on c'."""
    found = [d for d in report.carried if d.array == variable]
    shown = ", ".join(f"{d.id} {d.kind}" for d in found[:3])
    more = f" and {len(found) - 3} more" if len(found) > 3 else ""
    return f"{shown}{more} on {variable}" if found else f"its dependences on {variable}"


def parallel_reason(report: LoopReport) -> str:
    """Why a loop may run in parallel, in the slides' words."""
    if report.parallel:
        return f"{report.var} carries no dependence: parallel as written"
    parts = []
    for remedy in report.remedies:
        if remedy.kind in {"privatize", "expand"}:
            parts.append(f"{remedy.label()} removes {_carried_text(report, remedy.variable)}")
        elif remedy.kind == "reduction":
            parts.append(f"{remedy.label()}: each thread sums its share, the shares are "
                         "combined at the end")
        elif remedy.kind == "generalized reduction":
            parts.append(f"{remedy.label()}")
        elif remedy.kind == "copy":
            parts.append(f"{remedy.label()} removes {_carried_text(report, remedy.variable)}")
    return f"{report.var} is parallel once " + "; ".join(parts)


def _first_carried(report: LoopReport) -> str:
    """The first dependence a loop carries that nothing removes (else the first it carries),
    with its direction vector: 'D2 WAR on B [<,=,<]'."""
    first = (report.unresolved or report.carried)[0]
    return f"{first.id} {first.kind} on {first.array} [{','.join(first.direction)}]"


def blocked_reason(report: LoopReport) -> str:
    """Why a loop stays sequential: the dependence it carries that nothing removes."""
    blocking = report.unresolved or report.carried
    if not blocking:
        return f"{report.var}: sequential"
    scan = next((r for r in report.remedies if r.kind == "scan"), None)
    why = (f"{scan.label()}: not a DOALL loop" if scan else
           f"it carries {_first_carried(report)}, which no remedy removes")
    return f"{report.var} stays sequential: {why}"


def sequential_reason(report: LoopReport, context: Context | None = None) -> str:
    """Why a loop runs sequentially in the plan that keeps every loop sequential (on the
    CPU, given its ``context``: where its starts have too little work, that)."""
    if _parallelizable(report):
        waste = fork_join_waste(context, report.loop) if context else None
        return (f"{parallel_reason(report)}; kept sequential: " + (waste or (
            "no parallel recipe held (refused by the transformer, or slower when "
            "measured)")))
    return blocked_reason(report)


def fork_join_waste(context: Context, loop: Loop) -> str | None:
    """Why running ``loop`` in parallel costs more than it saves: started many times (inside
    sequential loops), each start with fewer statement instances than
    ``FORK_JOIN_INSTANCES`` at the tuning sizes (from the loops' extents, their largest
    counts); None where that is not so."""
    starts = math.prod(context.extents[label(outer)] for outer in loop.enclosing[:-1])
    work = sum(math.prod(context.extents[label(inner)] for inner in s.loops[loop.depth:])
               for s in loop.statements())
    if starts == 1 or work >= FORK_JOIN_INSTANCES:
        return None
    return (f"in parallel it would start {starts:,} times with at most {work:,} statement "
            f"instances each, where a fork-join of the threads costs as much as "
            f"{FORK_JOIN_INSTANCES:,} of them")


def uneven_work(loop: Loop) -> str | None:
    """Why the iterations of ``loop`` hold different amounts of work (a loop inside it whose
    range moves with it: a triangle's rows, ``j`` from ``i + 1``; or one whose bounds are
    not affine: a sparse row's); None where every iteration runs the same loops."""
    for inner in _loops_inside(loop):
        bounds = (inner.start, inner.stop)
        if any(bound is None for bound in bounds):
            return f"{inner.var}'s bounds are not affine"
        if bounds_name(inner, loop.var):
            return f"{inner.var}'s range moves with {loop.var}"
    return None


def _loops_inside(loop: Loop) -> Iterator[Loop]:
    for child in loop.body:
        if isinstance(child, Loop):
            yield child
            yield from _loops_inside(child)


def with_cyclic(context: Context, plans: list[NestPlan]) -> list[NestPlan]:
    """``plans`` with each parallel loop whose iterations hold different work dealing them
    in turn to the threads (``cyclic=threads``), not one equal run per thread, which gave
    the first of 16 threads most of correlation's triangle (its tiled product measured
    97.5 ms, behind the untiled one's 67.9 ms): a tile loop's tiles, or an untiled loop's
    iterations where each writes rows of its own (``own_rows``), so that no two threads
    write into one cache line of results."""
    out = []
    for plan in plans:
        dealt = tuple((loop, context.threads) for loop, _ in plan.parallel
                      if loop not in plan.copies and uneven_work(loop) and (
                          loop in plan.band.loops if plan.band is not None
                          else own_rows(loop)))
        out.append(replace(plan, cyclic=dealt) if dealt and context.threads > 1 else plan)
    return out


def own_rows(loop: Loop) -> bool:
    """Whether every array element written inside ``loop`` lies in a row of its own
    iteration: the loop's variable in some subscript but the last (``C[i, j]``), never in
    the last (``y[i]``: neighbouring iterations share a cache line)."""
    writes = [a for s in loop.statements() for a in s.accesses
              if a.write and a.variable.is_array]
    return bool(writes) and all(
        a.subscripts and all(sub is not None for sub in a.subscripts)
        and loop.var not in a.subscripts[-1].symbols()
        and any(loop.var in sub.symbols() for sub in a.subscripts[:-1]) for a in writes)


def _parallelizable(report: LoopReport) -> bool:
    return report.parallel or (not report.unresolved and report.remedies and not any(
        r.kind in UNPARALLEL for r in report.remedies))


def parallel_paths(context: Context, loop: Loop
                   ) -> tuple[list[tuple[Loop, tuple[Decision, ...], tuple[Decision, ...], str]],
                              list[str]]:
    """The outermost parallelizable loop of each path from ``loop`` down: (loop, steps before
    loop moves, steps after them, why), and why the loops above them stay sequential."""
    report = context.report(loop)
    waste = fork_join_waste(context, loop) if _parallelizable(report) else None
    if waste:  # the loops inside start as often, with less work each
        return [], [f"{loop.var} stays sequential: {waste}"]
    if _parallelizable(report):
        before, after = [], []
        for remedy in report.remedies:
            step = _remedy_step(context.analysis.nest, remedy, loop)
            if step is None:
                continue
            decision = Decision(step, f"{remedy.label()}: needed to run {loop.var} in "
                                      f"parallel")
            (after if remedy.kind == "copy" else before).append(decision)
        return [(loop, tuple(before), tuple(after), parallel_reason(report))], []
    found: list[tuple[Loop, tuple[Decision, ...], tuple[Decision, ...], str]] = []
    blocked = [blocked_reason(report)]
    for child in loop.body:
        if isinstance(child, Loop):
            inner, reasons = parallel_paths(context, child)
            found += inner
            blocked += reasons
    return found, blocked


def _band_at(analysis: Analysis, top: Loop) -> tuple[Loop, ...]:
    """The perfect band from ``top`` inwards: a band's own, or the rest of the band ``top``
    is inside (the loops within a loop of steps the GPU runs on the host: ``for it: for
    color: for i: for j``, from ``i``)."""
    for band in perfect_bands(analysis.nest):
        if top in band:
            return band[band.index(top):]
    return (top,)


def _options(analysis: Analysis, band: tuple[Loop, ...]) -> list[Interchange]:
    return [o for o in analysis.interchange_options
            if o.band == band and o.legal_once_privatized]


def _order_plan(context: Context, top: Loop, option: Interchange, accesses: list[ArrayAccess],
                tile: bool, best: Interchange | None = None) -> NestPlan | None:
    """The band in ``option``'s order, its outermost parallel loop run in parallel (tiled
    when ``tile`` and a tile would keep data in cache); None where no band loop is
    parallel in that order (the as-written plans look below the band). ``best``: the
    better-scored order this one is measured beside (``_orders_to_measure``)."""
    parallel = [loop for loop in option.order if loop in option.parallel
                or loop in option.parallel_after_privatizing]
    if not parallel:
        return None
    target = parallel[0]
    needed = tuple(option.legal_after) + (
        tuple(option.privatizing) if target not in option.parallel else ())
    before = [Decision(privatize_step(context.analysis.nest, r.variable, top, target),
                       f"{r.label()}: a copy per band iteration, so that the band may be "
                       f"reordered and {target.var} run in parallel")
              for r in dict.fromkeys(needed) if r.kind == "privatize"]
    if option.order != option.band:
        score = order_score(accesses, option.band, option.order)
        inner = option.order[-1].var
        units = sorted({a.text for a in accesses if a.statement.loops[-1] in option.band
                        and _unit(a, inner)})
        beside = "" if best is None else (
            f"; measured beside {', '.join(loop.var for loop in best.order)} (score "
            f"{order_score(accesses, option.band, best.order)}), whose innermost "
            f"{best.order[-1].var} carries a dependence: no vector lanes without "
            "reordering its sums")
        before.append(Decision(
            make_step("permute", *(label(loop) for loop in option.order)),
            f"innermost {inner}: {', '.join(units) or 'no access'} unit-stride (locality "
            f"score {score} against {order_score(accesses, option.band, option.band)} as "
            f"written{beside}); legal: every dependence keeps its source first"))
    band, registers = None, ()
    reuse = band_reuse(accesses, option.band, option.order)
    if tile and len(option.order) >= 2 and reuse:
        jammed = jammed_loops(accesses, option.order)
        band = tiled_band(context, accesses, option.order, reuse, jammed, (target,))
        registers = register_decisions(jammed, {})
    sequential = tuple(f"{loop.var} stays sequential in this order: it carries a dependence "
                       f"the others do not" for loop in option.order
                       if loop not in option.parallel
                       and loop not in option.parallel_after_privatizing)
    why = (f"{target.var} carries no dependence in this order" if target in option.parallel
           else f"{target.var} is parallel once "
                f"{', '.join(r.label() for r in option.privatizing)}")
    return NestPlan(top, "tiled" if band else "reordered", tuple(before), band, (),
                    ((target, why),), sequential,
                    registers=registers,
                    lanes=vector_lanes(context, innermost_loops(top, option.band,
                                                                option.order)))


def unit_stride_texts(accesses: list[ArrayAccess], var: str) -> str:
    """The accesses unit-stride in loop ``var``, as written ('no access' where none is)."""
    return ", ".join(sorted({a.text for a in accesses if _unit(a, var)})) or "no access"


def _unit(access: ArrayAccess, var: str) -> bool:
    return stride(access.subscripts, var) == "unit"


# Unroll-and-jam factor of each of the two loops a register tile jams: 4 x 4 copies of the
# innermost loop's body keep 16 vectors of results and operands in the 16 vector registers of
# AVX2 (measured on the lectures' MMM on the 2-core VM: 4 x 4 18.8 ms, 8 x 2 29.6 ms, 8 x 4
# 25.0 ms, 2 x 4 32.0 ms, none 54.8 ms at 1024^3 in float32).
REGISTER_FACTOR = 4


def tiled_band(context: Context, accesses: list[ArrayAccess], order: tuple[Loop, ...],
               reuse: Reuse, jammed: list[tuple[Loop, str]], held: tuple[Loop, ...],
               names: tuple[tuple[str, str], ...] = (), lead: Loop | None = None
               ) -> TiledBand:
    """The band in ``order`` with the cache model's tile, and where it is register-tiled
    (``jammed``), its vector loop and panel longer (``tiles.panel``; ``held``: the loops
    whose tile loops run in parallel keep the tile)."""
    choice = choose_tile(accesses, order, context.extents, context.element_bytes,
                         context.l1_bytes, context.l2_bytes, context.threads)
    shape = panel(accesses, order, context.extents, context.element_bytes,
                  context.l1_bytes, context.l2_bytes, choice.tile,
                  {loop: REGISTER_FACTOR for loop, _ in jammed},
                  held + ((lead,) if lead is not None else ()))
    return TiledBand(order, choice, reuse, names, lead, (),
                     shape.tiles if shape else (), shape.reason if shape else "")


def register_tiles(accesses: list[ArrayAccess], order: tuple[Loop, ...],
                   names: Mapping[str, str], kept: Mapping[Loop, str] | None = None
                   ) -> tuple[Decision, ...]:
    """The ``unroll(..., jam=True)`` steps of ``jammed_loops`` (the loops named by
    ``names`` where not by their label)."""
    return register_decisions(jammed_loops(accesses, order, kept), names)


def register_decisions(jammed: list[tuple[Loop, str]], names: Mapping[str, str]
                       ) -> tuple[Decision, ...]:
    """An ``unroll(loop, REGISTER_FACTOR, jam=True)`` step for each loop of ``jammed``."""
    return tuple(Decision(make_step("unroll", names.get(label(loop), label(loop)),
                                    REGISTER_FACTOR, keywords=[("jam", True)]),
                          f"register tiling: {texts} reused from a register by "
                          f"{REGISTER_FACTOR} iterations of {loop.var} (unroll-and-jam)")
                 for loop, texts in jammed)


def jammed_loops(accesses: list[ArrayAccess], order: tuple[Loop, ...],
                 kept: Mapping[Loop, str] | None = None,
                 guarded: bool = False) -> list[tuple[Loop, str]]:
    """Each loop to jam and what its copies share, in the order to jam them. Register
    tiling of a tiled band in ``order``: unroll-and-jam of the (up to) two loops nearest the
    innermost in which some access is invariant, so that the copies of the innermost loop's
    body share that value from a register (the slides' register tiling as steps). Only an
    access that moves with the innermost loop counts: one invariant there is a scalar its
    run reads once, whatever the copies (mode-1 product ``total[i, j, k] += U[i, l] * X[l,
    j, k]`` in the order ``i, j, l, k``: jamming ``j`` shares ``U[i, l]`` and loads a vector
    of ``X`` per multiply-add; jamming ``i`` shares that vector). ``kept``
    adds reuse the accesses do not show: an expanded scalar's element, invariant in the
    loops it was summed along. The loop the written element is invariant in is jammed last,
    so that the copies updating one element are adjacent and LLVM keeps it in a register
    between them. Empty where the innermost loop has no unit-stride access
    (nothing runs in vector lanes for the copies to share), or where a loop lies below the
    band (the copies would be jammed into it: a private sum per copy, no vector loop for
    them to share, and a body the compiler takes minutes over: bmmm's 16 copies). A loop
    that bounds a loop between it and the innermost, or is bounded by one, is not jammed:
    its copies run over different ranges of that loop, so each needs a guard inside the
    vector loop, which LLVM then does not vectorize (syrk: 166 ms jammed in i and k against
    47 ms in k alone, 2 cores, 2026-11-29). The innermost loop itself may start or stop with
    it (a triangle's ``j`` from ``i + 1``): codegen separates its range into the pieces
    each copy runs whole (``codegen._ranges_move_with_copies``; correlation's triangular
    product at 1200 x 1400 on 2 cores, 2026-11-30: 39.6 ms jammed in k alone, 16.3 ms in i
    and k). ``guarded``: the copies' guards are checked once per run of the innermost
    loops, not inside them (``optimize.lanes``), so a loop that bounds another, or is
    bounded by one, is jammed too where every bound below it is affine."""
    kept = kept or {}
    inner = order[-1]
    if not any(stride(a.subscripts, inner.var) == "unit" for a in accesses):
        return []
    if any(a.statement.loops[-1] not in order for a in accesses):
        return []
    chosen: list[tuple[bool, Loop, str]] = []
    for position, loop in reversed(list(enumerate(order[:-1]))):
        if guarded:
            if any(bound is None for below in order[position:]
                   for bound in (below.start, below.stop)):
                continue
        elif any(_coupled(loop, other) for other in order[position + 1:-1]) \
                or _coupled(loop, inner, separable=True):
            continue
        reused = [a for a in accesses if loop in a.statement.loops
                  and stride(a.subscripts, loop.var) == "invariant"
                  and stride(a.subscripts, inner.var) != "invariant"]
        written = any(a.access.write for a in reused) or loop in kept
        texts = [kept[loop]] if loop in kept else []
        texts += sorted({a.text for a in reused})
        if texts:
            chosen.append((written, loop, ", ".join(texts)))
        if len(chosen) == 2:
            break
    chosen.sort(key=lambda item: item[0])
    return [(loop, texts) for _, loop, texts in chosen]


def _coupled(outer: Loop, inner: Loop, separable: bool = False) -> bool:
    """Whether either loop's bounds name the other's variable (or cannot be told);
    ``separable``: the inner loop's affine bounds may name the outer's."""
    if separable:
        return bounds_name(outer, inner.var) or inner.start is None or inner.stop is None
    return bounds_name(inner, outer.var) or bounds_name(outer, inner.var)


def bounds_name(loop: Loop, var: str) -> bool:
    """Whether a loop's bounds name a variable (or cannot be told: not affine)."""
    return any(bound is None or var in bound.symbols() for bound in (loop.start, loop.stop))


def vector_lanes(context: Context, innermost: list[Loop]) -> tuple[Decision, ...]:
    """``vectorize`` of each innermost loop that carries only sums (into scalars, or into one
    array element the loop never moves): without leave to reorder the sum, the compiler adds
    one element after another (a chain of dependent adds) instead of a vector's worth at
    once."""
    arrays = {v.name for v in context.analysis.nest.variables if v.is_array}
    decisions = []
    for loop in innermost:
        report = context.report(loop)
        sums = [r for r in report.remedies if r.kind == "reduction"]
        if sums and not report.unresolved and len(sums) == len(report.remedies):
            summed = ", ".join(f"{r.op or '+'} on {r.variable}" + (
                ", an element held in a scalar for the loop's run" if r.variable in arrays
                else "") for r in sums)
            decisions.append(Decision(
                make_step("vectorize", label(loop)),
                f"{loop.var} carries a sum ({summed}): partial sums in vector lanes, "
                "combined at the end (the compiler may reorder it)"))
    return tuple(decisions)


def innermost_loops(top: Loop, band: tuple[Loop, ...] = (),
                    order: tuple[Loop, ...] = ()) -> list[Loop]:
    """The loops with no loop inside them once ``band`` is put in ``order``."""
    def leaves_of(loop: Loop) -> list[Loop]:
        inner = [child for child in loop.body if isinstance(child, Loop)]
        return [leaf for child in inner for leaf in leaves_of(child)] if inner else [loop]

    leaves = leaves_of(top)
    if band and order and band[-1] in leaves:
        leaves = [order[-1] if loop is band[-1] else loop for loop in leaves]
    return list(dict.fromkeys(leaves))


def distributed_plans(context: Context, top: Loop) -> list[NestPlan]:
    """Where the band at the top is perfect but for statements around one loop chain (mmm's
    ``s = 0.0``, ``for k: s += ...``, ``C[i, j] = s``; 2mm's ``tmp[i, j] = 0.0`` beside
    ``for k: tmp[i, j] += ...``; covariance's division and mirror after its sum), or its body
    is loop chains alone (gemm's ``for j: C[i, j] *= beta`` before ``for k: for j: ...``):
    the scalars among them expanded over the band, the band distributed (a nest for each
    statement or chain beside the one with the most work, one for that chain), and that
    nest, the band and the chain together, in its best orders by locality, tiled or not, its
    outermost loop parallel; only where some order of it has better locality than the one as
    written, or where a nest of three loops or more would tile and its outermost loop as
    written carries an array's dependence (a product written k, i, j). The transformer
    judges every step; the copies of a distributed loop are named by the line of the chain's
    first statement."""
    band = _band_at(context.analysis, top)
    below = [c for c in band[-1].body if isinstance(c, Loop)]
    around = [c for c in band[-1].body if not isinstance(c, Loop)]
    around_one_chain = len(below) == 1 and bool(around)
    nests_alone = len(below) >= 2 and not around
    if not (around_one_chain or nests_alone):
        return []
    chains = [deep_chain(loop) for loop in below]
    chain, levels = max(chains, key=lambda found: len(found[0]))  # the most work
    if any(not found[0][-1].body or any(isinstance(c, Loop) for c in found[0][-1].body)
           or (found[1] and found[0] is not chain) for found in chains):
        return []  # each chain ends in statements; only the band's holds some beside loops
    inside = chain[-1].body
    scalars = _written_scalars(around)
    loops = (*band, *chain)
    line = min(s.line for s in inside)
    names = tuple((label(loop), f"{loop.var}@{line}") for loop in loops)
    renamed = dict(names)
    over = [label(loop) for loop in band]
    before = [Decision(make_step("expand", v, *over), f"{v} carries a value around the {chain[0].var} "
                       "loop: an element per band iteration lets the band be distributed")
              for v in scalars]
    expanded = list(scalars)
    for level, beside in levels:  # (matmul's saxpy form: ``a = alpha * A[i, k]`` in k)
        depth = chain.index(level)
        within = [*over, *(label(loop) for loop in chain[:depth + 1])]
        inner_scalars = _written_scalars(beside)
        before += [Decision(make_step("expand", v, *within), f"{v} carries a value into the "
                            f"{chain[depth + 1].var} loop: an element per iteration of "
                            f"{', '.join(loop.var for loop in (*band, *chain[:depth + 1]))} "
                            f"lets {level.var} be distributed")
                   for v in inner_scalars]
        expanded += inner_scalars
    joining = [(level, chain[chain.index(level) + 1].var) for level, _ in reversed(levels)]
    before += [Decision(make_step("distribute", label(level)), f"the statements beside the "
                        f"{var} loop become nests of their own, the {var} loop joins the band")
               for level, var in joining]
    before += [Decision(make_step("distribute", label(loop)), f"the "
                        f"{'statements' if around else 'loops'} beside the {chain[0].var} "
                        f"loop become nests of their own, the {chain[0].var} loop joins the "
                        "band") for loop in reversed(band)]
    sides = tuple(Decision(make_step("parallel", f"{top.var}@{line}"),
                           f"the nest at line {line}, beside the band's, runs in parallel: "
                           f"{top.var} carries no dependence between its statements")
                  for line, statements in _side_nests(
                      context, [*around, *(s for _, beside in levels for s in beside)],
                      [found[0] for found in chains if found[0] is not chain], expanded)
                  if not context.carries(top, statements, expanded))
    accesses = array_accesses(context.model, inside)
    orders = sorted((o for o in itertools.permutations(loops) if o[0] in band),
                    key=lambda o: (-order_score(accesses, loops, o), o != loops))
    # loops free of any dependence between the band's own statements, expanded scalars apart
    free = [loop for loop in loops if not context.carries(loop, inside, expanded)]
    # With statements around the chain, distributed only for a better order, or for tiles:
    # a product written k, i, j with ``aik = A[i, k]`` beside its j loop is as local as it
    # gets, but k carries its sums into C (distributed, i, k, j runs i in parallel and tiles
    # all three); two loops reuse nothing a tile keeps (bicg's sums). Beside other nests,
    # the chain joins the band: a deeper band to tile, whatever order.
    scalars_apart = [v.name for v in context.analysis.nest.variables if not v.is_array]
    if around and order_score(accesses, loops, orders[0]) <= order_score(accesses, loops,
                                                                         loops) \
            and (len(loops) < 3 or not context.carries(loops[0], inside, scalars_apart)):
        return []
    plans = []
    for order in _distributed_orders(orders, free):
        steps = list(before)
        if order != loops:
            inner = order[-1].var
            steps.append(Decision(make_step("permute", *(renamed[label(loop)] for loop in order)),
                                  f"innermost {inner}: {unit_stride_texts(accesses, inner)} "
                                  "unit-stride"))
        target = _distributed_target(order, free)
        outer = order[0]
        why = ((target, f"{target.var} (outermost) carries no dependence once distributed"
                if target is outer else f"{target.var} carries no dependence (its tile loop "
                f"first, outside {outer.var}'s, which carries "
                f"{_first_carried(context.report(outer))})"),)
        summed = {loop: f"{', '.join(scalars)} (expanded)" for loop in chain} if scalars \
            else {}
        jammed = jammed_loops(accesses, order, summed)
        tiled = tiled_band(context, accesses, order, band_reuse(accesses, loops, order),
                           jammed, (target,), names, None if target is outer else target)
        plans.append(NestPlan(top, "distributed", tuple(steps), tiled, sides, why, (), names,
                              register_decisions(jammed, renamed)))
        if target is outer:  # untiled, an inner parallel loop would fork per iteration
            plans.append(NestPlan(top, "distributed", tuple(steps), None, sides, why, (),
                                  names))
    return plans


def _distributed_orders(orders: list[tuple[Loop, ...]], free: list[Loop]
                        ) -> list[tuple[Loop, ...]]:
    """The two best orders of a distributed band, but not a second whose innermost loop
    carries a dependence (a sum along it, a chain of adds no vector runs exactly) where the
    best one's innermost carries none: 3mm's products as written (``i, j, k``) beside
    ``i, k, j`` measured 10 times slower on 2 cores, and compiling their register tiles
    took a fifth of the optimize call."""
    if len(orders) > 1 and orders[0][-1] in free and orders[1][-1] not in free:
        return orders[:1]
    return orders[:2]


def deep_chain(loop: Loop) -> tuple[list[Loop], list[tuple[Loop, list[Statement]]]]:
    """``loop`` and the loops each the only loop in the body of the one before (a perfect
    chain, or one whose loops hold statements beside the next: matmul's ``for k: a = alpha
    * A[i, k]; for j: ...``), and those statements by the loop that holds them."""
    chain: list[Loop] = [loop]
    levels: list[tuple[Loop, list[Statement]]] = []
    while True:
        inner = [c for c in chain[-1].body if isinstance(c, Loop)]
        if len(inner) != 1:
            return chain, levels
        beside = [c for c in chain[-1].body if not isinstance(c, Loop)]
        if beside:
            levels.append((chain[-1], beside))
        chain.append(inner[0])


def _written_scalars(statements: list[Statement]) -> list[str]:
    return sorted({a.variable.name for s in statements for a in s.accesses
                   if a.write and not a.variable.is_array})


def _side_nests(context: Context, around: list[Statement], others: list[list[Loop]],
                expanded: list[str]) -> list[tuple[int, list[Statement]]]:
    """The nests distribution makes beside the band's, each as the line of its first
    statement (its loops' name in a step) and its statements: each other loop chain
    (gemm's ``C[i, j] *= beta``), and the statements around the chain, those on one
    dependence cycle together, as distribution groups them (dependences on the scalars it
    expands left out: each band iteration has an element of its own)."""
    import networkx as nx

    by_id = {id(s): s for s in around}
    graph = nx.DiGraph()
    graph.add_nodes_from(by_id)
    for (first, access), (second, _), _ in context.relations:
        if id(first) in by_id and id(second) in by_id and first is not second \
                and access.variable.name not in expanded:
            graph.add_edge(id(first), id(second))
    groups = [[by_id[k] for k in component]
              for component in nx.strongly_connected_components(graph)]
    groups += [list(other[0].statements()) for other in others]
    return sorted(((min(s.line for s in group), group) for group in groups),
                  key=lambda side: side[0])


def _distributed_target(order: tuple[Loop, ...], free: list[Loop]) -> Loop:
    """The loop of a distributed band to run in parallel: the outermost, unless it carries a
    dependence distribution keeps (trmm's ``i``: row ``i`` reads rows later iterations
    update) and a loop inside it carries none (trmm's ``j``: its tile loop leads the tile
    loops, the point loops keep their order for locality). ``free``: the band's loops that
    carry no dependence between its own statements, the scalars expanded left out
    (matmul's ``a``, once ``a[i, k]``, leaves ``i`` free); the transformer judges either
    way."""
    candidates = [loop for loop in order if loop in free]
    return order[0] if order[0] in free or not candidates else candidates[0]


def chain_of(loop: Loop) -> list[Loop]:
    """``loop`` and the loops each alone in the body of the one before."""
    chain = [loop]
    while len(chain[-1].body) == 1 and isinstance(chain[-1].body[0], Loop):
        chain.append(chain[-1].body[0])
    return chain


def _orders_to_measure(options: list[Interchange]) -> list[Interchange]:
    """The best-ranked order and, where its innermost loop carries a dependence (rank-1
    updates in the order ``i, j, p``: each ``A[i, j]`` summed along ``p``, a chain of adds
    no vector can run without reordering the sum), the best one whose innermost loop
    carries none (``i, p, j``: a row of ``A`` updated in vector lanes, at a worse locality
    score for the column of ``V`` it reads, which packing can repair): the search measures
    both."""
    if not options or options[0].order[-1] in options[0].parallel:
        return options[:1]
    vectorizable = next((o for o in options[1:] if o.order[-1] in o.parallel
                         and o.order[0] in o.parallel + o.parallel_after_privatizing), None)
    return options[:1] + ([vectorizable] if vectorizable else [])


def plan_nest(context: Context, top: Loop) -> list[NestPlan]:
    """The plans for the nest at ``top``, most ambitious first, each recipe once."""
    plans: list[NestPlan] = distributed_plans(context, top)
    band = _band_at(context.analysis, top)
    accesses = array_accesses(context.model, top.statements())
    if len(band) >= 2:
        options = sorted(_options(context.analysis, band), key=lambda o: (
            o.order[0] not in o.parallel + o.parallel_after_privatizing,
            -order_score(accesses, band, o.order), o.order != band))
        for option in _orders_to_measure(options):
            for tile in (True, False):
                plan = _order_plan(context, top, option, accesses, tile,
                                   options[0] if option is not options[0] else None)
                if plan is not None:
                    plans.append(plan)
    paths, blocked = parallel_paths(context, top)
    lanes = vector_lanes(context, innermost_loops(top))
    if paths:
        plans.append(NestPlan(top, "as written",
                              tuple(d for _, before, _, _ in paths for d in before), None,
                              tuple(d for _, _, after, _ in paths for d in after),
                              tuple((loop, why) for loop, _, _, why in paths), tuple(blocked),
                              lanes=lanes))
    reasons = tuple(sequential_reason(context.report(loop), context)
                    for loop in context.analysis.nest.loops
                    if loop is top or top in loop.enclosing)
    plans.append(NestPlan(top, "sequential", sequential=reasons))
    unique: dict[tuple[object, ...], NestPlan] = {}
    for plan in plans:
        for fallback in plan.fallbacks():
            unique.setdefault(fallback.key, fallback)
    out = list(unique.values())
    # the loops in order, their sums in vector lanes (cholesky's dot products): the
    # sequential plan's steps, so not one of its fallbacks (that would be named after it)
    in_lanes = NestPlan(top, "in lanes", sequential=reasons, lanes=lanes)
    if in_lanes.lanes and in_lanes.key not in unique:
        out.insert(len(out) - 1, in_lanes)
    return out
