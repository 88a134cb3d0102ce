// C = A . B for row-major float32 A (M x K), B (K x N), C (M x N), the lectures' MMM ladder.
// Compiled through NVRTC (no host headers); tile sizes are template parameters, instantiated
// by name expression. Every kernel checks its bounds, so any M, N, K works with any tile.

#include "../../gpu/warp_tile.cuh"

// gpu-naive: a thread per element of C, threadIdx.x along a row of C so that the loads of B
// and the stores of C are coalesced. Every product reads both operands from global memory
// (through L1/L2): data reuse O(1) from DRAM's point of view, whatever the caches catch.
template <int BX, int BY>
__global__ void __launch_bounds__(BX * BY)
mmm_naive(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
          int M, int N, int K) {
    const int j = blockIdx.x * BX + threadIdx.x;
    const int i = blockIdx.y * BY + threadIdx.y;
    if (i >= M || j >= N) return;
    float c = 0.0f;
    for (int k = 0; k < K; ++k) c += A[(long long)i * K + k] * B[(long long)k * N + j];
    C[(long long)i * N + j] = c;
}

// gpu-block-tiled: T x T threads, one element of C each; the block stages T x T tiles of A
// and B in shared memory, so each element loaded from global memory serves T products.
template <int T>
__global__ void __launch_bounds__(T * T)
mmm_block_tiled(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                int M, int N, int K) {
    __shared__ float Aloc[T][T];
    __shared__ float Bloc[T][T + 1];  // +1: no bank conflicts whatever T is
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int i = blockIdx.y * T + ty, j = blockIdx.x * T + tx;
    float c = 0.0f;
    for (int kk = 0; kk < K; kk += T) {
        Aloc[ty][tx] = i < M && kk + tx < K ? A[(long long)i * K + kk + tx] : 0.0f;
        Bloc[ty][tx] = kk + ty < K && j < N ? B[(long long)(kk + ty) * N + j] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < T; ++k) c += Aloc[ty][k] * Bloc[k][tx];
        __syncthreads();
    }
    if (i < M && j < N) C[(long long)i * N + j] = c;
}

// gpu-register-tiled: the slides' block + register tiling. T x T threads; the block computes
// a (T R) x (T R) tile of C and each thread an R x R block of it (rows ii = iii + ty R,
// columns jj = jjj + tx R), accumulated in registers. Per step of T along k, the block copies
// the slices A[iii : iii+T R][kk : kk+T] and B[kk : kk+T][jjj : jjj+T R] into Aloc[T R][T]
// and Bloc[T][T R] (zeros outside A and B). Each shared value then serves R products from
// registers: data reuse T from shared memory and R from registers.
template <int T, int R>
__global__ void __launch_bounds__(T * T)
mmm_register_tiled(const float* __restrict__ A, const float* __restrict__ B,
                   float* __restrict__ C, int M, int N, int K) {
    __shared__ float Aloc[T * R][T];
    __shared__ float Bloc[T][T * R];
    const int tx = threadIdx.x, ty = threadIdx.y, flat = ty * T + tx;
    const int iii = blockIdx.y * T * R, jjj = blockIdx.x * T * R;
    float c[R][R];
#pragma unroll
    for (int ir = 0; ir < R; ++ir)
#pragma unroll
        for (int jr = 0; jr < R; ++jr) c[ir][jr] = 0.0f;
    for (int kk = 0; kk < K; kk += T) {
        // Collective copy: T*R*T elements of each slice, R per thread, coalesced along rows.
#pragma unroll
        for (int r = 0; r < R; ++r) {
            const int e = r * T * T + flat;
            const int ai = e / T, ak = e % T;      // Aloc[ai][ak] = A[iii + ai][kk + ak]
            const int bk = e / (T * R), bj = e % (T * R);  // Bloc[bk][bj] = B[kk + bk][jjj + bj]
            Aloc[ai][ak] = iii + ai < M && kk + ak < K ? A[(long long)(iii + ai) * K + kk + ak]
                                                       : 0.0f;
            Bloc[bk][bj] = kk + bk < K && jjj + bj < N ? B[(long long)(kk + bk) * N + jjj + bj]
                                                       : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int kr = 0; kr < T; ++kr) {
            float a[R], b[R];
#pragma unroll
            for (int r = 0; r < R; ++r) {
                a[r] = Aloc[ty * R + r][kr];
                b[r] = Bloc[kr][tx * R + r];
            }
#pragma unroll
            for (int ir = 0; ir < R; ++ir)
#pragma unroll
                for (int jr = 0; jr < R; ++jr) c[ir][jr] += a[ir] * b[jr];
        }
        __syncthreads();
    }
#pragma unroll
    for (int ir = 0; ir < R; ++ir) {
        const int i = iii + ty * R + ir;
#pragma unroll
        for (int jr = 0; jr < R; ++jr) {
            const int j = jjj + tx * R + jr;
            if (i < M && j < N) C[(long long)i * N + j] = c[ir][jr];
        }
    }
}

