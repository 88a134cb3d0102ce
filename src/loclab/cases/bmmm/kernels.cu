// Batch matrix multiplication under a mask: Y[i][j1][j2] = sum_q A[j1][q] B[q][j2] (X[i][q] != 0)
// for A (K x N), B (N x K) float32, X (M x N) bytes, Y (M x K x K). Compiled through NVRTC;
// every kernel checks its bounds, so any M, N, K works.

#include "../../gpu/warp_tile.cuh"

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

// gpu-optimized, step 1: C[q][j1 K + j2] = A[j1][q] B[q][j2], N x KKP (small: stays in L2),
// padded with zeros to KKP columns (whole column tiles of step 2) and to whole slices of BQ
// rows, so that step 2 copies C's slices without bounds checks.
template <int K, int KKP, int BQ>
__global__ void bmmm_products(const float* __restrict__ A, const float* __restrict__ B,
                              float* __restrict__ C, int N) {
    const int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= (N + BQ - 1) / BQ * BQ * KKP) return;
    const int q = e / KKP, j = e % KKP;
    C[e] = j < K * K && q < N ? A[(j / K) * N + q] * B[q * K + j % K] : 0.0f;
}

// Word i of a vector (i a constant once loops are unrolled: the vector stays in registers).
__device__ __forceinline__ unsigned word(const uint4& v, int i) {
    return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// gpu-optimized, step 2: Y (M x K^2) = mask (M x N, 0/1) . C, a tiled matrix product by
// loclab::WarpTile (gpu/warp_tile.cuh, as mmm's gpu-optimized): BM x BN tiles of Y (C's K^2
// columns padded to KKP, a multiple of BN), WM x WN warp tiles, TM x TN of Y a lane.
// Persistent: as many blocks as fit the GPU at once, block b computing tiles b, b + grid, ...
// The sum along q runs over slices of BQ, and a block's slices form one stream of steps
// across its tiles: the copies of a tile's first slices are in flight while the previous
// tile's last slices are multiplied and its results stored, so the pipeline never drains.
// Cursors walk the stream (a step's tile and slice by increments: a division per slice cost
// 8% of the time in stalls on its dependent instructions).
// C's slices come by cp.async, STAGES - 1 in flight while one is multiplied. The mask's are
// bytes that the product needs as 0/1 floats, transposed (Xs[q][row]): every thread loads its
// share of the next slice into registers before multiplying this one and stores it, converted,
// into the other of two buffers after: one barrier per slice. VECTORS: 16-byte loads, 16 q's
// of a row each (N % 16 == 0, X 16-byte aligned), else byte loads of 4 q's after the product.
// Consecutive threads take consecutive rows, so that the transposed stores are conflict-free.
// The column tiles of one row tile are consecutive tiles (the mask rows they share are read
// from L2 once). MIN_BLOCKS: blocks that must fit an SM at once.
template <int K, int KKP, int BM, int BN, int BQ, int WM, int WN, int TM, int TN, int STAGES,
          bool VECTORS, int MIN_BLOCKS>
__global__ void __launch_bounds__(loclab::WarpTile<BM, BN, WM, WN, TM, TN>::THREADS, MIN_BLOCKS)
bmmm_optimized(const u8* __restrict__ X, const float* __restrict__ C, float* __restrict__ Y,
               int M, int N) {
    using Tile = loclab::WarpTile<BM, BN, WM, WN, TM, TN>;
    constexpr int THREADS = Tile::THREADS, COLUMN_TILES = KKP / BN;
    constexpr int WIDTH = VECTORS ? 16 : 4;  // q's per mask load (per thread)
    constexpr int XGROUPS = BM * BQ / WIDTH, XLOADS = (XGROUPS + THREADS - 1) / THREADS;
    static_assert(KKP % BN == 0 && KKP >= K * K && BQ % WIDTH == 0 && STAGES >= 2,
                  "whole column tiles, whole mask loads a slice, one slice in flight");
    extern __shared__ __align__(16) float shared[];
    float* const Xs = shared;                // [2][BQ][BM]
    float* const Cs = shared + 2 * BQ * BM;  // [STAGES][BQ][BN]
    const int slices = (N + BQ - 1) / BQ, rows = slices * BQ;  // C's rows: whole slices
    const int tiles = (M + BM - 1) / BM * COLUMN_TILES;
    const Tile tile;

    // A position in this block's stream of steps: a tile and a slice of it.
    struct Cursor {
        int tile, slice;
        __device__ __forceinline__ void advance(int slices) {
            if (++slice == slices) {
                slice = 0;
                tile += gridDim.x;
            }
        }
        __device__ __forceinline__ int row0() const { return tile / COLUMN_TILES * BM; }
        __device__ __forceinline__ int col0() const { return tile % COLUMN_TILES * BN; }
    };

    uint4 x[VECTORS ? XLOADS : 1];
    auto load_vectors = [&](const Cursor& at) {
        const int i0 = at.row0(), q0 = at.slice * BQ;
#pragma unroll
        for (int s = 0; s < XLOADS; ++s) {
            const int e = threadIdx.x + s * THREADS, r = e % BM, q = q0 + e / BM * WIDTH;
            x[s] = e < XGROUPS && i0 + r < M && q < N
                ? __ldg(reinterpret_cast<const uint4*>(X + (i64)(i0 + r) * N + q))
                : make_uint4(0, 0, 0, 0);
        }
    };
    auto store_mask = [&](const Cursor& at, float* xs) {
        const int i0 = at.row0(), q0 = at.slice * BQ;
#pragma unroll(VECTORS ? XLOADS : 1)
        for (int s = 0; s < XLOADS; ++s) {
            const int e = threadIdx.x + s * THREADS, r = e % BM, c = e / BM * WIDTH;
            if (XLOADS * THREADS == XGROUPS || e < XGROUPS) {
                const u8* from = X + (i64)(i0 + r) * N + q0 + c;
#pragma unroll
                for (int b = 0; b < WIDTH; ++b) {
                    const bool set = VECTORS
                        ? (word(x[VECTORS ? s : 0], b / 4) >> (8 * (b % 4))) & 0xffu
                        : i0 + r < M && q0 + c + b < N && from[b] != 0;
                    xs[(c + b) * BM + r] = set ? 1.0f : 0.0f;
                }
            }
        }
    };
    auto fetch_products = [&](const Cursor& at, int stage) {
        loclab::copy_slice<BQ, BN, THREADS>(Cs + stage * BQ * BN, C, rows, KKP, KKP,
                                            at.slice * BQ, at.col0());
    };

    if (blockIdx.x >= tiles) return;
    Cursor now{static_cast<int>(blockIdx.x), 0}, next = now, fetched = now;
    int fetch_stage = 0;
    auto fetch_next = [&] {  // the slice of C STAGES - 1 steps ahead of the one multiplied
        if (fetched.tile < tiles) fetch_products(fetched, fetch_stage);
        loclab::commit_copies();  // an empty group past the stream: counts stay in step
        fetched.advance(slices);
        fetch_stage = fetch_stage == STAGES - 1 ? 0 : fetch_stage + 1;
    };
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) fetch_next();
    if (VECTORS) load_vectors(now);
    store_mask(now, Xs);
    next.advance(slices);

    float acc[TM][TN] = {};
    for (int stage = 0, buffer = 0; now.tile < tiles; ) {
        loclab::wait_copies<STAGES - 2>();  // this thread's copies of C's slice have landed,
        __syncthreads();  // everyone's too, the mask's slice is stored, the last step's
        fetch_next();     // buffers are free
        const bool more = next.tile < tiles;
        if (VECTORS && more) load_vectors(next);
        tile.template multiply<BQ>(Xs + buffer * BQ * BM, Cs + stage * BQ * BN, acc);
        if (more) store_mask(next, Xs + (buffer ^ 1) * BQ * BM);
        if (now.slice == slices - 1) {  // the tile's last slice: its results out, a new sum
            tile.template store<K * K % 4 == 0>(Y, M, K * K, now.row0(), now.col0(), acc);
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;
        }
        now = next;
        next.advance(slices);
        stage = stage == STAGES - 1 ? 0 : stage + 1;
        buffer ^= 1;
    }
}
