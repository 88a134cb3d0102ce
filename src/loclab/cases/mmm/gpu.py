"""GPU variants of the matrix product: CUDA C in kernels.cu, launched through CuPy.

Tunable variants take their tile sizes as keyword arguments (their ``Space`` lists the
candidates); each configuration is its own template instantiation, compiled on first use
(CuPy caches the binary on disk). The module-level ``KERNELS`` lists the defaults, which the
nvcc check compiles without a GPU.
"""

from __future__ import annotations

from pathlib import Path
from collections.abc import Callable
from typing import Any

import numpy as np

from loclab.cases.base import Bound, Dims
from loclab.cases.transpose import gpu as transpose_gpu
from loclab.gpu import require_fp32_matmul
from loclab.gpu.kernels import (KernelAccesses, KernelSource, Launch, blocks, in_order,
                                source_for)
from loclab.gpu.limits import (MAX_REGISTERS_PER_THREAD, SHARED_WITHOUT_OPT_IN, refuse,
                               registers_fit, threads_fit)
from loclab.gpu.warp_tile import LANE_COL, LANE_ROW, WARP, block_threads, warp_tile
from loclab.hw import Machine
from loclab.measure.space import Config, Space
from loclab.model.access import DeclaredAccess

SOURCE = Path(__file__).with_name("kernels.cu")
NAIVE_BLOCK = (32, 8)


def _flag(value: bool) -> str:
    return "true" if value else "false"


def naive_kernel() -> str:
    return f"mmm_naive<{NAIVE_BLOCK[0]},{NAIVE_BLOCK[1]}>"


def block_tiled_kernel(tile: int) -> str:
    return f"mmm_block_tiled<{tile}>"


def register_tiled_kernel(tile: int, r: int) -> str:
    return f"mmm_register_tiled<{tile},{r}>"


def _warp_tile(config: Config) -> tuple[int, int]:
    return warp_tile(config["lanes_m"], config["tm"], config["tn"])


def optimized_kernel(config: Config, vec: bool) -> str:
    """The instantiation of ``config`` (the warp tile derived from it)."""
    wm, wn = _warp_tile(config)
    return (f"mmm_optimized<{config['bm']},{config['bn']},{config['bk']},{wm},{wn},"
            f"{config['tm']},{config['tn']},{config['stages']},{_flag(vec)},{GROUP},"
            f"{config['blocks_per_sm']}>")


def optimized_shared_bytes(config: Config) -> int:
    """Dynamic shared memory: ``stages`` slices of A^T (bk x bm) and B (bk x bn)."""
    return config["stages"] * config["bk"] * (config["bm"] + config["bn"]) * 4


BLOCK_TILED_DEFAULT = {"tile": 32}
# Measured on an H200 at 4096^3 (ms): the slides' T = 16, R = 4 5.49; T = 32, R = 4 4.93, the
# best of the space (cuBLAS 2.70).
REGISTER_TILED_DEFAULT = {"tile": 32, "r": 4}
# gpu-optimized on an H100 at 4096^3 (% of cuBLAS, same run): the register-staged kernel this
# replaced (bk 8, double-buffered through registers) 85.3; cp.async from A^T: bk 8 and 4
# stages 88.7, bk 16 and 3 stages 95.3 (bk 32 89.3; 128 x 128 tiles, 2 blocks an SM, 86.0).
OPTIMIZED_DEFAULT = {"bm": 128, "bn": 256, "bk": 16, "tm": 16, "tn": 8, "lanes_m": 8,
                     "stages": 3, "blocks_per_sm": 1}
# Rows of tiles whose blocks are numbered together (kernels.cu), so that the blocks resident at
# once share tiles of A^T and B in L2.
GROUP = 8

