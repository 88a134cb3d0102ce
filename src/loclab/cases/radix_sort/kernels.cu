// Radix sort kernels: the lecture's one-bit split (gpu-split) and an LSD sort by digits of
// log2(RADIX) bits (gpu-lsd). Compiled through NVRTC (no host headers): templates are
// instantiated by name expression. Keys and values are uint32; n < 2^31, so every index and
// output position fits an unsigned 32-bit int.
// Keys-only and key-value kernels are separate __global__ templates around one body, so that
// each declares its own accesses.

#include "../../gpu/block_scan.cuh"

typedef unsigned int u32;

using loclab::FULL_WARP;

// Exclusive prefix sum of counts[0, len) in place by one block, and counts[len] = the total.
// In rounds of THREADS x ITEMS counts: thread t adds up its ITEMS consecutive counts, the
// block scans those sums, each thread rewrites its counts from its offset, and the round's
// total carries over to the next.
template <int THREADS, int ITEMS>
__device__ void scan_in_place(u32* __restrict__ counts, u32 len) {
    __shared__ u32 warp_totals[THREADS / 32];
    u32 carry = 0u;
    for (u32 base = 0; base < len; base += THREADS * ITEMS) {
        const u32 first = base + threadIdx.x * ITEMS;
        u32 count[ITEMS];
        u32 own = 0u;
#pragma unroll
        for (int j = 0; j < ITEMS; ++j) {
            count[j] = first + j < len ? counts[first + j] : 0u;
            own += count[j];
        }
        u32 total;
        u32 running = carry + loclab::block_exclusive_scan<u32, THREADS>(own, total, warp_totals);
#pragma unroll
        for (int j = 0; j < ITEMS; ++j) {
            if (first + j < len) counts[first + j] = running;
            running += count[j];
        }
        carry += total;
        __syncthreads();  // the next round's scan rewrites warp_totals
    }
    if (threadIdx.x == 0) counts[len] = carry;
}

// ---- gpu-split: the lecture's split on one bit, 32 passes --------------------------------

// Step 1 of 3: the number of keys whose bit is 0 (the lecture's e = 1) in each block of
// THREADS keys, one key per thread: falses[blockIdx.x].
template <int THREADS>
__global__ void __launch_bounds__(THREADS)
split_count(const u32* __restrict__ keys, u32 n, u32 bit, u32* __restrict__ falses) {
    const u32 i = blockIdx.x * THREADS + threadIdx.x;
    const bool e = i < n && ((keys[i] >> bit) & 1u) == 0u;
    const int count = __syncthreads_count(e);
    if (threadIdx.x == 0) falses[blockIdx.x] = (u32)count;
}

// Step 2 of 3: one block scans the blocks' counts: falses[b] = the 0-bit keys before block b,
// falses[blocks] = all of them (the lecture's totalFalses). TILE: keys per block of step 1.
template <int THREADS, int ITEMS, int TILE>
__global__ void __launch_bounds__(THREADS) split_scan(u32* __restrict__ falses, u32 n) {
    scan_in_place<THREADS, ITEMS>(falses, (n + TILE - 1) / TILE);
}

// Step 3 of 3: the lecture's scatter, one key per thread: f = the 0-bit keys before this one
// (the block's offset plus a block scan of e), t = i - f + totalFalses, d = b ? t : f.
// A warp's keys go to two runs, one from each side of the split.
template <int THREADS, bool PAIRS>
__device__ __forceinline__ void split_scatter_body(const u32* __restrict__ keys_in,
                                                   const u32* __restrict__ vals_in,
                                                   u32* __restrict__ keys_out,
                                                   u32* __restrict__ vals_out, u32 n, u32 bit,
                                                   const u32* __restrict__ falses) {
    __shared__ u32 warp_totals[THREADS / 32];
    const u32 i = blockIdx.x * THREADS + threadIdx.x;
    const u32 key = i < n ? keys_in[i] : 0u;
    const u32 b = (key >> bit) & 1u;
    const u32 e = i < n ? 1u - b : 0u;
    u32 block_falses;
    const u32 f = falses[blockIdx.x] +
                  loclab::block_exclusive_scan<u32, THREADS>(e, block_falses, warp_totals);
    if (i < n) {
        const u32 total_falses = falses[gridDim.x];
        const u32 d = b ? i - f + total_falses : f;
        keys_out[d] = key;
        if (PAIRS) vals_out[d] = vals_in[i];
    }
}

