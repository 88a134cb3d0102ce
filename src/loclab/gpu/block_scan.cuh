// Block-wide scans and the decoupled look-back of a single-pass scan (Merrill & Garland,
// "Single-pass Parallel Prefix Scan with Decoupled Look-back", 2016), shared by the scan-family
// cases' kernels. A case's kernels.cu includes it by a relative quoted path; loclab.gpu.kernels
// inlines such includes before NVRTC (and CuPy's binary cache) see the source, so an edit here
// recompiles every kernel that uses it. T is a 4-byte type (float, int, unsigned).
#ifndef LOCLAB_BLOCK_SCAN_CUH
#define LOCLAB_BLOCK_SCAN_CUH

namespace loclab {

constexpr unsigned FULL_WARP = 0xffffffffu;

template <class T> struct Vector4;
template <> struct Vector4<float> { using type = float4; };
template <> struct Vector4<int> { using type = int4; };
template <> struct Vector4<unsigned> { using type = uint4; };

// Inclusive scan of one value per lane (Hillis-Steele across the lanes, in registers).
template <class T>
__device__ __forceinline__ T warp_inclusive_scan(T value) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int offset = 1; offset < 32; offset *= 2) {
        const T up = __shfl_up_sync(FULL_WARP, value, offset);
        if (lane >= offset) value += up;
    }
    return value;
}

// The sum of `value` over each aligned group of G lanes (G a power of two, at most 32): a
// butterfly, so every lane of the group ends with the group's sum. All 32 lanes must call it.
template <int G, class T>
__device__ __forceinline__ T group_sum(T value) {
#pragma unroll
    for (int offset = G / 2; offset > 0; offset /= 2) {
        value += __shfl_xor_sync(FULL_WARP, value, offset, G);
    }
    return value;
}

// The sum of one value per lane, in every lane.
template <class T>
__device__ __forceinline__ T warp_sum(T value) {
    return group_sum<32>(value);
}

// Exclusive scan of one value per thread over a block of BLOCK threads (a multiple of 32, at
// most 1024): each warp scans in registers, the first warp scans the warp totals.
// `aggregate` receives the block's total in every thread. `warp_totals` is BLOCK/32 elements of
// shared memory; a caller that scans again must __syncthreads() first (threads may still be
// reading the totals of this scan).
template <class T, int BLOCK>
__device__ __forceinline__ T block_exclusive_scan(T value, T& aggregate, T* warp_totals) {
    static_assert(BLOCK % 32 == 0 && BLOCK <= 1024, "BLOCK: whole warps, at most 1024 threads");
    constexpr int WARPS = BLOCK / 32;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const T inclusive = warp_inclusive_scan(value);
    T exclusive = __shfl_up_sync(FULL_WARP, inclusive, 1);
    if (lane == 0) exclusive = T(0);
    if (lane == 31) warp_totals[warp] = inclusive;
    __syncthreads();
    if (warp == 0) {
        const T total = lane < WARPS ? warp_totals[lane] : T(0);
        const T scanned = warp_inclusive_scan(total);
        if (lane < WARPS) warp_totals[lane] = scanned;  // inclusive over the warps
    }
    __syncthreads();
    aggregate = warp_totals[WARPS - 1];
    return warp == 0 ? exclusive : warp_totals[warp - 1] + exclusive;
}

// ITEMS consecutive elements from `first` on (first a multiple of 4): 16-byte loads where the
// whole run lies inside n, element loads (missing ones = `fill`) at the end of the array.
template <class T, int ITEMS>
__device__ __forceinline__ void load_items(const T* __restrict__ in, long long first, long long n,
                                           T (&items)[ITEMS], T fill) {
    if (ITEMS % 4 == 0 && first + ITEMS <= n) {
        using V = typename Vector4<T>::type;
        const V* vectors = reinterpret_cast<const V*>(in + first);
#pragma unroll
        for (int v = 0; v < ITEMS / 4; ++v) {
            const V x = vectors[v];
            items[4 * v] = x.x; items[4 * v + 1] = x.y;
            items[4 * v + 2] = x.z; items[4 * v + 3] = x.w;
        }
    } else {
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) items[i] = first + i < n ? in[first + i] : fill;
    }
}

