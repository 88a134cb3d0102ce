// Hash-table construction kernels: the ordered linear-probing table of N distinct keys in m
// slots (EMPTY = 0), built by T = k_i x k_o threads. Thread (part, owner) hashes the keys of
// input part `part` and inserts those whose home slot lies in slot range `owner`.
// Compiled through NVRTC (no host headers); templates are instantiated by name expression.
// Every kernel checks its bounds, so any N, m and T work with any grid.

typedef unsigned int u32;
typedef long long i64;
typedef unsigned long long u64;

constexpr u32 EMPTY = 0u;

// murmur3's 32-bit finalizer, then multiply-shift onto [0, slots): the same function as
// loclab.cases.partitioning.cpu.home_slot (the golden table depends on it).
__device__ __forceinline__ i64 home_slot(u32 key, i64 slots)
{
    u32 h = key;
    h ^= h >> 16;
    h *= 0x85EBCA6Bu;
    h ^= h >> 13;
    h *= 0xC2B2AE35u;
    h ^= h >> 16;
    return (i64)(((u64)h * (u64)slots) >> 32);
}

// One step of an ordered insertion: `key` goes into `slot` if the slot holds a smaller key
// (EMPTY included). Returns the key to carry on: the one displaced (EMPTY: done), `key` itself
// past a larger key, EMPTY if `key` is there already. SHARED: other threads may write the slot,
// so reads bypass L1 (which other SMs' writes do not update) and writes are atomicCAS; a failed
// CAS returns the slot's current value, so the retry needs no new load. A slot's value only
// grows, so a stale read of a larger key is still larger: moving past it is right.
template <bool SHARED>
__device__ __forceinline__ u32 settle(u32* table, i64 slot, u32 key)
{
    u32 current = SHARED ? __ldcg(table + slot) : table[slot];
    while (current < key) {
        u32 seen = current;
        if (SHARED) {
            seen = atomicCAS(table + slot, current, key);
        } else {
            table[slot] = key;
        }
        if (seen == current) {
            return current;
        }
        current = seen;
    }
    return current == key ? EMPTY : key;
}

// Carry `key` along its probe from `position` (unwrapped: slot position mod m) until it, or a
// key it displaced, fills an empty slot, or the probe reaches `stop`. Returns the key still
// carried (EMPTY if none); `position` is left where the probe stopped.
template <bool SHARED>
__device__ u32 place(u32* table, i64 slots, u32 key, i64& position, i64 stop)
{
    while (key != EMPTY && position < stop) {
        key = settle<SHARED>(table, position >= slots ? position - slots : position, key);
        ++position;
    }
    return key;
}

// Keys 4g .. 4g+3 in one 16-byte load (`keys` is 16-byte aligned); past the end, EMPTY, which
// is never a key and is skipped.
__device__ __forceinline__ uint4 load_group(const u32* __restrict__ keys, i64 n, i64 g)
{
    if (4 * g + 3 < n) {
        return reinterpret_cast<const uint4*>(keys)[g];
    }
    uint4 group = make_uint4(EMPTY, EMPTY, EMPTY, EMPTY);
    if (4 * g < n) group.x = keys[4 * g];
    if (4 * g + 1 < n) group.y = keys[4 * g + 1];
    if (4 * g + 2 < n) group.z = keys[4 * g + 2];
    return group;
}

// Where a thread's slot range ends and what it may write.
struct Range {
    i64 slots, low, high, limit;
};

// Hash `key` (one hash computation); insert it if its home lies in the thread's range. A probe
// that reaches `limit` (the range's end where other threads own the slots beyond) leaves its
// carried key and position in the deferral buffer for partition_finish.
template <bool SHARED>
__device__ __forceinline__ void insert_if_owned(u32* table, const Range& range, u32 key,
                                                u32* deferred_keys, i64* deferred_at,
                                                u64* deferred)
{
    if (key == EMPTY) {
        return;
    }
    const i64 start = home_slot(key, range.slots);
    if (start < range.low || start >= range.high) {
        return;
    }
    i64 position = start;
    const i64 stop = range.limit < start + range.slots ? range.limit : start + range.slots;
    const u32 carried = place<SHARED>(table, range.slots, key, position, stop);
    if (carried != EMPTY) {
        const u64 d = atomicAdd(deferred, 1ull);
        deferred_keys[d] = carried;
        deferred_at[d] = position % range.slots;
    }
}

// All three plans: T = parts x owners threads, thread `task` is (part = task % parts, owner =
// task / parts). Input parts interleave groups of 4 keys (part p reads groups p, p + parts,
// ...), so the lanes of a warp read neighbouring groups: coalesced 16-byte loads. With one part
// (output partitioning) every lane reads the same group: one broadcast load per warp, and
// each lane hashes all N keys. ITEMS groups are loaded before any is inserted, so that ITEMS
// loads are in flight while a thread walks the keys. SHARED (parts > 1): the threads of one
// range race for its slots through atomicCAS. The launch bounds keep it to 32 registers, so
// that a full SM holds 2048 threads (ITEMS = 2 fits without spills; 4 spills).
template <bool SHARED, int ITEMS, int BLOCK>
__global__ void __launch_bounds__(BLOCK, 2048 / BLOCK)
partition_build(const u32* __restrict__ keys, i64 n, u32* table, i64 slots, int parts,
                int owners, u32* deferred_keys, i64* deferred_at, u64* deferred)
{
    const i64 task = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (task >= (i64)parts * owners) {
        return;
    }
    const i64 owner = task / parts;
    Range range;
    range.slots = slots;
    range.low = owner * slots / owners;
    range.high = (owner + 1) * slots / owners;
    range.limit = owners > 1 ? range.high : 2 * slots;
    const i64 groups = (n + 3) / 4;
    for (i64 first = task % parts; first < groups; first += (i64)parts * ITEMS) {
        uint4 batch[ITEMS];
#pragma unroll
        for (int j = 0; j < ITEMS; ++j) {
            const i64 g = first + (i64)j * parts;
            batch[j] = g < groups ? load_group(keys, n, g) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int j = 0; j < ITEMS; ++j) {
            insert_if_owned<SHARED>(table, range, batch[j].x, deferred_keys, deferred_at,
                                    deferred);
            insert_if_owned<SHARED>(table, range, batch[j].y, deferred_keys, deferred_at,
                                    deferred);
            insert_if_owned<SHARED>(table, range, batch[j].z, deferred_keys, deferred_at,
                                    deferred);
            insert_if_owned<SHARED>(table, range, batch[j].w, deferred_keys, deferred_at,
                                    deferred);
        }
    }
}

// After partition_build: the deferred keys resume their probes, concurrently (atomicCAS), in
// a grid-stride loop over however many were deferred.
__global__ void partition_finish(u32* table, i64 slots, const u32* __restrict__ deferred_keys,
                                 const i64* __restrict__ deferred_at, const u64* deferred)
{
    const i64 count = (i64)*deferred;
    for (i64 d = (i64)blockIdx.x * blockDim.x + threadIdx.x; d < count;
         d += (i64)gridDim.x * blockDim.x) {
        i64 position = deferred_at[d];
        place<true>(table, slots, deferred_keys[d], position, position + slots);
    }
}
