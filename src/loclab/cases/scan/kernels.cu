// Prefix sums, from the lecture's Hillis-Steele to a single-pass scan at copy speed.
// Compiled through NVRTC (no host headers); templates are instantiated by name expression.
// T: float or int; EXCLUSIVE: out[i] = in[0] + ... + in[i-1] (else up to in[i]).
#include "../../gpu/block_scan.cuh"

using loclab::block_exclusive_scan;
using loclab::load_items;
using loclab::scan_chunk_sums;
using loclab::store_items;

// ---- Multi-level scans: scan each block, scan the block sums (recursively), add them --------

// The lecture's scan: one element per thread, log2(BLOCK) steps in which every thread adds the
// element `offset` places back (O(n log n) additions), double-buffered in shared memory so
// that no step reads what it overwrites. Writes the block's scan and its total.
template <class T, bool EXCLUSIVE, int BLOCK>
__global__ void __launch_bounds__(BLOCK)
scan_hillis_steele(const T* __restrict__ in, T* __restrict__ out, T* __restrict__ block_sums,
                   long long n) {
    __shared__ T buffer[2][BLOCK];
    const long long i = (long long)blockIdx.x * BLOCK + threadIdx.x;
    buffer[0][threadIdx.x] = i < n ? in[i] : T(0);
    __syncthreads();
    int current = 0;
    for (int offset = 1; offset < BLOCK; offset *= 2) {
        T value = buffer[current][threadIdx.x];
        if (threadIdx.x >= offset) value += buffer[current][threadIdx.x - offset];
        buffer[1 - current][threadIdx.x] = value;
        current = 1 - current;
        __syncthreads();
    }
    if (i < n) {
        out[i] = !EXCLUSIVE ? buffer[current][threadIdx.x]
                            : threadIdx.x ? buffer[current][threadIdx.x - 1] : T(0);
    }
    if (threadIdx.x == BLOCK - 1) block_sums[blockIdx.x] = buffer[current][BLOCK - 1];
}

// Blelloch's work-efficient scan of 2 x BLOCK elements (O(n) additions): an up-sweep builds a
// tree of partial sums in place, the root is cleared, a down-sweep turns the tree into the
// exclusive scan. Element j lives at j + j/32 in shared memory: the padding moves the strided
// tree accesses of neighbouring threads onto different banks (GPU Gems 3, ch. 39).
#define CONFLICT_FREE(j) ((j) + ((j) >> 5))
template <class T, bool EXCLUSIVE, int BLOCK>
__global__ void __launch_bounds__(BLOCK)
scan_blelloch(const T* __restrict__ in, T* __restrict__ out, T* __restrict__ block_sums,
              long long n) {
    constexpr int ELEMENTS = 2 * BLOCK;
    __shared__ T tree[CONFLICT_FREE(ELEMENTS - 1) + 1];
    const long long base = (long long)blockIdx.x * ELEMENTS;
    const int a = threadIdx.x, b = threadIdx.x + BLOCK;  // coalesced: two block-wide rows
    const T x_a = base + a < n ? in[base + a] : T(0);
    const T x_b = base + b < n ? in[base + b] : T(0);
    tree[CONFLICT_FREE(a)] = x_a;
    tree[CONFLICT_FREE(b)] = x_b;
    int offset = 1;
    for (int active = BLOCK; active > 0; active >>= 1, offset <<= 1) {  // up-sweep
        __syncthreads();
        if (threadIdx.x < active) {
            const int left = offset * (2 * threadIdx.x + 1) - 1, right = left + offset;
            tree[CONFLICT_FREE(right)] += tree[CONFLICT_FREE(left)];
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        block_sums[blockIdx.x] = tree[CONFLICT_FREE(ELEMENTS - 1)];
        tree[CONFLICT_FREE(ELEMENTS - 1)] = T(0);
    }
    for (int active = 1; active < ELEMENTS; active <<= 1) {  // down-sweep
        offset >>= 1;
        __syncthreads();
        if (threadIdx.x < active) {
            const int left = offset * (2 * threadIdx.x + 1) - 1, right = left + offset;
            const T saved = tree[CONFLICT_FREE(left)];
            tree[CONFLICT_FREE(left)] = tree[CONFLICT_FREE(right)];
            tree[CONFLICT_FREE(right)] += saved;
        }
    }
    __syncthreads();
    if (base + a < n) out[base + a] = tree[CONFLICT_FREE(a)] + (EXCLUSIVE ? T(0) : x_a);
    if (base + b < n) out[base + b] = tree[CONFLICT_FREE(b)] + (EXCLUSIVE ? T(0) : x_b);
}

// Block b (> 0) of a level adds the inclusive scan of the block sums up to block b - 1.
// Launched with one block fewer than the level has (block 0 has nothing to add).
template <class T>
__global__ void add_block_offsets(T* __restrict__ out, const T* __restrict__ scanned_sums,
                                  long long n, int per_block) {
    const long long block = blockIdx.x + 1;
    const T offset = scanned_sums[block - 1];
    for (int j = threadIdx.x; j < per_block; j += blockDim.x) {
        const long long i = block * per_block + j;
        if (i < n) out[i] += offset;
    }
}

// ---- Reduce, then scan: three passes over contiguous chunks -----------------------------------

// A thread's ITEMS elements become their inclusive sums, in registers.
template <class T, int ITEMS>
__device__ __forceinline__ void scan_in_thread(T (&items)[ITEMS]) {
#pragma unroll
    for (int i = 1; i < ITEMS; ++i) items[i] += items[i - 1];
}

// The thread's inclusive sums become the scan's outputs, given the sum of everything before
// the thread's first element.
template <class T, bool EXCLUSIVE, int ITEMS>
__device__ __forceinline__ void add_offset(T (&items)[ITEMS], T offset) {
    if (EXCLUSIVE) {
#pragma unroll
        for (int i = ITEMS - 1; i > 0; --i) items[i] = offset + items[i - 1];
        items[0] = offset;
    } else {
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) items[i] += offset;
    }
}

