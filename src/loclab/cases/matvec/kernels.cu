// Matrix-vector product kernels: y[i] = sum_k a[i][k] * x[k] for a row-major float32 matrix `a`
// of rows x cols, a vector `x` of cols and `y` of rows. Every kernel checks bounds and loops
// over rows the grid does not reach, so any shape works (the host keeps rows and cols below
// 2^31 - 2^16, so that no int index overflows).
// Compiled through NVRTC (no host headers): templates are instantiated by name expression.
//
// The lesson: each element of `a` is used once, so the product can only be as fast as `a`
// streams from memory; `x` is used by every row and must come from cache. What separates the
// kernels is whether a warp's loads are coalesced, and whether every thread has work.

#include "../../gpu/block_scan.cuh"

constexpr int WARP = 32;
constexpr int GROUPED_THREADS = 256;  // matvec_grouped's block size (gpu.py launches it so)

using loclab::group_sum;  // block_scan.cuh

// Sums of N values over a block of THREADS threads (a multiple of 32): each warp reduces with
// shuffles, warp 0 reduces the warps' sums; thread 0 ends with the N sums in `v`.
// Every thread of the block must call it (it synchronises).
template <int THREADS, int N>
__device__ __forceinline__ void block_sums(float (&v)[N]) {
    static_assert(THREADS % WARP == 0 && THREADS <= WARP * WARP, "THREADS: warps, at most 32");
    constexpr int WARPS = THREADS / WARP;
    __shared__ float warp_sums[N][WARPS];
    const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
#pragma unroll
    for (int n = 0; n < N; ++n) {
        v[n] = group_sum<WARP>(v[n]);
        if (lane == 0) warp_sums[n][warp] = v[n];
    }
    __syncthreads();
    if (warp == 0) {
#pragma unroll
        for (int n = 0; n < N; ++n) {
            v[n] = group_sum<WARP>(lane < WARPS ? warp_sums[n][lane] : 0.f);
        }
    }
    __syncthreads();  // the next call may overwrite warp_sums
}

// VEC consecutive floats at p + k: one float4 (16-byte) load when VEC = 4, which needs p + k
// 16-byte aligned (the host checks). __ldg: through the read-only data cache.
template <int VEC>
struct Vector {
    static_assert(VEC == 4, "VEC is 1 or 4");
    using type = float4;
    static __device__ __forceinline__ float4 load(const float* __restrict__ p, int k) {
        return __ldg(reinterpret_cast<const float4*>(p + k));
    }
};

template <>
struct Vector<1> {
    using type = float;
    static __device__ __forceinline__ float load(const float* __restrict__ p, int k) {
        return __ldg(p + k);
    }
};

// Loads of `a`, each element of which is used once: read-only (.nc) and not kept in L1
// (L1::no_allocate), which leaves L1 to x (read through __ldg). On an H100 the hint made the
// split kernel 1.5-2% faster on 64 x 4M (to 103% of copy bandwidth) and changed nothing on
// 16384 x 16384; on 4M x 64 one sweep gave 6% and a later one nothing (that shape's times
// drifted between 350 and 372 us within one session). Before sm_70: __ldg's plain load.
template <int VEC>
__device__ __forceinline__ typename Vector<VEC>::type stream(const float* __restrict__ p, int k) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
    if constexpr (VEC == 4) {
        float4 v;
        asm("ld.global.nc.L1::no_allocate.v4.f32 {%0,%1,%2,%3}, [%4];"
            : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p + k));
        return v;
    } else {
        float v;
        asm("ld.global.nc.L1::no_allocate.f32 %0, [%1];" : "=f"(v) : "l"(p + k));
        return v;
    }
#else
    return Vector<VEC>::load(p, k);
#endif
}

// acc + a . x over the VEC floats of a vector.
__device__ __forceinline__ float dot_add(float a, float x, float acc) { return fmaf(a, x, acc); }

__device__ __forceinline__ float dot_add(float4 a, float4 x, float acc) {
    acc = fmaf(a.x, x.x, acc);
    acc = fmaf(a.y, x.y, acc);
    acc = fmaf(a.z, x.z, acc);
    return fmaf(a.w, x.w, acc);
}

