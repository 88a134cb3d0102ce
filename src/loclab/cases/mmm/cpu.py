"""CPU variants of the matrix product: numba ``prange`` is this project's OpenMP.

The ladder of case study 5.3 on a multi-core: the golden loop nest (B read down columns),
B transposed first (spatial locality only), block tiling (each element reused from a cache a
tile's width of times) and block + register tiling (each value loaded into a register reused
by a whole row or column of a register block), measured against NumPy's BLAS.

Floating point: the untiled loop nests sum each C[i][j] in order, exactly as the golden loop
nest does (a chain of dependent adds, not vectorized). The tiled ones sum in order along k
within a tile of k and add the tiles' partial sums; they may fuse a multiply and an add into
an FMA (``fastmath={"contract"}``) but never reassociate. Their innermost loops run along j,
across independent sums, which is what lets LLVM vectorize them without reassociating.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache, partial

import numpy as np
from numba import carray, literally, njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from loclab.cases.base import Bound, Config, Dims, Space
from loclab.cases.transpose.cpu import blocked_tiles, transpose_blocked
from loclab.cpu.tiles import floor_power_of_two, threads
from loclab.hw import Machine
from loclab.hw.cpu import CpuInfo, square_tile

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

# (float32 lanes, vector registers) of the widest vector ISA. LLVM may use half the lanes (it
# prefers 256-bit vectors on Intel's AVX-512 cores): a block sized for 16 lanes then needs
# twice the registers, which the tuner sees as spills.
VECTOR_REGISTERS = {"AVX-512": (16, 32), "AVX2": (8, 16), "AVX": (8, 16), "NEON": (4, 32),
                    "SSE2": (4, 16)}
# An FMA takes about 4 cycles and two start every cycle: fewer independent accumulators than
# this leave the FMA units idle (Little's law).
MIN_ACCUMULATORS = 8
REGISTER_ROWS = (2, 4, 6, 8)
DEPTHS = (64, 128, 256, 512)


@intrinsic
def stack_float32(typingctx, rows, cols):
    """A rows x cols float32 buffer (compile-time constants) on the stack. NumPy arrays in numba
    live on the heap, where LLVM keeps every access a load or a store; a stack buffer that is
    indexed only by constants once the loops over it are unrolled becomes registers."""
    if not all(isinstance(n, types.IntegerLiteral) for n in (rows, cols)):
        return None

    def codegen(context, builder, signature, args):
        return cgutils.alloca_once(builder, context.get_value_type(types.float32),
                                   size=rows.literal_value * cols.literal_value)

    return types.CPointer(types.float32)(rows, cols), codegen


@njit(parallel=True, cache=True)
def pack_panels(x, packed):
    """``packed[q, kk, :] = x[kk, q*width:(q+1)*width]`` with ``width = packed.shape[2]``,
    zeros past the last column: each panel of ``width`` columns becomes one contiguous run that
    the register block reads in order, and edge blocks need no bounds checks. B is packed as it
    is and A as A^T (a view), so that a panel of A holds ``r`` rows, k-major."""
    depth, cols = x.shape
    width = packed.shape[2]
    for q in prange(packed.shape[0]):
        j0 = q * width
        valid = min(width, cols - j0)
        for kk in range(depth):
            xk = x[kk, j0:j0 + valid]
            pk = packed[q, kk]
            for j in range(valid):
                pk[j] = xk[j]
            for j in range(valid, width):
                pk[j] = 0
    return packed


@njit(cache=True, fastmath=CONTRACT)
def register_block(pa, pb, out, i0, j0, first, r, width):
    """out[i0:i0+r, j0:j0+width] = (or += unless ``first``) a panel of A (k x r) times a panel
    of B (k x width), for one register block of r x width compile-time constants
    (``literally``). Loop order k, j, i: LLVM unrolls the i loop, vectorizes the j loop (a
    vector of B serves r FMAs, a value of A ``width`` lanes), unrolls the vector loop and keeps
    the block in registers. In the order k, i, j it unrolls j first and vectorizes i, a column
    of the block, with gathers and scatters."""
    acc = carray(stack_float32(literally(r), literally(width)), (r, width))
    for i in range(r):
        for j in range(width):
            acc[i, j] = 0
    for kk in range(pa.shape[0]):
        for j in range(width):
            bkj = pb[kk, j]
            for i in range(r):
                acc[i, j] += pa[kk, i] * bkj
    for i in range(min(r, out.shape[0] - i0)):
        ci = out[i0 + i, j0:j0 + width]
        if first:
            for j in range(ci.size):
                ci[j] = acc[i, j]
        else:
            for j in range(ci.size):
                ci[j] += acc[i, j]


@cache
def register_tiled_kernel(r: int, width: int) -> Callable[..., np.ndarray]:
    """The product with r x width register blocks: a function of its own for each (r, width),
    which are constants of its closure (calling a ``literally`` function from Python would
    type its arguments again on every call, about 14 ms). Each gets its own name: numba's
    cache keeps closures apart by their variables, but two of one name loaded from the cache
    into one process share an environment, and the second fails to return its array."""

    def mmm_register_tiled(pa, pb, out, tile_i, tile_j, tile_k):
        """Blocks of C of about tile_i x tile_j (whole register blocks) are the parallel work.
        For each tile of k, a panel of A (r x tile_k, in L1) meets every panel of B of the
        block (tile_k x tile_j together, in L2)."""
        panels_a, k = pa.shape[0], pa.shape[1]
        panels_b = pb.shape[0]
        per_block_a = max(1, tile_i // r)
        per_block_b = max(1, tile_j // width)
        blocks_j = (panels_b + per_block_b - 1) // per_block_b
        for t in prange(((panels_a + per_block_a - 1) // per_block_a) * blocks_j):
            p0 = (t // blocks_j) * per_block_a
            q0 = (t % blocks_j) * per_block_b
            for k0 in range(0, k, tile_k):
                k1 = min(k0 + tile_k, k)
                for p in range(p0, min(p0 + per_block_a, panels_a)):
                    for q in range(q0, min(q0 + per_block_b, panels_b)):
                        register_block(pa[p, k0:k1], pb[q, k0:k1], out, p * r, q * width,
                                       k0 == 0, r, width)
        return out

    mmm_register_tiled.__qualname__ = f"mmm_register_tiled_{r}x{width}"
    return njit(parallel=True, cache=True)(mmm_register_tiled)


def vector_registers(cpu: CpuInfo) -> tuple[int, int]:
    """(float32 lanes, vector registers) of the CPU's widest vector ISA (SSE2's if unknown)."""
    return VECTOR_REGISTERS.get(cpu.isa or "", VECTOR_REGISTERS["SSE2"])


def register_tiled_space(machine: Machine) -> Space:
    """Register blocks of 2 to 8 rows by 1, 2 or 4 vectors. By default 6 rows by 2 vectors
    (the shape of BLIS's AVX2 SGEMM kernel): 12 accumulators hide the FMA latency, and with a
    row of B the block takes 14 registers, which fits every ISA's register file, also where
    LLVM splits AVX-512 into 256-bit vectors (28 of 32). Square blocks of C and B: the B
    block (tile_k x tile_j) fills half of L2."""
    lanes, _ = vector_registers(machine.cpu)
    tile = square_tile(machine.cpu.l2_bytes, ITEMSIZE)
    return Space(values={"r": REGISTER_ROWS, "width": (lanes, 2 * lanes, 4 * lanes),
                         "tile_i": TILES, "tile_j": TILES, "tile_k": DEPTHS},
                 default={"r": 6, "width": 2 * lanes, "tile_i": tile, "tile_j": tile,
                          "tile_k": min(max(tile, DEPTHS[0]), DEPTHS[-1])},
                 restriction=register_tiled_restriction)


def register_tiled_restriction(config: Config, dims: Dims, machine: Machine) -> str | None:
    """Register blocks that spill or cannot keep the FMA units busy, blocks of C smaller than
    one register block, and B blocks larger than L2."""
    r, width, tile_j, tile_k = config["r"], config["width"], config["tile_j"], config["tile_k"]
    lanes, registers = vector_registers(machine.cpu)
    accumulators = r * width // lanes
    if accumulators < MIN_ACCUMULATORS:
        return f"{accumulators} accumulators cannot hide the FMA latency ({MIN_ACCUMULATORS})"
    if accumulators + width // lanes > registers:
        return (f"an {r}x{width} block and a row of B need {accumulators + width // lanes} "
                f"vector registers of {registers}")
    if config["tile_i"] < r or tile_j < width:
        return f"a {config['tile_i']}x{tile_j} block of C is smaller than one {r}x{width}"
    if tile_k * tile_j * ITEMSIZE > machine.cpu.l2_bytes:
        return f"a {tile_k}x{tile_j} block of B exceeds L2"
    return None


def register_tiled(inputs: dict, out: np.ndarray, machine: Machine, **config: int) -> Bound:
    """The panels of A and B are allocated here and packed inside the timed run."""
    config = register_tiled_space(machine).configure(config)
    a, b = inputs["a"], inputs["b"]
    (m, k), n = a.shape, b.shape[1]
    r, width = config["r"], config["width"]
    pa = np.empty((-(-m // r), k, r), np.float32)
    pb = np.empty((-(-n // width), k, width), np.float32)
    kernel = register_tiled_kernel(r, width)
    tiles = config["tile_i"], config["tile_j"], config["tile_k"]

    def run() -> np.ndarray:
        pack_panels(a.T, pa)
        pack_panels(b, pb)
        return kernel(pa, pb, out, *tiles)

    reuse = (f"{min(config['tile_i'], m)} (B) and {min(config['tile_j'], n)} (A) products per "
             f"element packed in L2 and L1, {r} (B) and {width} (A) per element in a register")
    return Bound(run, {**config, "reuse": reuse, **threads()})


def library(inputs: dict, out: np.ndarray, machine: Machine) -> Bound:
    return Bound(partial(np.matmul, inputs["a"], inputs["b"], out=out))