template <int THREADS>
__global__ void __launch_bounds__(THREADS)
split_scatter_keys(const u32* __restrict__ keys_in, u32* __restrict__ keys_out, u32 n, u32 bit,
                   const u32* __restrict__ falses) {
    split_scatter_body<THREADS, false>(keys_in, nullptr, keys_out, nullptr, n, bit, falses);
}

template <int THREADS>
__global__ void __launch_bounds__(THREADS)
split_scatter_pairs(const u32* __restrict__ keys_in, const u32* __restrict__ vals_in,
                    u32* __restrict__ keys_out, u32* __restrict__ vals_out, u32 n, u32 bit,
                    const u32* __restrict__ falses) {
    split_scatter_body<THREADS, true>(keys_in, vals_in, keys_out, vals_out, n, bit, falses);
}

// ---- gpu-lsd ---------------------------------------------------------------------------

// Before the first pass: the bits in which some keys differ, as OR and AND of all keys
// (bits[0] |= OR, bits[1] &= AND; the host sets them to 0 and ~0). A digit with no differing
// bit is the same in every key: its pass would leave the order as it is. A grid-stride loop,
// ITEMS loads in flight per thread; warps combine with shuffles, then one atomic each.
template <int THREADS, int ITEMS>
__global__ void __launch_bounds__(THREADS)
radix_differing_bits(const u32* __restrict__ keys, u32 n, u32* __restrict__ bits) {
    u32 any = 0u, all = FULL_WARP;
    const u32 step = gridDim.x * THREADS * ITEMS;
    for (u32 base = blockIdx.x * THREADS * ITEMS + threadIdx.x; base < n; base += step) {
        u32 key[ITEMS];
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const u32 i = base + k * THREADS;
            key[k] = i < n ? keys[i] : keys[base];  // a key of the input: neutral for both
        }
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            any |= key[k];
            all &= key[k];
        }
        if (n - base <= step) break;  // base + step would pass n (and may wrap around)
    }
#pragma unroll
    for (int d = 16; d > 0; d >>= 1) {
        any |= __shfl_xor_sync(FULL_WARP, any, d);
        all &= __shfl_xor_sync(FULL_WARP, all, d);
    }
    if ((threadIdx.x & 31) == 0) {
        atomicOr(&bits[0], any);
        atomicAnd(&bits[1], all);
    }
}

// The lanes of a warp whose digit (< RADIX, or RADIX for a key beyond n) equals this lane's,
// and this lane's rank among them in lane order; every lane must call it. One ballot per bit
// of the digit, and one for the bit of RADIX (CUB's match): __match_any_sync loops over the
// distinct values, up to 32 of them for random 8-bit digits, which made it the bottleneck.
struct Peers {
    u32 mask;
    u32 below;   // peers in lower lanes
    u32 leader;  // the highest lane of the group
};

template <int RADIX>
__device__ __forceinline__ Peers peers_of(u32 digit) {
    u32 mask = FULL_WARP;
#pragma unroll
    for (u32 bit = 1u; bit <= (u32)RADIX; bit <<= 1) {
        const bool set = (digit & bit) != 0u;
        const u32 ones = __ballot_sync(FULL_WARP, set);
        mask &= set ? ones : ~ones;
    }
    const u32 lane = threadIdx.x & 31;
    return Peers{mask, (u32)__popc(mask & ((1u << lane) - 1u)), 31u - __clz(mask)};
}