// gpu-row-per-thread: thread i computes y[i] alone, walking its row. At each step the 32
// threads of a warp load 32 floats `cols` apart: 32 sectors for 128 useful bytes (uncoalesced);
// the L1 cache saves what it can. With few rows (short-wide) only a few threads exist at all.
template <int THREADS>
__global__ void __launch_bounds__(THREADS)
matvec_row_per_thread(const float* __restrict__ a, const float* __restrict__ x,
                      float* __restrict__ y, int rows, int cols) {
    const long long stride = (long long)gridDim.x * THREADS;
    for (long long row = (long long)blockIdx.x * THREADS + threadIdx.x; row < rows;
         row += stride) {
        const float* arow = a + row * cols;
        float acc = 0.f;
        for (int k = 0; k < cols; ++k) {
            acc = fmaf(arow[k], x[k], acc);
        }
        y[row] = acc;
    }
}

// gpu-block-thread0, the lecture's "not so good" algorithm: block i computes y[i]; thread k
// stores a[i][k] * x[k] in Temp[k]; thread 0 adds up Temp. Rows longer than the block are done
// a block-width tile at a time. Loads are coalesced, but while thread 0 adds THREADS numbers
// one after another the other THREADS - 1 threads wait at the barrier.
template <int THREADS>
__global__ void __launch_bounds__(THREADS)
matvec_block_thread0(const float* __restrict__ a, const float* __restrict__ x,
                     float* __restrict__ y, int rows, int cols) {
    __shared__ float temp[THREADS];
    for (int row = blockIdx.x; row < rows; row += gridDim.x) {
        const float* arow = a + (size_t)row * cols;
        float sum = 0.f;  // thread 0's
        for (int k0 = 0; k0 < cols; k0 += THREADS) {
            const int k = k0 + threadIdx.x;
            temp[threadIdx.x] = k < cols ? arow[k] * x[k] : 0.f;
            __syncthreads();
            if (threadIdx.x == 0) {
                const int n = min(THREADS, cols - k0);
                for (int j = 0; j < n; ++j) {
                    sum += temp[j];
                }
            }
            __syncthreads();  // temp is overwritten by the next tile
        }
        if (threadIdx.x == 0) {
            y[row] = sum;
        }
    }
}

// gpu-block-reduce: block i computes y[i], every thread a strided partial sum (coalesced, all
// threads busy), then one tree reduction through shuffles. Still one row per block: rows
// shorter than the block leave threads idle, and a few long rows leave SMs idle.
template <int THREADS>
__global__ void __launch_bounds__(THREADS)
matvec_block_reduce(const float* __restrict__ a, const float* __restrict__ x,
                    float* __restrict__ y, int rows, int cols) {
    for (int row = blockIdx.x; row < rows; row += gridDim.x) {
        const float* arow = a + (size_t)row * cols;
        float v[1] = {0.f};
        for (int k = threadIdx.x; k < cols; k += THREADS) {
            v[0] = fmaf(__ldg(arow + k), __ldg(x + k), v[0]);
        }
        block_sums<THREADS, 1>(v);
        if (threadIdx.x == 0) {
            y[row] = v[0];
        }
    }
}

// gpu-warp-per-row (G = 32, UNROLL = 1) and the row strategies of gpu-optimized: a group of G
// lanes per row, the lanes strided over the row VEC floats at a time (coalesced; float4 when
// VEC = 4), then a shuffle reduction within the group. With G < 32 one warp covers 32 / G
// consecutive rows, so short rows still fill a warp's loads (tall-skinny: G = 16 for 64
// columns reads two 256-byte rows per warp load). With UNROLL > 1 the source issues UNROLL
// loads, then UNROLL independent accumulations (ptxas interleaves them again: for UNROLL = 8
// the sm_90 SASS keeps 2 to 3 loads of `a` per lane outstanding). x is read through the
// read-only cache: every row reads the same x, so it comes from L1 or L2, not from memory.
// Warps loop over their rows together (warp-uniform), so every lane reaches the shuffles.
template <int G, int VEC, int UNROLL>
__global__ void __launch_bounds__(GROUPED_THREADS)
matvec_grouped(const float* __restrict__ a, const float* __restrict__ x, float* __restrict__ y,
               int rows, int cols) {
    static_assert(G >= 1 && G <= WARP && (G & (G - 1)) == 0, "G: a power of two <= 32");
    constexpr int ROWS_PER_WARP = WARP / G;
    const int lane = threadIdx.x % G;
    const long long warp = ((long long)blockIdx.x * GROUPED_THREADS + threadIdx.x) / WARP;
    const long long warps = (long long)gridDim.x * GROUPED_THREADS / WARP;
    const int group = threadIdx.x % WARP / G;
    for (long long row0 = warp * ROWS_PER_WARP; row0 < rows; row0 += warps * ROWS_PER_WARP) {
        const long long row = row0 + group;
        float acc[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) acc[u] = 0.f;
        if (row < rows) {
            const float* arow = a + row * cols;
            int k = lane * VEC;
            if constexpr (UNROLL > 1) {
                for (; k + (UNROLL - 1) * G * VEC < cols; k += UNROLL * G * VEC) {
                    typename Vector<VEC>::type av[UNROLL], xv[UNROLL];
#pragma unroll
                    for (int u = 0; u < UNROLL; ++u) {  // the loads first, then the arithmetic
                        av[u] = stream<VEC>(arow, k + u * G * VEC);
                        xv[u] = Vector<VEC>::load(x, k + u * G * VEC);
                    }
#pragma unroll
                    for (int u = 0; u < UNROLL; ++u) acc[u] = dot_add(av[u], xv[u], acc[u]);
                }
            }
#pragma unroll 1
            for (; k < cols; k += G * VEC) {
                acc[0] = dot_add(stream<VEC>(arow, k), Vector<VEC>::load(x, k), acc[0]);
            }
        }
#pragma unroll
        for (int u = 1; u < UNROLL; ++u) acc[0] += acc[u];
        const float sum = group_sum<G>(acc[0]);
        if (lane == 0 && row < rows) {
            y[row] = sum;
        }
    }
}

