// C = A . B for row-major float32 A (M x K), B (K x N), C (M x N), the lectures' MMM ladder.
// Compiled through NVRTC (no host headers); tile sizes are template parameters, instantiated
// by name expression. Every kernel checks its bounds, so any M, N, K works with any tile.

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

// gpu-optimized: a BM x BN tile of C per block, split into WM x WN warp tiles; each lane holds
// a TM x TN block of C in registers, as (TM/4) x (TN/4) sub-blocks of 4 x 4 spread WM/(TM/4)
// rows and WN/(TN/4) columns apart, so that a warp's shared-memory reads are 16-byte vectors
// of consecutive floats (lanes that share a row or column read the same address: a broadcast,
// no bank conflict). Per step along k a lane loads TM + TN floats for TM x TN FMAs: register
// reuse TM x TN / (TM + TN). A is stored transposed in shared memory (As[k][m], rows padded
// by 4 floats so that the transposing stores spread over the banks), B as it is (Bs[k][n]).
// Double buffering: the next BK-slice is loaded from global memory into registers while the
// current one is multiplied, then stored into the other buffer; one barrier per slice.
// VEC: 16-byte global loads and stores (K and N multiples of 4, arrays 16-byte aligned);
// otherwise scalar. Edges are zero-filled, so any M, N, K works. MIN_BLOCKS: blocks that must
// fit an SM at once (the compiler caps registers per thread to make them fit).
template <int BM, int BN, int BK, int WM, int WN, int TM, int TN>
struct OptimizedTile {
    static constexpr int THREADS = (BM / WM) * (BN / WN) * 32;
    static constexpr int LANES_N = WN / TN;      // lanes across a warp tile's columns
    static constexpr int STRIDE_M = WM / (TM / 4), STRIDE_N = WN / (TN / 4);  // sub-blocks
    static constexpr int A_PAD = 4;
    static constexpr int A_LOADS = BM * BK / 4 / THREADS;  // 4-float groups per thread
    static constexpr int B_LOADS = BK * BN / 4 / THREADS;
    static_assert(TM % 4 == 0 && TN % 4 == 0, "lane tiles are made of 4 x 4 sub-blocks");
    static_assert((WM / TM) * (WN / TN) == 32, "a warp tile is 32 lanes of TM x TN");
    static_assert(BM % WM == 0 && BN % WN == 0, "warp tiles must divide the block tile");
    static_assert(A_LOADS * THREADS * 4 == BM * BK && B_LOADS * THREADS * 4 == BK * BN,
                  "every thread loads whole 4-float groups of both slices");
};

// Four consecutive floats of a row-major matrix at (row, col), zeros past its edges.
template <bool VEC>
__device__ __forceinline__ float4 load4(const float* __restrict__ X, int rows, int cols,
                                        int row, int col) {
    if (row >= rows) return make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    const float* p = X + (long long)row * cols + col;
    if (VEC && col + 3 < cols) return *reinterpret_cast<const float4*>(p);
    float4 v;
    v.x = col < cols ? p[0] : 0.0f;
    v.y = col + 1 < cols ? p[1] : 0.0f;
    v.z = col + 2 < cols ? p[2] : 0.0f;
    v.w = col + 3 < cols ? p[3] : 0.0f;
    return v;
}

template <bool VEC>
__device__ __forceinline__ void store4(float* __restrict__ C, int M, int N, int row, int col,
                                       const float* v) {
    if (row >= M) return;
    float* p = C + (long long)row * N + col;
    if (VEC && col + 3 < N) {
        *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
        return;
    }
#pragma unroll
    for (int c = 0; c < 4; ++c)
        if (col + c < N) p[c] = v[c];
}

template <int BM, int BN, int BK, int WM, int WN, int TM, int TN, bool VEC, int MIN_BLOCKS>
__global__ void __launch_bounds__(OptimizedTile<BM, BN, BK, WM, WN, TM, TN>::THREADS, MIN_BLOCKS)
mmm_optimized(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
              int M, int N, int K) {
    using Tile = OptimizedTile<BM, BN, BK, WM, WN, TM, TN>;
    __shared__ __align__(16) float As[2][BK][BM + Tile::A_PAD];
    __shared__ __align__(16) float Bs[2][BK][BN];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int wm = (warp / (BN / WN)) * WM, wn = (warp % (BN / WN)) * WN;
    const int lm = (lane / Tile::LANES_N) * 4, ln = (lane % Tile::LANES_N) * 4;

    float4 a_next[Tile::A_LOADS], b_next[Tile::B_LOADS];
    auto fetch = [&](int kk) {  // global -> registers
#pragma unroll
        for (int l = 0; l < Tile::A_LOADS; ++l) {
            const int g = l * Tile::THREADS + threadIdx.x;  // 4-float group of the A slice
            a_next[l] = load4<VEC>(A, M, K, row0 + g / (BK / 4), kk + (g % (BK / 4)) * 4);
        }
#pragma unroll
        for (int l = 0; l < Tile::B_LOADS; ++l) {
            const int g = l * Tile::THREADS + threadIdx.x;
            b_next[l] = load4<VEC>(B, K, N, kk + g / (BN / 4), col0 + (g % (BN / 4)) * 4);
        }
    };
    auto stash = [&](int buf) {  // registers -> shared, A transposed
#pragma unroll
        for (int l = 0; l < Tile::A_LOADS; ++l) {
            const int g = l * Tile::THREADS + threadIdx.x;
            const int m = g / (BK / 4), k = (g % (BK / 4)) * 4;
            As[buf][k][m] = a_next[l].x;
            As[buf][k + 1][m] = a_next[l].y;
            As[buf][k + 2][m] = a_next[l].z;
            As[buf][k + 3][m] = a_next[l].w;
        }
#pragma unroll
        for (int l = 0; l < Tile::B_LOADS; ++l) {
            const int g = l * Tile::THREADS + threadIdx.x;
            *reinterpret_cast<float4*>(&Bs[buf][g / (BN / 4)][(g % (BN / 4)) * 4]) = b_next[l];
        }
    };

    float c[TM][TN] = {};
    fetch(0);
    stash(0);
    __syncthreads();
    const int slices = (K + BK - 1) / BK;
    for (int s = 0; s < slices; ++s) {
        const int buf = s & 1;
        if (s + 1 < slices) fetch((s + 1) * BK);
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            float a[TM], b[TN];
#pragma unroll
            for (int i = 0; i < TM; i += 4)
                *reinterpret_cast<float4*>(&a[i]) = *reinterpret_cast<const float4*>(
                    &As[buf][k][wm + (i / 4) * Tile::STRIDE_M + lm]);
#pragma unroll
            for (int j = 0; j < TN; j += 4)
                *reinterpret_cast<float4*>(&b[j]) = *reinterpret_cast<const float4*>(
                    &Bs[buf][k][wn + (j / 4) * Tile::STRIDE_N + ln]);
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) c[i][j] += a[i] * b[j];
        }
        if (s + 1 < slices) stash(buf ^ 1);
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = row0 + wm + (i / 4) * Tile::STRIDE_M + lm + i % 4;
#pragma unroll
        for (int j = 0; j < TN; j += 4)
            store4<VEC>(C, M, N, row, col0 + wn + (j / 4) * Tile::STRIDE_N + ln, &c[i][j]);
    }
}
