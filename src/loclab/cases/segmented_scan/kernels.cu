// Segmented inclusive sum: out[i] = values[h] + ... + values[i], where h <= i is the last head
// (flags[h] != 0) at or before i. float32 values, uint8 head flags, int32 segment offsets.
// Compiled through NVRTC (no host headers): templates are instantiated by name expression.
//
// The lesson's tool is the segmented operator on (head, sum) pairs,
//     (h1, s1) + (h2, s2) = (h1 | h2, h2 ? s2 : s1 + s2),
// which is associative: any scan algorithm (the lecture's tree, a warp's shuffles, a look-back
// over tiles) computes a segmented scan when it combines pairs with it instead of adding.
// A range's pair says whether the range holds a head and sums it from its last head (the whole
// range if none): exactly what a later range needs from it.

#include "../../gpu/block_scan.cuh"

typedef unsigned int u32;
typedef unsigned long long u64;
typedef long long i64;
typedef unsigned char u8;

constexpr u32 FULL_MASK = 0xffffffffu;
constexpr int WARP = 32;

struct Seg {
    int head;   // 1 if the range holds a head flag
    float sum;  // the sum from the range's last head to its end (all of it without a head)
};

// (a, b): range a followed by range b. The identity is Seg{0, 0.0f}.
__device__ __forceinline__ Seg combine(Seg a, Seg b) {
    return Seg{a.head | b.head, b.head ? b.sum : a.sum + b.sum};
}

// Inclusive scan of one pair per lane over the warp (Hillis-Steele with shuffles).
__device__ __forceinline__ Seg warp_inclusive(Seg x) {
    const int lane = threadIdx.x % WARP;
#pragma unroll
    for (int d = 1; d < WARP; d <<= 1) {
        const int head = __shfl_up_sync(FULL_MASK, x.head, d);
        const float sum = __shfl_up_sync(FULL_MASK, x.sum, d);
        if (lane >= d) x = combine(Seg{head, sum}, x);
    }
    return x;
}

using loclab::warp_sum;  // block_scan.cuh

// ---------------------------------------------------------------------------------------------
// gpu-flags-blelloch: the lecture's segmented up-sweep / down-sweep per tile in shared memory,
// the tiles' pairs scanned by the same kernel one level up (the host recurses until one tile
// is left), then a fix-up per level.

// One tile of TILE = 2 * BLOCK elements per block; thread t owns elements t and t + BLOCK
// (coalesced loads and stores). In shared memory, x holds the values, f the lecture's working
// flags (ORed upwards by the up-sweep, cleared by the down-sweep) and head the original ones.
// The up-sweep combines pairs up a binary tree; its root is the tile's pair, written to
// tile_sums / tile_heads for the next level, together with the position of the tile's first
// head (TILE if none) in first_heads for the fix-up. The down-sweep turns the tree into the
// exclusive segmented scan (0 at every head), and out = exclusive + value: each tile's scan
// as if the tile started a segment.
// Step d of either sweep has TILE / (2d) active threads; thread k works on the pair (left,
// right) = (k 2d + d - 1, k 2d + 2d - 1): at d = 1 every thread, near the root a few.
template <int BLOCK>
__global__ void __launch_bounds__(BLOCK)
segscan_blelloch(const float* __restrict__ values, const u8* __restrict__ flags,
                 float* __restrict__ out, i64 n, float* __restrict__ tile_sums,
                 u8* __restrict__ tile_heads, int* __restrict__ first_heads) {
    constexpr int TILE = 2 * BLOCK;
    __shared__ float x[TILE];
    __shared__ u8 f[TILE];
    __shared__ u8 head[TILE];
    __shared__ int first;
    const i64 start = (i64)blockIdx.x * TILE;
    if (threadIdx.x == 0) first = TILE;
    float own[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int e = threadIdx.x + h * BLOCK;
        const i64 i = start + e;
        own[h] = i < n ? values[i] : 0.0f;  // beyond n: (no head, 0), the identity
        x[e] = own[h];
        f[e] = head[e] = i < n && flags[i] != 0;
    }
    __syncthreads();
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int e = threadIdx.x + h * BLOCK;
        if (head[e]) atomicMin(&first, e);
    }
    // Up-sweep (the lecture's, run up to the root so that the root holds the tile's pair).
    for (int d = 1; d < TILE; d <<= 1) {
        const int k = threadIdx.x;
        if (k < TILE / (2 * d)) {
            const int right = (k + 1) * 2 * d - 1, left = right - d;
            if (!f[right]) x[right] += x[left];
            f[right] |= f[left];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        tile_sums[blockIdx.x] = x[TILE - 1];
        tile_heads[blockIdx.x] = f[TILE - 1];
        first_heads[blockIdx.x] = first;
        x[TILE - 1] = 0.0f;
    }
    // Down-sweep (the lecture's): the right child's prefix restarts at a head that begins the
    // right half, is the left child's alone if the left half holds a head, else the sum.
    for (int d = TILE / 2; d >= 1; d >>= 1) {
        __syncthreads();
        const int k = threadIdx.x;
        if (k < TILE / (2 * d)) {
            const int right = (k + 1) * 2 * d - 1, left = right - d;
            const float t = x[left];
            x[left] = x[right];
            if (head[left + 1]) {
                x[right] = 0.0f;
            } else if (f[left]) {
                x[right] = t;
            } else {
                x[right] = t + x[right];
            }
            f[left] = 0;
        }
    }
    __syncthreads();
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int e = threadIdx.x + h * BLOCK;
        const i64 i = start + e;
        if (i < n) out[i] = x[e] + own[h];
    }
}

