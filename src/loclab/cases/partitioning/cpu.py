"""CPU plans of the hash-table build: numba ``prange`` over exactly t tasks, on t threads.

One kernel serves the three plans: t = k_i x k_o tasks, task (part, owner) hashes the keys of
input part ``part`` (a contiguous N/k_i of them) and inserts those whose home slot lies in
slot range ``owner`` (m/k_o slots). Input partitioning is k_o = 1, output partitioning k_i = 1.
Where one task owns its slots (k_i = 1) it uses plain loads and stores; where k_i > 1 tasks
share a range they use LLVM's ``cmpxchg`` (``loclab.cpu.atomics``).

Thread count: a run sets numba's thread count to t (restored afterwards) and splits the work
into exactly t tasks, one per thread: the row measures t threads whatever ``--threads`` says,
and the skip rule leaves out thread counts numba does not have.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numba
import numpy as np
from numba import njit, prange

from loclab.cases.base import Bound, Dims
from loclab.cases.partitioning import both_grid, check_inputs, plan_params, threads_of
from loclab.cpu.atomics import atomic_add, atomic_load, compare_and_swap
from loclab.hw import Machine

# The hash and EMPTY live here, beside the kernels compiled from them: numba's cache notices
# when this file changes, not when another module's function or constant does (after editing
# loclab.cpu.atomics, delete this folder's __pycache__, or ``build`` keeps the old atomics).
EMPTY = 0  # the smallest key: one comparison says whether a key may take a slot
EMPTY_KEY = np.uint32(EMPTY)

# murmur3's 32-bit finalizer, then multiply-shift onto [0, slots): every bit of the key moves
# the home slot, and any m works (no power of two needed). Written for uint64 arithmetic that
# NumPy (on arrays) and numba (on scalars) share; kernels.cu repeats it in CUDA C.
_MIX1, _MIX2 = np.uint64(0x85EBCA6B), np.uint64(0xC2B2AE35)
_LOW32 = np.uint64(0xFFFFFFFF)
_SHIFT13, _SHIFT16, _SHIFT32 = np.uint64(13), np.uint64(16), np.uint64(32)


def home_slot(key: Any, slots: Any) -> Any:
    """The slot where ``key``'s probe starts: one hash computation (on NumPy arrays, or on
    scalars in numba code)."""
    h = np.uint64(key)
    h ^= h >> _SHIFT16
    h = (h * _MIX1) & _LOW32
    h ^= h >> _SHIFT13
    h = (h * _MIX2) & _LOW32
    h ^= h >> _SHIFT16
    return np.int64((h * np.uint64(slots)) >> _SHIFT32)


home = njit(home_slot)


@njit(cache=True)
def insert_in_order(keys, table):
    """Sequential plain linear probing (the golden build): each key into the first empty slot
    from its home, wrapping at the end. ``table`` must be empty and larger than ``keys``."""
    slots = table.size
    for key in keys:
        slot = home(key, slots)
        while table[slot] != EMPTY_KEY:
            slot = slot + 1 if slot + 1 < slots else 0
        table[slot] = key
    return table


@njit
def load(table, slot, shared):
    """A slot's value: an atomic load where other threads may be writing it."""
    return atomic_load(table, slot) if shared else table[slot]


@njit
def exchange(table, slot, expected, key, shared):
    """Write ``key`` over ``expected``; returns what the slot held (``expected`` on success).
    Compare-and-swap where other threads may write the slot, a plain store where this thread
    owns it."""
    if shared:
        return compare_and_swap(table, slot, expected, key)
    table[slot] = key
    return expected


@njit
def settle(table, slot, key, shared):
    """One step of an ordered insertion: ``key`` goes into ``slot`` if the slot holds a
    smaller key (EMPTY included). Returns the key to carry on to the next slot: the one
    displaced (EMPTY: done), ``key`` itself past a larger key, EMPTY if ``key`` is there."""
    current = load(table, slot, shared)
    while current < key:
        seen = exchange(table, slot, current, key, shared)
        if seen == current:
            return current
        current = seen  # another thread wrote the slot first; slots only grow: look again
    return EMPTY_KEY if current == key else key


@njit
def place(table, key, position, stop, shared):
    """Carry ``key`` along its probe from ``position`` (unwrapped: slot ``position mod m``)
    until it, or a key it displaced, fills an empty slot, or the probe reaches ``stop``.
    Returns the key still carried (EMPTY if none) and where the probe stopped."""
    slots = table.size
    while key != EMPTY_KEY and position < stop:
        key = settle(table, position - slots if position >= slots else position, key, shared)
        position += 1
    return key, position


