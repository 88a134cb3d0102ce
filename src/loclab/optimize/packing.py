"""Packing: a read that walks a column in the innermost loop of a tiled band, copied tile by
tile into a contiguous buffer, transposed, so that the innermost loop reads it along a row.

The lectures' "remap a read-only slice", and BLIS's packing of a panel (Polly's matrix
multiplication pattern does the same): syrk's ``C[i, j] += A[i, k] * A[j, k]`` in the order
``i, k, j`` reads ``A[j, k]`` down a column of ``A`` as ``j`` advances, one cache line per
multiply-add and no vector loads; no loop order makes every access unit-stride (``k``
innermost is a sum the compiler may not reorder). Staged at the tile loop of ``j``,
``A[jj:jj+T, kk:kk+T]`` is copied once per tile into ``A_jj[k - kk, j - jj]``, which ``j``
then walks with unit stride, and the copy is paid once for the ``T`` iterations of ``i`` that
read the same panel. The arithmetic is unchanged (each element is read from the copy, in the
same order), so the result is bit-identical.

A read qualifies where it is 2-D, affine, strided in the innermost loop and unit-stride once
transposed, its array is not written anywhere in the nest (a copy would go stale) and some
loop of the band leaves it invariant (otherwise every copied element is read once: the copy
costs what it saves); and only where the innermost loop writes a new element each iteration
(one that sums into an element, gemm's ``k`` in the order ``i, j, k``, runs no vector loop
for the packed panel to feed, without leave to reorder the sum). The planner offers the
packed plan before the same plan unpacked; the search measures both.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from loclab.nest.ir import Loop
from loclab.optimize.locality import ArrayAccess, array_accesses, stride
from loclab.optimize.planner import Context, Decision, NestPlan, bounds_name
from loclab.optimize.tiles import choose_tile


@dataclass(frozen=True)
class Pack:
    """One array's reads to pack: staged at the tile loop of ``loop`` (the band's innermost),
    only the reads that move with it."""

    array: str
    loop: Loop
    reason: str


def with_packs(context: Context, plans: list[NestPlan]) -> list[NestPlan]:
    """``plans`` with, before each tiled plan that has reads to pack, the same plan packing
    them."""
    out: list[NestPlan] = []
    for plan in plans:
        packed = _packed(context, plan) if plan.band is not None and not plan.packs else None
        if packed is not None:
            out.append(packed)
        out.append(plan)
    return out


def _packed(context: Context, plan: NestPlan) -> NestPlan | None:
    """The plan packing its band's reads that qualify, one pack per array, its tile the one
    that fits the L2 (BLIS keeps its packed panel there: at the L1's tile, 16 for syrk, the
    copy of each 16 x 16 panel costs a sixteenth of the work it serves, and the packed plan
    measures slower than the unpacked one it beats at 64, 47 against 121 ms, 2 cores,
    2026-11-29); None where no read qualifies."""
    band = plan.band
    assert band is not None
    order = band.loops
    inner = order[-1]
    accesses = array_accesses(context.model, [s for s in plan.top.statements()
                                              if s.loops and s.loops[-1] in order])
    if any(a.access.write and stride(a.access.subscripts, inner.var) == "invariant"
           for a in accesses):
        return None  # the innermost loop sums into one element: no vector loop to feed
    written = {a.variable.key for s in plan.top.statements() for a in s.accesses if a.write}
    found: dict[str, list[ArrayAccess]] = {}
    for access in accesses:
        if not access.access.write and access.access.variable.key not in written \
                and _packable(access, order):
            found.setdefault(access.access.variable.name, []).append(access)
    if not found:
        return None
    choice = choose_tile(accesses, order, context.extents, context.element_bytes,
                         context.l1_bytes, context.l2_bytes, context.threads, l2_only=True)
    packs = []
    for array, reads in found.items():
        texts = ", ".join(sorted({a.text for a in reads}))
        reused = sorted({loop.var for a in reads for loop in order
                         if stride(a.access.subscripts, loop.var) == "invariant"})
        packs.append(Pack(array, inner, (
            f"packing: {texts} strided in the innermost loop {inner.var}: each tile's "
            f"panel copied transposed into a contiguous buffer that {inner.var} reads with "
            f"unit stride, the copy reused across {', '.join(reused)} (tile "
            f"{choice.tile})")))
    # the packed panel is the cube the L2 holds: no longer vector loop past it
    return replace(plan, packs=tuple(packs),
                   band=replace(band, choice=choice, fixed=(), panel=""),
                   registers=tuple(d for d in plan.registers if not _bounds(d, inner)))


def _bounds(decision: Decision, inner: Loop) -> bool:
    """Whether a register tile's unroll jams a loop the innermost one's range moves with (a
    triangle's rows): beside packed panels it gained nothing and cost a compile three to
    seven times longer (syr2k at 1200 x 1000, 2 cores, 2026-11-30: packed and jammed in
    ``k`` alone 68 ms, built in 3.4 s; also in ``i`` 72 ms, built in 23 s)."""
    return decision.step is not None and bounds_name(inner, decision.step.args[0].var)


def _packable(access: ArrayAccess, order: tuple[Loop, ...]) -> bool:
    subscripts = access.access.subscripts
    if len(subscripts) != 2 or not access.access.affine:
        return False
    inner = order[-1].var
    return stride(subscripts, inner) == "strided" \
        and stride(subscripts[::-1], inner) == "unit" \
        and any(stride(subscripts, loop.var) == "invariant" for loop in order)