// The fix-up of one level: block b adds the running sum at the end of tile b (carries[b], the
// next level's inclusive scan of the tiles' pairs) to tile b + 1's elements before its first
// head, the only ones whose segment began in an earlier tile. Threads stride over those.
template <int BLOCK>
__global__ void __launch_bounds__(BLOCK)
segscan_fixup(float* __restrict__ out, i64 n, const float* __restrict__ carries,
              const int* __restrict__ first_heads) {
    constexpr int TILE = 2 * BLOCK;
    const i64 tile = (i64)blockIdx.x + 1;
    const float carry = carries[tile - 1];
    const int first = first_heads[tile];
    const i64 start = tile * TILE;
    for (int e = threadIdx.x; e < first; e += BLOCK) {
        const i64 i = start + e;
        if (i < n) out[i] += carry;
    }
}

// ---------------------------------------------------------------------------------------------
// gpu-single-pass: one read of the input and one write of the output, with decoupled
// look-back (Merrill & Garland 2016) on the segmented operator.
//
// Each tile's state is one 64-bit word: status in the high half, the float's bits in the low
// half, so a state and its value are published and read together by one relaxed access. A
// tile that holds a head publishes its inclusive prefix at once (a segment restarts inside it,
// so its prefix is its own pair), and so a look-back stops at the first predecessor that holds
// a head: no head bit is needed in the word, as AGGREGATE means "no head here".
constexpr u32 INVALID = 0, AGGREGATE = 1, PREFIX = 2;

__device__ __forceinline__ u64 state_word(u32 status, float sum) {
    return ((u64)status << 32) | __float_as_uint(sum);
}

__device__ __forceinline__ u64 load_state(const u64* p) {
    u64 word;
    asm volatile("ld.relaxed.gpu.u64 %0, [%1];" : "=l"(word) : "l"(p) : "memory");
    return word;
}

__device__ __forceinline__ void store_state(u64* p, u64 word) {
    asm volatile("st.relaxed.gpu.u64 [%0], %1;" : : "l"(p), "l"(word) : "memory");
}

// The running sum at the end of tile - 1 (tile > 0), by one warp: lane l reads the state of
// tile window - l, the window sliding back 32 tiles at a time. It waits until every state up
// to the nearest PREFIX is published (tiles before 0 read as a PREFIX of 0), then adds that
// prefix and the aggregates after it; without a PREFIX in the window it adds all 32 and moves
// on. Tiles are numbered in the order their blocks started, so every state it waits for
// belongs to a running or finished block, which publishes its aggregate without waiting.
__device__ float look_back(const u64* states, i64 tile) {
    const int lane = threadIdx.x % WARP;
    float carry = 0.0f;
    for (i64 window = tile - 1;; window -= WARP) {
        const i64 pred = window - lane;
        u64 word;
        u32 prefixes, needed;
        while (true) {
            word = pred >= 0 ? load_state(states + pred) : state_word(PREFIX, 0.0f);
            const u32 status = (u32)(word >> 32);
            prefixes = __ballot_sync(FULL_MASK, status == PREFIX);
            const u32 invalid = __ballot_sync(FULL_MASK, status == INVALID);
            // lanes 0 .. the nearest PREFIX (all 32 without one)
            needed = prefixes ? ((prefixes & (0u - prefixes)) << 1) - 1u : FULL_MASK;
            if (!(invalid & needed)) break;
        }
        carry += warp_sum((needed >> lane) & 1u ? __uint_as_float((u32)word) : 0.0f);
        if (prefixes) return carry;
    }
}