@njit
def share(index, count, extent):
    """[start, end) of share ``index`` of ``count`` near-equal shares of ``extent`` items."""
    return index * extent // count, (index + 1) * extent // count


@njit
def insert_part(keys, table, low, high, limit, shared, deferred_keys, deferred_at, deferred):
    """One task: hash every key of its part, insert those whose home lies in [low, high).
    A probe stops at ``limit`` (``high`` where other tasks own the slots beyond, else after a
    lap) and its key is deferred. Returns the hash computations done."""
    slots = table.size
    hashes = 0
    for key in keys:
        start = home(key, slots)
        hashes += 1
        if low <= start < high:
            carried, position = place(table, key, start, min(limit, start + slots), shared)
            if carried != EMPTY_KEY:
                d = atomic_add(deferred, 0, 1)
                deferred_keys[d] = carried
                deferred_at[d] = position % slots
    return hashes


@njit(parallel=True, cache=True)
def build(keys, table, parts, owners, deferred_keys, deferred_at, deferred):
    """Build the table with ``parts`` x ``owners`` tasks; returns (hash computations, keys
    deferred). Each task first clears its share of its owner's range; after all tasks have
    inserted, the deferred keys resume their probes one after another (plain stores: no other
    thread runs then).

    ``shared`` is passed as a constant in two calls so that LLVM compiles a copy of the
    insertion loop for each: with a flag known only at run time the loop was 2.5x slower even
    where it took the plain path (its misses overlapped less)."""
    slots, tasks = table.size, parts * owners
    for task in prange(tasks):
        low, high = share(task % owners, owners, slots)
        first, last = share(task // owners, parts, high - low)
        table[low + first:low + last] = EMPTY_KEY
    deferred[0] = 0
    hashes = 0
    for task in prange(tasks):
        low, high = share(task % owners, owners, slots)
        first, last = share(task // owners, parts, keys.size)
        limit = high if owners > 1 else 2 * slots
        part = keys[first:last]
        if parts > 1:
            hashes += insert_part(part, table, low, high, limit, True, deferred_keys,
                                  deferred_at, deferred)
        else:
            hashes += insert_part(part, table, low, high, limit, False, deferred_keys,
                                  deferred_at, deferred)
    for d in range(deferred[0]):
        place(table, deferred_keys[d], deferred_at[d], deferred_at[d] + slots, False)
    return hashes, deferred[0]


@contextmanager
def numba_threads(count: int) -> Iterator[None]:
    """numba's parallel loops run on ``count`` threads inside the block."""
    previous = numba.get_num_threads()
    numba.set_num_threads(count)
    try:
        yield
    finally:
        numba.set_num_threads(previous)


def threads_available(dims: Dims, machine: Machine) -> str | None:
    """A row must run on as many threads as it says (else: why not)."""
    have = numba.get_num_threads()
    if dims["threads"] > have:
        return f"{dims['threads']} threads: numba runs {have} (--threads or the CPU count)"
    return None


def _plan(inputs: dict, out: np.ndarray, parts: int, owners: int) -> Bound:
    """A run of ``build`` on parts x owners threads. A key is deferred at most once and only
    where slot ranges have owners, so the deferral buffer holds N keys then, else none."""
    keys = inputs["keys"]
    check_inputs(inputs, out.size)
    room = keys.size if owners > 1 else 0
    deferred_keys, deferred_at = np.empty(room, np.uint32), np.empty(room, np.int64)
    deferred = np.zeros(1, np.int64)

    def run() -> np.ndarray:
        with numba_threads(parts * owners):
            build(keys, out, parts, owners, deferred_keys, deferred_at, deferred)
        return out

    return Bound(run, {"threads": parts * owners, **plan_params(parts, owners)})


def input_partitioned(inputs: dict, out: np.ndarray, machine: Machine) -> Bound:
    """t threads split the keys: k_i = t, k_o = 1."""
    return _plan(inputs, out, threads_of(inputs), 1)


def output_partitioned(inputs: dict, out: np.ndarray, machine: Machine) -> Bound:
    """t threads split the slots: k_i = 1, k_o = t."""
    return _plan(inputs, out, 1, threads_of(inputs))


def both(inputs: dict, out: np.ndarray, machine: Machine, owners: int | None = None) -> Bound:
    """A k_i x k_o grid (``both_grid``: k_o = ``owners``, a divisor of t)."""
    return _plan(inputs, out, *both_grid(threads_of(inputs), owners))