// gpu-optimized: C = A . B from A^T (K x M, written first by the transposition case's kernel)
// and B, both read along rows, by loclab::WarpTile (gpu/warp_tile.cuh): a BM x BN tile of C
// per block, WM x WN warp tiles, TM x TN of C a lane.
// Slices of BK along k go from global to shared memory by cp.async (sm_80+), which needs no
// staging registers: STAGES - 1 slices are in flight while one is multiplied, one barrier per
// slice. With A^T both slices are rows of 16-byte groups; copying A itself transposed takes
// 4-byte copies and their address arithmetic, which cost more issue slots than the
// transposition does (measured on an H100: 84-86% of cuBLAS, against 95% from A^T). The rows of
// A^T and B are lda and ldb floats apart (multiples of 4: the host pads them), so every copy
// is 16 bytes at any shape; slices are zero-filled past M, N and K. VEC: 16-byte stores of C
// (N a multiple of 4); otherwise 4-byte. Blocks are numbered in groups of GROUP
// rows of tiles, walked column by column, so that the blocks resident at once share tiles of
// A^T and B in L2. MIN_BLOCKS: blocks that must fit an SM at once.
template <int BM, int BN, int BK, int WM, int WN, int TM, int TN, int STAGES, bool VEC,
          int GROUP, int MIN_BLOCKS>
__global__ void __launch_bounds__(loclab::WarpTile<BM, BN, WM, WN, TM, TN>::THREADS, MIN_BLOCKS)
mmm_optimized(const float* __restrict__ At, const float* __restrict__ B, float* __restrict__ C,
              int M, int N, int K, int lda, int ldb) {
    using Tile = loclab::WarpTile<BM, BN, WM, WN, TM, TN>;
    static_assert(STAGES >= 2, "at least one slice in flight while one is multiplied");
    extern __shared__ __align__(16) float shared[];
    float* As = shared;                     // [STAGES][BK][BM]: slices of A^T
    float* Bs = shared + STAGES * BK * BM;  // [STAGES][BK][BN]

    const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
    const int per_group = GROUP * tiles_n, first_m = blockIdx.x / per_group * GROUP;
    const int rows = min(tiles_m - first_m, GROUP), in_group = blockIdx.x % per_group;
    const int row0 = (first_m + in_group % rows) * BM, col0 = (in_group / rows) * BN;
    const Tile tile;

    auto fetch = [&](int slice) {
        const int stage = slice % STAGES, kk = slice * BK;
        loclab::copy_slice<BK, BM, Tile::THREADS>(As + stage * BK * BM, At, K, M, lda, kk, row0);
        loclab::copy_slice<BK, BN, Tile::THREADS>(Bs + stage * BK * BN, B, K, N, ldb, kk, col0);
    };

    float c[TM][TN] = {};
    const int slices = (K + BK - 1) / BK;
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < slices) fetch(s);
        loclab::commit_copies();  // an empty group where there is no slice: counts stay in step
    }
    for (int s = 0; s < slices; ++s) {
        loclab::wait_copies<STAGES - 2>();  // this thread's copies of slice s have landed,
        __syncthreads();                    // everyone's too, and slice s - 1's stage is free
        if (s + STAGES - 1 < slices) fetch(s + STAGES - 1);
        loclab::commit_copies();
        tile.template multiply<BK>(As + (s % STAGES) * BK * BM, Bs + (s % STAGES) * BK * BN, c);
    }
    tile.template store<VEC>(C, M, N, row0, col0, c);
}

