"""CPU variants of the matrix product: numba ``prange`` is this project's OpenMP.

The ladder of case study 5.3 on a multi-core: the golden loop nest (B read down columns),
B transposed first (spatial locality only), block tiling (each element reused from a cache a
tile's width of times) and block + register tiling (each value loaded into a register reused
by a whole row or column of a register block, packed blocks of A and B reused from L1 and L2:
GotoBLAS's loop nest), measured against NumPy's BLAS.

Floating point: the untiled loop nests sum each C[i][j] in order, exactly as the golden loop
nest does (a chain of dependent adds, not vectorized). Block tiling sums in order along k
within a tile of k and adds the tiles' partial sums; block + register tiling sums along k in
order from the first product to the last (each depth block goes on from C's partial sum). Both
may fuse a multiply and an add into an FMA (``fastmath={"contract"}``, ``llvm.fmuladd``) but
never reassociate: their vectors run along j, across independent sums, which is what lets them
be vectorized without reassociating.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache, partial

import numpy as np
from numba import njit, prange

from loclab.cases.base import Bound, Dims
from loclab.cases.transpose.cpu import blocked_tiles, transpose_blocked
from loclab.cpu.atomics import atomic_add
from loclab.cpu.tiles import floor_power_of_two, threads
from loclab.cpu.vectors import aligned_float32, fma_block
from loclab.hw import Machine
from loclab.hw.cpu import CpuInfo
from loclab.measure.space import Config, Space

ITEMSIZE = 4  # float32
# A multiply and an add may become one FMA; no reassociation: sums along k stay in order.
CONTRACT = {"contract"}
TILES = (32, 64, 128, 256, 512, 1024, 2048)


# --- untiled ---------------------------------------------------------------------------------

@njit(parallel=True, cache=True)
def mmm_naive(a, b, out):
    """The golden loop nest with i and j collapsed into one parallel loop (``collapse(2)``).
    The k loop reads B down a column: a cache line per product, and at power-of-two widths
    every line of the column maps to the same few cache sets."""
    m, n = out.shape
    k = a.shape[1]
    for t in prange(m * n):
        i, j = t // n, t % n
        acc = np.float32(0.0)
        for q in range(k):
            acc += a[i, q] * b[q, j]
        out[i, j] = acc
    return out


@njit(parallel=True, cache=True)
def mmm_transposed(a, bt, out):
    """The same loop nest on B transposed: both operands are read along rows, so every byte of
    a cache line is used; a row of B^T is reused only while it happens to stay cached."""
    m, n = out.shape
    k = a.shape[1]
    for t in prange(m * n):
        i, j = t // n, t % n
        ai, bj = a[i], bt[j]
        acc = np.float32(0.0)
        for q in range(k):
            acc += ai[q] * bj[q]
        out[i, j] = acc
    return out


def naive(inputs: dict, out: np.ndarray, machine: Machine) -> Bound:
    return Bound(partial(mmm_naive, inputs["a"], inputs["b"], out),
                 {"reuse": "O(1): each product loads both operands", **threads()})


def transposed_b(inputs: dict, out: np.ndarray, machine: Machine) -> Bound:
    """B^T goes to a buffer allocated here, written by the transpose case's blocked kernel
    inside the timed run."""
    b = inputs["b"]
    bt = np.empty(b.shape[::-1], np.float32)
    outer, inner = blocked_tiles(machine)

    def run() -> np.ndarray:
        transpose_blocked(b, bt, outer, inner)
        return mmm_transposed(inputs["a"], bt, out)

    return Bound(run, {"transpose_outer": outer, "transpose_inner": inner,
                       "reuse": "O(1): each product loads both operands, from lines read "
                                "whole", **threads()})


# --- block tiling ----------------------------------------------------------------------------

@njit(parallel=True, cache=True, fastmath=CONTRACT)
def mmm_blocked(a, b, out, tile_i, tile_j, tile_k):
    """Tiles of C (tile_i x tile_j) are the parallel work. For each tile of k, the loops run
    i, k, j: a row of the C tile (in L1) is updated by every row of the B tile (in L2), in a
    vectorized loop along j; each B tile serves tile_i rows. The j loop starts again for every
    (i, k), so longer rows amortize its setup: on a 2-core VM at 2048^3, rows of 2048 ran 4.6x
    faster than rows of 128."""
    m, n = out.shape
    k = a.shape[1]
    tiles_j = (n + tile_j - 1) // tile_j
    for t in prange(((m + tile_i - 1) // tile_i) * tiles_j):
        i0 = (t // tiles_j) * tile_i
        j0 = (t % tiles_j) * tile_j
        i1 = min(i0 + tile_i, m)
        j1 = min(j0 + tile_j, n)
        for i in range(i0, i1):
            ci = out[i, j0:j1]
            for j in range(j1 - j0):
                ci[j] = 0
        for k0 in range(0, k, tile_k):
            k1 = min(k0 + tile_k, k)
            for i in range(i0, i1):
                ci = out[i, j0:j1]
                ai = a[i, k0:k1]
                for q in range(k1 - k0):
                    aiq = ai[q]
                    bq = b[k0 + q, j0:j1]
                    for j in range(j1 - j0):
                        ci[j] += aiq * bq[j]
    return out


# Rows of C that share one tile of B from L2: a tile crosses from L3 once for this many rows,
# and 2048-row matrices still give 16 cores two tiles each.
BLOCKED_ROWS = 64


def blocked_space(machine: Machine) -> Space:
    """By default rows of the C tile as long as a row of C and a row of B can be while they
    fill at most half of L1d, and the B tile (tile_k x tile_j) fills half of L2."""
    cpu = machine.cpu
    tile_j = min(floor_power_of_two(cpu.l1d_bytes // (4 * ITEMSIZE)), TILES[-1])
    tile_k = floor_power_of_two(cpu.l2_bytes // (2 * ITEMSIZE * tile_j))
    return Space(values={"tile_i": TILES, "tile_j": TILES, "tile_k": TILES},
                 default={"tile_i": BLOCKED_ROWS, "tile_j": tile_j,
                          "tile_k": min(max(tile_k, TILES[0]), TILES[-1])},
                 restriction=blocked_restriction)


def blocked_restriction(config: Config, dims: Dims, machine: Machine) -> str | None:
    """The B tile must fit in L2 (every row of the C tile sweeps all of it), a row of C and a
    row of B in L1d."""
    tile_j, tile_k = config["tile_j"], config["tile_k"]
    if tile_k * tile_j * ITEMSIZE > machine.cpu.l2_bytes:
        return f"a {tile_k}x{tile_j} tile of B exceeds L2"
    if 2 * tile_j * ITEMSIZE > machine.cpu.l1d_bytes:
        return f"a row of C and a row of B ({tile_j} wide) exceed L1d"
    return None


def blocked(inputs: dict, out: np.ndarray, machine: Machine, **config: int) -> Bound:
    config = blocked_space(machine).configure(config)
    tile_i, tile_j, tile_k = config["tile_i"], config["tile_j"], config["tile_k"]
    (m, k), n = inputs["a"].shape, inputs["b"].shape[1]
    reuse = (f"{min(tile_i, m)} (B) products per element in L2, {min(tile_j, n)} (A) per "
             f"element in a register, {min(tile_k, k)} (C) per element in L1")
    return Bound(partial(mmm_blocked, inputs["a"], inputs["b"], out, tile_i, tile_j, tile_k),
                 {**config, "reuse": reuse, **threads()})


# --- block + register tiling -----------------------------------------------------------------

# (float32 lanes, vector registers) of the widest vector ISA.
VECTOR_REGISTERS = {"AVX-512": (16, 32), "AVX2": (8, 16), "AVX": (8, 16), "NEON": (4, 32),
                    "SSE2": (4, 16)}
# An FMA takes about 4 cycles and two start every cycle: fewer independent accumulators than
# this leave the FMA units idle (Little's law).
MIN_ACCUMULATORS = 8
REGISTER_ROWS = (2, 4, 6, 8, 12, 14)
REGISTER_VECTORS = (1, 2, 3, 4)
DEPTHS = (64, 128, 192, 256, 384, 512, 768, 1024)
BLOCK_COLUMNS = (64, 128, 256, 384, 512, 768, 1024, 1536, 2048)
BLOCK_ROWS = (64, 128, 256, 512, 1024, 2048, 4096, 8192)
# Blocks of C per thread at least: threads take the next block when done (a shared counter),
# so a thread slowed down (turbo, a neighbour on a VM) leaves a block, not 1/threads of the
# work, to the others.
BLOCKS_PER_THREAD = 4


def vector_registers(cpu: CpuInfo) -> tuple[int, int]:
    """(float32 lanes, vector registers) of the CPU's widest vector ISA (SSE2's if unknown)."""
    return VECTOR_REGISTERS.get(cpu.isa or "", VECTOR_REGISTERS["SSE2"])


def register_block(lanes: int, registers: int) -> tuple[int, int]:
    """(rows, vectors) of the register block: the most accumulators that fit the register file
    beside a row of B (``vectors`` registers) and a broadcast value of A (one), with no more
    loads than FMAs a step (``rows + vectors <= rows * vectors``: cores load about as many
    operands a cycle as they start FMAs), and of those the fewest loads per FMA: 14 x 2
    vectors with 32 registers (AVX-512, NEON; 28 accumulators, 16 loads), 4 x 3 with 16 (AVX2;
    12 accumulators, 7 loads)."""
    fits = [(r, v) for r in REGISTER_ROWS for v in REGISTER_VECTORS
            if r * v + v + 1 <= registers and r * v >= max(MIN_ACCUMULATORS, r + v)]
    return max(fits, key=lambda block: (block[0] * block[1],
                                        -(block[0] + block[1]) / (block[0] * block[1])))


def largest(candidates: tuple[int, ...], limit: float) -> int:
    """The largest candidate <= limit, else the smallest."""
    return max((value for value in candidates if value <= limit), default=candidates[0])


def register_tiled_space(machine: Machine) -> Space:
    """GotoBLAS's blocking around a register block of the ISA's full vector width.

    Defaults from the detected CPU: the register block from the vector registers
    (``register_block``); depth ``kc`` so that an r-row panel of A (kc x r, reused by every
    panel of B of its block) fills at most half of L1d; ``nc`` columns so that the kc x nc
    block of B (reused by every panel of A of its block) fills at most half of L2; at most
    ``mc`` rows so that the mc x kc block of A fits a core's share of the LLC twice over."""
    cpu = machine.cpu
    lanes, registers = vector_registers(cpu)
    r, vectors = register_block(lanes, registers)
    kc = largest(DEPTHS, cpu.l1d_bytes / (2 * ITEMSIZE * r))
    nc = largest(BLOCK_COLUMNS, cpu.l2_bytes / (2 * ITEMSIZE * kc))
    mc = largest(BLOCK_ROWS, cpu.llc_share_bytes / (2 * cpu.cores * ITEMSIZE * kc))
    return Space(values={"r": REGISTER_ROWS, "width": tuple(v * lanes for v in REGISTER_VECTORS),
                         "mc": BLOCK_ROWS, "kc": DEPTHS, "nc": BLOCK_COLUMNS},
                 default={"r": r, "width": vectors * lanes, "mc": mc, "kc": kc, "nc": nc},
                 restriction=register_tiled_restriction)