// gpu-optimized for few long rows (short-wide), first pass: split each row into chunks of
// THREADS * VEC * PER_THREAD columns; a block takes one chunk of ROWS consecutive rows and
// writes their partial sums to partial[row][chunk] (rows x chunks). Each thread loads its
// PER_THREAD pieces of x once and uses them for all ROWS rows; its ROWS * PER_THREAD loads of
// `a` are independent and come before the arithmetic. Blocks are numbered row group
// fastest: the blocks running together share their chunk of x, which stays in L2.
// A second kernel (matvec_sum_partials) adds up each row's partials: deterministic, no atomics.
template <int THREADS, int VEC, int PER_THREAD, int ROWS>
__global__ void __launch_bounds__(THREADS)
matvec_split_partials(const float* __restrict__ a, const float* __restrict__ x,
                      float* __restrict__ partial, int rows, int cols, int chunks) {
    constexpr int CHUNK = THREADS * VEC * PER_THREAD;
    const int row_groups = (rows + ROWS - 1) / ROWS;
    const long long tiles = (long long)row_groups * chunks;
    for (long long tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        const int row0 = (int)(tile % row_groups) * ROWS;
        const int chunk = (int)(tile / row_groups);
        float v[ROWS];
#pragma unroll
        for (int r = 0; r < ROWS; ++r) v[r] = 0.f;
        // Every load first (rows past the end and columns past the row load nothing), then
        // the arithmetic.
        typename Vector<VEC>::type av[ROWS][PER_THREAD], xv[PER_THREAD];
#pragma unroll
        for (int j = 0; j < PER_THREAD; ++j) {
            // VEC = 4: cols % 4 == 0, so k < cols means k + 3 < cols
            const int k = chunk * CHUNK + (j * THREADS + (int)threadIdx.x) * VEC;
            xv[j] = k < cols ? Vector<VEC>::load(x, k) : typename Vector<VEC>::type{};
#pragma unroll
            for (int r = 0; r < ROWS; ++r) {
                av[r][j] = k < cols && row0 + r < rows
                               ? stream<VEC>(a + (size_t)(row0 + r) * cols, k)
                               : typename Vector<VEC>::type{};
            }
        }
#pragma unroll
        for (int r = 0; r < ROWS; ++r) {
#pragma unroll
            for (int j = 0; j < PER_THREAD; ++j) v[r] = dot_add(av[r][j], xv[j], v[r]);
        }
        block_sums<THREADS, ROWS>(v);
        if (threadIdx.x == 0) {
#pragma unroll
            for (int r = 0; r < ROWS; ++r) {
                if (row0 + r < rows) {
                    partial[(size_t)(row0 + r) * chunks + chunk] = v[r];
                }
            }
        }
    }
}

// Second pass of the split: y[row] = the sum of partial[row][0..chunks), a block per row.
template <int THREADS>
__global__ void __launch_bounds__(THREADS)
matvec_sum_partials(const float* __restrict__ partial, float* __restrict__ y, int rows,
                    int chunks) {
    for (int row = blockIdx.x; row < rows; row += gridDim.x) {
        float v[1] = {0.f};
        for (int c = threadIdx.x; c < chunks; c += THREADS) {
            v[0] += partial[(size_t)row * chunks + c];
        }
        block_sums<THREADS, 1>(v);
        if (threadIdx.x == 0) {
            y[row] = v[0];
        }
    }
}
