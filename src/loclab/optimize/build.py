"""Plans into steps the transformer accepts: nest by nest, the first plan every step of
which is proved legal (and which the Numba emitter can write) is kept; a refused step is
recorded with the transformer's reason and the next, less ambitious plan is tried.

The tile loop a ``parallel`` step names is only known once the band is tiled (``ii``, or
``iii`` where ``ii`` is taken), so a tiled plan is applied up to its tile step first and the
name read off the new loop tree.
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from loclab.errors import UsageError
from loclab.nest.ir import Loop
from loclab.optimize.planner import NestPlan
from loclab.transform.recipe import Step, make_step

if TYPE_CHECKING:
    from loclab.optimize.packing import Pack


@dataclass(frozen=True)
class Source:
    """The function being optimized, as the transformer reads it."""

    text: str
    function: str
    filename: str
    # Its scalars' NumPy types for the arguments the code is for (``measure.scalar_types``):
    # the type of an expanded scalar's array.
    scalar_types: tuple[tuple[str, str], ...] = ()
    # the user vouches that no two arguments share memory: the code does not check them
    # (otherwise it runs as written when they do, loclab.transform.versioning)
    assume_distinct: bool = False
    # the user lets the compiler fuse multiplies and adds and reorder sums (--fast-math):
    # every recipe for Numba ends in ``fastmath()``
    fast_math: bool = False

    def transform(self, steps: Sequence[Step], emit: str = "numba") -> Any:
        """``loclab.transform`` of the function with ``steps`` (none: the function as
        written, emitted as ``emit``, ``fastmath()`` not added); the same steps again are not
        proved again (a plan is tried, then kept: seconds each where it unrolls), nor
        refused again."""
        if self.fast_math and steps and emit == "numba":
            steps = [*steps, FAST_MATH]
        return _transformed(self, tuple(steps), emit)


FAST_MATH = make_step("fastmath")
TransformKey = tuple[Source, tuple[Step, ...], str]

# the transforms made lately (a result, or the refusal it raised), the latest last: a step
# proved once is not proved again in this process, whether proved here or in a worker of
# ``loclab.optimize.ahead`` (``remember``)
_TRANSFORMS: OrderedDict[TransformKey, Any] = OrderedDict()
TRANSFORMS_KEPT = 256
_recording: list[list[tuple[TransformKey, Any]]] = []  # where ``recorded`` collects


def _transformed(source: Source, steps: tuple[Step, ...], emit: str) -> Any:
    from loclab.transform import transform

    key = (source, steps, emit)
    if key in _TRANSFORMS:
        _TRANSFORMS.move_to_end(key)
        made = _TRANSFORMS[key]
    else:
        try:
            made = transform(source.text, steps, source.function, emit=emit,
                             filename=source.filename,
                             scalar_types=dict(source.scalar_types),
                             assume_distinct=source.assume_distinct)
        except _refusals() as err:
            made = err
        remember([(key, made)])
        for made_here in _recording:
            made_here.append((key, made))
    if isinstance(made, Exception):
        raise made.with_traceback(None)
    return made


def remember(transforms: Iterable[tuple[TransformKey, Any]]) -> None:
    """Keep transforms made elsewhere (a worker's): the same steps are then not proved
    here."""
    for key, made in transforms:
        _TRANSFORMS[key] = made
        _TRANSFORMS.move_to_end(key)
    while len(_TRANSFORMS) > TRANSFORMS_KEPT:
        _TRANSFORMS.popitem(last=False)


@contextlib.contextmanager
def recorded() -> Iterator[list[tuple[TransformKey, Any]]]:
    """The transforms made (not found kept) while inside, in order: what a worker hands
    back to ``remember``."""
    made: list[tuple[TransformKey, Any]] = []
    _recording.append(made)
    try:
        yield made
    finally:
        _recording.remove(made)


@dataclass(frozen=True)
class Chosen:
    """The plan kept for one nest, the steps it contributed, and the plans refused before it
    (with the transformer's reason)."""

    plan: NestPlan
    steps: tuple[Step, ...]
    refused: tuple[tuple[NestPlan, str], ...]


def refusal(err: Exception) -> str:
    """A transformer's refusal in one line (IllegalStep, StorageError, UsageError)."""
    return str(err).splitlines()[0]


def _refusals() -> tuple[type[Exception], ...]:
    from loclab.transform.steps import IllegalStep
    from loclab.transform.storage import StorageError

    return (IllegalStep, StorageError, UsageError)


def loop_tiles(plans: Sequence[NestPlan], tiles: Mapping[str, int]) -> dict[Loop, int]:
    """Each tiled loop's tile where ``tiles`` gives the tuned tile of each band (by its key;
    the model's by default)."""
    return {loop: size for plan in plans if plan.band is not None
            for loop, size in plan.band.sizes(tiles.get(plan.band.key,
                                                        plan.band.choice.tile)).items()}


def plan_steps(source: Source, done: Sequence[Step], plan: NestPlan,
               tiles: Mapping[str, int]) -> list[Step]:
    """The steps of ``plan`` after the steps ``done`` for the nests before it; ``tiles``
    gives the tile size of each band (by its key; the model's by default). Raises what the
    transformer raises for a step it refuses."""
    steps = [d.step for d in plan.before if d.step]
    tile_loops: dict[tuple[str, int], str] = {}
    if plan.band is not None:
        steps.append(plan.band.step(tiles.get(plan.band.key, plan.band.choice.tile)))
        program = source.transform([*done, *steps], emit="python").program
        tile_loops = {(node.origin.var, node.origin.line): node.label
                      for node in program.loops() if node.tile}
    steps += wavefront_steps(plan, tile_loops)
    steps += [d.step for d in (*plan.after, *plan.registers, *plan.lanes)
              if d.step and d.step.name != "hold"]
    steps += [pack_step(plan, pack, tile_loops) for pack in plan.packs]
    # ``hold`` reads a packed read as the packed panel: after the ``stage`` steps
    steps += [d.step for d in plan.registers if d.step and d.step.name == "hold"]
    dealt = dict(plan.cyclic)
    steps += [make_step("parallel", tile_loops.get((loop.var, loop.line), plan.name(loop)),
                        keywords=[("copies", True)] if loop in plan.copies
                        else [("cyclic", dealt[loop])] if loop in dealt else [])
              for loop, _ in plan.parallel]
    return steps


def wavefront_steps(plan: NestPlan, tile_loops: Mapping[tuple[str, int], str]) -> list[Step]:
    """``skew(ii, tt, r); interchange(tt, ii)``: a time-tiled band's tiles in waves, the
    time loop's tile loop inside (its tiles of one wave run in parallel); ``r``, the fused
    loop's tile over the time loop's, makes a tile's wave the sum of its two tile
    indices."""
    if plan.wavefront is None or plan.band is None:
        return []
    outer, inner = (tile_loops[(loop.var, loop.line)] for loop in plan.wavefront)
    ratio = dict(zip(plan.band.loops, plan.band.ratios)).get(plan.wavefront[1], 1)
    return [make_step("skew", inner, outer, ratio), make_step("interchange", outer, inner)]


def pack_step(plan: NestPlan, pack: "Pack", tile_loops: Mapping[tuple[str, int], str]) -> Step:
    """``stage(A, jj, transpose=True, using=j)``: the pack's reads staged at the tile loop
    of its loop."""
    return make_step("stage", pack.array, tile_loops[(pack.loop.var, pack.loop.line)],
                     keywords=[("transpose", True), ("using", plan.name(pack.loop))])


def choose(source: Source, plans: Sequence[Sequence[NestPlan]],
           tiles: Mapping[str, int] | None = None) -> tuple[list[Chosen], Any]:
    """For each nest (in order), the first of its plans the transformer accepts after the
    nests before it; and the transformed function (emitted for Numba). The last plan of each
    nest (sequential) has no step, so some plan is always kept."""
    tiles = tiles or {}
    done: list[Step] = []
    chosen: list[Chosen] = []
    absorbed: dict[int, NestPlan] = {}  # a nest fused into one before it: by its top
    for candidates in plans:
        top = candidates[0].top
        if id(top) in absorbed:
            chosen.append(Chosen(absorbed_plan(top, absorbed[id(top)]), (), ()))
            continue
        refused: list[tuple[NestPlan, str]] = []
        for plan in candidates:
            try:
                steps = plan_steps(source, done, plan, tiles)
                source.transform([*done, *steps])
            except _refusals() as err:
                refused.append((plan, refusal(err)))
                continue
            done += steps
            chosen.append(Chosen(plan, tuple(steps), tuple(refused)))
            if plan.absorbs is not None:
                absorbed[id(plan.absorbs)] = plan
            break
    return chosen, source.transform(done)


def absorbed_plan(top: Any, by: NestPlan) -> NestPlan:
    """What a nest fused into the one before it keeps: no step of its own."""
    return NestPlan(top, f"fused into line {by.top.line}")


def tiers(source: Source, plans: Sequence[Sequence[NestPlan]]
          ) -> Iterator[tuple[list[Chosen], Any]]:
    """The whole function at each tier of ambition (``tier_plans``), built on demand: each
    tier's kept plans and transformed function."""
    for tier in tier_plans(plans):
        yield choose(source, tier)


def tier_plans(plans: Sequence[Sequence[NestPlan]]) -> list[list[list[NestPlan]]]:
    """Each tier's plans to choose from: tier t starts each nest's choice at its t-th plan
    (its last, sequential, once it has no more). Plans that fuse the next nest into theirs
    come first, once; then every tier without them (else the next nest's own first plan
    would never be measured beside its unfused neighbour)."""
    unfused = [[plan for plan in nest if plan.absorbs is None] for nest in plans]
    fusing = any(plan.absorbs is not None for nest in plans for plan in nest)
    return ([[list(nest) for nest in plans]] if fusing else []) + [
        [p[tier:] or p[-1:] for p in unfused] for tier in range(max(len(p) for p in unfused))]


def built_function(source: Source, plans: Sequence[Sequence[NestPlan]],
                   tiles: Mapping[str, int] | None = None) -> Any:
    """``choose``'s transformed function alone (what a worker of ``optimize.ahead``
    builds)."""
    return choose(source, plans, tiles)[1]
