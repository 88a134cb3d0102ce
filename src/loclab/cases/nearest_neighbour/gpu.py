"""GPU variants of the nearest neighbour: CUDA C in kernels.cu, launched through CuPy.

Tunable variants take their template parameters as keyword arguments (their ``Space`` lists
the candidates); each configuration is its own instantiation, compiled on first use. The
module-level ``KERNELS`` lists the defaults, which the nvcc check compiles without a GPU.
Instruction counts per pair are read off the sm_90 SASS of the inner loops (nvcc 13).
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from loclab.cases.base import Bound, Dims
from loclab.cases.nearest_neighbour import (INSTRUCTIONS_PER_PAIR, broadcast_argmin, issue_limit,
                                            queries_and_points)
from loclab.gpu.kernels import KernelAccesses, KernelSource, Launch, blocks, source_for
from loclab.gpu.limits import SHARED_WITHOUT_OPT_IN, refuse, registers_fit, threads_fit
from loclab.hw import Machine
from loclab.measure.space import Config, Space
from loclab.model.access import DeclaredAccess

SOURCE = Path(__file__).with_name("kernels.cu")
ITEMSIZE = 4
NAIVE_THREADS = 256
LIBRARY_CHUNK_BYTES = 256 * 2**20  # cupy's distances for a chunk of queries
# 128 threads x 8 queries: at M = 2^18, 256 blocks, about 2 per SM of an H100 or H200 (132
# SMs), all resident at once, 2 warps per scheduler of 8 independent chains each. On an H100
# (2026-11-27, one run, M = N = 2^18, two repetitions): 84.9-85.0% of the 4-instruction issue
# limit; 256 x 8 84.7-84.9%, 64 x 8 84.2-84.6%; 128 x 4 80.0-80.2% (4.44 instructions a pair:
# the index adds and the loop take 1.75/q); 128 x 16 77% (128 blocks: 4 SMs idle, one warp
# per scheduler).
SHARED_DEFAULT = {"threads": 128, "b": 1024, "q": 8}
# Chunks of 64 points: with 4 queries a thread, the shared loads, the notes (an FSETP and a
# SEL per query) and the loop take 33 instructions per chunk of 256 pairs, 0.13 a pair; the
# rescan reads 64 points per query (0.02% of the pairs at N = 2^18).
MIN_FIRST_DEFAULT = {"threads": 128, "b": 1024, "q": 4, "c": 64}
THREADS = (64, 128, 256, 512)
POINTS_PER_STAGE = (256, 512, 1024, 2048, 4096)
QUERIES_PER_THREAD = (1, 2, 4, 8, 16)
CHUNKS = (16, 32, 64, 128)


def naive_kernel() -> str:
    return f"nn_naive<{NAIVE_THREADS}>"


def shared_kernel(threads: int, b: int, q: int) -> str:
    return f"nn_shared<{threads},{b},{q}>"


def min_first_kernel(threads: int, b: int, q: int, c: int) -> str:
    return f"nn_min_first<{threads},{b},{q},{c}>"


# The main accesses at the first step of each loop (j = 0: the first point or float4 of the
# tile; j0 = 0: the first tile; k = 0: a thread's first query; s = 0: its first staged point).
# A thread stages points s*THREADS + tid of a tile of B ("% B": with THREADS > B the threads
# past B stage nothing). nn_min_first's rescan of a chunk per query is not declared: its index
# comes from the data (the chunk that query noted), no affine text describes it; it reads C
# of the n points per query.
_QUERY = "(blockIdx.x*Q + k)*THREADS + threadIdx.x"
_STAGED = "(s*THREADS + threadIdx.x) % B"
_BLOCKS = "(queries + THREADS*Q - 1)/(THREADS*Q)"


def _staged_accesses() -> tuple[DeclaredAccess, ...]:
    """nn_shared's and nn_min_first's: queries in, points staged, tile read, nns out."""
    return (
        DeclaredAccess(f"queries[{_QUERY}]", "global", 4, note="queries[i]: along the block",
                       count="queries"),
        DeclaredAccess(f"points[j0 + {_STAGED}]", "global", 4,
                       note="stage points[j0 + t]: once per block", count=f"{_BLOCKS}*points"),
        DeclaredAccess(f"tile[{_STAGED}]", "shared", 4, ("B",), note="stage the tile",
                       write=True),
        DeclaredAccess("tile4[j]", "shared", 16, ("B/4",),
                       note="4 points a float4 read, a broadcast (for Q queries each)"),
        DeclaredAccess(f"nns[{_QUERY}]", "global", 4, note="nns[i]: along the block",
                       write=True, count="queries"))


ACCESSES = (
    KernelAccesses("nn_naive", ("THREADS",), (
        DeclaredAccess("queries[blockIdx.x*THREADS + threadIdx.x]", "global", 4,
                       note="queries[i]: along the block", count="queries"),
        DeclaredAccess("points[j]", "global", 4, note="points[j]: a broadcast, from L1",
                       count="queries*points"),
        DeclaredAccess("nns[blockIdx.x*THREADS + threadIdx.x]", "global", 4,
                       note="nns[i]: along the block", write=True, count="queries")),
        at=(("j", 0),), block=("THREADS",)),
    KernelAccesses("nn_shared", ("THREADS", "B", "Q"),
                   _staged_accesses(),
                   at=(("j", 0), ("j0", 0), ("k", 0), ("s", 0)), block=("THREADS",)),
    KernelAccesses("nn_min_first", ("THREADS", "B", "Q", "C"),
                   _staged_accesses(),
                   at=(("j", 0), ("j0", 0), ("k", 0), ("s", 0)), block=("THREADS",)),
)

KERNELS = KernelSource(SOURCE, (naive_kernel(), shared_kernel(**SHARED_DEFAULT),
                                min_first_kernel(**MIN_FIRST_DEFAULT)), ACCESSES)


def _launch(name: str, inputs: dict, out: Any, threads: int, queries_per_block: int) -> Launch:
    """A launch of one instantiation, a block per ``queries_per_block`` queries."""
    queries, points = queries_and_points(inputs)  # sizes the kernels' int arithmetic holds
    m, n = queries.size, points.size
    return Launch(source_for(KERNELS, name), name, grid=(blocks(m, queries_per_block),),
                  block=(threads,), args=(queries, points, out, np.int32(m), np.int32(n)),
                  result=out)


def _rates(machine: Machine, instructions: float) -> str:
    """The instructions a pair of the inner loop takes, and the roof they imply."""
    return (f"{instructions:.3g} instructions a pair (issue limit "
            f"{issue_limit(machine, instructions) / 1e12:.2f} T pairs/s; at "
            f"{INSTRUCTIONS_PER_PAIR}: {issue_limit(machine, INSTRUCTIONS_PER_PAIR) / 1e12:.2f})")


def naive(inputs: dict, out: Any, machine: Machine) -> Bound:
    """A load, FADD, FSETP, FSEL and a predicated IADD (the index select) per pair, and 6
    instructions of loop per 16 pairs: 86 per 16."""
    launch = _launch(naive_kernel(), inputs, out, NAIVE_THREADS, NAIVE_THREADS)
    return Bound(launch, {"threads": NAIVE_THREADS,
                          "reuse": f"32 queries per point loaded (a warp's broadcast from "
                                   f"L1); {_rates(machine, 86 / 16)}"})


def shared_restriction(config: Config, dims: Dims, machine: Machine) -> str | None:
    """Threads per block, the static shared tile, and registers: about 4 per query (query,
    best, index, temporaries) and 16 for addresses and loop counters."""
    threads, b, q = config["threads"], config["b"], config["q"]
    registers = 4 * q + 16
    if reason := threads_fit(threads, machine.gpu):
        return reason
    if b * ITEMSIZE > SHARED_WITHOUT_OPT_IN:
        return f"a tile of {b} points exceeds {SHARED_WITHOUT_OPT_IN} bytes of static shared memory"
    return registers_fit(registers, threads, machine.gpu)


def shared_space(machine: Machine) -> Space:
    return Space({"threads": THREADS, "b": POINTS_PER_STAGE, "q": QUERIES_PER_THREAD},
                 SHARED_DEFAULT, shared_restriction)


def shared(inputs: dict, out: Any, machine: Machine, threads: int = 128, b: int = 1024,
           q: int = 8) -> Bound:
    """FADD, FSETP and the predicated FADD and IMAD per pair (one ALU instruction of the four:
    see note_pair in kernels.cu), and per 16 points an IADD3 each (its index, for q pairs), 4
    shared loads and about 8 of loop: 4 + 1.75/q instructions a pair (the sm_90 SASS has 285
    per 64 pairs at q = 4, 540 per 128 at q = 8; the selects of C, FSEL and SEL, had 272 and
    528, 3 ALU instructions a pair)."""
    refuse(shared_restriction({"threads": threads, "b": b, "q": q}, {}, machine))
    launch = _launch(shared_kernel(threads, b, q), inputs, out, threads, threads * q)
    return Bound(launch, {"threads": threads, "b": b, "q": q, "alu_per_pair": 1,
                          "reuse": f"{threads * q} queries per point staged in shared memory, "
                                   f"{q} per point read from it; "
                                   f"{_rates(machine, 4 + 1.75 / q)}"})


def min_first_restriction(config: Config, dims: Dims, machine: Machine) -> str | None:
    """gpu-shared's limits, and whole chunks in a tile (a chunk is noted or not as a whole)."""
    if config["b"] % config["c"]:
        return f"chunks of {config['c']} points do not divide a tile of {config['b']}"
    return shared_restriction(config, dims, machine)


