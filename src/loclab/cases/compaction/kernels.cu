// Stream compaction: out = the values whose flag is set, in input order, and their count.
// Compiled through NVRTC (no host headers); templates are instantiated by name expression.
// Where an element goes is the exclusive scan of the flags before it; both kernels count a
// tile's kept elements, scan the counts, gather the kept values of the tile in shared memory
// in order and write them out as one contiguous, coalesced run.
#include "../../gpu/block_scan.cuh"

using loclab::block_exclusive_scan;
using loclab::scan_chunk_sums;

constexpr int LOOKBACK_DELAY_NS = 700;  // before each read of predecessors' states (block_scan.cuh)

// A thread's ITEMS flags (one byte each, ITEMS a multiple of 16: 16-byte loads where whole).
template <int ITEMS>
__device__ __forceinline__ void load_flags(const unsigned char* __restrict__ flags, long long first,
                                           long long n, unsigned char (&kept)[ITEMS]) {
    if (first + ITEMS <= n) {
        const uint4* vectors = reinterpret_cast<const uint4*>(flags + first);
#pragma unroll
        for (int v = 0; v < ITEMS / 16; ++v) {
            const uint4 x = vectors[v];
            const unsigned words[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
            for (int b = 0; b < 16; ++b) kept[16 * v + b] = (words[b / 4] >> (8 * (b % 4))) & 0xff;
        }
    } else {
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) kept[i] = first + i < n ? flags[first + i] : 0;
    }
}

template <int ITEMS>
__device__ __forceinline__ int count_kept(const unsigned char (&kept)[ITEMS]) {
    int count = 0;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) count += kept[i] != 0;
    return count;
}

// The tile's kept values, gathered in order in `gathered` (thread t's from `before_thread`,
// the kept elements of the threads before it), then written to out[offset ...] by the whole
// block: consecutive threads write consecutive elements.
template <int BLOCK, int ITEMS>
__device__ __forceinline__ void write_kept(const float (&values)[ITEMS],
                                           const unsigned char (&kept)[ITEMS], int before_thread,
                                           int tile_kept, long long offset, float* gathered,
                                           float* __restrict__ out) {
    int slot = before_thread;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        if (kept[i]) gathered[slot++] = values[i];
    }
    __syncthreads();
    for (int j = threadIdx.x; j < tile_kept; j += BLOCK) out[offset + j] = gathered[j];
}

// Single pass: tiles in launch order (loclab::next_tile), the count of kept elements before a
// tile from the decoupled look-back. Values come in through the warp-striped staging area,
// which then holds the tile's gathered values. The last tile writes the total count.
template <int BLOCK, int ITEMS>
__global__ void __launch_bounds__(BLOCK)
compact_lookback(const float* __restrict__ values, const unsigned char* __restrict__ flags,
                 float* __restrict__ out, long long* __restrict__ count, long long n,
                 long long tiles, unsigned long long* __restrict__ states) {
    static_assert(ITEMS % 16 == 0, "16 flags a vector");
    __shared__ int warp_totals[BLOCK / 32];
    __shared__ int tile_prefix;
    __shared__ long long tile_id;
    __shared__ float staging[BLOCK / 32 * LOCLAB_STRIPED_REGION(ITEMS)];
    const long long tile = loclab::next_tile(states, &tile_id);
    const long long tile_first = tile * BLOCK * ITEMS;
    const int warp = threadIdx.x / 32;
    float items[ITEMS];
    loclab::load_items_striped<float, ITEMS>(values, tile_first + warp * 32 * ITEMS, n, items,
                                             0.0f, staging + warp * LOCLAB_STRIPED_REGION(ITEMS));
    unsigned char kept[ITEMS];
    load_flags<ITEMS>(flags, tile_first + (long long)threadIdx.x * ITEMS, n, kept);
    int tile_kept;
    const int before_thread = block_exclusive_scan<int, BLOCK>(count_kept(kept), tile_kept,
                                                               warp_totals);
    const int before_tile = loclab::tile_exclusive_prefix<int, LOOKBACK_DELAY_NS>(
        states + 1, tile, tile_kept, &tile_prefix);
    write_kept<BLOCK, ITEMS>(items, kept, before_thread, tile_kept, before_tile, staging, out);
    if (tile == tiles - 1 && threadIdx.x == 0) *count = (long long)before_tile + tile_kept;
}

// Three passes, pass 1: block b counts the kept elements of chunk b (whole tiles).
template <int BLOCK, int ITEMS>
__global__ void __launch_bounds__(BLOCK)
count_chunks(const unsigned char* __restrict__ flags, int* __restrict__ chunk_counts, long long n,
             long long chunk) {
    __shared__ int warp_totals[BLOCK / 32];
    const long long begin = blockIdx.x * chunk, end = min(begin + chunk, n);
    int count = 0;
    for (long long tile = begin; tile < end; tile += BLOCK * ITEMS) {
        unsigned char kept[ITEMS];
        load_flags<ITEMS>(flags, tile + (long long)threadIdx.x * ITEMS, end, kept);
        count += count_kept(kept);
    }
    int total;
    block_exclusive_scan<int, BLOCK>(count, total, warp_totals);
    if (threadIdx.x == 0) chunk_counts[blockIdx.x] = total;
}

// Pass 2 is scan_chunk_sums<int> (block_scan.cuh). Pass 3: block b compacts chunk b tile by
// tile from its chunk's prefix; the last chunk's block writes the total count.
template <int BLOCK, int ITEMS>
__global__ void __launch_bounds__(BLOCK)
compact_chunks(const float* __restrict__ values, const unsigned char* __restrict__ flags,
               float* __restrict__ out, long long* __restrict__ count,
               const int* __restrict__ chunk_prefixes, long long n, long long chunk) {
    __shared__ int warp_totals[BLOCK / 32];
    __shared__ float gathered[BLOCK * ITEMS];
    const long long begin = blockIdx.x * chunk, end = min(begin + chunk, n);
    long long offset = chunk_prefixes[blockIdx.x];
    for (long long tile = begin; tile < end; tile += BLOCK * ITEMS) {
        const long long first = tile + (long long)threadIdx.x * ITEMS;
        float items[ITEMS];
        loclab::load_items<float, ITEMS>(values, first, end, items, 0.0f);
        unsigned char kept[ITEMS];
        load_flags<ITEMS>(flags, first, end, kept);
        int tile_kept;
        const int before_thread = block_exclusive_scan<int, BLOCK>(count_kept(kept), tile_kept,
                                                                   warp_totals);
        write_kept<BLOCK, ITEMS>(items, kept, before_thread, tile_kept, offset, gathered, out);
        offset += tile_kept;
        __syncthreads();  // the next tile rewrites warp_totals and gathered
    }
    if (blockIdx.x == gridDim.x - 1 && threadIdx.x == 0) *count = offset;
}