// Upsweep of a pass: block b counts the digits (key >> shift) % RADIX of its range of keys,
// [b * per_block, min(n, (b + 1) * per_block)), the range the downsweep's block b sorts, and
// writes counts[digit * blocks + b] (digit-major, so that an exclusive scan of counts gives
// each (digit, block) its first output position). Each warp counts into its own row of
// shared counters with one atomic per key, or one per warp where all 32 keys have the same
// digit (sorted keys' high digits: 32 atomics on one counter would run one after another).
// The loop runs the same number of steps in every thread (keys beyond the range get digit
// RADIX, not counted), so that whole warps vote.
template <int RADIX, int THREADS, int ITEMS>
__global__ void __launch_bounds__(THREADS)
radix_upsweep(const u32* __restrict__ keys, u32 n, u32 per_block, u32 shift, u32 blocks,
              u32* __restrict__ counts) {
    static_assert(RADIX <= THREADS, "a thread per digit sums the warps' counters");
    constexpr int WARPS = THREADS / 32;
    __shared__ u32 tally[WARPS * RADIX];
    for (int j = threadIdx.x; j < WARPS * RADIX; j += THREADS) tally[j] = 0u;
    __syncthreads();
    u32* const mine = tally + (threadIdx.x >> 5) * RADIX;
    const u32 begin = blockIdx.x * per_block;
    const u32 end = begin + min(per_block, n - begin);
    for (u32 base = begin; base < end; base += THREADS * ITEMS) {
        u32 key[ITEMS];
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const u32 i = base + k * THREADS + threadIdx.x;
            key[k] = i < end ? keys[i] : 0u;
        }
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const u32 i = base + k * THREADS + threadIdx.x;
            const u32 digit = i < end ? (key[k] >> shift) & (RADIX - 1) : (u32)RADIX;
            if (__all_sync(FULL_WARP, digit == __shfl_sync(FULL_WARP, digit, 0))) {
                if ((threadIdx.x & 31) == 0 && digit < RADIX) atomicAdd(&mine[digit], 32u);
            } else if (digit < RADIX) {
                atomicAdd(&mine[digit], 1u);
            }
        }
    }
    __syncthreads();
    if (threadIdx.x < RADIX) {
        u32 sum = 0u;
        for (int w = 0; w < WARPS; ++w) sum += tally[w * RADIX + threadIdx.x];
        counts[threadIdx.x * blocks + blockIdx.x] = sum;
    }
}

// Scan of a pass: one block, counts[0, RADIX * blocks) to their exclusive prefix sums.
template <int THREADS, int ITEMS, int RADIX>
__global__ void __launch_bounds__(THREADS) radix_scan(u32* __restrict__ counts, u32 blocks) {
    scan_in_place<THREADS, ITEMS>(counts, RADIX * blocks);
}

// Shared memory of the downsweep (dynamic, in words), in this order: the tile of keys (and of
// values), which the warps' digit counters share while the keys are ranked; per digit the
// output position of the tile's first key of that digit minus its place in the tile; the
// block scan's warp totals. gpu.py's downsweep_shared_bytes says the same.
template <int RADIX, int THREADS, int ITEMS, bool PAIRS>
struct DownsweepShared {
    static constexpr int WARPS = THREADS / 32;
    static constexpr int TILE = THREADS * ITEMS;
    static constexpr int COUNTERS = WARPS * RADIX;
    static constexpr int TILES = TILE * (PAIRS ? 2 : 1);
    static constexpr int POOL = TILES > COUNTERS ? TILES : COUNTERS;
    static constexpr int WORDS = POOL + RADIX + WARPS;
};

