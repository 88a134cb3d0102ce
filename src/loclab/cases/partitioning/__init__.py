"""Hash-table construction, the lectures' three ways to partition data-parallel work.

N distinct keys go into a table of m slots (open addressing, linear probing). Partition the
input and each of p threads hashes its N/p keys once, but any two threads may race for a slot:
insertion needs compare-and-swap. Partition the output and each thread owns m/p slots: no
synchronization, but every thread must hash every key to find its own (p hash computations per
key). Partition both, a k_i x k_o grid of threads (p = k_i k_o): k_o hash computations per key,
k_i threads that may race for a slot. The report shows each plan's time as the thread count
grows, with its hash computations per key.

The table must come out the same whatever the threads' timing, or it could not be compared
with a golden one: a first-come linear-probing table depends on the order of insertion. So
every plan builds the ordered (history-independent) linear-probing table of Amble and Knuth,
made concurrent with compare-and-swap by Shun and Blelloch ("Phase-concurrent hash tables for
determinism", SPAA 2014): along every probe sequence larger keys come first. An insertion
probing from the key's home slot swaps itself in where the slot holds a smaller key (EMPTY = 0
is the smallest) and carries the key it displaced on to the next slot. Whatever the order and
interleaving of the insertions, the table is the one that inserting the keys in decreasing
order with plain linear probing gives: the golden table. A slot's value only ever grows, which
is what makes stale reads harmless and a failed CAS a signal to look again.

A probe that runs off the end of an owner's slot range (output partitioning) would write into
a range another thread owns; it stops there, and the key it carries is inserted after all
threads finish (few keys: a probe crosses a range boundary only near it).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from loclab.cases.base import Case, Dims, SizeRule, Variant, Work, dims_text, lazy
from loclab.errors import UsageError
from loclab.hw import Machine

CPU = "loclab.cases.partitioning.cpu"
GPU = "loclab.cases.partitioning.gpu"
KEY_BYTES = 4  # uint32 keys and slots
LOAD_FACTOR = 0.5  # m = 2N: the expected probe of a linear-probing insertion stays short
GPU_BLOCK = 256  # threads per block of the GPU kernels: the GPU sweep steps in whole blocks
# Hash computations beyond which GPU output partitioning is not run: at the 10^12 or so a
# large GPU does per second, a run would take seconds (an estimate, not a measurement).
HASH_LIMIT = 2**38
MAX_SLOTS = 2**32 - 1  # uint32 keys: at most 2**32 - 2 of them, EMPTY (0) and the poison aside
MAX_THREADS = 2**31 - 1  # the GPU kernels take k_i and k_o as int


def check_dims(dims: Mapping[str, Any]) -> None:
    """Refuse, in one line that names the size, a table no plan can build: no key; no empty
    slot left (load factor >= 1: the golden build would probe forever, a plan would lose a
    key); more slots than uint32 keys fill; no thread, or more than the GPU kernels count."""
    size = f"partitioning at {dims_text(dims)}"
    for name in dims:
        try:
            operator.index(dims[name])
        except TypeError:
            raise UsageError(f"{size}: {name} must be a whole number") from None
    keys, slots, threads = dims["keys"], dims["slots"], dims.get("threads", 1)
    if keys < 1:
        raise UsageError(f"{size}: needs at least one key")
    if slots <= keys:
        raise UsageError(f"{size}: needs more slots than keys (a load factor below 1: "
                         f"linear probing stops at an empty slot)")
    if slots > MAX_SLOTS:
        raise UsageError(f"{size}: at most {MAX_SLOTS:,} slots (uint32 keys)")
    if not 1 <= threads <= MAX_THREADS:
        raise UsageError(f"{size}: threads must be from 1 to {MAX_THREADS:,}")


def check_inputs(inputs: Mapping[str, Any], slots: int) -> None:
    """``check_dims`` on staged inputs (NumPy or CuPy) and the table they are built into, so
    that a caller who skipped ``make_inputs`` gets the error, not a hang or a lost key."""
    check_dims({"keys": inputs["keys"].size, "slots": slots,
                "threads": threads_of(inputs)})


def threads_of(inputs: Mapping[str, Any]) -> int:
    """The thread count t that travels with the keys (one element, NumPy or CuPy)."""
    return int(inputs["threads"][0])


def both_grid(threads: int, owners: int | None = None) -> tuple[int, int]:
    """(k_i, k_o) of the ``both`` plan on ``threads`` threads: k_o = ``owners``, a divisor of
    ``threads`` (default ``balanced_owners``), k_i = threads / k_o."""
    owners = owners or balanced_owners(threads)
    if threads % owners:
        raise ValueError(f"{owners} owners do not divide {threads} threads")
    return threads // owners, owners


def balanced_owners(threads: int) -> int:
    """k_o of the ``both`` plan by default: the largest divisor of ``threads`` not above its
    square root, so that the hash computations per key (k_o) and the threads that may race
    for a slot (k_i = threads / k_o) are both about sqrt(threads)."""
    return max(d for d in range(1, math.isqrt(threads) + 1) if threads % d == 0)


def plan_params(parts: int, owners: int) -> dict[str, object]:
    """What a plan costs in theory, for the report (``reuse`` is printed next to the rate)."""
    racing = "no synchronization" if parts == 1 else f"{parts} threads may race for a slot (CAS)"
    return {"input_parts": parts, "owners": owners, "hashes_per_key": owners,
            "reuse": f"{owners} hash computation{'s' if owners > 1 else ''} per key; {racing}"}


def golden(inputs: dict[str, np.ndarray]) -> np.ndarray:
    """Plain sequential linear probing of the keys in decreasing order: each key lands behind
    every larger key of its cluster, which is the ordered table every plan must build."""
    from loclab.cases.partitioning.cpu import EMPTY, insert_in_order

    slots = int(inputs["slots"][0])
    check_inputs(inputs, slots)
    table = np.full(slots, EMPTY, np.uint32)
    return insert_in_order(np.sort(inputs["keys"])[::-1], table)


def make_inputs(dims: dict[str, int], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """N distinct uint32 keys in [1, 2**32 - 2]: neither EMPTY (0) nor the poison value, so a
    slot left unwritten cannot pass; in random order. The table size and thread count travel
    with them (one element each)."""
    check_dims(dims)
    drawn = rng.choice(2**32 - 2, size=dims["keys"], replace=False).astype(np.uint32)
    drawn += 1
    return {"keys": drawn, "slots": np.array([dims["slots"]], np.int64),
            "threads": np.array([dims["threads"]], np.int64)}


def output(dims: dict[str, int]) -> tuple[tuple[int, ...], type]:
    """The table: m uint32 slots."""
    return (dims["slots"],), np.uint32


def work(dims: dict[str, int]) -> Work:
    """The sequential build reads every key once and writes the table once, and inserts N
    keys (rows are rated in keys per second); hashing and probing are not flops."""
    return Work(bytes=KEY_BYTES * (dims["keys"] + dims["slots"]), flops=0, items=dims["keys"])


def thread_counts(most: int) -> list[int]:
    """1, 2, 4, ... below ``most``, then ``most``."""
    return [1 << k for k in range(max(most, 1).bit_length()) if 1 << k < most] + [most]


def cpu_threads(machine: Machine) -> list[int]:
    """Up to the threads numba runs: every logical CPU, or fewer where ``--threads`` says so
    (the runner sets numba's count before it asks for sizes), so that the sweep ends at the
    count the user chose rather than skipping every row above it."""
    import numba

    return thread_counts(min(machine.cpu.logical_cpus, numba.get_num_threads()))


def gpu_threads(machine: Machine) -> list[int]:
    """One block, then four times as many blocks each step while at most half a full GPU,
    then a full GPU (every SM holding as many threads as it can); none without a GPU."""
    gpu = machine.gpu
    if gpu is None:
        return []
    full = gpu.sms * (gpu.max_threads_per_sm // GPU_BLOCK)
    blocks = [4**k for k in range(full.bit_length()) if 2 * 4**k <= full] + [full]
    return [GPU_BLOCK * b for b in blocks]


def table_dims(keys: int) -> dict[str, int]:
    """``keys`` keys in a table at LOAD_FACTOR."""
    return {"keys": keys, "slots": int(keys / LOAD_FACTOR)}


def footprint_table(cache_bytes: int) -> dict[str, int]:
    """Keys (a power of two, at least 2**24) whose keys and table fill at least four times
    ``cache_bytes``."""
    need = 4 * cache_bytes / (KEY_BYTES * (1 + 1 / LOAD_FACTOR))
    return table_dims(max(2**24, 1 << math.ceil(math.log2(need))))


TableRule = dict[str, int] | Callable[[Machine], dict[str, int]]


def sweep(threads: Callable[[Machine], list[int]], table: TableRule) -> SizeRule:
    """The table (fixed, or a rule reading the machine) at every thread count of ``threads``."""
    def rule(machine: Machine) -> list[dict[str, int]]:
        counts = threads(machine)
        if not counts:
            return []
        size = table(machine) if callable(table) else table
        return [{**size, "threads": t} for t in counts]
    return rule


def too_many_hashes(dims: Dims, machine: Machine) -> str | None:
    """Output partitioning over a whole GPU hashes every key once per thread: beyond
    HASH_LIMIT hash computations a run takes seconds (hundreds of thousands of threads each
    reading every key), so those sizes are left out (else: None)."""
    hashes = dims["threads"] * dims["keys"]
    if hashes > HASH_LIMIT:
        return (f"{dims['threads']} owners x {dims['keys']} keys = {hashes:.2e} hash "
                f"computations (limit {HASH_LIMIT:.2e}): seconds per run")
    return None


SMALL = {"keys": 100_003, "slots": 200_009}
SIZES = {
    "small": {"cpu": sweep(cpu_threads, SMALL), "gpu": sweep(gpu_threads, SMALL)},
    "default": {"cpu": sweep(cpu_threads, table_dims(2**22)),
                "gpu": sweep(gpu_threads, table_dims(2**22))},
    "large": {"cpu": sweep(cpu_threads, lambda m: footprint_table(m.cpu.llc_bytes)),
              "gpu": sweep(gpu_threads, lambda m: footprint_table(m.gpu.l2_bytes))},
}

# One key; a nearly full table (7 keys in 8 slots, 100 in 101); odd sizes; more threads than
# slots; a thread count the CPU skips on 2 cores but a GPU runs (slot ranges of 45 slots: many
# probes cross into the next owner's range).
TEST_DIMS = tuple({"keys": k, "slots": m, "threads": t} for k, m, t in (
    (1, 2, 1), (1, 3, 2), (7, 8, 2), (100, 101, 2), (3, 5, 2), (1000, 1999, 2),
    (5003, 7919, 1), (20_011, 40_009, 2), (1000, 1500, 3), (30_011, 45_007, 1000)))


CASE = Case(
    name="partitioning",
    lesson="partitioning data-parallel work: input (CAS), output (redundant hashing), both",
    description="a linear-probing hash table of N distinct uint32 keys in m = 2N slots, "
                "built by t threads; rated in keys inserted per second",
    sizes=SIZES,
    make_inputs=make_inputs,
    golden=golden,
    output=output,
    work=work,
    tolerance=0.0,
    test_dims=TEST_DIMS,
    sweep="threads",
    sweep_param=("hashes_per_key", "hash computations per key"),
    unit="keys",
    variants=(
        Variant("cpu-input-partitioned", "cpu", "naive",
                "t threads split the keys (N/t each, hashed once) and insert anywhere with "
                "compare-and-swap (LLVM cmpxchg)",
                lazy(CPU, "input_partitioned"), skip=lazy(CPU, "threads_available")),
        Variant("cpu-output-partitioned", "cpu", "optimized",
                "each of t threads owns m/t slots, hashes all N keys and inserts those that "
                "hash into its range: plain stores, t hash computations per key",
                lazy(CPU, "output_partitioned"), skip=lazy(CPU, "threads_available")),
        Variant("cpu-both", "cpu", "optimized",
                "a k_i x k_o grid (k_o = largest divisor of t <= sqrt t): k_o hash "
                "computations per key, k_i threads share a slot range through CAS",
                lazy(CPU, "both"), skip=lazy(CPU, "threads_available")),
        Variant("gpu-input-partitioned", "gpu", "naive",
                "t GPU threads split the keys (interleaved, coalesced) and insert anywhere "
                "with atomicCAS",
                lazy(GPU, "input_partitioned")),
        Variant("gpu-output-partitioned", "gpu", "optimized",
                "each of t GPU threads owns m/t slots and reads every key (a warp reads each "
                "key once, broadcast): plain stores, t hash computations per key",
                lazy(GPU, "output_partitioned"), skip=too_many_hashes),
        Variant("gpu-both", "gpu", "optimized",
                "a k_i x k_o grid of GPU threads (k_o = largest divisor of t <= sqrt t): k_o "
                "hash computations per key, atomicCAS among the k_i threads of a range",
                lazy(GPU, "both")),
    ),
    limit="unit",
    dimensions=("keys", "slots", "threads"),
    check=check_dims,
)