// VEC4 = 4 elements, the unit of the vector loads: a float4 of values, a u32 of 4 flags.
// Chunk e0 .. e0 + 3 as vectors where aligned (the host checks the pointers) and in bounds,
// element by element (0 and no head beyond n) otherwise.
__device__ __forceinline__ void load_chunk(const float* __restrict__ values,
                                           const u8* __restrict__ flags, i64 e0, i64 n,
                                           int aligned, float (&x)[4], u32& heads) {
    if (aligned && e0 + 4 <= n) {
        const float4 v = *reinterpret_cast<const float4*>(values + e0);
        x[0] = v.x; x[1] = v.y; x[2] = v.z; x[3] = v.w;
        heads = *reinterpret_cast<const u32*>(flags + e0);
    } else {
        heads = 0;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            x[j] = e0 + j < n ? values[e0 + j] : 0.0f;
            heads |= (e0 + j < n ? (u32)flags[e0 + j] : 0u) << (8 * j);
        }
    }
}

__device__ __forceinline__ void store_chunk(float* __restrict__ out, i64 e0, i64 n, int aligned,
                                            const float (&x)[4]) {
    if (aligned && e0 + 4 <= n) {
        *reinterpret_cast<float4*>(out + e0) = make_float4(x[0], x[1], x[2], x[3]);
    } else {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            if (e0 + j < n) out[e0 + j] = x[j];
        }
    }
}

// One tile of TILE = BLOCK * V * 4 elements per block, its number taken from tile_counter.
// Warp w owns the tile's w-th run of 32 * V * 4 elements; in it lane l owns the 4-element
// chunks k * 32 + l (k < V), so every vector load and store of a warp covers 512 contiguous
// bytes of values (128 of flags). The tile is scanned bottom-up: each lane's 4 elements (in
// registers), the lanes of each k (warp shuffles) with a running pair over k, the warps
// (their totals in shared memory), the tiles (look-back by warp 0). Zeroed states and counter
// before each launch (the host's memsets).
template <int BLOCK, int V>
__global__ void __launch_bounds__(BLOCK)
segscan_single_pass(const float* __restrict__ values, const u8* __restrict__ flags,
                    float* __restrict__ out, i64 n, int aligned, u32* __restrict__ tile_counter,
                    u64* __restrict__ states) {
    static_assert(BLOCK % WARP == 0, "BLOCK: whole warps");
    constexpr int WARPS = BLOCK / WARP;
    constexpr int TILE = BLOCK * V * 4;
    __shared__ u32 tile_shared;
    __shared__ Seg warp_total[WARPS];
    __shared__ float carry_shared;
    const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
    if (threadIdx.x == 0) tile_shared = atomicAdd(tile_counter, 1u);
    __syncthreads();
    const i64 tile = tile_shared;
    const i64 base = tile * TILE + ((i64)warp * V * WARP + lane) * 4;  // chunk k: + k * 128

    float x[V][4];
    u32 heads[V];
#pragma unroll
    for (int k = 0; k < V; ++k) load_chunk(values, flags, base + k * WARP * 4, n, aligned,
                                           x[k], heads[k]);
    // Each chunk scanned in place as if it began a segment; its pair kept.
    Seg chunk[V];
#pragma unroll
    for (int k = 0; k < V; ++k) {
        Seg s{0, 0.0f};
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            s = combine(s, Seg{(heads[k] >> (8 * j)) & 0xffu ? 1 : 0, x[k][j]});
            x[k][j] = s.sum;
        }
        chunk[k] = s;
    }
    // before[k]: the pair of the warp's elements before this lane's chunk k.
    Seg before[V];
    Seg run{0, 0.0f};