# The inner loops' accesses at their first iteration (kk = 0, kt = 0); the size is m, n, k.
_FLAT = "(r*T*T + threadIdx.y*T + threadIdx.x)"
_REGISTER_BLOCKS = "((m + T*R - 1)/(T*R))*((n + T*R - 1)/(T*R))*((k + T - 1)/T)"
_OPTIMIZED_SLICES = "((m + BM - 1)/BM)*((n + BN - 1)/BN)*((k + BK - 1)/BK)"
ACCESSES = (
    KernelAccesses("mmm_naive", ("BX", "BY"), (
        DeclaredAccess("A[(blockIdx.y*BY + threadIdx.y)*k + kk]", "global", 4,
                       note="A[i][k]: one value a row of threads", count="m*n*k"),
        DeclaredAccess("B[kk*n + blockIdx.x*BX + threadIdx.x]", "global", 4,
                       note="B[k][j]: along a row", count="m*n*k"),
        DeclaredAccess("C[(blockIdx.y*BY + threadIdx.y)*n + blockIdx.x*BX + threadIdx.x]",
                       "global", 4, note="C[i][j]: along a row", write=True, count="m*n")),
        at=(("kk", 0),), block=("BX", "BY")),
    KernelAccesses("mmm_block_tiled", ("T",), (
        DeclaredAccess("A[(blockIdx.y*T + threadIdx.y)*k + kk + threadIdx.x]", "global", 4,
                       note="stage a tile of A", count="m*n*((k + T - 1)/T)"),
        DeclaredAccess("B[(kk + threadIdx.y)*n + blockIdx.x*T + threadIdx.x]", "global", 4,
                       note="stage a tile of B", count="m*n*((k + T - 1)/T)"),
        DeclaredAccess("Aloc[threadIdx.y][kt]", "shared", 4, ("T", "T"),
                       note="Aloc[ty][k]: a broadcast"),
        DeclaredAccess("Bloc[kt][threadIdx.x]", "shared", 4, ("T", "T + 1"),
                       note="Bloc[k][tx]: along a row"),
        DeclaredAccess("C[(blockIdx.y*T + threadIdx.y)*n + blockIdx.x*T + threadIdx.x]",
                       "global", 4, note="C[i][j]: along a row", write=True, count="m*n")),
        at=(("kk", 0), ("kt", 0)),
        block=("T", "T")),
    # mmm_register_tiled: thread (tx, ty) copies element e = r*T*T + ty*T + tx of each slice.
    KernelAccesses("mmm_register_tiled", ("T", "R"), (
        DeclaredAccess(f"A[(blockIdx.y*T*R + {_FLAT}/T)*k + kk + {_FLAT} % T]", "global", 4,
                       note="stage a slice of A", count=f"{_REGISTER_BLOCKS}*T*T*R"),
        DeclaredAccess(f"B[(kk + {_FLAT}/(T*R))*n + blockIdx.x*T*R + {_FLAT} % (T*R)]",
                       "global", 4, note="stage a slice of B", count=f"{_REGISTER_BLOCKS}*T*T*R"),
        DeclaredAccess("Aloc[threadIdx.y*R + r][kr]", "shared", 4, ("T*R", "T"),
                       note="a[r]: a broadcast along the warp's rows"),
        DeclaredAccess("Bloc4[kr][threadIdx.x*(R/4)]", "shared", 16, ("T", "T*R/4"),
                       note="b[0..R): R floats, which nvcc loads as float4 (R = 4)"),
        DeclaredAccess("C[(blockIdx.y*T*R + threadIdx.y*R + ir)*n + blockIdx.x*T*R + "
                       "threadIdx.x*R + jr]", "global", 4, note="C: R floats apart",
                       write=True, count="m*n")),
        at=(("r", 0), ("kk", 0), ("kr", 0), ("ir", 0), ("jr", 0)), block=("T", "T")),
    # mmm_optimized with 16-byte copies (VEC; the scalar instantiation runs at shapes that are not
# multiples of 4: its copies are 4-byte ones in the same sectors), indexed in float4s: thread g
# copies 4-float group g of each slice (at0 = A^T, row-major k x m). Tiles are numbered in
# groups of rows (declared here in the plain order: the same sectors per block).
    KernelAccesses("mmm_optimized", ("BM", "BN", "BK", "WM", "WN", "TM", "TN", "STAGES", "VEC",
                                     "GROUP", "MIN"), (
        DeclaredAccess("At4[(threadIdx.x/(BM/4))*(m/4) + blockIdx.y*(BM/4) + "
                       "threadIdx.x % (BM/4)]", "global", 16, note="a slice of A^T, float4",
                       count=f"{_OPTIMIZED_SLICES}*(BK*BM/4)"),
        DeclaredAccess("B4[(threadIdx.x/(BN/4))*(n/4) + blockIdx.x*(BN/4) + "
                       "threadIdx.x % (BN/4)]", "global", 16, note="a slice of B, float4",
                       count=f"{_OPTIMIZED_SLICES}*(BK*BN/4)"),
        DeclaredAccess(f"As4[0][({LANE_ROW})/4]", "shared", 16, ("BK", "BM/4"),
                       note="a lane's 4 rows of A, float4"),
        DeclaredAccess(f"Bs4[0][({LANE_COL})/4]", "shared", 16, ("BK", "BN/4"),
                       note="a lane's 4 columns of B, float4"),
        DeclaredAccess(f"C4[(blockIdx.y*BM + {LANE_ROW})*(n/4) + (blockIdx.x*BN + "
                       f"{LANE_COL})/4]", "global", 16, note="C, float4", write=True,
                       count="(m*n + 3)/4")),
        block=("(BM/WM)*(BN/WN)*32",)),
)