// The store of load_items: ITEMS elements at `first`, those below n.
template <class T, int ITEMS>
__device__ __forceinline__ void store_items(T* __restrict__ out, long long first, long long n,
                                            const T (&items)[ITEMS]) {
    if (ITEMS % 4 == 0 && first + ITEMS <= n) {
        using V = typename Vector4<T>::type;
        V* vectors = reinterpret_cast<V*>(out + first);
#pragma unroll
        for (int v = 0; v < ITEMS / 4; ++v) {
            vectors[v] = V{items[4 * v], items[4 * v + 1], items[4 * v + 2], items[4 * v + 3]};
        }
    } else {
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) {
            if (first + i < n) out[first + i] = items[i];
        }
    }
}

// The middle pass of a three-pass (reduce-then-scan) algorithm: one block turns the sums of
// at most BLOCK chunks into their exclusive prefixes, in place.
template <class T, int BLOCK>
__global__ void __launch_bounds__(BLOCK)
scan_chunk_sums(T* __restrict__ chunk_sums, int chunks) {
    __shared__ T warp_totals[BLOCK / 32];
    const T sum = threadIdx.x < chunks ? chunk_sums[threadIdx.x] : T(0);
    T aggregate;
    const T prefix = block_exclusive_scan<T, BLOCK>(sum, aggregate, warp_totals);
    if (threadIdx.x < chunks) chunk_sums[threadIdx.x] = prefix;
}

// ---- Warp-striped loads and stores, through shared memory --------------------------------------
// The blocked loads above make each of a warp's load instructions touch 32 lines 16 bytes at a
// time (L1 serves the rest). The striped ones make every instruction read 512 contiguous bytes:
// lane l loads vectors v*32 + l of the warp's 32 x ITEMS elements, parks them in the warp's
// region of shared memory, and reads its own ITEMS consecutive elements back (CUB's
// BLOCK_LOAD_WARP_TRANSPOSE). Element j of a region lives at j + j/32: one padding word per
// 32 keeps both the striped writes (stride 4) and the blocked reads (stride ITEMS) free of bank
// conflicts. A region holds STRIPED_REGION(ITEMS) elements.
#define LOCLAB_STRIPED_REGION(ITEMS) (33 * (ITEMS))

__device__ __forceinline__ int striped_slot(int j) { return j + (j >> 5); }

template <class T, int ITEMS>
__device__ __forceinline__ void load_items_striped(const T* __restrict__ in, long long warp_first,
                                                   long long n, T (&items)[ITEMS], T fill,
                                                   T* region) {
    static_assert(ITEMS % 4 == 0, "striped loads move 4-element vectors");
    const int lane = threadIdx.x & 31;
    if (warp_first + 32 * ITEMS <= n) {
        using V = typename Vector4<T>::type;
        const V* vectors = reinterpret_cast<const V*>(in + warp_first);
#pragma unroll
        for (int v = 0; v < ITEMS / 4; ++v) {
            const V x = vectors[v * 32 + lane];
            const int j = 4 * (v * 32 + lane);
            region[striped_slot(j)] = x.x; region[striped_slot(j + 1)] = x.y;
            region[striped_slot(j + 2)] = x.z; region[striped_slot(j + 3)] = x.w;
        }
    } else {
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) {
            const int j = i * 32 + lane;
            region[striped_slot(j)] = warp_first + j < n ? in[warp_first + j] : fill;
        }
    }
    __syncwarp();
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) items[i] = region[striped_slot(lane * ITEMS + i)];
    __syncwarp();  // the region may be reused at once (the store below)
}

template <class T, int ITEMS>
__device__ __forceinline__ void store_items_striped(T* __restrict__ out, long long warp_first,
                                                    long long n, const T (&items)[ITEMS],
                                                    T* region) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) region[striped_slot(lane * ITEMS + i)] = items[i];
    __syncwarp();
    if (warp_first + 32 * ITEMS <= n) {
        using V = typename Vector4<T>::type;
        V* vectors = reinterpret_cast<V*>(out + warp_first);
#pragma unroll
        for (int v = 0; v < ITEMS / 4; ++v) {
            const int j = 4 * (v * 32 + lane);
            vectors[v * 32 + lane] = V{region[striped_slot(j)], region[striped_slot(j + 1)],
                                       region[striped_slot(j + 2)], region[striped_slot(j + 3)]};
        }
    } else {
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) {
            const int j = i * 32 + lane;
            if (warp_first + j < n) out[warp_first + j] = region[striped_slot(j)];
        }
    }
    __syncwarp();
}

