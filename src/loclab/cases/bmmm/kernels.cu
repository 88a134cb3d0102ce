// Batch matrix multiplication under a mask: Y[i][j1][j2] = sum_q A[j1][q] B[q][j2] (X[i][q] != 0)
// for A (K x N), B (N x K) float32, X (M x N) bytes, Y (M x K x K). Compiled through NVRTC;
// every kernel checks its bounds, so any M, N, K works.

#include "../../gpu/async_copy.cuh"

typedef unsigned char u8;
typedef long long i64;

// gpu-naive: a block of K x K threads per row i (grid M); each thread sums over q with a, b
// and the mask byte read from global memory (through L1/L2).
template <int K>
__global__ void __launch_bounds__(K * K)
bmmm_naive(const float* __restrict__ A, const float* __restrict__ B, const u8* __restrict__ X,
           float* __restrict__ Y, int M, int N) {
    const int i = blockIdx.x, j1 = threadIdx.y, j2 = threadIdx.x;
    float acc = 0.0f;
    for (int q = 0; q < N; ++q) {
        const float v = X[(i64)i * N + q] != 0 ? 1.0f : 0.0f;
        acc += A[j1 * N + q] * B[q * K + j2] * v;
    }
    Y[(i64)i * K * K + j1 * K + j2] = acc;
}

// X (rows x cols bytes) -> Xtr (cols x rows): the slides' coalesced transposition, a TILE x
// TILE block of threads moving one element each through tile[TILE][TILE + 1], so that both the
// reads and the writes run along rows (for floats the padding avoids bank conflicts; bytes are
// what the lectures' bmmm code transposes with it).
template <int TILE>
__global__ void __launch_bounds__(TILE * TILE)
transpose_bytes(const u8* __restrict__ X, u8* __restrict__ Xtr, int rows, int cols) {
    __shared__ u8 tile[TILE][TILE + 1];
    const int x = blockIdx.x * TILE + threadIdx.x, y = blockIdx.y * TILE + threadIdx.y;
    if (x < cols && y < rows) tile[threadIdx.y][threadIdx.x] = X[(i64)y * cols + x];
    __syncthreads();
    const int x_tr = blockIdx.y * TILE + threadIdx.x, y_tr = blockIdx.x * TILE + threadIdx.y;
    if (x_tr < rows && y_tr < cols) Xtr[(i64)y_tr * rows + x_tr] = tile[threadIdx.x][threadIdx.y];
}

// gpu-tiled: the slides' kernel. A block of K x K threads computes T rows of Y (grid M/T);
// thread (j1, j2) keeps acc[T] in registers, so that ab = A[j1][q] B[q][j2] is computed once
// per q and serves T rows. Per q the block stages X_tr[q][ii : ii+T] (coalesced, thanks to
// the transposition) in shared memory, with barriers around the use. As in the slides, the
// staged values are the mask bytes and each use tests them (compare, select, multiply-add:
// three instructions where gpu-optimized, staging 0/1 floats, needs one).
template <int K, int T>
__global__ void bmmm_tiled(const float* __restrict__ A, const float* __restrict__ B, const u8* __restrict__ Xtr,
           float* __restrict__ Y, int M, int N) {
    __shared__ float Xsh_tr[T];
    const int j1 = threadIdx.y, j2 = threadIdx.x, tid = j1 * K + j2;
    const int ii = blockIdx.x * T;
    float acc[T];
#pragma unroll
    for (int r = 0; r < T; ++r) acc[r] = 0.0f;
    for (int q = 0; q < N; ++q) {
        const float ab = A[j1 * N + q] * B[q * K + j2];
        // The first T threads stage the slice; where K x K < T (K = 4) a thread stages several.
        // The trip count is a constant: for K x K >= T this compiles to the slides' one `if`.
        // The index is an int as in the slides (the setup refuses M x N >= 2^31): a 64-bit one
        // costs 9 registers, 16 instead of 18 blocks of 64 threads per SM, 12% of the time.
#pragma unroll
        for (int s = 0; s < (T + K * K - 1) / (K * K); ++s) {
            const int t = tid + s * K * K;
            if (t < T) Xsh_tr[t] = ii + t < M ? Xtr[q * M + ii + t] : 0;
        }
        __syncthreads();
#pragma unroll
        for (int r = 0; r < T; ++r) {
            const float v = Xsh_tr[r] != 0 ? 1.0f : 0.0f;
            acc[r] += ab * v;
        }
        __syncthreads();
    }
#pragma unroll
    for (int r = 0; r < T; ++r) {
        if (ii + r < M) Y[(i64)(ii + r) * K * K + j1 * K + j2] = acc[r];
    }
}

