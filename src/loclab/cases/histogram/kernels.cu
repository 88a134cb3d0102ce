// Histogram kernels: hist[inds[i]] += vals[i] for every i with lo <= inds[i] < hi.
// Compiled through NVRTC (no host headers): templates are instantiated by name expression.
// Every kernel walks its input with a grid-stride loop, so any n works with any grid.

#include "../../gpu/block_scan.cuh"

typedef unsigned int u32;
typedef long long i64;

// gpu-atomic (lo = 0, hi = bins) and each pass of gpu-multipass (one chunk [lo, hi)): the
// lecture's kernel, with ITEMS elements per thread per step (loads first, then the atomics)
// so that enough loads are in flight to stream the input at full bandwidth. Indices are read
// coalesced; a value only when its bin is in range (a pass skips the sectors of `vals` whose
// bins all lie in other chunks).
// With random indices every atomicAdd hits a random line of `hist`: in L2 while the chunk
// fits there, in DRAM (a 32-byte read-modify-write for 4 bytes) when it does not.
template <int ITEMS>
__global__ void histogram_atomic(const u32* __restrict__ inds, const float* __restrict__ vals,
                                 float* __restrict__ hist, i64 n, u32 lo, u32 hi) {
    const i64 step = (i64)gridDim.x * blockDim.x * ITEMS;
    for (i64 base = (i64)blockIdx.x * blockDim.x * ITEMS + threadIdx.x; base < n; base += step) {
        u32 ind[ITEMS];
        float val[ITEMS];
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const i64 i = base + (i64)k * blockDim.x;
            ind[k] = i < n ? inds[i] : hi;
        }
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const bool kept = ind[k] >= lo && ind[k] < hi;
            val[k] = kept ? vals[base + (i64)k * blockDim.x] : 0.0f;
        }
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            if (ind[k] >= lo && ind[k] < hi) atomicAdd(&hist[ind[k]], val[k]);
        }
    }
}

// The positions of the active lanes of a warp that hold the same key as this lane, and this
// lane's rank among them: one shared atomic per distinct key per warp instead of one per lane.
struct Peers {
    u32 mask;
    int rank;
    bool leader;
};

__device__ __forceinline__ Peers peers_of(u32 key, u32 active) {
    const u32 mask = __match_any_sync(active, key);
    const u32 lane = threadIdx.x & 31;
    const int rank = __popc(mask & ((1u << lane) - 1u));
    return Peers{mask, rank, rank == 0};
}

// gpu-partitioned, step 1 of 3: how many elements of each tile of BLOCK * ITEMS consecutive
// elements fall in each chunk of the histogram. counts[1 + part * tiles + tile]: part-major,
// so that an inclusive scan of counts gives every (part, tile) its first output position and
// each part's elements end up contiguous. counts[0] is the scan's leading zero.
template <int BLOCK, int ITEMS, int MAX_PARTS>
__global__ void __launch_bounds__(BLOCK)
partition_count(const u32* __restrict__ inds, i64 n, u32 bins, u32 chunk, int parts,
                int tiles, i64* __restrict__ counts) {
    __shared__ int tally[MAX_PARTS];
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        for (int p = threadIdx.x; p < parts; p += BLOCK) tally[p] = 0;
        __syncthreads();
        const i64 base = (i64)tile * BLOCK * ITEMS;
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const i64 i = base + k * BLOCK + threadIdx.x;
            const u32 ind = i < n ? inds[i] : bins;
            const u32 part = ind < bins ? ind / chunk : (u32)parts;
            const Peers peers = peers_of(part, __activemask());
            if (peers.leader && part < (u32)parts) atomicAdd(&tally[part], __popc(peers.mask));
        }
        __syncthreads();
        for (int p = threadIdx.x; p < parts; p += BLOCK) {
            counts[1 + (i64)p * tiles + tile] = tally[p];
        }
        __syncthreads();
    }
}

