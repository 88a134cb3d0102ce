// Batch matrix multiplication under a mask: Y[i][j1][j2] = sum_q A[j1][q] B[q][j2] (X[i][q] != 0)
// for A (K x N), B (N x K) float32, X (M x N) bytes, Y (M x K x K). Compiled through NVRTC;
// every kernel checks its bounds, so any M, N, K works.

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

// gpu-optimized, step 1: C[q][j1 K + j2] = A[j1][q] B[q][j2], N x K^2 (small: stays in L2),
// each row padded with zeros to KKP columns (whole vectors of the thread tiles).
template <int K, int KKP>
__global__ void bmmm_products(const float* __restrict__ A, const float* __restrict__ B,
                              float* __restrict__ C, int N) {
    const int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= N * KKP) return;
    const int q = e / KKP, j = e % KKP;
    C[e] = j < K * K ? A[(j / K) * N + q] * B[q * K + j % K] : 0.0f;
}

// gpu-optimized, step 2: Y (M x K^2) = mask (M x N, 0/1) . C, a tiled matrix product. A block
// computes BM rows of Y (all K^2 columns, padded to KKP); per slice of BQ along q it stages the
// mask as 0/1 floats, transposed (Xs[q][row]), and C's slice (Cs[q][col]) in shared memory;
// each thread holds TM consecutive rows x TN consecutive columns of Y in registers, reading
// TM + TN floats per q (16-byte vectors; lanes that share rows or columns read the same
// address) for TM x TN FMAs. WORDS: the mask read 4 bytes at a time (N a multiple of 4).
template <int K, int KKP, int BM, int BQ, int TM, int TN, bool WORDS>
__global__ void __launch_bounds__((BM / TM) * (KKP / TN))
bmmm_optimized(const u8* __restrict__ X, const float* __restrict__ C, float* __restrict__ Y,
               int M, int N) {
    constexpr int KK = K * K, COLS = KKP / TN, THREADS = (BM / TM) * COLS;
    static_assert(KKP % TN == 0 && KKP >= KK && BM % TM == 0 && TM % 4 == 0 && TN % 4 == 0,
                  "whole 4-float vectors of rows and columns");
    __shared__ __align__(16) float Xs[BQ][BM + 4];
    __shared__ __align__(16) float Cs[BQ][KKP];
    const int tc = threadIdx.x % COLS, tr = threadIdx.x / COLS;
    const int i0 = blockIdx.x * BM;
    float acc[TM][TN];
#pragma unroll
    for (int r = 0; r < TM; ++r)
#pragma unroll
        for (int c = 0; c < TN; ++c) acc[r][c] = 0.0f;
    for (int q0 = 0; q0 < N; q0 += BQ) {
        if (WORDS) {
            for (int e = threadIdx.x; e < BM * BQ / 4; e += THREADS) {
                const int r = e / (BQ / 4), c = (e % (BQ / 4)) * 4;
                const int i = i0 + r, q = q0 + c;
                const unsigned w = i < M && q < N
                    ? *reinterpret_cast<const unsigned*>(X + (i64)i * N + q) : 0u;
#pragma unroll
                for (int b = 0; b < 4; ++b) Xs[c + b][r] = (w >> (8 * b)) & 0xffu ? 1.0f : 0.0f;
            }
        } else {
            for (int e = threadIdx.x; e < BM * BQ; e += THREADS) {
                const int r = e / BQ, c = e % BQ;
                const int i = i0 + r, q = q0 + c;
                Xs[c][r] = i < M && q < N && X[(i64)i * N + q] != 0 ? 1.0f : 0.0f;
            }
        }
        for (int e = threadIdx.x; e < BQ * KKP / 4; e += THREADS) {
            const int c = e / (KKP / 4), j = (e % (KKP / 4)) * 4;
            *reinterpret_cast<float4*>(&Cs[c][j]) = q0 + c < N
                ? *reinterpret_cast<const float4*>(C + (i64)(q0 + c) * KKP + j)
                : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
        __syncthreads();
#pragma unroll
        for (int c = 0; c < BQ; ++c) {
            float x[TM], y[TN];
#pragma unroll
            for (int r = 0; r < TM; r += 4)
                *reinterpret_cast<float4*>(&x[r]) =
                    *reinterpret_cast<const float4*>(&Xs[c][tr * TM + r]);
#pragma unroll
            for (int j = 0; j < TN; j += 4)
                *reinterpret_cast<float4*>(&y[j]) =
                    *reinterpret_cast<const float4*>(&Cs[c][tc * TN + j]);
#pragma unroll
            for (int r = 0; r < TM; ++r)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[r][j] += x[r] * y[j];
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
            const int col = tc * TN + j;
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