// Pass 1: block b sums chunk b, [b * chunk, (b + 1) * chunk) (chunk a multiple of the tile).
template <class T, int BLOCK, int ITEMS>
__global__ void __launch_bounds__(BLOCK)
reduce_chunks(const T* __restrict__ in, T* __restrict__ chunk_sums, long long n, long long chunk) {
    __shared__ T warp_totals[BLOCK / 32];
    const long long begin = blockIdx.x * chunk, end = min(begin + chunk, n);
    T sum = T(0);
    for (long long tile = begin; tile < end; tile += BLOCK * ITEMS) {
        T items[ITEMS];
        load_items<T, ITEMS>(in, tile + (long long)threadIdx.x * ITEMS, end, items, T(0));
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) sum += items[i];
    }
    T aggregate;
    block_exclusive_scan<T, BLOCK>(sum, aggregate, warp_totals);
    if (threadIdx.x == 0) chunk_sums[blockIdx.x] = aggregate;
}

// Pass 2: scan_chunk_sums (block_scan.cuh).

// Pass 3: block b scans chunk b tile by tile, starting from its chunk's prefix.
template <class T, bool EXCLUSIVE, int BLOCK, int ITEMS>
__global__ void __launch_bounds__(BLOCK)
scan_chunks(const T* __restrict__ in, T* __restrict__ out, const T* __restrict__ chunk_prefixes,
            long long n, long long chunk) {
    __shared__ T warp_totals[BLOCK / 32];
    const long long begin = blockIdx.x * chunk, end = min(begin + chunk, n);
    T carry = chunk_prefixes[blockIdx.x];
    for (long long tile = begin; tile < end; tile += BLOCK * ITEMS) {
        const long long first = tile + (long long)threadIdx.x * ITEMS;
        T items[ITEMS];
        load_items<T, ITEMS>(in, first, end, items, T(0));
        scan_in_thread(items);
        T aggregate;
        add_offset<T, EXCLUSIVE>(items, carry + block_exclusive_scan<T, BLOCK>(
                                            items[ITEMS - 1], aggregate, warp_totals));
        carry += aggregate;
        store_items<T, ITEMS>(out, first, end, items);
        __syncthreads();  // the next tile's scan rewrites warp_totals
    }
}

// ---- Single pass: decoupled look-back -----------------------------------------------------------