// gpu-partitioned, step 3 of 3 (step 2 is the scan): each tile moves its elements to the
// positions the scan gave its (part, tile) pairs. Within a tile the elements of one part are
// written next to each other, so the scattered writes still come in runs.
template <int BLOCK, int ITEMS, int MAX_PARTS>
__global__ void __launch_bounds__(BLOCK)
partition_scatter(const u32* __restrict__ inds, const float* __restrict__ vals, i64 n,
                  u32 bins, u32 chunk, int parts, int tiles, const i64* __restrict__ offsets,
                  u32* __restrict__ part_inds, float* __restrict__ part_vals) {
    __shared__ i64 cursor[MAX_PARTS];
    __shared__ int taken[MAX_PARTS];
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        for (int p = threadIdx.x; p < parts; p += BLOCK) {
            cursor[p] = offsets[(i64)p * tiles + tile];
            taken[p] = 0;
        }
        __syncthreads();
        const i64 base = (i64)tile * BLOCK * ITEMS;
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const i64 i = base + k * BLOCK + threadIdx.x;
            const u32 ind = i < n ? inds[i] : bins;
            const u32 part = ind < bins ? ind / chunk : (u32)parts;
            const Peers peers = peers_of(part, __activemask());
            int first = 0;
            if (peers.leader && part < (u32)parts) {
                first = atomicAdd(&taken[part], __popc(peers.mask));
            }
            first = __shfl_sync(peers.mask, first, __ffs(peers.mask) - 1);
            if (part < (u32)parts) {
                const i64 to = cursor[part] + first + peers.rank;
                part_inds[to] = ind;
                part_vals[to] = vals[i];
            }
        }
        __syncthreads();
    }
}

// gpu-partitioned, one pass per chunk: the atomic kernel over the chunk's own elements only,
// [offsets[begin], offsets[end]), read from the scan on the device (no round trip to the host).
template <int ITEMS>
__global__ void histogram_segment(const u32* __restrict__ part_inds,
                                  const float* __restrict__ part_vals, float* __restrict__ hist,
                                  const i64* __restrict__ offsets, i64 begin, i64 end) {
    const i64 first = offsets[begin], last = offsets[end];
    const i64 step = (i64)gridDim.x * blockDim.x * ITEMS;
    for (i64 base = first + (i64)blockIdx.x * blockDim.x * ITEMS + threadIdx.x; base < last;
         base += step) {
        u32 ind[ITEMS];
        float val[ITEMS];
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const i64 i = base + (i64)k * blockDim.x;
            ind[k] = i < last ? part_inds[i] : 0u;
            val[k] = i < last ? part_vals[i] : 0.0f;
        }
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            if (base + (i64)k * blockDim.x < last) atomicAdd(&hist[ind[k]], val[k]);
        }
    }
}

// gpu-shared: each block keeps a whole sub-histogram in shared memory (dynamic, bins floats),
// accumulates its share of the input with shared-memory atomics (no L2 round trips), then
// adds its non-zero bins into the global histogram. For histograms that fit a block's
// shared memory only; the host checks.
__global__ void histogram_shared(const u32* __restrict__ inds, const float* __restrict__ vals,
                                 float* __restrict__ hist, i64 n, u32 bins) {
    extern __shared__ float sub[];
    for (u32 b = threadIdx.x; b < bins; b += blockDim.x) sub[b] = 0.0f;
    __syncthreads();
    const i64 stride = (i64)gridDim.x * blockDim.x;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const u32 ind = inds[i];
        if (ind < bins) atomicAdd(&sub[ind], vals[i]);
    }
    __syncthreads();
    for (u32 b = threadIdx.x; b < bins; b += blockDim.x) {
        const float s = sub[b];
        if (s != 0.0f) atomicAdd(&hist[b], s);
    }
}


// gpu-bucketed: one scatter of the input into buckets of bins small enough for one block's
// shared memory, then one block per bucket. An element becomes a 6-byte record in its bucket's
// room (its bin's offset in the bucket, 16 bits: a bucket has at most 65,536 bins; its value),
// so the input is read once (8 bytes an element), written once as records (6) and read once
// more (6): 20 bytes where one pass alone would move 8, at best 40% of the copy rate. Each
// bucket's room is sized from a sample of the input, not from a counting pass over all of it;
// records beyond a bucket's room spill to a list that global atomics add in at the end, so any
// input is summed right (and spread ones never spill). Four kernels: sample, room, scatter, sum;
// then histogram_segment adds the spill list (an empty one costs a launch of idle blocks).

