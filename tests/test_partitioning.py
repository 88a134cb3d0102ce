"""The partitioning case beyond the generic per-variant tests: compare-and-swap (and the other
CPU atomics it relies on) under contention, the golden table's properties, the ordered
insertion under any interleaving of its probe steps, every plan on key sets that collide
heavily and fill the table (and all of numba's threads racing through one cluster that wraps
around a nearly full table), hash computations per key, what the validation catches, bad
sizes refused in one line, and the sizes and skip rules."""

import numba
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import njit, prange
from numba.core.errors import TypingError

from loclab.bench.auto import get_case
from loclab.cases.partitioning import (HASH_LIMIT, MAX_SLOTS, balanced_owners, gpu_threads,
                                       thread_counts, too_many_hashes)
from loclab.cases.partitioning.cpu import EMPTY, home_slot, numba_threads, settle
from loclab.cpu.atomics import atomic_add, atomic_load, compare_and_swap
from loclab.errors import UsageError
from loclab.hw import Machine
from loclab.measure.validate import compare
from tests.gpus import H200

CASE = get_case("partitioning")
INTEGER_TYPES = (np.uint32, np.int32, np.uint64, np.int64)
PLANS = [(parts, owners) for parts in (1, 2, 3) for owners in (1, 2, 3)]


# --- CPU atomics -----------------------------------------------------------------------------

@njit
def _cas(array, index, expected, desired):
    return compare_and_swap(array, index, expected, desired)


@pytest.mark.parametrize("dtype", INTEGER_TYPES)
def test_compare_and_swap_writes_only_over_the_expected_value(dtype):
    array = np.array([5, 6, 7], dtype)
    assert _cas(array, 1, 6, 9) == 6  # won: returns what it replaced
    assert array.tolist() == [5, 9, 7]
    assert _cas(array, 1, 6, 11) == 9  # lost: returns the current value, writes nothing
    assert array.tolist() == [5, 9, 7]


def test_compare_and_swap_uses_all_bits_of_64_bit_elements():
    high, top = np.uint64(2**63 + 5), np.uint64(2**64 - 1)
    array = np.array([high], np.uint64)
    assert _cas(array, 0, np.uint64(5), top) == high and array[0] == high  # low bits equal
    assert _cas(array, 0, high, top) == high and array[0] == top


@njit(parallel=True)
def _race(slots, rounds):
    """Attempt t tries to claim slot t % slots.size (0 = free) with its own id t + 1."""
    won = np.zeros(slots.size * rounds, np.bool_)
    for t in prange(won.size):
        won[t] = compare_and_swap(slots, t % slots.size, 0, t + 1) == 0
    return won


@pytest.mark.parametrize("dtype", INTEGER_TYPES)
def test_racing_threads_exactly_one_wins_each_slot(dtype):
    slots, rounds = np.zeros(7, dtype), 20_000
    won = _race(slots, rounds)
    winners = np.flatnonzero(won)
    assert sorted(winners % slots.size) == list(range(slots.size))  # one winner per slot
    assert (slots[winners % slots.size] == winners + 1).all()  # and its id is what stayed


@njit(parallel=True)
def _fetch_all(counter, times):
    seen = np.empty(times, np.int64)
    for t in prange(times):
        seen[t] = atomic_add(counter, 0, 1)
    return seen


def test_atomic_add_hands_out_distinct_old_values():
    counter = np.zeros(1, np.int64)
    seen = _fetch_all(counter, 200_000)
    assert counter[0] == 200_000 and np.array_equal(np.sort(seen), np.arange(200_000))


@njit
def _load(array, index):
    return atomic_load(array, index)


def test_atomic_load_reads_the_element():
    assert _load(np.array([3, 2**40], np.int64), 1) == 2**40


@pytest.mark.parametrize("array", [np.zeros(3, np.float32), np.zeros((2, 2), np.int64)])
def test_compare_and_swap_refuses_what_cmpxchg_cannot_do(array):
    with pytest.raises(TypingError, match="1-D array of integers"):
        _cas(array, 0, 0, 1)