def min_first_space(machine: Machine) -> Space:
    return Space({"threads": THREADS, "b": POINTS_PER_STAGE, "q": QUERIES_PER_THREAD,
                  "c": CHUNKS}, MIN_FIRST_DEFAULT, min_first_restriction)


def min_first(inputs: dict, out: Any, machine: Machine, threads: int = 128, b: int = 1024,
              q: int = 4, c: int = 64) -> Bound:
    """FADD and FMNMX per pair; per chunk of c points, c/4 shared loads, an FSETP and a SEL
    per query and about 9 of loop: 2.13 instructions a pair at the defaults (the sm_90 SASS
    has 545 per 256 pairs)."""
    config = {"threads": threads, "b": b, "q": q, "c": c}
    refuse(min_first_restriction(config, {}, machine))
    launch = _launch(min_first_kernel(threads, b, q, c), inputs, out, threads, threads * q)
    instructions = 2 + (c / 4 + 2 * q + 9) / (c * q)
    return Bound(launch, {**config,
                          "reuse": f"{threads * q} queries per point staged in shared memory, "
                                   f"{q} per point read from it; {_rates(machine, instructions)}"})


def library(inputs: dict, out: Any, machine: Machine) -> Bound:
    """CuPy's subtract, abs and argmin over chunks of queries (distances in a buffer
    allocated here): memory-bound, each pair's distance is written and read twice."""
    queries, points = queries_and_points(inputs)
    import cupy

    rows = max(1, LIBRARY_CHUNK_BYTES // (ITEMSIZE * points.size))
    buffer = cupy.empty((min(rows, queries.size), points.size), np.float32)
    return Bound(partial(broadcast_argmin, cupy, queries, points, out, buffer),
                 {"chunk_rows": buffer.shape[0]})
