"""How one top-level loop nest runs on the GPU: which loops become threads, which loop goes on
``threadIdx.x``, which arrays are updated atomically, and the knobs a launch is tuned by.

A *mapping* is decided by the planner (``loclab.optimize.cuda.plan``) and proved by the
transformer: the grid loops are the leading loops of a legal order of the band at the top of
the nest, each one ``parallel`` once the scalars the nest assigns are private (on a GPU they
live in each thread's registers), so no dependence crosses two threads. A *config* is what
the cache-free model picks first and measurement may change: threads per block along each
grid loop, the register tile (how many iterations of each grid loop one thread runs, jammed
through the loops inside), whether read-only tiles are staged in shared memory, and the
strip of the loop they are staged along.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

from loclab.nest.ir import Loop, Statement
from loclab.nest.python import serves
from loclab.transform.recipe import Step

AXES = ("x", "y", "z")
THREADS = 256  # threads per block the model starts from
WARP = 32
ACCUMULATOR_REGISTERS = 64  # of a thread's 255: the rest hold operands and addresses
# A split loop's grid with fewer iterations than this gets a block per iteration instead of
# a warp: 64 rows of a short, wide matvec as 64 warps leave an H100's 132 SMs nearly idle
# (85 GB/s); as 64 blocks of BLOCK_LANES threads each streams its row with 32 warps.
FEW_ITERATIONS = 1024
BLOCK_LANES = 1024
BLOCK_LIMITS = (1024, 1024, 64)  # CUDA's most threads of a block along x, y and z
# A row split (a loop shared by the block's rows) adds rows until the grid has this many
# threads (an H100's 132 SMs of 2,048 threads: about half resident), each row running at
# least ROW_ITERATIONS iterations of the loop
FILL_THREADS = 1 << 17
ROW_ITERATIONS = 8
# A loop split by a warp's lanes with fewer than LANE_ITERATIONS iterations a lane is split
# by fewer lanes (16, 8, 4: several grid iterations a warp): a tall matvec's 64 columns on
# 32 lanes give each lane two loads before the shuffles, too few in flight to stream
GROUP_LANES = (4, 8, 16)
LANE_ITERATIONS = 4
# A grid of few iterations, a block each (a short, wide matvec's 64 rows): each iteration's
# split loop is shared by several blocks (``Config.chunks``) until the grid has this many
# threads (an H200's 132 SMs hold 270,336: about two waves), each thread running at least
# ROW_ITERATIONS iterations of the loop
CHUNK_THREADS = 1 << 19
REUSE_TILE = 4  # a staged register tile fitted to a short loop keeps 4 iterations first
LONG_STRIP = 256  # a one-loop grid's strip: one element of a tile read by all, a thread


@dataclass(frozen=True)
class CopiedReads:
    """Reads of ``array`` that read ``name``, a copy the host makes before the kernel
    (the transformer's ``copy``: they see only values from before the nest, and later
    iterations overwrite what they read, trmm's ``B[k, j]``). ``reads`` as written (empty:
    every read of the array)."""

    array: str
    name: str
    reads: frozenset[str] = frozenset()

    def serves(self, node: ast.Subscript) -> bool:
        return serves(self.reads, node)


@dataclass(frozen=True)
class NestMapping:
    """One top-level nest on the GPU (``grid`` empty: one thread runs it as written)."""

    top: Loop
    node: ast.For  # the top loop's syntax
    order: tuple[Loop, ...]  # the band at the top, in the order the thread code nests it
    grid: tuple[Loop, ...]  # leading loops of ``order`` run by threads, outermost first
    x: Loop | None  # the grid loop on threadIdx.x (unit-stride accesses along it coalesce)
    atomics: frozenset[str]  # arrays a grid loop updates with + from many threads
    steps: tuple[Step, ...]  # the transformer's steps that prove the mapping legal
    reasons: tuple[tuple[str, str], ...]  # (decision, why), in the slides' words
    # A loop inside the grid whose iterations threads share, each summing its part of the
    # reductions ``reductions`` ((name, op): scalars, or array elements kept in registers
    # across the loop), combined after it: a warp's lanes (threadIdx.x; a warp per grid
    # iteration, ``x`` None), or with ``split_rows`` the block's rows (threadIdx.y), the
    # grid loop staying on threadIdx.x.
    split: Loop | None = None
    reductions: tuple[tuple[str, str], ...] = ()
    split_rows: bool = False
    # loops around ``top`` that run on the host, each iteration launching this kernel (a
    # stencil's time steps): their variables are the kernel's integer arguments
    host: tuple[Loop, ...] = ()
    # the one statement of the innermost body this kernel runs, where a distributed loop's
    # body holds several (``node`` is then that statement too)
    part: ast.stmt | None = None
    copies: tuple[CopiedReads, ...] = ()  # reads served by copies made before the kernel
    # No grid, one block: its threads run the nest's sequential loops together, each of
    # these loops (innermost, parallel but for their reductions) shared by them, its
    # reductions ((name, op)) combined after it; what the rest writes one thread writes,
    # a barrier after it (a triangular solve's row sum, between rows)
    block_splits: tuple[tuple[Loop, tuple[tuple[str, str], ...]], ...] = ()
    # scalars the whole grid reduces ((name, op); ``plan.GRID_OPS``): each thread's share in
    # a register, each block's combined and added atomically to one device copy (``sums``)
    sums: tuple[tuple[str, str], ...] = ()
    # an access unit-stride along a grid loop other than ``x`` (a transposition's write):
    # the threads of a warp touch as many lines of it as they are
    crossing: bool = False
    # no loop inside the grid has its moving accesses unit-stride along it more than
    # along ``x`` (else the transformer's rewrite may bring that loop into the grid)
    coalesced: bool = True

    def statements(self) -> list[Statement]:
        """The statements this kernel runs (``part``'s alone where it is one)."""
        inside = self.top.statements()
        if self.part is None:
            return inside
        return [s for s in inside if s.line == self.part.lineno]

    @property
    def threads_share(self) -> bool:
        """Whether more than one thread runs the nest (a grid, or one block's threads)."""
        return bool(self.grid or self.block_splits)

    def axis(self, loop: Loop) -> int:
        """0 (x), 1 (y) or 2 (z): x is ``self.x`` (or a warp's lanes, where the loop inside
        is split), the others outermost-last."""
        others = [g for g in self.grid if g is not self.x]
        if loop is self.x:
            return 0
        return 1 + list(reversed(others)).index(loop)  # (split: every grid loop is here)


@dataclass(frozen=True)
class Config:
    """Threads per block and iterations per thread along each grid loop (grid order); staging
    on or off; the strip of the loop tiles are staged along; products of doubles on the
    tensor cores where a kernel has one (``cuda.mma``)."""

    block: tuple[int, ...]
    tile: tuple[int, ...]
    stage: bool = True
    strip: int = 32

    lanes: int = 1  # threads along x per grid iteration (a warp where a loop is split)
    rows: int = 1  # threads along y per grid iteration (the block's rows split a loop)
    mma: bool = True
    # blocks sharing a grid iteration's split loop (a block per iteration, ``lanes`` above a
    # warp): each reduces its part, the last to finish combines the parts in block order
    chunks: int = 1
    # staged strips copied into a ring of tiles by cp.async, strips in flight while one is
    # computed (``cuda.pipeline``); else through registers a strip ahead
    pipelined: bool = True
    # a product of 4-byte floats: each thread's iterations in groups of 4, its factors read
    # from shared memory as 16-byte vectors (``cuda.warp_layout``)
    warp_tiles: bool = True

    @property
    def threads(self) -> int:
        product = self.lanes * self.rows
        for b in self.block:
            product *= b
        return product

    def to_json(self) -> dict[str, object]:
        return {"block": list(self.block), "tile": list(self.tile), "stage": self.stage,
                "strip": self.strip, "lanes": self.lanes, "rows": self.rows,
                "mma": self.mma, "chunks": self.chunks, "pipelined": self.pipelined,
                "warp_tiles": self.warp_tiles}

    def text(self) -> str:
        if not self.block and self.lanes > 1:
            return f"one block of {self.lanes} threads"
        if self.rows > 1:
            return f"block {self.block[0]} x {self.rows} rows sharing the loop inside"
        if self.lanes > WARP:
            shared = f", {self.chunks} blocks sharing its loop" if self.chunks > 1 else ""
            return f"a block of {self.lanes} threads per iteration{shared}"
        if self.lanes > 1:
            lanes = "a warp" if self.lanes == WARP else f"{self.lanes} lanes"
            return (f"{lanes} per iteration, {'x'.join(map(str, self.block))} "
                    "iterations a block")
        return (f"block {'x'.join(map(str, self.block)) or '1'}, "
                f"{'x'.join(map(str, self.tile)) or '1'} per thread, "
                + (f"staged in strips of {self.strip}" if self.stage else "not staged")
                + ("" if self.pipelined or not self.stage else " through registers")
                + ("" if self.mma else ", no tensor cores")
                + ("" if self.warp_tiles else ", no warp tiles"))


def planar(mapping: NestMapping, config: Config) -> tuple[int, int] | None:
    """The grid's indices of its loops on x and on y, where a layout of a block's
    iterations other than ``r`` blocks of threads along may take them (``cuda.mma``,
    ``cuda.warp_layout``): tiles staged, no loop split across threads, grid loops on x and
    y, and any third grid loop one iteration a block; else None."""
    if not (config.stage and config.lanes == 1 and config.rows == 1) \
            or mapping.split is not None or mapping.block_splits or len(mapping.grid) < 2:
        return None
    by_axis = {mapping.axis(loop): index for index, loop in enumerate(mapping.grid)}
    x, y = by_axis.get(0), by_axis.get(1)
    if x is None or y is None or any(config.block[i] * config.tile[i] != 1
                                     for axis, i in by_axis.items() if axis > 1):
        return None
    return x, y


def default_config(mapping: NestMapping, reuse: bool, accumulators: int = 1,
                   words: int = 1) -> Config:
    """The model's first choice: 256 threads. One grid loop: 256 of its iterations a block,
    tiles staged along the loop inside in strips of ``LONG_STRIP`` (a tile every thread reads
    whole, nearest neighbour's points, costs a barrier pair a strip: on an H200 strips of
    256 ran it in 14.8 ms against 18.9 for 32 and 17.6 for 512; a tile of the block's rows
    is shrunk to fit shared memory, to 32 or 16 as before). Two or more, without reuse: a 32 x 32
    square of iterations a block, 16 x 16 threads with 2 x 2 each, read and written directly
    (a warp's strided accesses touch 32 lines that the neighbouring iterations of the
    square, in the same and the next warps, use up while they are in L1; measured on an
    H100, staging the square in shared memory was slower, 73% against 93% of a copy for
    transposition); where an access is unit-stride along another grid loop than x
    (``crossing``: a transposition), 8 threads along x with 4 iterations each, 32 along y
    (a warp's 8 x 4 iterations use whole 32-byte sectors of a float32 access along either
    loop; transposition on an H200: 82.9% of a copy against 76.3% for 16 x 16 with 2 x 2,
    79.8% with 4 x 4, 45% for 32 x 8 with 4 along y). Where threads of a block share what
    they read along an inner loop (``reuse``), a 32 x 8 block (a warp along x) with
    T x T iterations each (register tiling: each value staged is used T times from
    registers), T the largest of 8, 4, 2 whose scalars (``accumulators`` a grid iteration,
    ``words`` registers each) take at most 64 registers, tiles staged in strips of 8; a
    grid loop that bounds a loop inside (trmm's ``k`` from ``i + 1``) gets no tile and the
    other T (one loop the tile's copies run together, jammed; on an H200 trmm's product
    ran in 0.34 ms with 1 x 4, 0.41 ms with 1 x 8 and 0.63 ms with 2 x 8)."""
    if mapping.block_splits:  # one block, or a block per grid iteration
        return Config((1,) * len(mapping.grid), (1,) * len(mapping.grid), False,
                      lanes=BLOCK_LANES)
    if not mapping.grid:
        return Config((), (), False)
    if mapping.split_rows:  # 32 grid iterations a block; how many rows: fit_to_extents
        return Config((WARP,), (1,), False)
    if mapping.split is not None:  # a warp per grid iteration, 8 warps a block
        return Config((THREADS // WARP,) + (1,) * (len(mapping.grid) - 1),
                      (1,) * len(mapping.grid), False, lanes=WARP)
    count = len(mapping.grid)
    by_axis = [1] * count
    tiles = [1] * count
    x = mapping.grid.index(mapping.x) if mapping.x is not None else count - 1
    if count == 1:
        by_axis[x] = THREADS
    elif reuse:
        by_axis[x] = WARP
        y = next(i for i in reversed(range(count)) if i != x)
        by_axis[y] = THREADS // WARP
        side = next((t for t in (8, 4, 2) if t * t * max(accumulators, 1) * words
                     <= ACCUMULATOR_REGISTERS), 1)
        tiles[x] = tiles[y] = side
        bounding = _bounding(mapping)
        if len(bounding) == 1 and side > 1:
            tiles[mapping.grid.index(bounding[0])] = 1
            tiles[x if mapping.grid[x] is not bounding[0] else y] = side
    else:  # a 32 x 32 square of iterations a block, read directly
        y = next(i for i in reversed(range(count)) if i != x)
        if mapping.crossing:  # a warp of 8 x 4: whole sectors of both accesses
            by_axis[x], tiles[x], by_axis[y] = 8, 4, THREADS // 8
        else:  # 2 x 2 a thread
            by_axis[x], by_axis[y], tiles[x], tiles[y] = 16, THREADS // 16, 2, 2
        return Config(tuple(by_axis), tuple(tiles), False, 8)
    return Config(tuple(by_axis), tuple(tiles), True, LONG_STRIP if count == 1 else 8)


def _bounding(mapping: NestMapping) -> list[Loop]:
    """The grid loops a bound of a loop inside the nest reads."""
    inner = [loop for loop in _loops_in(mapping.top) if loop not in mapping.grid]
    names = {name for loop in inner for bound in (loop.start, loop.stop) if bound is not None
             for name in bound.symbols()}
    return [loop for loop in mapping.grid if loop.var in names]


def _loops_in(loop: Loop) -> list[Loop]:
    return [loop, *(inner for child in loop.body if isinstance(child, Loop)
                    for inner in _loops_in(child))]


def fit_to_extents(mapping: NestMapping, config: Config,
                   extents: Mapping[str, int]) -> Config:
    """``config`` with no grid loop given many more threads and iterations than it has
    (bmmm's 8 x 8 results a batch on a block of 256 x 64 would leave 255 threads in 256
    idle): iterations a thread, then threads, halved while their span is twice the loop's
    extent or more; a staged register tile is halved only down to ``REUSE_TILE`` before
    the threads (the reuse it buys is why it is there: bmmm at K = 8 on an H200, 2 x 2
    threads of 4 x 4 a batch ran in 0.75 ms, 8 x 8 threads of one in 2.9 ms, one thread of
    8 x 8 in 1.2 ms, its 255 registers leaving few threads resident); the threads freed go
    to the outermost grid loop, as far as CUDA lets a block extend along its axis (64
    threads along z) and its extent has iterations for them, then to the next."""
    if not mapping.grid:
        return config
    if mapping.split_rows:
        return _rows_to_fill(mapping, config, extents)
    if config.lanes > 1:  # a split loop: a block's lanes where a warp's would leave it idle
        extent = extents.get(mapping.grid[0].var)
        if extent is not None and extent < FEW_ITERATIONS:
            return _shared_by_blocks(mapping, _per_block(config), extents)
        split = _split_extent(mapping, extents)
        lanes = config.lanes
        while split is not None and lanes > GROUP_LANES[0] \
                and split < lanes * LANE_ITERATIONS:
            lanes //= 2
        return _with_lanes(config, lanes)
    block, tile = list(config.block), list(config.tile)
    for index, loop in enumerate(mapping.grid):
        extent = extents.get(loop.var)
        if extent is None:
            continue
        kept = REUSE_TILE if config.stage else 1
        while tile[index] > kept and block[index] * tile[index] >= 2 * extent:
            tile[index] //= 2
        while block[index] > 1 and block[index] * tile[index] >= 2 * extent:
            block[index] //= 2
        while tile[index] > 1 and block[index] * tile[index] >= 2 * extent:
            tile[index] //= 2
    strip = config.strip
    inner = [extents[loop.var] for loop in _loops_in(mapping.top)
             if loop not in mapping.grid and loop.var in extents]
    while inner and strip > 8 and strip > max(inner):  # a strip the loops fill
        strip //= 2
    threads = 1
    for b in block:
        threads *= b
    spare = max(1, config.threads // threads)
    for index in sorted(range(len(block)), key=lambda i: (mapping.grid[i] is mapping.x, i)):
        limit = BLOCK_LIMITS[mapping.axis(mapping.grid[index])]
        extent = extents.get(mapping.grid[index].var)
        while spare > 1 and block[index] * 2 <= limit \
                and (extent is None or block[index] * tile[index] < extent):
            block[index] *= 2
            spare //= 2
    return replace(config, block=tuple(block), tile=tuple(tile), strip=strip)


def _rows_to_fill(mapping: NestMapping, config: Config,
                  extents: Mapping[str, int]) -> Config:
    """A row split's rows: as many as give the GPU ``FILL_THREADS`` threads, where the grid
    loop alone gives fewer (a column sum over 2,000 columns: 2,000 threads would leave most
    SMs idle), at most a block's 1,024 threads and no fewer than ``ROW_ITERATIONS``
    iterations of the split loop a row (the rows' parts are combined in shared memory)."""
    extent = extents.get(mapping.grid[0].var)
    split = _split_extent(mapping, extents)
    rows = 1
    while extent is not None and extent * rows < FILL_THREADS \
            and config.block[0] * rows * 2 <= BLOCK_LANES \
            and (split is None or split >= ROW_ITERATIONS * rows * 2):
        rows *= 2
    return replace(config, rows=rows)


def _split_extent(mapping: NestMapping, extents: Mapping[str, int]) -> int | None:
    """The iterations of the loop the threads split, where known."""
    return extents.get(mapping.split.var) if mapping.split is not None else None


def _with_lanes(config: Config, lanes: int) -> Config:
    """A split loop's config with ``lanes`` lanes a grid iteration (at most a warp), the
    block's threads kept by more grid iterations a block."""
    first = max(1, config.block[0] * config.lanes // lanes)
    return replace(config, block=(first,) + config.block[1:], lanes=lanes)


def _shared_by_blocks(mapping: NestMapping, config: Config,
                      extents: Mapping[str, int]) -> Config:
    """A block-per-iteration config whose split loop enough blocks share to fill the GPU
    (``CHUNK_THREADS``), each thread left at least ``ROW_ITERATIONS`` iterations of it."""
    iterations = 1
    for loop in mapping.grid:
        iterations *= extents.get(loop.var, FEW_ITERATIONS)
    split = _split_extent(mapping, extents)
    chunks = 1
    while split is not None and iterations * chunks * config.lanes < CHUNK_THREADS \
            and split >= config.lanes * ROW_ITERATIONS * chunks * 2:
        chunks *= 2
    return replace(config, chunks=chunks)


def _per_block(config: Config) -> Config:
    """A split loop's config with a block of ``BLOCK_LANES`` threads per grid iteration."""
    return replace(config, block=(1,) * len(config.block), lanes=BLOCK_LANES)


def neighbours(mapping: NestMapping, config: Config) -> list[Config]:
    """Configs one step from ``config``: register tiles halved or doubled along the grid
    loops on x and y, the strip halved or doubled, staging switched (and its copies:
    cp.async or registers), the tensor cores switched, the block reshaped (the same
    threads, x doubled or halved) or, for one grid loop, its threads doubled or halved
    (fewer rows a block let a tile of whole rows fit: the coalescing lesson's rows of 61
    floats on an H200, 256 rows in strips of 32 ran at 39.5% of a copy, 64 whole rows at
    65.7%). What measurement walks (``search``)."""
    if mapping.block_splits:  # the block's size
        return [replace(config, lanes=lanes) for lanes in (256, 512, 1024)
                if lanes != config.lanes]
    if not mapping.grid:
        return []
    if mapping.split_rows:  # rows doubled or halved, the rows' width doubled or halved
        return [replace(config, block=(x,), rows=rows)
                for x, rows in ((config.block[0], config.rows * 2),
                                (config.block[0], config.rows // 2),
                                (config.block[0] * 2, config.rows),
                                (config.block[0] // 2, config.rows))
                if 16 <= x and rows >= 1 and x * rows <= BLOCK_LANES]
    if mapping.split is not None:
        if config.lanes > WARP:  # a block per iteration: back to warps, fewer lanes, the
            # blocks sharing an iteration doubled or halved
            return [default_config(mapping, reuse=False),
                    *(replace(config, lanes=lanes) for lanes in (256, 512, 1024)
                      if lanes != config.lanes),
                    *(replace(config, chunks=chunks)
                      for chunks in (config.chunks * 2, config.chunks // 2) if chunks >= 1)]
        return [*(replace(config, block=(b,) + config.block[1:]) for b in (2, 4, 16, 32)
                  if b != config.block[0]),
                *(_with_lanes(config, lanes) for lanes in (*GROUP_LANES, WARP)
                  if lanes != config.lanes),
                _per_block(config)]
    out: list[Config] = []
    count = len(mapping.grid)
    for index in range(count):
        for factor in (2, 0.5):
            tile = list(config.tile)
            tile[index] = int(tile[index] * factor)
            if 1 <= tile[index] <= 8 or (tile[index] == 16 and math.prod(tile) <= 128):
                # (16 x 8 a thread: the hand-written product's register tile, which warp
                # tiles read in 6 vector loads per 128 multiply-adds)
                out.append(replace(config, tile=tuple(tile)))
    both = [int(t * 2) for t in config.tile]
    if all(t <= 8 for t in both):
        out.append(replace(config, tile=tuple(both)))
    if count == 1:
        out += [replace(config, block=(threads,)) for threads in
                (config.block[0] * 2, config.block[0] // 2)
                if WARP <= threads <= BLOCK_LIMITS[mapping.axis(mapping.grid[0])]]
    if count >= 2:
        x = mapping.grid.index(mapping.x) if mapping.x is not None else count - 1
        y = next(i for i in reversed(range(count)) if i != x)
        for factor in (2, 0.5):
            block = list(config.block)
            block[x] = int(block[x] * factor)
            block[y] = int(block[y] / factor)
            if block[x] >= 4 and block[y] >= 1:
                out.append(replace(config, block=tuple(block)))
    for strip in (config.strip * 2, config.strip // 2):
        if 4 <= strip <= 4 * LONG_STRIP:
            out.append(replace(config, strip=strip))
    out.append(replace(config, stage=not config.stage))
    if config.stage:
        out.append(replace(config, pipelined=not config.pipelined))
    out.append(replace(config, mma=not config.mma))
    out.append(replace(config, warp_tiles=not config.warp_tiles))
    return out
