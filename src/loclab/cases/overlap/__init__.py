"""Overlapping copies with compute: a kernel on data that starts and ends in host memory.

Copy in, compute, copy out, one after the other (``serial``, the lecture's vector-add host
code) takes the sum of the three; the link is idle while the kernel runs and the device while
the link copies. Cut into chunks issued to k streams from pinned memory (``streams-k``), one
chunk's copy in, another's kernel and a third's copy out run at once (streams map to the
hardware's queues; the copy engines and the SMs work independently; the link is full duplex),
and the whole takes about the longest of the three: the ideal max(bytes in / H2D, bytes out /
D2H, compute) against the serial sum. ``rounds`` sets the work per byte: 1 is a memory-bound
scaled add, for which overlap hides the kernel and the copy back behind the copy in; with
thousands of rounds the kernel is the longest, and overlap hides the copies behind it.

Each element goes through ``rounds`` fused multiply-adds v = a v + b with a = 1, b = 1/64:
inputs are multiples of 1/64 in [-1, 1], so every round is exact in float32 and the output,
x + rounds / 64, is checked exactly; a skipped or repeated round shows.

On the CPU the same pipeline shows where the host's own memory sits: a fresh buffer (pages the
operating system places where they are first touched), the input copied in, the rounds, the
result copied out. Copied in by one thread, every page lands on that thread's NUMA node and
the parallel passes that follow read it across the sockets; copied in by the threads that
later compute on each part (first touch), every page is local to its thread.
"""

from __future__ import annotations

import math

import numpy as np

from loclab.cases.base import (PAGEABLE_HOST, PINNED_HOST, Case, Variant, Work, dyadic_nonzero,
                               lazy)
from loclab.hw import Machine

CPU = "loclab.cases.overlap.cpu"
GPU = "loclab.cases.overlap.gpu"
SCALE, SHIFT = 1.0, 1.0 / 64  # v = SCALE v + SHIFT, exact on multiples of 1/64
ELEMENT_BYTES = 4  # float32
MAX_ROUNDS = 2**20  # x + rounds / 64 stays below 2**15: a multiple of 1/64, exact in float32
GPU_N = 2**26  # 256 MiB in, 256 MiB out
GPU_ROUNDS = (1, 512, 2048, 8192)  # memory-bound; the kernel under, near and over a copy


def make_inputs(dims: dict[str, int], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """``x``, and ``rounds`` as a one-element array: the golden output needs it (it is a
    kernel argument, never copied)."""
    return {"x": dyadic_nonzero(rng, dims["n"]), "rounds": np.array([dims["rounds"]], np.int64)}


def golden(inputs: dict[str, np.ndarray]) -> np.ndarray:
    """``rounds`` times v = v + 1/64, all at once: exact, as every round of a variant is."""
    rounds = int(inputs["rounds"][0])
    return (inputs["x"].astype(np.float64) * SCALE**rounds + rounds * SHIFT).astype(np.float32)


def output(dims: dict[str, int]) -> tuple[tuple[int, ...], type]:
    return (dims["n"],), np.float32


def work(dims: dict[str, int]) -> Work:
    """x in from the host, the result back: 4 bytes each way an element; a multiply and an
    add a round."""
    n = dims["n"]
    return Work(bytes=2 * ELEMENT_BYTES * n, flops=2 * dims["rounds"] * n,
                to_device=ELEMENT_BYTES * n, to_host=ELEMENT_BYTES * n)


def sweep(n: int, rounds: tuple[int, ...]) -> list[dict[str, int]]:
    return [{"n": n, "rounds": r} for r in rounds]


def cpu_default(machine: Machine) -> list[dict[str, int]]:
    """One memory-bound size whose buffer is at least four times the last-level cache these
    cores can count on (the pages, not the cache, are the lesson)."""
    n = 1 << math.ceil(math.log2(max(4 * machine.cpu.llc_share_bytes / ELEMENT_BYTES, 2**22)))
    return sweep(n, (1,))


SIZES = {
    "small": {"cpu": sweep(2**20, (1,)), "gpu": sweep(2**22, (1, 2048))},
    "default": {"cpu": cpu_default, "gpu": sweep(GPU_N, GPU_ROUNDS)},
    "large": {"cpu": lambda m: sweep(4 * cpu_default(m)[0]["n"], (1,)),
              "gpu": sweep(4 * GPU_N, GPU_ROUNDS)},
}
# One element; sizes that are no multiple of a warp, a block, or the chunks the tests use.
TEST_DIMS = tuple({"n": n, "rounds": r} for n, r in (
    (1, 1), (1000, 2), (65537, 7), (1_000_003, 1), (1_000_003, 64)))


def numa_skip(dims: dict[str, int], machine: Machine) -> str | None:
    """First touch places pages only where there is more than one place."""
    if machine.cpu.numa_nodes < 2:
        return ("this host has one NUMA node: every page is as near to every core, so where "
                "the first touch puts it changes nothing")
    return None


CASE = Case(
    name="overlap",
    lesson="copies overlapped with compute: chunks in k streams from pinned memory against "
           "copy in, compute, copy out",
    description="out = x + rounds/64, rounds fused multiply-adds v = a v + b an element, x "
                "and out in host memory (float32)",
    sizes=SIZES,
    make_inputs=make_inputs,
    golden=golden,
    output=output,
    work=work,
    tolerance=0.0,
    test_dims=TEST_DIMS,
    sweep="rounds",
    limit="interconnect",
    dimensions=("n", "rounds"),
    ranges={"rounds": (1, MAX_ROUNDS)},
    variants=(
        Variant("cpu-serial-init", "cpu", "naive",
                "a fresh buffer copied in by one thread (every page on its NUMA node), the "
                "rounds and the copy out in parallel (numba prange)",
                lazy(CPU, "serial_init")),
        Variant("cpu-first-touch", "cpu", "optimized",
                "a fresh buffer copied in by the threads that compute on each part (every "
                "page on its own thread's node), the rounds and the copy out likewise",
                lazy(CPU, "first_touch"), skip=numa_skip),
        Variant("serial", "gpu", "naive",
                "copy in, kernel, copy out, one after the other, from pinned memory",
                lazy(GPU, "serial"), placement=PINNED_HOST),
        Variant("serial-pageable", "gpu", "naive",
                "the same from pageable memory (the lecture's host code: the driver stages "
                "every copy)", lazy(GPU, "serial"), placement=PAGEABLE_HOST,
                baseline="serial"),
        Variant("streams-k", "gpu", "optimized",
                "chunks round-robin on k streams from pinned memory: a chunk's copy in, "
                "another's kernel and another's copy out at once (k and the chunk tunable)",
                lazy(GPU, "in_streams"), placement=PINNED_HOST, space=lazy(GPU, "space"),
                baseline="serial"),
    ),
)
