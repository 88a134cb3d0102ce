"""``fuse(i@3, i@7[, 1])``: one loop runs the iterations of two adjacent loops, the second's
body after the first's in each iteration, the second's iterations shifted by the third
argument: iteration ``i`` of the second runs in iteration ``i + 1`` (fusion with a shift, as
Pluto does it: jacobi's copy-back loop one behind its sweep, so that no row is copied back
before the sweep has read it).

Legal when every dependence between the two bodies keeps its source first in the fused order
(a read of the first loop that a later write of the second would now precede is a WAR the
fusion breaks). Fusion is the inverse of distribution and the step that makes a time-iterated
stencil one perfect band, which ``skew`` and ``tile`` then cut into time tiles.
"""

from __future__ import annotations

from loclab.transform.recipe import Step
from loclab.transform.steps import Applied, Context, loop_pair, skew_bases
from loclab.transform.tree import LoopNode, Program

NAMES = ("fuse",)


def apply(program: Program, step: Step, context: Context) -> Applied:
    usage = "fuse(loop, the loop right after it[, shift of the second])"
    new, first, second, shift = loop_pair(program, step, usage, "shift", 0)
    _require_fusible(new, first, second, step)
    body = new.parent_body(first)
    body.remove(second)
    first.fused += tuple((loop, offset + shift) for loop, offset
                         in ((second.origin, 0), *second.fused))
    first.body += second.body
    context.require_order(new, step, [first])
    moved = f", {second.name} shifted by {shift}" if shift else ""
    return Applied(new, f"every dependence between the bodies of {first.label} and "
                        f"{second.label} keeps its source first in one loop{moved}")


def _require_fusible(program: Program, first: LoopNode, second: LoopNode, step: Step) -> None:
    """Two loops over variables (not tiles), counting up, adjacent in one body, with nothing
    a later step attached to them (parallel, storage, buffers, skews)."""
    skewed_by = skew_bases(program)
    for node in (first, second):
        if node.tile or node.within is not None:
            raise step.error(f"{node.label} runs over tiles or inside a tile: fuse the loops "
                             "before tiling them")
        if any(loop.step < 0 for loop in node.origins):
            raise step.error(f"{node.label} counts down: fuse takes loops that count up")
        if node.skew or id(node) in skewed_by:
            raise step.error(f"{node.label} is skewed or skews another loop: fuse first, "
                             "then skew")
        if node.parallel or node.vectorized or node.gpu:
            raise step.error(f"{node.label} is already parallel or mapped: fuse first")
        if any(p.loop in node.origins for p in program.private.values()):
            raise step.error(f"a variable is private to {node.label}: fuse first, then "
                             "privatize at the fused loop's parent")
        if any(b.loop is node for b in program.buffers):
            raise step.error(f"an array is staged for {node.label}: fuse first")
    body = program.parent_body(first)
    index = next(k for k, child in enumerate(body) if child is first)
    if index + 1 >= len(body) or body[index + 1] is not second:
        raise step.error(f"{second.label} must come right after {first.label}, in the same "
                         "body")