KERNELS = KernelSource(SOURCE, (
    naive_kernel(),
    block_tiled_kernel(**BLOCK_TILED_DEFAULT),
    register_tiled_kernel(**REGISTER_TILED_DEFAULT),
    *(optimized_kernel(OPTIMIZED_DEFAULT, vec) for vec in (True, False)),
), ACCESSES)


def _launch(name: str, grid: tuple[int, ...], block: tuple[int, ...], inputs: dict,
            out: Any) -> Launch:
    """A launch of one instantiation (a tuned one compiles on first use)."""
    a, b = inputs["a"], inputs["b"]
    m, k = a.shape
    n = b.shape[1]
    return Launch(source_for(KERNELS, name), name, grid=grid, block=block,
                  args=(a, b, out, np.int32(m), np.int32(n), np.int32(k)), result=out)


def _shape(inputs: dict) -> tuple[int, int, int]:
    (m, k), n = inputs["a"].shape, inputs["b"].shape[1]
    return m, n, k


def naive(inputs: dict, out: Any, machine: Machine) -> Bound:
    m, n, _ = _shape(inputs)
    bx, by = NAIVE_BLOCK
    launch = _launch(naive_kernel(), (blocks(n, bx), blocks(m, by)), NAIVE_BLOCK, inputs, out)
    return Bound(launch, {"block": list(NAIVE_BLOCK),
                          "reuse": "O(1): each product loads both operands"})


# --- block tiling ----------------------------------------------------------------------------

def block_tiled_restriction(config: Config, dims: Dims, machine: Machine) -> str | None:
    return threads_fit(config["tile"] ** 2, machine.gpu)


def block_tiled_space(machine: Machine) -> Space:
    return Space({"tile": (8, 16, 32)}, BLOCK_TILED_DEFAULT, block_tiled_restriction)


def block_tiled(inputs: dict, out: Any, machine: Machine, tile: int = 32) -> Bound:
    refuse(block_tiled_restriction({"tile": tile}, {}, machine))
    m, n, _ = _shape(inputs)
    launch = _launch(block_tiled_kernel(tile), (blocks(n, tile), blocks(m, tile)),
                     (tile, tile), inputs, out)
    return Bound(launch, {"tile": tile,
                          "reuse": f"{tile} products per element staged in shared memory"})


# --- block and register tiling (the slides) ---------------------------------------------------

def register_tiled_restriction(config: Config, dims: Dims, machine: Machine) -> str | None:
    """Threads per block, static shared memory (two slices of T R x T floats), and registers:
    at least R^2 accumulators + 2R operands + about 16 for addresses per thread."""
    tile, r = config["tile"], config["r"]
    shared = 2 * tile * tile * r * 4
    registers = r * r + 2 * r + 16
    if reason := threads_fit(tile * tile, machine.gpu):
        return reason
    if shared > SHARED_WITHOUT_OPT_IN:
        return (f"slices of {shared} bytes exceed {SHARED_WITHOUT_OPT_IN} bytes of static shared "
                f"memory")
    return registers_fit(registers, tile * tile, machine.gpu)


def register_tiled_space(machine: Machine) -> Space:
    return Space({"tile": (8, 16, 32), "r": (2, 4, 6, 8)}, REGISTER_TILED_DEFAULT,
                 register_tiled_restriction)


