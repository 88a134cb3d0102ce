"""``stripmine(i, 32[, ii])``: a loop over tiles of 32 iterations around a loop over one.

The slides' ``for ii in range(0, N, 32): for i in range(ii, min(ii + 32, N))``. Always legal:
every iteration keeps its place in the order. The tile loop is named as the slides do (``ii``)
unless a third argument names it.
"""

from __future__ import annotations

from loclab.transform.recipe import Step
from loclab.transform.steps import (Applied, Context, expect_args, find_loop, no_keywords,
                                    replace_node, require_new_name, size_argument, tile_name)
from loclab.transform.tree import LoopNode, Program

NAMES = ("stripmine",)


def apply(program: Program, step: Step, context: Context) -> Applied:
    expect_args(step, 2, 3, "stripmine(loop, size[, name of the tile loop])")
    no_keywords(step)
    new = program.clone()
    node = find_loop(new, step.args[0], step)
    size = size_argument(step.args[1], step)
    name = require_new_name(new, step.args[2], step) if len(step.args) == 3 else None
    tile = stripmine(new, node, size, name, step)
    return Applied(new, f"strip-mining keeps every iteration in its place ({tile.name} runs "
                        f"over tiles of {size} iterations of {node.name})")


def stripmine(program: Program, node: LoopNode, size: int, name: str | None,
              step: Step) -> LoopNode:
    """Cut ``node`` into tiles of ``size`` iterations in place; the new tile loop."""
    if node.tile:
        raise step.error(f"{node.label} runs over tiles: strip-mine the loop over "
                         f"{node.origin.var} inside it instead")
    tile = LoopNode(name or tile_name(program, node.origin.var), node.origin, [node],
                    tile=size, within=node.within, fused=node.fused, skew=node.skew)
    replace_node(program, node, [tile])
    node.within = tile
    return tile