typedef unsigned long long u64;
typedef unsigned short u16;
constexpr u32 NO_KEY = 0xffffffffu;  // an element whose index is out of range: skipped
constexpr int RECORD_GROUP = 4;      // records a load in step 4: 8 bytes of offsets, 16 of values
constexpr int ROOM_ALIGN = 16;       // rooms hold whole multiples: each starts on a 32-byte sector

// An in-range index as (bucket << 16) | its offset in the bucket: one division per element.
__device__ __forceinline__ u32 bucket_key(u32 ind, u32 bucket_bins) {
    const u32 bucket = ind / bucket_bins;
    return bucket << 16 | (ind - bucket * bucket_bins);
}

// Exclusive prefix sum of counts[0, len) in place (shared or global memory); returns the total.
// Each thread scans a contiguous run of entries, so len may exceed THREADS. warp_totals:
// THREADS / 32 entries of shared memory. Every thread of the block must call it.
template <class T, int THREADS>
__device__ T scan_runs(T* counts, int len, T* warp_totals) {
    const int per = (len + THREADS - 1) / THREADS;
    const int first = min((int)threadIdx.x * per, len), last = min(first + per, len);
    T own = 0;
    for (int b = first; b < last; ++b) own += counts[b];
    T total;
    T running = loclab::block_exclusive_scan<T, THREADS>(own, total, warp_totals);
    for (int b = first; b < last; ++b) {
        const T count = counts[b];
        counts[b] = running;
        running += count;
    }
    __syncthreads();
    return total;
}

// Step 1 of 4: the buckets of one chunk of 4 * THREADS consecutive indices out of every
// `every`, tallied per block in shared memory (buckets ints), then added into sampled (zeroed
// by the host). The host knows how many elements the chunks hold (the scale of the estimate).
template <int THREADS>
__global__ void __launch_bounds__(THREADS)
bucket_sample(const u32* __restrict__ inds, i64 n, u32 bins, u32 bucket_bins, int buckets,
              int every, u64* __restrict__ sampled) {
    extern __shared__ int tally[];
    for (int b = threadIdx.x; b < buckets; b += THREADS) tally[b] = 0;
    __syncthreads();
    constexpr int CHUNK = 4 * THREADS;
    const i64 chunks = (n + CHUNK - 1) / CHUNK;
    for (i64 chunk = (i64)blockIdx.x * every; chunk < chunks; chunk += (i64)gridDim.x * every) {
        u32 ind[4];
        loclab::load_items<u32, 4>(inds, chunk * CHUNK + 4 * threadIdx.x, n, ind, bins);
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            if (ind[k] < bins) atomicAdd(&tally[ind[k] / bucket_bins], 1);
        }
    }
    __syncthreads();
    for (int b = threadIdx.x; b < buckets; b += THREADS) {
        if (tally[b]) atomicAdd(&sampled[b], (u64)tally[b]);
    }
}

// Step 2 of 4, one block: each bucket's room, its count estimated from the sample (scale input
// elements per sampled one) plus `spread` standard deviations of that estimate plus `scale`,
// rounded up to a multiple of ROOM_ALIGN records; the rooms laid end to end (region[b]: bucket
// b's first record, region[buckets]: all rooms); every bucket's fill and the spill count
// (spill_range[1]) cleared.
template <int THREADS>
__global__ void __launch_bounds__(THREADS)
bucket_room(const u64* __restrict__ sampled, int buckets, double scale, double spread,
            i64* __restrict__ room, i64* __restrict__ region, u64* __restrict__ fill,
            i64* __restrict__ spill_range) {
    __shared__ i64 warp_totals[THREADS / 32];
    for (int b = threadIdx.x; b < buckets; b += THREADS) {
        const double expected = (double)sampled[b] * scale;
        const double wanted = ceil(expected + spread * sqrt(scale * expected) + scale);
        const i64 aligned = wanted > 0.0 ? ((i64)wanted + ROOM_ALIGN - 1) / ROOM_ALIGN : 0;
        room[b] = region[b] = aligned * ROOM_ALIGN;
        fill[b] = 0;
    }
    if (threadIdx.x == 0) spill_range[0] = spill_range[1] = 0;
    __syncthreads();
    const i64 total = scan_runs<i64, THREADS>(region, buckets, warp_totals);
    if (threadIdx.x == 0) region[buckets] = total;
}

