"""Copies that run where another runs, shifted: isl generates code for one of them.

Unrolling makes copies of a unit (``unroll``: ``C[i][j + 1]`` beside ``C[i][j]``), each a
unit of its own with its instances restricted to its place in a group of iterations; jammed
ones sit side by side in one body. isl's AST generator pays for every unit: it meets each
copy's floors and existentials again, and with two loops unrolled and jammed by 4 (a
register tile), sixteen copies of each statement made it spend seconds where one took
tenths. Yet a copy adjacent to another copy of the same unit usually runs at exactly the
same loop values, at coordinates shifted by a constant (``j + 1``), where that one runs (or
at a subset of those places: a guarded copy past the sizes' edge).

:func:`copy_groups` finds such runs of adjacent copies and proves, with isl, for each
follower: the relation "same loop values" from the leader's instances to the follower's is
a translation by a constant vector, it reaches every instance of the follower, and where it
does not start from every instance of the leader, the leader's instances it starts from are
a condition on the leader's coordinates without integer divisions (the guard). Codegen then
schedules only the leaders and emits each follower right after its leader's call, at the
shifted coordinates, under its guard: the same instances in the same order as isl would
have placed them (adjacent siblings at equal loop values run one after the other, and
nothing can sit between adjacent units). A run that fails any of the checks is left to isl,
copy by copy, as before; so is a copy whose guard names the innermost loop's variable
(:func:`_guards_innermost`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from loclab.transform.schedule import POSITION_STRIDE, Placed, Schedule

if TYPE_CHECKING:
    import islpy as isl


@dataclass(frozen=True)
class Follower:
    """A copy emitted right after its leader: at the leader's coordinates plus ``offsets``,
    where ``guard`` holds (a set over the leader's coordinates; None: everywhere)."""

    placed: Placed
    offsets: tuple[int, ...]
    guard: "isl.Set | None"


def copy_groups(schedule: Schedule) -> dict[int, list[Follower]]:
    """Leader's unit number -> its followers, in order (see the module)."""
    placed = schedule.placed
    groups: dict[int, list[Follower]] = {}
    start = 0
    while start < len(placed):
        leader = placed[start]
        followers: list[Follower] = []
        lead = None
        for candidate in placed[start + 1:]:
            if not _adjacent_copy(leader, candidate, len(followers) + 1):
                break
            lead = lead or _timed(schedule, leader)
            follower = _follower(schedule, lead, candidate)
            if follower is None or _guards_innermost(follower):
                break
            followers.append(follower)
        if followers:
            groups[leader.number] = followers
        start += len(followers) + 1
    return groups


def _adjacent_copy(leader: Placed, candidate: Placed, distance: int) -> bool:
    """Whether ``candidate`` is another copy of ``leader``'s unit, ``distance`` siblings
    after it in the same body."""
    a, b = leader.unit, candidate.unit
    return (bool(a.statements) and a.copy != () and b.statements == a.statements
            and b.syntax is a.syntax and b.loops == a.loops and b.guards == a.guards
            and [loop for loop, _ in b.copy] == [loop for loop, _ in a.copy]
            and len(candidate.path) == len(leader.path)
            and all(x is y for x, y in zip(candidate.path, leader.path))
            and candidate.positions[:-1] == leader.positions[:-1]
            and candidate.positions[-1] == leader.positions[-1] + POSITION_STRIDE * distance)


def _follower(schedule: Schedule, lead: "isl.Map", candidate: Placed) -> Follower | None:
    """``candidate`` as a follower of the leader whose instances -> loop values are
    ``lead``, or None where the checks fail."""
    import islpy as isl

    follow = _timed(schedule, candidate)
    same_time = lead.apply_range(follow.reverse())
    if same_time.is_empty() or not same_time.is_single_valued() \
            or not same_time.is_injective():
        return None
    if not same_time.range().is_equal(follow.domain()):
        return None  # the follower runs somewhere its leader does not
    plain = same_time.reset_tuple_id(isl.dim_type.in_).reset_tuple_id(isl.dim_type.out)
    deltas = plain.deltas()
    offsets = _constant_point(deltas)
    if offsets is None:
        return None
    starts = same_time.domain()
    if starts.is_equal(lead.domain()):
        return Follower(candidate, offsets, None)
    guard = starts.gist(lead.domain()).coalesce()
    if any(piece.dim(isl.dim_type.div) for piece in guard.get_basic_sets()):
        return None
    return Follower(candidate, offsets, guard)


def _guards_innermost(follower: Follower) -> bool:
    """Whether the follower's guard names the variable of the innermost loop around it (a
    triangle's ``j >= i + 2`` for the second copy of a jammed ``i``): as a guard it would sit
    in every iteration of that loop and keep it from vector lanes, where isl, given the copy,
    separates the loop's range into pieces each copy runs whole (``codegen``'s
    ``separate``). The innermost loop's own copies are left grouped: their guards are its
    remainder."""
    import islpy as isl

    inner = follower.placed.path[-1] if follower.placed.path else None
    if follower.guard is None or inner is None or inner.copies:
        return False
    index = follower.placed.unit.loops.index(inner.origin)
    return follower.guard.involves_dims(isl.dim_type.set, index, 1)


def _timed(schedule: Schedule, placed: Placed) -> "isl.Map":
    """The unit's instances -> their loop values (its time without its place among its
    siblings)."""
    import islpy as isl

    times = placed.times[:-1]
    text = (f"{schedule.model.header}{{ {placed.name}[{placed.coords()}] -> "
            f"[{', '.join(times)}] }}")
    return isl.Map(text).intersect_domain(isl.Set(schedule.unit_domain(placed)))


def _constant_point(deltas: "isl.Set") -> tuple[int, ...] | None:
    """The one vector of ``deltas`` if it is the same for every value of the sizes."""
    import islpy as isl

    if not deltas.is_singleton():
        return None
    point = deltas.sample_point()
    values = tuple(int(point.get_coordinate_val(isl.dim_type.set, k).to_python())
                   for k in range(deltas.dim(isl.dim_type.set)))
    names = [deltas.get_dim_name(isl.dim_type.param, k)
             for k in range(deltas.dim(isl.dim_type.param))]
    header = f"[{', '.join(names)}] -> " if names else ""
    exact = isl.Set(f"{header}{{ [{', '.join(map(str, values))}] }}")
    return values if exact.intersect_params(deltas.params()).is_equal(deltas) else None