def register_tiled_restriction(config: Config, dims: Dims, machine: Machine) -> str | None:
    """Register blocks that are not whole vectors, spill or cannot keep the FMA units busy;
    blocks of C smaller than one register block; panels of A beyond L1d and blocks of B beyond
    L2."""
    r, width, kc, nc = config["r"], config["width"], config["kc"], config["nc"]
    cpu = machine.cpu
    lanes, registers = vector_registers(cpu)
    if width % lanes:
        return f"a block {width} wide is not whole {lanes}-lane vectors"
    vectors = width // lanes
    accumulators = r * vectors
    if accumulators < MIN_ACCUMULATORS:
        return f"{accumulators} accumulators cannot hide the FMA latency ({MIN_ACCUMULATORS})"
    if accumulators + vectors + 1 > registers:
        return (f"an {r}x{width} block, a row of B and a broadcast need "
                f"{accumulators + vectors + 1} vector registers of {registers}")
    if config["mc"] < r or nc < width:
        return f"a {config['mc']}x{nc} block of C is smaller than one {r}x{width}"
    if kc * r * ITEMSIZE > cpu.l1d_bytes:
        return f"a {kc}x{r} panel of A exceeds L1d"
    if kc * nc * ITEMSIZE > cpu.l2_bytes:
        return f"a {kc}x{nc} block of B exceeds L2"
    return None


