// Histogram kernels: hist[inds[i]] += vals[i] for every i with lo <= inds[i] < hi.
// Compiled through NVRTC (no host headers): templates are instantiated by name expression.
// Every kernel walks its input with a grid-stride loop, so any n works with any grid.

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


// gpu-sorted: the input grouped into buckets of bins small enough for one block's shared
// memory, then one block per bucket. Three kernels: count per bucket, scatter, histogram.

// Exclusive prefix sum of counts[0, len) in shared memory, in place; returns the total. Each
// thread scans a contiguous run of entries; warps combine their runs with shuffles.
// warp_sums holds THREADS / 32 + 1 ints. Every thread of the block must call it.
template <int THREADS>
__device__ int block_exclusive_scan(int* counts, int len, int* warp_sums) {
    const int per = (len + THREADS - 1) / THREADS;
    const int first = min((int)threadIdx.x * per, len), last = min(first + per, len);
    int own = 0;
    for (int b = first; b < last; ++b) own += counts[b];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int inclusive = own;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        const int up = __shfl_up_sync(0xffffffffu, inclusive, d);
        if (lane >= d) inclusive += up;
    }
    if (lane == 31) warp_sums[warp] = inclusive;
    __syncthreads();
    if (warp == 0) {
        const int mine = lane < THREADS / 32 ? warp_sums[lane] : 0;
        int before = mine;
#pragma unroll
        for (int d = 1; d < 32; d <<= 1) {
            const int up = __shfl_up_sync(0xffffffffu, before, d);
            if (lane >= d) before += up;
        }
        if (lane < THREADS / 32) warp_sums[lane] = before - mine;
        if (lane == 31) warp_sums[THREADS / 32] = before;
    }
    __syncthreads();
    int running = warp_sums[warp] + inclusive - own;
    for (int b = first; b < last; ++b) {
        const int count = counts[b];
        counts[b] = running;
        running += count;
    }
    const int total = warp_sums[THREADS / 32];
    __syncthreads();
    return total;
}

// gpu-sorted, step 1 of 3: elements per bucket (bucket = index / bucket_bins), tallied in
// shared memory per block, then added into totals (zeroed by the host).
template <int THREADS, int ITEMS>
__global__ void __launch_bounds__(THREADS)
bucket_count(const u32* __restrict__ inds, i64 n, u32 bins, u32 bucket_bins, int buckets,
             unsigned long long* __restrict__ totals) {
    extern __shared__ int tally[];
    for (int b = threadIdx.x; b < buckets; b += THREADS) tally[b] = 0;
    __syncthreads();
    const i64 step = (i64)gridDim.x * THREADS * ITEMS;
    for (i64 base = (i64)blockIdx.x * THREADS * ITEMS + threadIdx.x; base < n; base += step) {
        u32 ind[ITEMS];
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const i64 i = base + (i64)k * THREADS;
            ind[k] = i < n ? inds[i] : bins;
        }
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            if (ind[k] < bins) atomicAdd(&tally[ind[k] / bucket_bins], 1);
        }
    }
    __syncthreads();
    for (int b = threadIdx.x; b < buckets; b += THREADS) {
        if (tally[b]) atomicAdd(&totals[b], (unsigned long long)tally[b]);
    }
}