// gpu-optimized, step 1: C[q][j1 K + j2] = A[j1][q] B[q][j2], ROWS x KKP (small: stays in L2),
// padded with zeros to KKP columns (whole column tiles of step 2) and to ROWS >= N rows (whole
// slices along q), so that step 2 copies C's slices without bounds checks.
template <int K, int KKP>
__global__ void bmmm_products(const float* __restrict__ A, const float* __restrict__ B,
                              float* __restrict__ C, int N, int ROWS) {
    const int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= ROWS * KKP) return;
    const int q = e / KKP, j = e % KKP;
    C[e] = j < K * K && q < N ? A[(j / K) * N + q] * B[q * K + j % K] : 0.0f;
}

// Word i of a vector (i a constant once loops are unrolled: the vector stays in registers).
__device__ __forceinline__ unsigned word(const uint4& v, int i) {
    return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// gpu-optimized, step 2: Y (M x K^2) = mask (M x N, 0/1) . C, a tiled matrix product. A block
// computes a BM x BN tile of Y (C's K^2 columns padded to KKP, a multiple of BN). Along q it
// runs over slices of BQ, double-buffered in dynamic shared memory: while the block multiplies
// slice t, C's slice t + 1 arrives by cp.async and the mask's waits in registers, loaded before
// the products and stored after them as 0/1 floats, transposed (Xs[q][row]): one barrier per
// slice. VECTORS: the mask read as 16-byte vectors, 16 q's of a row each (N % 16 == 0, X
// 16-byte aligned), else 4 q's a byte at a time. Lanes take consecutive rows, so that the
// transposed stores are conflict-free.
// Each thread accumulates TM rows x TN columns of Y in registers: per q it reads TM + TN floats
// (16-byte vectors) for TM x TN FMAs. A warp's threads form a (32 / WC) x WC grid, so that a
// warp's reads of the mask hit 32 / WC addresses (a broadcast each) and its reads of C
// contiguous 16 WC bytes: a thread's columns are TN / 4 vectors, WC vectors apart. With
// TM = TN = 8, WC = 8 a warp reads 4 wavefronts of shared memory per q for 64 FMAs.
// At least 16 warps per SM (the launch bounds): at most 128 registers a thread.
template <int K, int KKP, int BM, int BN, int BQ, int TM, int TN, int WC, bool VECTORS>
__global__ void __launch_bounds__((BM / TM) * (BN / TN),
                                  (BM / TM) * (BN / TN) >= 512 ? 1 : 512 / ((BM / TM) * (BN / TN)))
bmmm_optimized(const u8* __restrict__ X, const float* __restrict__ C, float* __restrict__ Y,
               int M, int N) {
    constexpr int KK = K * K, COLS = BN / TN, THREADS = (BM / TM) * COLS, WR = 32 / WC;
    constexpr int WIDTH = VECTORS ? 16 : 4;  // q's per mask load (per thread)
    constexpr int XLOADS = (BM * BQ / WIDTH + THREADS - 1) / THREADS;  // per thread and slice
    constexpr int CLOADS = (BQ * BN / 4 + THREADS - 1) / THREADS;
    static_assert(KKP % BN == 0 && KKP >= KK && BN % TN == 0 && BM % TM == 0 &&
                  TM % 4 == 0 && TN % 4 == 0 && 32 % WC == 0 && COLS % WC == 0 &&
                  (BM / TM) % WR == 0 && BQ % WIDTH == 0, "whole warps of whole vectors");
    extern __shared__ __align__(16) float shared[];
    float* const Xs = shared;                // [2][BQ][BM]
    float* const Cs = shared + 2 * BQ * BM;  // [2][BQ][BN]
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int tr = (warp / (COLS / WC)) * WR + lane / WC;      // the thread's row of threads
    const int tc = (warp % (COLS / WC)) * WC * TN + lane % WC * 4;  // its first column
    // Blocks of one row tile run side by side (their mask rows are read from L2 once).
    const int i0 = blockIdx.x / (KKP / BN) * BM, col0 = blockIdx.x % (KKP / BN) * BN;

    // The vector path loads a slice's mask before the products and stores it after them; the
    // byte path (other N) loads and stores a word's 4 bytes at a time after them (its words,
    // 4x more, would not fit beside the accumulators).
    uint4 x[VECTORS ? XLOADS : 1];
    auto load_vectors = [&](int q0) {
#pragma unroll
        for (int s = 0; s < XLOADS; ++s) {
            const int e = threadIdx.x + s * THREADS, r = e % BM, q = q0 + e / BM * WIDTH;
            x[s] = e < BM * BQ / WIDTH && i0 + r < M && q < N
                ? __ldg(reinterpret_cast<const uint4*>(X + (i64)(i0 + r) * N + q))
                : make_uint4(0, 0, 0, 0);
        }
    };
    auto store_mask = [&](int q0, int buffer) {
#pragma unroll(VECTORS ? XLOADS : 1)
        for (int s = 0; s < XLOADS; ++s) {
            const int e = threadIdx.x + s * THREADS, r = e % BM, c = e / BM * WIDTH;
            if (XLOADS * THREADS == BM * BQ / WIDTH || e < BM * BQ / WIDTH) {
                const u8* at = X + (i64)(i0 + r) * N + q0 + c;
#pragma unroll
                for (int b = 0; b < WIDTH; ++b) {
                    const bool set = VECTORS
                        ? (word(x[VECTORS ? s : 0], b / 4) >> (8 * (b % 4))) & 0xffu
                        : i0 + r < M && q0 + c + b < N && at[b] != 0;
                    Xs[(buffer * BQ + c + b) * BM + r] = set ? 1.0f : 0.0f;
                }
            }
        }
    };
    auto load_products = [&](int q0, int buffer) {
#pragma unroll
        for (int s = 0; s < CLOADS; ++s) {
            const int e = threadIdx.x + s * THREADS, c = e / (BN / 4), j = e % (BN / 4) * 4;
            if (CLOADS * THREADS == BQ * BN / 4 || e < BQ * BN / 4)
                loclab::copy_async<16>(Cs + (buffer * BQ + c) * BN + j,
                                       C + (i64)(q0 + c) * KKP + col0 + j);
        }
    };

    float acc[TM][TN];
#pragma unroll
    for (int r = 0; r < TM; ++r)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[r][j] = 0.0f;
    const int slices = (N + BQ - 1) / BQ;
    load_products(0, 0);
    if (VECTORS) load_vectors(0);
    store_mask(0, 0);
    loclab::commit_copies();
    loclab::wait_copies<0>();
    __syncthreads();
    for (int t = 0; t < slices; ++t) {
        const int buffer = t & 1;
        const bool next = t + 1 < slices;
        if (next) {
            load_products((t + 1) * BQ, buffer ^ 1);
            if (VECTORS) load_vectors((t + 1) * BQ);
        }
        const float* xs = Xs + buffer * BQ * BM + tr * TM;
        const float* cs = Cs + buffer * BQ * BN + tc;
#pragma unroll
        for (int c = 0; c < BQ; ++c) {
            float xv[TM], cv[TN];
#pragma unroll
            for (int r = 0; r < TM; r += 4)
                *reinterpret_cast<float4*>(&xv[r]) =
                    *reinterpret_cast<const float4*>(xs + c * BM + r);
#pragma unroll
            for (int j = 0; j < TN; j += 4)
                *reinterpret_cast<float4*>(&cv[j]) =
                    *reinterpret_cast<const float4*>(cs + c * BN + j / 4 * WC * 4);
#pragma unroll
            for (int r = 0; r < TM; ++r)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[r][j] = fmaf(xv[r], cv[j], acc[r][j]);
        }
        if (next) {
            store_mask((t + 1) * BQ, buffer ^ 1);
            loclab::commit_copies();
            loclab::wait_copies<0>();  // this thread's copies of C; the barrier: everyone's
        }
        __syncthreads();
    }
#pragma unroll
    for (int r = 0; r < TM; ++r) {
        const int i = i0 + tr * TM + r;
        if (i >= M) break;
        float* row = Y + (i64)i * KK;
#pragma unroll
        for (int j = 0; j < TN; j += 4) {
            const int col = col0 + tc + j / 4 * WC * 4;
            if (KK % 4 == 0) {  // rows of Y start 16-byte aligned; col < KK or col >= KK + 3
                if (col < KK)
                    *reinterpret_cast<float4*>(row + col) =
                        make_float4(acc[r][j], acc[r][j + 1], acc[r][j + 2], acc[r][j + 3]);
            } else {
#pragma unroll
                for (int b = 0; b < 4; ++b)
                    if (col + b < KK) row[col + b] = acc[r][j + b];
            }
        }
    }
}