@njit(parallel=True, cache=True)
def pack_blocks(x, packed, width, depth, workers):
    """Copy ``x`` (depth_all x cols) into ``packed`` (1-D) block by block of ``depth`` rows,
    and within a block panel by panel of ``width`` columns, each panel row-major (k-major),
    zeros past the last column: a panel is the contiguous run a register block reads in order,
    a block of panels is contiguous too (no two panels of one block compete for the same cache
    sets, as panels a whole matrix depth apart did), and edge blocks need no bounds checks. B
    is packed as it is and A as A^T (a view), so that a panel of A holds ``r`` rows. The
    panels are taken in turn from a shared counter by ``workers`` workers, as the blocks of
    the product are."""
    rows, cols = x.shape
    panels = -(-cols // width)
    items = -(-rows // depth) * panels
    taken = np.zeros(1, np.int64)
    for _ in prange(workers):
        t = atomic_add(taken, 0, 1)
        while t < items:
            k0 = (t // panels) * depth
            q = t % panels
            height = min(depth, rows - k0)
            start = k0 * panels * width + q * height * width
            valid = min(width, cols - q * width)
            for kk in range(height):
                source = x[k0 + kk, q * width:q * width + valid]
                target = packed[start + kk * width:start + (kk + 1) * width]
                for j in range(valid):
                    target[j] = source[j]
                for j in range(valid, width):
                    target[j] = 0
            t = atomic_add(taken, 0, 1)
    return packed


@cache
def register_tiled_kernel(r: int, vectors: int, lanes: int) -> Callable[..., np.ndarray]:
    """The product over packed blocks with r x (vectors * lanes) register blocks (``fma_block``):
    a function of its own for each block shape, whose constants are its closure's. Each gets
    its own name: numba's cache keeps closures apart by their variables, but two of one name
    loaded from the cache into one process share an environment, and the second fails to
    return its array."""
    width = vectors * lanes

    def mmm_register_tiled(pa, pb, out, k, kc, row_bounds, col_bounds, workers):
        """Blocks of C (panels row_bounds[b]:row_bounds[b+1] of A by col_bounds[...] of B)
        are the parallel work, taken in turn from a shared counter by ``workers`` workers
        (one a thread).
        Within a block, for each depth block of kc: each r-row panel of A (in L1) meets every
        panel of the kc x nc block of B (in L2). Edge register blocks go through a small
        buffer, so that the vector stores never leave C."""
        m, n = out.shape
        panels_a, panels_b = -(-m // r), -(-n // width)
        blocks_j = col_bounds.size - 1
        blocks = (row_bounds.size - 1) * blocks_j
        taken = np.zeros(1, np.int64)
        for _ in prange(workers):
            edge = np.empty((r, width), np.float32)
            block = atomic_add(taken, 0, 1)
            while block < blocks:
                bi, bj = block // blocks_j, block % blocks_j
                for k0 in range(0, k, kc):
                    depth = min(kc, k - k0)
                    for p in range(row_bounds[bi], row_bounds[bi + 1]):
                        i0, a_start = p * r, (k0 * panels_a + p * depth) * r
                        rows = min(r, m - i0)
                        for q in range(col_bounds[bj], col_bounds[bj + 1]):
                            j0, b_start = q * width, (k0 * panels_b + q * depth) * width
                            cols = min(width, n - j0)
                            if rows == r and cols == width:
                                fma_block(pa, a_start, pb, b_start, depth, out, i0, j0, k0 > 0,
                                          r, vectors, lanes)
                                continue
                            for i in range(rows):
                                for j in range(cols):
                                    edge[i, j] = out[i0 + i, j0 + j]
                            fma_block(pa, a_start, pb, b_start, depth, edge, 0, 0, k0 > 0,
                                      r, vectors, lanes)
                            for i in range(rows):
                                for j in range(cols):
                                    out[i0 + i, j0 + j] = edge[i, j]
                block = atomic_add(taken, 0, 1)
        return out

    mmm_register_tiled.__qualname__ = f"mmm_register_tiled_{r}x{vectors}x{lanes}"
    return njit(parallel=True, cache=True)(mmm_register_tiled)


def split(panels: int, parts: int) -> np.ndarray:
    """Bounds cutting ``panels`` into ``parts`` runs whose lengths differ by at most one."""
    return np.array([part * panels // parts for part in range(parts + 1)], np.int64)


def block_bounds(panels_a: int, panels_b: int, per_a: int, per_b: int,
                 workers: int) -> tuple[np.ndarray, np.ndarray]:
    """(row bounds, column bounds) of the blocks of C in panels: at most ``per_b`` panels of B
    a block (its kc x nc block stays in L2), and rows cut finer than ``per_a`` panels of A
    until every worker has BLOCKS_PER_THREAD blocks (or every block is one panel high)."""
    cols = -(-panels_b // per_b)
    rows = max(-(-panels_a // per_a), -(-BLOCKS_PER_THREAD * workers // cols))
    return split(panels_a, min(rows, panels_a)), split(panels_b, cols)


def register_tiled(inputs: dict, out: np.ndarray, machine: Machine, **config: int) -> Bound:
    """The packed blocks of A and B are allocated here (aligned to cache lines) and packed
    inside the timed run."""
    config = register_tiled_space(machine).configure(config)
    a, b = inputs["a"], inputs["b"]
    (m, k), n = a.shape, b.shape[1]
    r, width, kc = config["r"], config["width"], config["kc"]
    lanes, _ = vector_registers(machine.cpu)
    panels_a, panels_b = -(-m // r), -(-n // width)
    pa = aligned_float32(panels_a * r * k)
    pb = aligned_float32(panels_b * width * k)
    workers = threads()["threads"]
    rows, cols = block_bounds(panels_a, panels_b, max(config["mc"] // r, 1),
                              max(config["nc"] // width, 1), workers)
    kernel = register_tiled_kernel(r, width // lanes, lanes)

    def run() -> np.ndarray:
        pack_blocks(a.T, pa, r, kc, workers)
        pack_blocks(b, pb, width, kc, workers)
        return kernel(pa, pb, out, k, kc, rows, cols, workers)

    high, wide = int(np.diff(rows).max()) * r, int(np.diff(cols).max()) * width
    reuse = (f"{width} (A) and {r} (B) products per element loaded into a register; "
             f"{min(high, m)} (B) per element of a {min(kc, k)}x{min(wide, n)} block in L2, "
             f"{min(wide, n)} (A) per element of a {min(kc, k)}x{r} panel in L1")
    return Bound(run, {**config, "isa": machine.cpu.isa, "vector_bits": lanes * 8 * ITEMSIZE,
                       "blocks": f"{rows.size - 1}x{cols.size - 1}", "reuse": reuse,
                       "threads": workers})


def library(inputs: dict, out: np.ndarray, machine: Machine) -> Bound:
    return Bound(partial(np.matmul, inputs["a"], inputs["b"], out=out))