// gpu-sorted, step 2 of 3 (after a scan of the totals into cursor): each tile of
// THREADS * ITEMS elements is sorted by bucket in shared memory (a counting sort), takes a
// range of each bucket's output with one global atomic per bucket, and writes its buckets out
// as contiguous runs, so that consecutive lanes store to consecutive addresses.
// Dynamic shared memory: THREADS * ITEMS * 8 + buckets * 12 bytes.
template <int THREADS, int ITEMS>
__global__ void __launch_bounds__(THREADS)
bucket_scatter(const u32* __restrict__ inds, const float* __restrict__ vals, i64 n, u32 bins,
               u32 bucket_bins, int buckets, unsigned long long* __restrict__ cursor,
               u32* __restrict__ sorted_inds, float* __restrict__ sorted_vals) {
    constexpr int TILE = THREADS * ITEMS;
    extern __shared__ unsigned long long pool[];
    i64* to_tile = (i64*)pool;                       // per bucket: output position - tile position
    u32* tile_inds = (u32*)(to_tile + buckets);
    float* tile_vals = (float*)(tile_inds + TILE);
    int* start = (int*)(tile_vals + TILE);           // per bucket: count, then first tile position
    __shared__ int warp_sums[THREADS / 32 + 1];
    const i64 tiles = (n + TILE - 1) / TILE;
    for (i64 tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        for (int b = threadIdx.x; b < buckets; b += THREADS) start[b] = 0;
        __syncthreads();
        u32 ind[ITEMS];
        float val[ITEMS];
        int rank[ITEMS];
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const i64 i = tile * TILE + k * THREADS + threadIdx.x;
            ind[k] = i < n ? inds[i] : bins;
        }
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const i64 i = tile * TILE + k * THREADS + threadIdx.x;
            val[k] = ind[k] < bins ? vals[i] : 0.0f;
        }
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            if (ind[k] < bins) rank[k] = atomicAdd(&start[ind[k] / bucket_bins], 1);
        }
        __syncthreads();
        for (int b = threadIdx.x; b < buckets; b += THREADS) {
            if (start[b]) to_tile[b] = (i64)atomicAdd(&cursor[b], (unsigned long long)start[b]);
        }
        const int kept = block_exclusive_scan<THREADS>(start, buckets, warp_sums);
        for (int b = threadIdx.x; b < buckets; b += THREADS) to_tile[b] -= start[b];
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            if (ind[k] < bins) {
                const int j = start[ind[k] / bucket_bins] + rank[k];
                tile_inds[j] = ind[k];
                tile_vals[j] = val[k];
            }
        }
        __syncthreads();
        for (int j = threadIdx.x; j < kept; j += THREADS) {
            const u32 key = tile_inds[j];
            const i64 to = to_tile[key / bucket_bins] + j;
            sorted_inds[to] = key;
            sorted_vals[to] = tile_vals[j];
        }
        __syncthreads();
    }
}

// gpu-sorted, step 3 of 3: one block per bucket sums the bucket's elements,
// [offsets[bucket], offsets[bucket + 1]), into a shared-memory histogram of its bucket_bins
// bins and writes them out: each bin of hist is written by exactly one block, no global
// atomics. Dynamic shared memory: bucket_bins * 4 bytes.
template <int THREADS, int ITEMS>
__global__ void __launch_bounds__(THREADS)
bucket_histogram(const u32* __restrict__ sorted_inds, const float* __restrict__ sorted_vals,
                 const unsigned long long* __restrict__ offsets, int buckets, u32 bins,
                 u32 bucket_bins, float* __restrict__ hist) {
    extern __shared__ float sub[];
    for (int bucket = blockIdx.x; bucket < buckets; bucket += gridDim.x) {
        const u32 lo = (u32)bucket * bucket_bins, width = min(bucket_bins, bins - lo);
        for (u32 b = threadIdx.x; b < width; b += THREADS) sub[b] = 0.0f;
        __syncthreads();
        const i64 first = (i64)offsets[bucket], last = (i64)offsets[bucket + 1];
        for (i64 base = first + threadIdx.x; base < last; base += (i64)THREADS * ITEMS) {
            u32 ind[ITEMS];
            float val[ITEMS];
#pragma unroll
            for (int k = 0; k < ITEMS; ++k) {
                const i64 i = base + (i64)k * THREADS;
                ind[k] = i < last ? sorted_inds[i] : lo;
                val[k] = i < last ? sorted_vals[i] : 0.0f;
            }
#pragma unroll
            for (int k = 0; k < ITEMS; ++k) atomicAdd(&sub[ind[k] - lo], val[k]);
        }
        __syncthreads();
        for (u32 b = threadIdx.x; b < width; b += THREADS) hist[lo + b] = sub[b];
        __syncthreads();
    }
}