def test_compare_and_swap_refuses_read_only_arrays_and_float_operands():
    frozen = np.zeros(3, np.int64)
    frozen.setflags(write=False)
    with pytest.raises(TypingError, match="read-only"):
        _cas(frozen, 0, 0, 1)
    with pytest.raises(TypingError, match="desired must be an integer"):
        _cas(np.zeros(3, np.int64), 0, 0, 1.5)
    with pytest.raises(TypingError, match="1-D array of integers"):
        _load(np.zeros(3, np.float64), 0)


# --- key sets and the golden table -----------------------------------------------------------

def inputs_for(keys, slots, threads=1):
    return {"keys": np.asarray(keys, np.uint32), "slots": np.array([slots], np.int64),
            "threads": np.array([threads], np.int64)}


@st.composite
def key_sets(draw):
    """Distinct keys in a table of at most 300 slots, up to full but one; ``hot`` of them
    hashing into one slot, or into the last three slots (clusters that wrap around)."""
    slots = draw(st.integers(2, 300))
    n = draw(st.integers(1, slots - 1))
    hot_share = draw(st.sampled_from([0.0, 0.5, 1.0]))
    hot_slots = draw(st.sampled_from(["one", "last three"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    pool = (rng.choice(2**32 - 2, size=400 * slots, replace=False) + 1).astype(np.uint32)
    homes = home_slot(pool, slots)
    hot = (homes == rng.integers(slots)) if hot_slots == "one" else (homes >= slots - 3)
    hot_keys, cold_keys = pool[hot], pool[~hot]  # in a table of 3 slots or fewer, all hot
    share = min(int(hot_share * n), hot_keys.size)
    keys = np.concatenate([hot_keys[:share], cold_keys[:n - share]])
    if keys.size < n:  # too few cold keys: more hot ones
        keys = np.concatenate([hot_keys, cold_keys])[:n]
    assert keys.size == n and np.unique(keys).size == n
    rng.shuffle(keys)
    return inputs_for(keys, slots)


def lookup(table, key):
    """Probe from the key's home until the key or an empty slot: where it is, or None."""
    slot = int(home_slot(np.uint32(key), table.size))
    for _ in range(table.size):
        if table[slot] == key:
            return slot
        if table[slot] == EMPTY:
            return None
        slot = (slot + 1) % table.size
    return None


def plain_probing_in_decreasing_order(keys, slots):
    """The golden build, in Python."""
    table = [EMPTY] * slots
    for key in sorted(keys.tolist(), reverse=True):
        slot = int(home_slot(np.uint32(key), slots))
        while table[slot] != EMPTY:
            slot = (slot + 1) % slots
        table[slot] = key
    return np.array(table, np.uint32)


@settings(max_examples=60, deadline=None)
@given(inputs=key_sets())
def test_golden_finds_every_key_once_and_orders_every_probe(inputs):
    keys, table = inputs["keys"], CASE.golden(inputs)
    np.testing.assert_array_equal(table, plain_probing_in_decreasing_order(keys, table.size))
    held = table[table != EMPTY]
    assert held.size == keys.size and set(held.tolist()) == set(keys.tolist())
    for key in keys.tolist():
        slot = lookup(table, key)
        assert slot is not None
        start = int(home_slot(np.uint32(key), table.size))
        passed = [(start + s) % table.size for s in range((slot - start) % table.size)]
        assert all(table[p] > key for p in passed)  # larger keys first along every probe


def interleaved(keys, slots, seed):
    """The table that inserting ``keys`` one probe step at a time gives (a step: one call of
    ``place`` over one slot, the CAS loop of one slot), with the probes started at random
    times and their steps interleaved at random: any schedule of any number of threads,
    including probes paused mid-way as output partitioning pauses those that leave a range."""
    from loclab.cases.partitioning.cpu import place

    rng = np.random.default_rng(seed)
    table = np.zeros(slots, np.uint32)
    waiting = list(rng.permutation(keys))
    probes = []  # (the key carried, its unwrapped position)
    while waiting or probes:
        if waiting and (not probes or rng.random() < 0.3):
            key = waiting.pop()
            probes.append((key, int(home_slot(key, slots))))
            continue
        i = int(rng.integers(len(probes)))
        key, position = place(table, *probes[i], probes[i][1] + 1, False)
        if key == EMPTY:
            probes.pop(i)
        else:
            probes[i] = (key, position)
    return table


@settings(max_examples=60, deadline=None)
@given(inputs=key_sets(), seed=st.integers(0, 2**32 - 1))
def test_any_interleaving_of_probe_steps_builds_the_golden_table(inputs, seed):
    """The claim every plan rests on (Shun and Blelloch): whatever the order and interleaving
    of the insertions' steps, the table is the golden one, every key in it once."""
    table = interleaved(inputs["keys"], int(inputs["slots"][0]), seed)
    np.testing.assert_array_equal(table, CASE.golden(inputs))


# --- the plans -------------------------------------------------------------------------------

def build(inputs, parts, owners):
    """One run of the CPU kernel: (table, hash computations, keys deferred)."""
    from loclab.cases.partitioning.cpu import build as kernel

    keys, slots = inputs["keys"], int(inputs["slots"][0])
    table = np.full(slots, 2**32 - 1, np.uint32)  # poisoned
    deferred_keys, deferred_at = np.empty(keys.size, np.uint32), np.empty(keys.size, np.int64)
    hashes, deferred = kernel(keys, table, parts, owners, deferred_keys, deferred_at,
                              np.zeros(1, np.int64))
    return table, hashes, deferred


@settings(max_examples=40, deadline=None)
@given(inputs=key_sets())
def test_every_plan_builds_the_golden_table(inputs):
    """1, 2 and 3 input parts and slot owners (3 rarely divides m), more tasks than numba has
    threads: every key found once, whatever the interleaving."""
    golden = CASE.golden(inputs)
    for parts, owners in PLANS:
        table, hashes, _ = build(inputs, parts, owners)
        np.testing.assert_array_equal(table, golden, err_msg=f"{parts} x {owners}")
        assert hashes == owners * inputs["keys"].size


def _colliding(n, slots, at):
    """``n`` keys whose home is slot ``at``."""
    pool = np.arange(1, 2_000_000, dtype=np.uint32)
    keys = pool[home_slot(pool, slots) == at][:n]
    assert keys.size == n
    return np.random.default_rng(n).permutation(keys)


def test_probes_that_leave_an_owners_range_are_finished_later():
    """60 keys hashing to the end of the first of three ranges: their cluster runs across
    the next owner's range; the keys it carries there are deferred, then inserted."""
    inputs = inputs_for(_colliding(60, 100, 30), 100)
    golden = CASE.golden(inputs)
    for parts in (1, 2, 3):
        table, _, deferred = build(inputs, parts, 3)
        assert deferred > 0
        np.testing.assert_array_equal(table, golden)


def _wrapping_cluster(n, slots, seed):
    """``n`` keys (in random order) whose homes are the last four slots: one cluster that
    runs through the end of the table and on from its start."""
    pool = np.arange(1, slots * (n + 200) // 4, dtype=np.uint32)
    keys = pool[home_slot(pool, slots) >= slots - 4][:n]
    assert keys.size == n
    return np.random.default_rng(seed).permutation(keys)


@pytest.mark.parametrize("round_", range(4))
def test_every_numba_thread_races_through_one_cluster_of_a_nearly_full_table(round_):
    """Stress: 2,000 keys in 2,003 slots, all homed at the end of the table, inserted by all of
    numba's threads at once through compare-and-swap (input partitioning, and a k_i x 2 grid
    whose probes also cross a range boundary): every probe walks the same cluster, which
    wraps around. Rounds differ in key order. (How often two threads meet depends on the
    machine; the next test makes them meet at every step.)"""
    slots = 2003
    inputs = inputs_for(_wrapping_cluster(2000, slots, round_), slots)
    golden = CASE.golden(inputs)
    threads = numba.get_num_threads()
    for parts, owners in ((threads, 1), (max(threads // 2, 2), 2), (4 * threads, 1)):
        with numba_threads(min(parts * owners, threads)):
            table, _, _ = build(inputs, parts, owners)
        np.testing.assert_array_equal(table, golden, err_msg=f"{parts} x {owners}")


@njit(parallel=True)
def _settle_at_once(table, keys):
    """One step of the ordered insertion for every key, all threads at once, key i at slot
    i mod the table's size: what each step leaves to carry on."""
    carried = np.empty_like(keys)
    for i in prange(keys.size):
        carried[i] = settle(table, i % table.size, keys[i], True)
    return carried


@pytest.mark.parametrize("slots", [1, 3])
def test_settle_loses_and_copies_no_key_while_every_thread_races_for_one_slot(slots):
    """The CAS retry at its most contended: each thread's keys (a contiguous share of the
    loop) grow, interleaved with the other threads', so nearly every step of every thread
    swaps into a slot that the other threads are swapping into too, and many CASes fail. The
    keys held and those carried on are the keys, each once; each slot holds its largest key.
    (A retry that gave up would lose a key; one that carried its stale read would copy one.)"""
    threads, chunk = numba.get_num_threads(), 100_000
    i = np.arange(threads * chunk)
    keys = ((i % chunk) * threads + i // chunk + 1).astype(np.uint32)
    table = np.zeros(slots, np.uint32)
    carried = _settle_at_once(table, keys)
    held = np.concatenate([carried[carried != EMPTY], table])
    np.testing.assert_array_equal(np.sort(held), np.sort(keys))
    np.testing.assert_array_equal(table, [keys[s::slots].max() for s in range(slots)])


def test_one_owner_wraps_around_without_deferring():
    inputs = inputs_for(_colliding(40, 41, 39), 41)  # a full table but one, wrapping around
    for parts in (1, 3):
        table, _, deferred = build(inputs, parts, 1)
        assert deferred == 0
        np.testing.assert_array_equal(table, CASE.golden(inputs))


@pytest.mark.parametrize("variant, threads, owners", [
    ("cpu-input-partitioned", 2, 1), ("cpu-output-partitioned", 2, 2), ("cpu-both", 1, 1),
    ("cpu-both", 2, 1)])
def test_setups_report_their_plan(variant, threads, owners, machine):
    inputs = CASE.make_inputs({"keys": 500, "slots": 1001, "threads": threads},
                              np.random.default_rng(0))
    out = np.empty(1001, np.uint32)
    setup = next(v for v in CASE.variants if v.name == variant).setup
    before = numba.get_num_threads()
    bound = setup(inputs, out, machine)
    np.testing.assert_array_equal(bound.run(), CASE.golden(inputs))
    assert numba.get_num_threads() == before  # a run's thread count does not leak
    params = bound.params
    assert params["threads"] == threads and params["owners"] == owners
    assert params["hashes_per_key"] == owners and params["input_parts"] == threads // owners
    assert f"{owners} hash computation" in params["reuse"]


def test_both_takes_any_divisor_of_the_threads_as_owners(machine):
    from loclab.cases.partitioning.cpu import both

    inputs = CASE.make_inputs({"keys": 300, "slots": 641, "threads": 2},
                              np.random.default_rng(1))
    bound = both(inputs, np.empty(641, np.uint32), machine, owners=2)
    assert bound.params["input_parts"] == 1 and bound.params["hashes_per_key"] == 2
    np.testing.assert_array_equal(bound.run(), CASE.golden(inputs))
    with pytest.raises(ValueError, match="do not divide"):
        both(inputs, np.empty(641, np.uint32), machine, owners=3)


# --- validation ------------------------------------------------------------------------------

def test_a_missing_a_duplicated_or_a_misplaced_key_fails_validation():
    inputs = CASE.make_inputs({"keys": 700, "slots": 1000, "threads": 1},
                              np.random.default_rng(2))
    golden = CASE.golden(inputs)
    tolerance = CASE.tolerance_for(inputs)
    assert compare(golden.copy(), golden, tolerance).valid
    full, empty = np.flatnonzero(golden != EMPTY), np.flatnonzero(golden == EMPTY)
    missing = golden.copy()
    missing[full[0]] = EMPTY
    duplicated = golden.copy()
    duplicated[empty[0]] = golden[full[0]]
    misplaced = golden.copy()
    misplaced[[full[0], full[1]]] = golden[[full[1], full[0]]]
    for wrong in (missing, duplicated, misplaced):
        assert not compare(wrong, golden, tolerance).valid


def test_inputs_are_distinct_keys_never_empty_nor_the_poison():
    inputs = CASE.make_inputs({"keys": 100_000, "slots": 200_000, "threads": 4},
                              np.random.default_rng(3))
    keys = inputs["keys"]
    assert keys.dtype == np.uint32 and np.unique(keys).size == keys.size
    assert keys.min() > EMPTY and keys.max() < 2**32 - 1
    assert inputs["threads"][0] == 4 and inputs["slots"][0] == 200_000


@pytest.mark.parametrize("keys, slots, threads, named, why", [
    (0, 10, 1, "keys=0", "at least one key"),
    (-3, 10, 1, "keys=-3", "at least one key"),
    (10, 10, 1, "slots=10", "more slots than keys"),
    (10, 7, 1, "slots=7", "more slots than keys"),
    (10, 0, 1, "slots=0", "more slots than keys"),
    (10, MAX_SLOTS + 1, 1, f"slots={MAX_SLOTS + 1}", "at most"),
    (10, 20, 0, "threads=0", "threads must be from 1"),
    (10, 20, -4, "threads=-4", "threads must be from 1"),
    (10, 20, 2**31, f"threads={2**31}", "threads must be from 1"),
    (10.5, 20, 1, "keys=10.5", "keys must be a whole number"),
])
def test_bad_sizes_are_refused_in_one_line_naming_them(keys, slots, threads, named, why):
    with pytest.raises(UsageError) as refused:
        CASE.make_inputs({"keys": keys, "slots": slots, "threads": threads},
                         np.random.default_rng(0))
    message = str(refused.value)
    assert named in message and why in message and "\n" not in message


def test_a_full_table_is_refused_not_probed_forever(machine):
    """The golden build and every plan refuse inputs that leave no empty slot, which
    ``make_inputs`` would have refused: plain probing would loop forever, a plan lose keys."""
    from loclab.cases.partitioning.cpu import both

    full = inputs_for(_colliding(5, 5, 0), 5)
    with pytest.raises(UsageError, match="more slots than keys"):
        CASE.golden(full)
    with pytest.raises(UsageError, match="keys=5 slots=5"):
        both(full, np.empty(5, np.uint32), machine)


def test_work_counts_keys_and_slots():
    work = CASE.work({"keys": 10, "slots": 21, "threads": 8})
    assert (work.bytes, work.flops, work.items) == (4 * 31, 0, 10)
    assert CASE.unit == "keys" and CASE.unit_roof is None


# --- sizes and skip rules --------------------------------------------------------------------

def test_balanced_owners_split_threads_near_their_square_root():
    assert [balanced_owners(t) for t in (1, 2, 4, 6, 8, 12, 16, 64, 7)] == [
        1, 1, 2, 2, 2, 3, 4, 8, 1]
    assert balanced_owners(132 * 2048) == 512


def test_thread_counts_double_up_to_the_cpu_count():
    assert thread_counts(1) == [1] and thread_counts(2) == [1, 2]
    assert thread_counts(6) == [1, 2, 4, 6] and thread_counts(16) == [1, 2, 4, 8, 16]


def test_cpu_sizes_sweep_threads_at_one_table(machine):
    sizes = CASE.dims("default", "cpu", machine)
    assert [d["threads"] for d in sizes] == thread_counts(
        min(machine.cpu.logical_cpus, numba.get_num_threads()))
    assert {(d["keys"], d["slots"]) for d in sizes} == {(2**22, 2**23)}
    large = CASE.dims("large", "cpu", machine)[0]
    assert 4 * (large["keys"] + large["slots"]) >= 4 * machine.cpu.llc_bytes


def test_the_cpu_sweep_ends_at_the_threads_numba_was_given(machine):
    """``--threads 1`` (numba's count, set before sizes are asked for): one row per plan, not
    rows at every count above it that would all be skipped."""
    with numba_threads(1):
        assert [d["threads"] for d in CASE.dims("small", "cpu", machine)] == [1]


def test_gpu_sizes_go_from_one_block_to_a_full_gpu(machine):
    h200 = Machine(cpu=machine.cpu, gpu=H200, gpu_unavailable=None)
    assert gpu_threads(h200) == [256, 1024, 4096, 16384, 65536, 132 * 2048]
    large = CASE.dims("large", "gpu", h200)[0]
    assert 4 * (large["keys"] + large["slots"]) >= 4 * H200.l2_bytes
    no_gpu = Machine(cpu=machine.cpu, gpu=None, gpu_unavailable="none here")
    assert CASE.dims("default", "gpu", no_gpu) == []


def test_gpu_output_partitioning_is_left_out_where_it_would_hash_too_much(machine):
    for dims in CASE.dims("default", "gpu", Machine(machine.cpu, H200, None)):
        skipped = too_many_hashes(dims, machine)
        assert (skipped is not None) == (dims["threads"] * dims["keys"] > HASH_LIMIT)
    assert too_many_hashes({"keys": 2**22, "threads": 132 * 2048}, machine)


def test_cpu_rows_need_as_many_numba_threads_as_they_name(machine):
    from loclab.cases.partitioning.cpu import threads_available

    have = numba.get_num_threads()
    assert threads_available({"threads": have}, machine) is None
    assert "numba runs" in threads_available({"threads": have + 1}, machine)


# --- GPU -------------------------------------------------------------------------------------

def _gpu_build(inputs, machine, parts, owners):
    """The GPU table of any plan: ``both`` with parts x owners threads and ``owners``."""
    import cupy

    from loclab.cases.partitioning.gpu import both

    staged = {name: cupy.asarray(array) for name, array in inputs.items()}
    staged["threads"] = cupy.asarray([parts * owners])
    out = cupy.full(int(inputs["slots"][0]), 2**32 - 1, cupy.uint32)
    bound = both(staged, out, machine, owners=owners)
    assert (bound.params["input_parts"], bound.params["owners"]) == (parts, owners)
    return cupy.asnumpy(bound.run())


@pytest.mark.gpu
@pytest.mark.parametrize("parts, owners", [(1, 1), (3, 1), (1, 3), (2, 3), (256, 1),
                                           (1, 256), (16, 16), (1, 1000), (40, 25)])
def test_gpu_plans_build_the_golden_table_from_colliding_keys(parts, owners, machine):
    """Clusters across many owners' ranges (deferred keys), a nearly full table, wrap-around,
    threads in a partial block."""
    for inputs in (inputs_for(_colliding(60, 100, 30), 100),
                   inputs_for(_colliding(40, 41, 39), 41),
                   CASE.make_inputs({"keys": 5003, "slots": 5010, "threads": 1},
                                    np.random.default_rng(4))):
        np.testing.assert_array_equal(_gpu_build(inputs, machine, parts, owners),
                                      CASE.golden(inputs))


@pytest.mark.gpu
def test_gpu_plans_at_a_full_gpu(machine):
    threads = gpu_threads(machine)[-1]
    inputs = CASE.make_inputs({"keys": 1_000_003, "slots": 2_000_009, "threads": threads},
                              np.random.default_rng(5))
    golden = CASE.golden(inputs)
    balanced = balanced_owners(threads)
    for parts, owners in ((threads, 1), (threads // balanced, balanced)):
        np.testing.assert_array_equal(_gpu_build(inputs, machine, parts, owners), golden)
