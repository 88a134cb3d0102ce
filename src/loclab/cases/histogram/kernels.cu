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