// ---- Decoupled look-back ----------------------------------------------------------------------
// Each tile publishes one 64-bit word: its status in the high half, a value's bits in the low
// half, so that a reader never sees a status with another state's value (one aligned 64-bit
// store, one 64-bit load). INVALID (0, what a memset leaves): nothing yet; AGGREGATE: the
// tile's own total; PREFIX: the inclusive prefix of everything up to and including the tile.
constexpr unsigned STATUS_INVALID = 0, STATUS_AGGREGATE = 1, STATUS_PREFIX = 2;

template <class T>
__device__ __forceinline__ void publish(unsigned long long* states, long long tile,
                                        unsigned status, T value) {
    static_assert(sizeof(T) == 4, "tile states hold 4-byte values");
    union { T value; unsigned bits; } cast{value};
    const unsigned long long word = (static_cast<unsigned long long>(status) << 32) | cast.bits;
    *reinterpret_cast<volatile unsigned long long*>(states + tile) = word;
}

// Waiting between reads of the predecessors' states: with hundreds of tiles polling L2 at
// once, polls compete with the tiles' own loads and stores. Like CUB (whose sm_90 float scan
// waits 1140 ns before its first read and 688 ns between reads), a tile waits DELAY_NS before
// each read, except in small grids (fewer than 500 tiles), where latency matters more.
template <int DELAY_NS>
__device__ __forceinline__ void pause_before_polling() {
    if (DELAY_NS > 0 && gridDim.x >= 500) __nanosleep(DELAY_NS);
}

// The exclusive prefix of tile `tile` (> 0), in every lane of the calling warp: the warp reads
// the 32 predecessors nearest first, waits until none is INVALID, and sums the values up to the
// nearest PREFIX; without one it adds the window's aggregates and looks 32 tiles further back.
// Tiles get their ids in launch order from an atomic counter, so every predecessor belongs to a
// block that is already running: the wait always ends (no forward-progress hazard).
template <class T, int DELAY_NS>
__device__ T look_back(const unsigned long long* states, long long tile) {
    const int lane = threadIdx.x & 31;
    T exclusive = T(0);
    for (long long window_end = tile;; window_end -= 32) {
        const long long predecessor = window_end - 1 - lane;
        unsigned long long word;
        do {
            pause_before_polling<DELAY_NS>();
            // Before tile 0: the identity, as a prefix (a window there always holds tile 0).
            word = predecessor >= 0
                ? *reinterpret_cast<const volatile unsigned long long*>(states + predecessor)
                : static_cast<unsigned long long>(STATUS_PREFIX) << 32;
        } while (__any_sync(FULL_WARP, static_cast<unsigned>(word >> 32) == STATUS_INVALID));
        union { unsigned bits; T value; } cast{static_cast<unsigned>(word)};
        const unsigned status = static_cast<unsigned>(word >> 32);
        const unsigned prefixes = __ballot_sync(FULL_WARP, status == STATUS_PREFIX);
        const int stop = prefixes ? __ffs(prefixes) - 1 : 31;  // the nearest PREFIX, inclusive
        exclusive += warp_sum(lane <= stop ? cast.value : T(0));
        if (prefixes) return exclusive;
    }
}

// The exclusive prefix of a tile whose block total is `aggregate`, in every thread of the block
// (one __syncthreads): the first warp publishes the aggregate, looks back, publishes the
// inclusive prefix. `shared_prefix` is one element of shared memory.
template <class T, int DELAY_NS>
__device__ __forceinline__ T tile_exclusive_prefix(unsigned long long* states, long long tile,
                                                   T aggregate, T* shared_prefix) {
    if (threadIdx.x < 32) {
        T prefix = T(0);
        if (tile == 0) {
            if (threadIdx.x == 0) publish(states, 0, STATUS_PREFIX, aggregate);
        } else {
            if (threadIdx.x == 0) publish(states, tile, STATUS_AGGREGATE, aggregate);
            prefix = look_back<T, DELAY_NS>(states, tile);
            if (threadIdx.x == 0) publish(states, tile, STATUS_PREFIX, prefix + aggregate);
        }
        if (threadIdx.x == 0) *shared_prefix = prefix;
    }
    __syncthreads();
    return *shared_prefix;
}

// The next tile id, in launch order (see look_back), in every thread of the block.
__device__ __forceinline__ long long next_tile(unsigned long long* counter,
                                               long long* shared_tile) {
    if (threadIdx.x == 0) *shared_tile = static_cast<long long>(atomicAdd(counter, 1ull));
    __syncthreads();
    return *shared_tile;
}

}  // namespace loclab

#endif  // LOCLAB_BLOCK_SCAN_CUH