// A tile's elements as a thread holds them: ITEMS / 4 vectors of 4, vector v of thread t at
// tile position 4 (v THREADS + t), so that each load instruction of a warp reads 512
// contiguous bytes. Missing elements (past n) get index `bins`: out of range.
template <int THREADS, int ITEMS>
__device__ __forceinline__ void load_tile(const u32* __restrict__ inds,
                                          const float* __restrict__ vals, i64 first, i64 n,
                                          u32 bins, u32 (&ind)[ITEMS], float (&val)[ITEMS]) {
#pragma unroll
    for (int v = 0; v < ITEMS / 4; ++v) {
        const i64 at = first + 4 * ((i64)v * THREADS + threadIdx.x);
        u32 ind4[4];
        float val4[4];
        loclab::load_items<u32, 4>(inds, at, n, ind4, bins);
        loclab::load_items<float, 4>(vals, at, n, val4, 0.0f);
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            ind[4 * v + k] = ind4[k];
            val[4 * v + k] = val4[k];
        }
    }
}

// Step 3 of 4: each tile of THREADS * ITEMS elements is counting-sorted by bucket in shared
// memory, takes a range of each bucket's room with one global atomic per bucket, and writes
// its buckets out as runs of records (consecutive lanes, consecutive addresses). The next
// tile's loads are issued before this tile's records are written, so they overlap. Records
// past a bucket's room go to the spill list (warp-aggregated claims of spill_range[1]).
// Dynamic shared memory: THREADS * ITEMS * 8 + buckets * 16 bytes.
template <int THREADS, int ITEMS>
__global__ void __launch_bounds__(THREADS, 1)
bucket_scatter(const u32* __restrict__ inds, const float* __restrict__ vals, i64 n, u32 bins,
               u32 bucket_bins, int buckets, const i64* __restrict__ room,
               const i64* __restrict__ region, u64* __restrict__ fill,
               u16* __restrict__ rec_offsets, float* __restrict__ rec_vals,
               i64* __restrict__ spill_range, u32* __restrict__ spill_inds,
               float* __restrict__ spill_vals) {
    static_assert(ITEMS % 4 == 0, "tiles load 4-element vectors");
    constexpr int TILE = THREADS * ITEMS;
    extern __shared__ i64 pool[];
    i64* dest = pool;                          // per bucket: record position of tile slot 0
    u32* tile_keys = (u32*)(dest + buckets);   // the tile sorted by bucket
    float* tile_vals = (float*)(tile_keys + TILE);
    int* start = (int*)(tile_vals + TILE);     // per bucket: count, first slot, then past last
    int* spill_from = start + buckets;         // per bucket: count, then first slot that spills
    __shared__ int warp_totals[THREADS / 32];
    const i64 tiles = (n + TILE - 1) / TILE;
    u32 key[ITEMS];
    float val[ITEMS];
    if (blockIdx.x < tiles) {
        load_tile<THREADS, ITEMS>(inds, vals, (i64)blockIdx.x * TILE, n, bins, key, val);
    }
    for (i64 tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        for (int b = threadIdx.x; b < buckets; b += THREADS) start[b] = 0;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            key[k] = key[k] < bins ? bucket_key(key[k], bucket_bins) : NO_KEY;
            if (key[k] != NO_KEY) atomicAdd(&start[key[k] >> 16], 1);
        }
        __syncthreads();
        for (int b = threadIdx.x; b < buckets; b += THREADS) {
            const int count = start[b];
            spill_from[b] = count;
            dest[b] = count ? (i64)atomicAdd(&fill[b], (u64)count) : 0;  // first slot in room
        }
        const int kept = scan_runs<int, THREADS>(start, buckets, warp_totals);
        for (int b = threadIdx.x; b < buckets; b += THREADS) {  // the same b as above
            const i64 claimed = dest[b];
            const i64 fits = min((i64)spill_from[b], max((i64)0, room[b] - claimed));
            spill_from[b] = start[b] + (int)fits;
            dest[b] = region[b] + claimed - start[b];
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            if (key[k] != NO_KEY) {
                const int slot = atomicAdd(&start[key[k] >> 16], 1);
                tile_keys[slot] = key[k];
                tile_vals[slot] = val[k];
            }
        }
        __syncthreads();
        const i64 next = tile + gridDim.x;
        if (next < tiles) load_tile<THREADS, ITEMS>(inds, vals, next * TILE, n, bins, key, val);
        for (int first = 0; first < kept; first += THREADS) {  // uniform: whole warps
            const int j = first + threadIdx.x;
            const bool here = j < kept;
            const u32 k = here ? tile_keys[j] : NO_KEY;
            const float v = here ? tile_vals[j] : 0.0f;
            const u32 bucket = k >> 16;
            const bool spill = here && j >= spill_from[bucket];
            if (here && !spill) {
                const i64 to = dest[bucket] + j;
                rec_offsets[to] = (u16)(k & 0xffffu);
                rec_vals[to] = v;
            }
            const u32 spilling = __ballot_sync(loclab::FULL_WARP, spill);
            if (spilling) {
                const int leader = __ffs(spilling) - 1, lane = threadIdx.x & 31;
                i64 base = 0;
                if (lane == leader) {
                    base = (i64)atomicAdd((u64*)&spill_range[1], (u64)__popc(spilling));
                }
                base = __shfl_sync(loclab::FULL_WARP, base, leader);
                if (spill) {
                    const i64 to = base + __popc(spilling & ((1u << lane) - 1u));
                    spill_inds[to] = bucket * bucket_bins + (k & 0xffffu);
                    spill_vals[to] = v;
                }
            }
        }
        __syncthreads();
    }
}