// A warp's part of a tile is V chunks of 128 consecutive elements; lane l holds elements
// 4l..4l+3 of each (one 16-byte load: every load instruction of the warp reads 512 contiguous
// bytes). Elements past n read as 0 and are not stored.
template <class T, int V>
__device__ __forceinline__ void load_chunks(const T* __restrict__ in, long long warp_first,
                                            long long n, T (&x)[V][4]) {
    using Vec = typename loclab::Vector4<T>::type;
#pragma unroll
    for (int k = 0; k < V; ++k) {
        const long long first = warp_first + k * 128 + 4 * (threadIdx.x & 31);
        if (first + 4 <= n) {
            const Vec v = *reinterpret_cast<const Vec*>(in + first);
            x[k][0] = v.x; x[k][1] = v.y; x[k][2] = v.z; x[k][3] = v.w;
        } else {
#pragma unroll
            for (int j = 0; j < 4; ++j) x[k][j] = first + j < n ? in[first + j] : T(0);
        }
    }
}

template <class T, int V>
__device__ __forceinline__ void store_chunks(T* __restrict__ out, long long warp_first,
                                             long long n, const T (&x)[V][4]) {
    using Vec = typename loclab::Vector4<T>::type;
#pragma unroll
    for (int k = 0; k < V; ++k) {
        const long long first = warp_first + k * 128 + 4 * (threadIdx.x & 31);
        if (first + 4 <= n) {
            *reinterpret_cast<Vec*>(out + first) = Vec{x[k][0], x[k][1], x[k][2], x[k][3]};
        } else {
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                if (first + j < n) out[first + j] = x[k][j];
            }
        }
    }
}

// Single pass with decoupled look-back: a block a tile of BLOCK x 4V elements, tiles numbered
// by an atomic counter in the order blocks start (loclab::look_back: no forward-progress
// hazard). Within a tile each thread scans its 4-element chunks, each warp scans its chunks'
// totals (shuffles, a running sum over its V chunks), the first warp scans the warp totals and
// looks back for the tile's prefix, waiting DELAY_NS before each read of the states.
// Measured on an H100 at 2**28 floats (128 threads, V = 8): 84% of copy with 700 ns, 75% with
// no wait; blocks made persistent, loading their next tile during the look-back, 49% (4
// blocks of 256 an SM by registers, against a fresh block for every finished tile here).
// `states` holds the tile counter, then one state per tile, all zero at launch.
template <class T, bool EXCLUSIVE, int BLOCK, int V, int DELAY_NS>
__global__ void __launch_bounds__(BLOCK)
scan_lookback(const T* __restrict__ in, T* __restrict__ out, long long n,
              unsigned long long* __restrict__ states) {
    constexpr int WARPS = BLOCK / 32;
    __shared__ T warp_totals[WARPS];
    __shared__ T tile_prefix;
    __shared__ long long tile_id;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const long long tile = loclab::next_tile(states, &tile_id);
    const long long warp_first = tile * BLOCK * 4 * V + warp * 128 * V;
    T x[V][4];
    load_chunks<T, V>(in, warp_first, n, x);
    T before[V];  // the warp's elements before each of this lane's chunks
    T warp_sum = T(0);
#pragma unroll
    for (int k = 0; k < V; ++k) {
#pragma unroll
        for (int j = 1; j < 4; ++j) x[k][j] += x[k][j - 1];
        const T inclusive = loclab::warp_inclusive_scan(x[k][3]);
        const T exclusive = __shfl_up_sync(loclab::FULL_WARP, inclusive, 1);
        before[k] = warp_sum + (lane ? exclusive : T(0));
        warp_sum += __shfl_sync(loclab::FULL_WARP, inclusive, 31);
    }
    if (lane == 0) warp_totals[warp] = warp_sum;
    __syncthreads();
    if (warp == 0) {
        const T total = lane < WARPS ? warp_totals[lane] : T(0);
        const T scanned = loclab::warp_inclusive_scan(total);
        if (lane < WARPS) warp_totals[lane] = scanned;
    }
    __syncthreads();
    const T tile_offset = loclab::tile_exclusive_prefix<T, DELAY_NS>(
        states + 1, tile, warp_totals[WARPS - 1], &tile_prefix);
    const T offset = tile_offset + (warp ? warp_totals[warp - 1] : T(0));
#pragma unroll
    for (int k = 0; k < V; ++k) {
        const T start = offset + before[k];
        if (EXCLUSIVE) {
#pragma unroll
            for (int j = 3; j > 0; --j) x[k][j] = start + x[k][j - 1];
            x[k][0] = start;
        } else {
#pragma unroll
            for (int j = 0; j < 4; ++j) x[k][j] += start;
        }
    }
    store_chunks<T, V>(out, warp_first, n, x);
}