def register_tiled(inputs: dict, out: Any, machine: Machine, tile: int = 32,
                   r: int = 4) -> Bound:
    refuse(register_tiled_restriction({"tile": tile, "r": r}, {}, machine))
    m, n, _ = _shape(inputs)
    side = tile * r
    launch = _launch(register_tiled_kernel(tile, r), (blocks(n, side), blocks(m, side)),
                     (tile, tile), inputs, out)
    return Bound(launch, {"tile": tile, "r": r,
                          "reuse": f"{side} products per element staged in shared memory, "
                                   f"{r} per element in a register"})


# --- A^T, warp tiling, cp.async pipelining -----------------------------------------------------

def optimized_restriction(config: Config, dims: Dims, machine: Machine) -> str | None:
    """The static asserts of loclab::WarpTile (gpu/warp_tile.cuh), plus threads, shared
    memory and a floor of registers (tm x tn accumulators, tm + tn operands, addresses)."""
    bm, bn, bk, tm, tn = (config[key] for key in ("bm", "bn", "bk", "tm", "tn"))
    stages, blocks_per_sm = config["stages"], config["blocks_per_sm"]
    if tm % 4 or tn % 4 or WARP % config["lanes_m"]:
        return f"lanes of {tm} x {tn} or {config['lanes_m']} lanes along m do not make a warp"
    wm, wn = _warp_tile(config)
    if bm % wm or bn % wn:
        return f"warp tiles of {wm} x {wn} do not divide the block tile {bm} x {bn}"
    threads = block_threads(bm, bn, config["lanes_m"], tm, tn)
    if reason := threads_fit(threads, machine.gpu):
        return reason
    if stages < 2:
        return "one stage leaves no slice in flight while one is multiplied"
    shared = optimized_shared_bytes(config)
    if shared > machine.gpu.shared_mem_per_block_optin:
        return (f"{stages} stages of {bk}-deep slices ({shared} bytes) exceed "
                f"{machine.gpu.shared_mem_per_block_optin} bytes of shared memory a block")
    if shared * blocks_per_sm > machine.gpu.shared_mem_per_sm:
        return f"{blocks_per_sm} blocks x {shared} bytes of shared memory do not fit an SM"
    registers = tm * tn + tm + tn + 16
    cap = min(MAX_REGISTERS_PER_THREAD, machine.gpu.registers_per_sm // (threads * blocks_per_sm))
    if registers > cap:
        return (f"{blocks_per_sm} blocks of {threads} threads leave {cap} registers per "
                f"thread, fewer than the {registers} it needs")
    return None


def optimized_space(machine: Machine) -> Space:
    return Space({"bm": (32, 64, 128, 256), "bn": (32, 64, 128, 256), "bk": (8, 16, 32),
                  "tm": (4, 8, 16), "tn": (4, 8, 16), "lanes_m": (1, 2, 4, 8, 16, 32),
                  "stages": (2, 3, 4, 5), "blocks_per_sm": (1, 2)},
                 OPTIMIZED_DEFAULT, optimized_restriction)


def optimized(inputs: dict, out: Any, machine: Machine, bm: int = 128, bn: int = 256,
              bk: int = 16, tm: int = 16, tn: int = 8, lanes_m: int = 8, stages: int = 3,
              blocks_per_sm: int = 1) -> Bound:
    """A^T first, into a buffer allocated here, by the transposition case's gpu-optimized
    kernel, then the product of A^T and B, both read along rows in 16-byte copies; all of it
    counted in the time (the transposition is 2% of it at 4096^3). The rows of A^T and B must
    be whole 16-byte groups: where m (n) is not a multiple of 4, A (B) is first copied into
    a buffer whose rows (columns) are padded to one (3% more at 4095 x 4097 x 4099)."""
    config = {"bm": bm, "bn": bn, "bk": bk, "tm": tm, "tn": tn, "lanes_m": lanes_m,
              "stages": stages, "blocks_per_sm": blocks_per_sm}
    refuse(optimized_restriction(config, {}, machine))
    m, n, k = _shape(inputs)
    if config == OPTIMIZED_DEFAULT:
        config = fitted_to_waves(config, m, n, machine)
    bm, bn = config["bm"], config["bn"]
    lda, ldb = _padded(m), _padded(n)
    a_rows, a_copy = _padded_copy(inputs["a"], (lda, k))
    a_t, transposition = _transposed(a_rows, machine)
    b, b_copy = _padded_copy(inputs["b"], (k, ldb))
    vec = n % 4 == 0  # rows of C start 16-byte aligned (CuPy aligns the arrays)
    wm, wn = _warp_tile(config)
    threads = block_threads(bm, bn, lanes_m, tm, tn)
    name = optimized_kernel(config, vec)
    product = Launch(source_for(KERNELS, name), name, grid=(blocks(m, bm) * blocks(n, bn),),
                     block=(threads,), args=(a_t, b, out, *map(np.int32, (m, n, k, lda, ldb))),
                     result=out, shared_mem=optimized_shared_bytes(config))
    steps = [step for step in (a_copy, transposition, b_copy) if step is not None]
    return Bound(in_order(*steps, product),
                 {**config, "warp_tile": [wm, wn], "vec": vec, "threads": threads,
                  "waves": waves(config, m, n, machine),
                  "a": "transposed first (A^T), in the time",
                  "padded": [name for name, step in (("a", a_copy), ("b", b_copy)) if step],
                  "reuse": f"{bn} (A) and {bm} (B) products per element staged in shared "
                           f"memory, {tn} (A) and {tm} (B) per element in a register"})


def waves(config: Config, m: int, n: int, machine: Machine) -> int:
    """How many times the SMs fill with blocks of ``config`` to cover an m x n C: the last
    wave costs a whole wave's time however few blocks it has."""
    tiles = blocks(m, config["bm"]) * blocks(n, config["bn"])
    return -(-tiles // (machine.gpu.sms * config["blocks_per_sm"]))


def fitted_to_waves(config: Config, m: int, n: int, machine: Machine) -> Config:
    """``config`` with its block tile turned (bm x bn to bn x bm) where that takes fewer waves.
    One column past a multiple of the tile adds a column of blocks: at 4096 x 4097 on 132 SMs,
    128 x 256 tiles take 5 waves, 256 x 128 tiles 4 (measured on an H100: 74% of cuBLAS, and
    about 92% turned). Applied to the default only: a tuned configuration runs as tuned."""
    turned = {**config, "bm": config["bn"], "bn": config["bm"]}
    if (optimized_restriction(turned, {}, machine) is None
            and waves(turned, m, n, machine) < waves(config, m, n, machine)):
        return turned
    return config


def _padded(extent: int) -> int:
    return -(-extent // 4) * 4


def _padded_copy(x: Any, shape: tuple[int, int]) -> tuple[Any, Callable[[], Any] | None]:
    """``x`` itself where its rows are whole 16-byte groups and it starts on one; otherwise a
    zeroed ``shape`` buffer (allocated here) and the copy of ``x`` into its top-left corner,
    for the timed run (cudaMemcpy2D: rows of ``x`` to rows of the buffer)."""
    import cupy

    if shape == x.shape and x.data.ptr % 16 == 0:
        return x, None
    padded = cupy.zeros(shape, np.float32)
    row_bytes = x.shape[1] * x.itemsize

    def copy() -> Any:
        cupy.cuda.runtime.memcpy2DAsync(
            padded.data.ptr, shape[1] * x.itemsize, x.data.ptr, x.strides[0], row_bytes,
            x.shape[0], cupy.cuda.runtime.memcpyDeviceToDevice, cupy.cuda.get_current_stream().ptr)
        return padded

    return padded, copy


def _transposed(a: Any, machine: Machine) -> tuple[Any, Callable[[], Any]]:
    """A buffer for A^T (allocated here) and the transposition case's best kernel into it."""
    import cupy

    a_t = cupy.empty(a.shape[::-1], np.float32)
    return a_t, transpose_gpu.optimized({"a": a}, a_t, machine).run


def cublas(inputs: dict, out: Any, machine: Machine) -> Bound:
    """cuBLAS SGEMM through cupy.matmul. CuPy uses TF32 only when CUPY_TF32=1; refuse that,
    so that the comparison is fp32 against fp32."""
    import cupy

    require_fp32_matmul()
    a, b = inputs["a"], inputs["b"]

    def run() -> Any:
        return cupy.matmul(a, b, out=out)

    return Bound(run, {"tf32": False})
