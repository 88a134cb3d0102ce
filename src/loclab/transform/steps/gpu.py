"""``grid(ii, jj)`` and ``block(i=16, j=16)``: the loops a CUDA kernel runs at once, over
blocks and over the threads of a block (``loclab transform --emit cuda``).

The lectures' mapping: tile a parallel band, run the tile loops over blocks and the loops
inside a tile over threads (``tile(i=16, j=16); grid(ii, jj); block(i=16, j=16)``). The
named loops, the last on ``x``, form a perfect band each, and a block band sits inside the
grid band with nothing but loops between (a product's ``kk``): code beside them would run
once per thread. Every thread runs such a loop between, in step with the block's others
(the emitter ends each of its iterations with a barrier). Each mapped loop
must be parallel as ``parallel`` proves it (no dependence carried, or only additive updates
of array elements, which become atomic adds); a scalar combined across threads is refused,
since a thread keeps its scalars to itself. A mapped loop runs its iterations strided over
its blocks or threads (``i = start + threadIdx.x; i < stop; i += blockDim.x``), so any trip
count is computed by any number of threads; ``block`` says how many threads each loop gets.
Loops outside the grid run on the host, launching the kernel once per iteration; loops
inside the block run in each thread, as ordered.
"""

from __future__ import annotations

from loclab.transform.recipe import Step
from loclab.transform.steps import (Applied, Context, IllegalStep, band_of, expect_args,
                                    find_loop, require_distinct, require_plain,
                                    size_argument)
from loclab.transform.steps.parallel import mark_parallel
from loclab.transform.tree import LoopNode, Program

NAMES = ("grid", "block")
AXES = ("x", "y", "z")
# CUDA's limits on a block: threads along x, y and z, and in all.
MAX_THREADS = {"x": 1024, "y": 1024, "z": 64}
MAX_BLOCK = 1024


def apply(program: Program, step: Step, context: Context) -> Applied:
    grid = step.name == "grid"
    usage = "grid(loop, ...)" if grid else "block(loop=threads, ...)"
    new = program.clone()
    if grid:
        expect_args(step, 1, 3, f"{usage}: up to three loops, the last on x")
        if step.keywords:
            raise step.error("takes loops only: the number of blocks follows from the loops "
                             "(block(loop=threads) gives the threads)")
        refs, counts = list(step.args), [0] * len(step.args)
    else:
        expect_args(step, 0, 0, usage)
        if not 1 <= len(step.keywords) <= 3:
            raise step.error(f"usage {usage}: up to three loops, each with its threads, the "
                             "last on x")
        refs = [ref for ref, _ in step.keywords]
        counts = [size_argument(value, step, "thread count", MAX_BLOCK)
                  for _, value in step.keywords]
    nodes = [find_loop(new, ref, step) for ref in refs]
    require_distinct(nodes, step)
    require_plain(new, nodes, step)
    _require_band(new, nodes, step)
    _require_placement(new, nodes, step, grid)
    axes = [f"{'blockIdx' if grid else 'threadIdx'}.{axis}"
            for axis in reversed(AXES[:len(nodes)])]
    if not grid:
        _require_threads(nodes, counts, axes, step)
    reasons = []
    for node in nodes:
        _, _, reason = mark_parallel(new, [node], step, context)
        scalars = [r for r in node.reductions if r.scalar]
        if scalars:
            raise IllegalStep(f"{step} is illegal: {node.name} combines {scalars[0].name} "
                              f"({scalars[0].op}) across its iterations, and a GPU thread "
                              "keeps its scalars to itself: keep the loop in the thread, or "
                              "sum into an array element")
        reasons.append(reason)
    for node, axis, count in zip(nodes, axes, counts):
        node.gpu, node.threads = axis, count
    where = ", ".join(f"{node.name} on {axis}" + (f" ({count} threads)" if count else "")
                      for node, axis, count in zip(nodes, axes, counts))
    return Applied(new, f"{where}: " + "; ".join(reasons))


def _require_band(program: Program, nodes: list[LoopNode], step: Step) -> None:
    """The named loops, outermost first, are one perfect band with nothing between them."""
    band = band_of(program, nodes, step)
    if band != nodes:
        names = ", ".join(n.name for n in band)
        raise step.error(f"name the loops of the band in order, none left out ({names})")


def _require_placement(program: Program, nodes: list[LoopNode], step: Step,
                       grid: bool) -> None:
    """A grid band lies outside any other mapped loop and holds no mapped loop yet; a block
    band lies inside a grid band, alone in the loops between, and holds no block yet."""
    outer = program.path(nodes[0])
    mapped = [n for n in outer if n.gpu] + [n for n in nodes if n.gpu]
    if grid:
        inside = [n for node in nodes for n in node.loops() if n.gpu]
        if mapped or inside:
            taken = (mapped or inside)[0]
            raise step.error(f"{taken.name} is already mapped ({taken.gpu}): one grid per "
                             "kernel, its loops named once")
        return
    grids = [k for k, n in enumerate(outer) if n.gpu.startswith("blockIdx")]
    if not grids:
        raise step.error(f"{nodes[0].name} is not inside a grid: map the loops around it "
                         "with grid(...) first")
    if any(n.gpu.startswith("threadIdx") for n in outer) or any(
            n.gpu for node in nodes for n in node.loops()):
        raise step.error("one block per grid: its loops named once")
    chain = outer[grids[-1]:] + [nodes[0]]
    for parent, child in zip(chain, chain[1:]):
        if parent.body != [child]:
            raise step.error(f"{child.name} must be the only thing inside {parent.name}: "
                             "code beside it would run once per thread (distribute first)")


def _require_threads(nodes: list[LoopNode], counts: list[int], axes: list[str],
                     step: Step) -> None:
    total = 1
    for node, count, axis in zip(nodes, counts, axes):
        limit = MAX_THREADS[axis[-1]]
        if count > limit:
            raise step.error(f"{node.name}={count}: a block has at most {limit} threads "
                             f"along {axis[-1]}")
        total *= count
    if total > MAX_BLOCK:
        raise step.error(f"{total} threads: a block has at most {MAX_BLOCK}")