// Downsweep of a pass: block b moves its range of keys (tiles [b * tiles_per_block, ...)) to
// their places. Per tile of THREADS x ITEMS keys:
//  1. Warp w holds keys [w * 32 * ITEMS, (w + 1) * 32 * ITEMS) of the tile, item k of lane l
//     being key w * 32 * ITEMS + k * 32 + l: loads are coalesced, and items in order then
//     lanes in order is input order. For each item the warp finds the lanes with the same
//     digit (peers_of); the highest of them adds the group to the warp's count of that digit,
//     and each key's rank in its warp is that count before the group plus its peers in lower
//     lanes.
//  2. Thread d (one per digit) adds up the warps' counts of digit d; a block scan of these
//     gives each digit's first place in the tile, and thread d turns the warps' counts into
//     each warp's first place for digit d. A key's place = its warp's first place for its
//     digit + its rank in the warp: the tile stably ordered by digit.
//  3. Keys (and values) are written to their places in shared memory, then read back in
//     order, thread t taking places t, t + THREADS, ...: consecutive threads hold consecutive
//     keys of one digit's run, which go to consecutive output positions (the digit's next
//     output position, kept per digit, plus the place in the tile minus the digit's first).
// The tile loop runs the same steps in every thread; keys beyond n get digit RADIX and are
// neither counted nor moved.
template <int RADIX, int THREADS, int ITEMS, bool PAIRS>
__device__ __forceinline__ void downsweep_body(const u32* __restrict__ keys_in,
                                               const u32* __restrict__ vals_in,
                                               u32* __restrict__ keys_out,
                                               u32* __restrict__ vals_out, u32 n,
                                               u32 tiles_per_block, u32 shift, u32 blocks,
                                               const u32* __restrict__ offsets) {
    static_assert(RADIX <= THREADS, "a thread per digit");
    using Shared = DownsweepShared<RADIX, THREADS, ITEMS, PAIRS>;
    constexpr int TILE = Shared::TILE;
    extern __shared__ u32 pool[];
    u32* const tile_keys = pool;                    // step 3
    u32* const tile_vals = pool + TILE;             // step 3, PAIRS only
    u32* const counters = pool;                     // steps 1-2: [warp][digit]
    u32* const to_output = pool + Shared::POOL;     // [digit]: output position - place in tile
    u32* const warp_totals = to_output + RADIX;

    const u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    // Thread d < RADIX: the output position of the block's next key of digit d.
    u32 next = threadIdx.x < RADIX ? offsets[threadIdx.x * blocks + blockIdx.x] : 0u;
    const u32 tiles = (n + TILE - 1) / TILE;
    const u32 first_tile = blockIdx.x * tiles_per_block;
    const u32 last_tile = first_tile + min(tiles_per_block, tiles - first_tile);
    for (u32 tile = first_tile; tile < last_tile; ++tile) {
        const u32 base = tile * TILE + warp * 32 * ITEMS + lane;
        u32 key[ITEMS], val[ITEMS], rank[ITEMS];
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const u32 i = base + k * 32;
            key[k] = i < n ? keys_in[i] : 0u;
            if (PAIRS) val[k] = i < n ? vals_in[i] : 0u;
        }
        // 1. rank within the warp
        u32* const mine = counters + warp * RADIX;
        for (int d = lane; d < RADIX; d += 32) mine[d] = 0u;
        __syncwarp();
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const bool valid = base + k * 32 < n;
            const u32 digit = valid ? (key[k] >> shift) & (RADIX - 1) : (u32)RADIX;
            const Peers peers = peers_of<RADIX>(digit);
            u32 before = 0u;
            if (valid && lane == peers.leader) before = atomicAdd(&mine[digit], __popc(peers.mask));
            rank[k] = __shfl_sync(FULL_WARP, before, peers.leader) + peers.below;
        }
        __syncthreads();
        // 2. each warp's first place for each digit
        u32 count = 0u;
        if (threadIdx.x < RADIX) {
#pragma unroll 4
            for (int w = 0; w < Shared::WARPS; ++w) count += counters[w * RADIX + threadIdx.x];
        }
        u32 tile_total;
        const u32 first = loclab::block_exclusive_scan<u32, THREADS>(count, tile_total,
                                                                     warp_totals);
        if (threadIdx.x < RADIX) {
            u32 place = first;
#pragma unroll 4
            for (int w = 0; w < Shared::WARPS; ++w) {
                const u32 c = counters[w * RADIX + threadIdx.x];
                counters[w * RADIX + threadIdx.x] = place;
                place += c;
            }
            to_output[threadIdx.x] = next - first;  // modulo 2^32: to_output + place is exact
            next += count;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const u32 digit = (key[k] >> shift) & (RADIX - 1);
            if (base + k * 32 < n) rank[k] += counters[warp * RADIX + digit];
        }
        __syncthreads();  // the counters' words become the tile's
        // 3. the tile in digit order, then out in runs
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            if (base + k * 32 < n) {
                tile_keys[rank[k]] = key[k];
                if (PAIRS) tile_vals[rank[k]] = val[k];
            }
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const u32 place = k * THREADS + threadIdx.x;
            if (place < tile_total) {
                const u32 sorted = tile_keys[place];
                const u32 to = to_output[(sorted >> shift) & (RADIX - 1)] + place;
                keys_out[to] = sorted;
                if (PAIRS) vals_out[to] = tile_vals[place];
            }
        }
        __syncthreads();  // the tile's words become the next tile's counters
    }
}

template <int RADIX, int THREADS, int ITEMS>
__global__ void __launch_bounds__(THREADS)
radix_downsweep_keys(const u32* __restrict__ keys_in, u32* __restrict__ keys_out, u32 n,
                     u32 tiles_per_block, u32 shift, u32 blocks,
                     const u32* __restrict__ offsets) {
    downsweep_body<RADIX, THREADS, ITEMS, false>(keys_in, nullptr, keys_out, nullptr, n,
                                                 tiles_per_block, shift, blocks, offsets);
}

template <int RADIX, int THREADS, int ITEMS>
__global__ void __launch_bounds__(THREADS)
radix_downsweep_pairs(const u32* __restrict__ keys_in, const u32* __restrict__ vals_in,
                      u32* __restrict__ keys_out, u32* __restrict__ vals_out, u32 n,
                      u32 tiles_per_block, u32 shift, u32 blocks,
                      const u32* __restrict__ offsets) {
    downsweep_body<RADIX, THREADS, ITEMS, true>(keys_in, vals_in, keys_out, vals_out, n,
                                                tiles_per_block, shift, blocks, offsets);
}