// Adds the RECORD_GROUP records of one group (offsets packed two to a word) that lie below
// `count`.
__device__ __forceinline__ void add_group(float* sub, const uint2& offsets, const float4& values,
                                          i64 at, i64 count) {
    const u32 pairs[2] = {offsets.x, offsets.y};
    const float value[RECORD_GROUP] = {values.x, values.y, values.z, values.w};
#pragma unroll
    for (int e = 0; e < RECORD_GROUP; ++e) {
        const u32 offset = (pairs[e / 2] >> (16 * (e % 2))) & 0xffffu;
        if (at + e < count) atomicAdd(&sub[offset], value[e]);
    }
}

// Step 4 of 4: one block per bucket sums the records in the bucket's room into a shared-memory
// histogram of its bins and writes them: each bin of hist is written once, by the block that
// owns it, and no update is a global atomic. A thread loads a group of records at a time (8
// bytes of offsets, 16 of values: each load instruction of a warp reads contiguous bytes),
// GROUPS groups in flight. Dynamic shared memory: bucket_bins floats.
template <int THREADS, int GROUPS>
__global__ void __launch_bounds__(THREADS)
bucket_sum(const u16* __restrict__ rec_offsets, const float* __restrict__ rec_vals,
           const i64* __restrict__ room, const i64* __restrict__ region,
           const u64* __restrict__ fill, int buckets, u32 bins, u32 bucket_bins,
           float* __restrict__ hist) {
    extern __shared__ float sub[];
    for (int bucket = blockIdx.x; bucket < buckets; bucket += gridDim.x) {
        const u32 lo = (u32)bucket * bucket_bins, width = min(bucket_bins, bins - lo);
        for (u32 b = threadIdx.x; b < width; b += THREADS) sub[b] = 0.0f;
        __syncthreads();
        const i64 count = min((i64)fill[bucket], room[bucket]);
        const i64 groups = (count + RECORD_GROUP - 1) / RECORD_GROUP;
        const uint2* offsets = (const uint2*)(rec_offsets + region[bucket]);
        const float4* values = (const float4*)(rec_vals + region[bucket]);
        for (i64 first = threadIdx.x; first < groups; first += (i64)THREADS * GROUPS) {
            uint2 pairs[GROUPS];
            float4 four[GROUPS];
#pragma unroll
            for (int u = 0; u < GROUPS; ++u) {
                const i64 g = first + (i64)u * THREADS;
                pairs[u] = g < groups ? offsets[g] : make_uint2(0, 0);
                four[u] = g < groups ? values[g] : make_float4(0, 0, 0, 0);
            }
#pragma unroll
            for (int u = 0; u < GROUPS; ++u) {
                add_group(sub, pairs[u], four[u], (first + (i64)u * THREADS) * RECORD_GROUP,
                          count);
            }
        }
        __syncthreads();
        for (u32 b = threadIdx.x; b < width; b += THREADS) hist[lo + b] = sub[b];
        __syncthreads();
    }
}