#pragma unroll
    for (int k = 0; k < V; ++k) {
        const Seg inclusive = warp_inclusive(chunk[k]);
        Seg exclusive{__shfl_up_sync(FULL_MASK, inclusive.head, 1),
                      __shfl_up_sync(FULL_MASK, inclusive.sum, 1)};
        if (lane == 0) exclusive = Seg{0, 0.0f};
        before[k] = combine(run, exclusive);
        run = combine(run, Seg{__shfl_sync(FULL_MASK, inclusive.head, WARP - 1),
                               __shfl_sync(FULL_MASK, inclusive.sum, WARP - 1)});
    }
    if (lane == 0) warp_total[warp] = run;
    __syncthreads();
    // The warps before this one, and the whole tile.
    Seg warp_before{0, 0.0f}, tile_pair{0, 0.0f};
#pragma unroll
    for (int w = 0; w < WARPS; ++w) {
        if (w == warp) warp_before = tile_pair;
        tile_pair = combine(tile_pair, warp_total[w]);
    }
    if (warp == 0) {
        // A tile with a head (and tile 0) knows its inclusive prefix: publish it at once.
        const bool known = tile == 0 || tile_pair.head;
        if (lane == 0) store_state(states + tile, state_word(known ? PREFIX : AGGREGATE,
                                                             tile_pair.sum));
        // The carry matters unless the tile starts with a head (lane 0's first flag).
        const bool starts_segment = __shfl_sync(FULL_MASK, heads[0] & 0xffu, 0) != 0;
        float carry = 0.0f;
        if (tile > 0 && !starts_segment) {
            carry = look_back(states, tile);
            if (lane == 0 && !known) {
                store_state(states + tile, state_word(PREFIX, carry + tile_pair.sum));
            }
        }
        if (lane == 0) carry_shared = carry;
    }
    __syncthreads();
    const Seg tile_before{0, carry_shared};
#pragma unroll
    for (int k = 0; k < V; ++k) {
        // What precedes chunk k in the whole input, as far as its first segment cares.
        const float into = combine(combine(tile_before, warp_before), before[k]).sum;
        bool seen = false;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            seen = seen || ((heads[k] >> (8 * j)) & 0xffu);
            if (!seen) x[k][j] += into;
        }
        store_chunk(out, base + k * WARP * 4, n, aligned, x[k]);
    }
}

// ---------------------------------------------------------------------------------------------
// gpu-offsets: a warp per segment [offsets[s], offsets[s + 1]) (empty ones do nothing). The warp
// walks its segment in steps of 32 * ITEMS elements: ITEMS coalesced loads in flight per lane
// (element k * 32 + lane of the step), then per k a shuffle scan and a running carry. Plain
// sums, no flags: the offsets say where segments start. Good for long segments; a segment of
// one element leaves 31 lanes idle.
template <int BLOCK, int ITEMS>
__global__ void __launch_bounds__(BLOCK)
segscan_offsets(const float* __restrict__ values, const int* __restrict__ offsets,
                float* __restrict__ out, i64 segments) {
    static_assert(BLOCK % WARP == 0, "BLOCK: whole warps");
    const i64 segment = ((i64)blockIdx.x * BLOCK + threadIdx.x) / WARP;
    if (segment >= segments) return;  // the whole warp: one segment per warp
    const int lane = threadIdx.x % WARP;
    const i64 first = offsets[segment], last = offsets[segment + 1];
    float carry = 0.0f;
    for (i64 step = first; step < last; step += (i64)WARP * ITEMS) {
        float x[ITEMS];
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const i64 i = step + k * WARP + lane;
            x[k] = i < last ? values[i] : 0.0f;
        }
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            float s = x[k];
#pragma unroll
            for (int d = 1; d < WARP; d <<= 1) {
                const float up = __shfl_up_sync(FULL_MASK, s, d);
                if (lane >= d) s += up;
            }
            const i64 i = step + k * WARP + lane;
            if (i < last) out[i] = carry + s;
            carry += __shfl_sync(FULL_MASK, s, WARP - 1);
        }
    }
}
