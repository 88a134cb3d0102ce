// The warp-tiled product of one slice, shared by the kernels that compute a tile of a matrix
// product from slices staged in shared memory (mmm's gpu-optimized: A^T . B; bmmm's: the 0/1
// mask . C). A BM x BN tile of the result per block, split into WM x WN warp tiles; each lane
// holds a TM x TN block in registers, as (TM/4) x (TN/4) sub-blocks of 4 x 4 spread
// WM/(TM/4) rows and WN/(TN/4) columns apart, so that a warp's shared-memory reads are 16-byte
// vectors of consecutive floats (lanes that share a row or column read the same address: a
// broadcast, no bank conflict). Per step along the sum a lane loads TM + TN floats for
// TM x TN FMAs: register reuse TM x TN / (TM + TN). A case's kernels.cu includes it by a
// relative quoted path; it brings async_copy.cuh (copy_slice below copies by cp.async).
#ifndef LOCLAB_WARP_TILE_CUH
#define LOCLAB_WARP_TILE_CUH

#include "async_copy.cuh"

namespace loclab {

template <int BM, int BN, int WM, int WN, int TM_, int TN_>
struct WarpTile {
    static constexpr int TM = TM_, TN = TN_;
    static constexpr int THREADS = (BM / WM) * (BN / WN) * 32;
    static constexpr int LANES_N = WN / TN;      // lanes across a warp tile's columns
    static constexpr int STRIDE_M = WM / (TM / 4), STRIDE_N = WN / (TN / 4);  // sub-blocks
    static_assert(TM % 4 == 0 && TN % 4 == 0, "lane tiles are made of 4 x 4 sub-blocks");
    static_assert((WM / TM) * (WN / TN) == 32, "a warp tile is 32 lanes of TM x TN");
    static_assert(BM % WM == 0 && BN % WN == 0, "warp tiles must divide the block tile");

    // This thread's first row and column in the block tile (its first sub-block's corner).
    int row, col;

    __device__ __forceinline__ WarpTile() {
        const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
        row = (warp / (BN / WN)) * WM + (lane / LANES_N) * 4;
        col = (warp % (BN / WN)) * WN + (lane % LANES_N) * 4;
    }

    // Row i (< TM) and column j (< TN) of this thread's block, in the block tile.
    __device__ __forceinline__ int row_of(int i) const { return row + (i / 4) * STRIDE_M + i % 4; }
    __device__ __forceinline__ int col_of(int j) const { return col + (j / 4) * STRIDE_N + j % 4; }

    // acc += As . Bs for one slice: As is DEPTH x BM (the left operand transposed), Bs
    // DEPTH x BN, both row-major in shared memory. Unrolled 16 steps at a time: a deeper
    // slice repeats the same code (an unrolled 32 steps of 16 x 8 is 70 KB of instructions).
    template <int DEPTH>
    __device__ __forceinline__ void multiply(const float* as, const float* bs,
                                             float (&acc)[TM][TN]) const {
        constexpr int UNROLLED = DEPTH < 16 ? DEPTH : 16;
        static_assert(DEPTH % UNROLLED == 0, "a slice is whole groups of unrolled steps");
#pragma unroll 1
        for (int k0 = 0; k0 < DEPTH; k0 += UNROLLED) {
#pragma unroll
            for (int k = k0; k < k0 + UNROLLED; ++k) {
                float a[TM], b[TN];
#pragma unroll
                for (int i = 0; i < TM; i += 4)
                    *reinterpret_cast<float4*>(&a[i]) =
                        *reinterpret_cast<const float4*>(as + k * BM + row_of(i));
#pragma unroll
                for (int j = 0; j < TN; j += 4)
                    *reinterpret_cast<float4*>(&b[j]) =
                        *reinterpret_cast<const float4*>(bs + k * BN + col_of(j));
#pragma unroll
                for (int i = 0; i < TM; ++i)
#pragma unroll
                    for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * b[j];
            }
        }
    }

    // The block at (row0, col0) of Out (rows x cols, row-major) from acc, outside Out skipped.
    // VEC: 16-byte stores (cols a multiple of 4, Out 16-byte aligned); otherwise 4-byte.
    template <bool VEC>
    __device__ __forceinline__ void store(float* __restrict__ out, int rows, int cols, int row0,
                                          int col0, const float (&acc)[TM][TN]) const {
#pragma unroll
        for (int i = 0; i < TM; ++i) {
            const int r = row0 + row_of(i);
            if (r >= rows) continue;
#pragma unroll
            for (int j = 0; j < TN; j += 4) {
                const int c = col0 + col_of(j);
                float* p = out + (long long)r * cols + c;
                if (VEC && c + 3 < cols) {
                    *reinterpret_cast<float4*>(p) =
                        make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]);
                    continue;
                }
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    if (c + e < cols) p[e] = acc[i][j + e];
            }
        }
    }

};

// ROWS x COLS floats of X (rows x cols, rows ld floats apart, ld a multiple of 4) at (row0,
// col0) into S (ROWS x COLS, row-major), asynchronously, 16 bytes a copy, zeros outside X.
// THREADS share the copies; where they outnumber them the last ones idle.
template <int ROWS, int COLS, int THREADS>
__device__ __forceinline__ void copy_slice(float* S, const float* __restrict__ X, int rows,
                                           int cols, int ld, int row0, int col0) {
    constexpr int GROUPS = ROWS * COLS / 4, COPIES = (GROUPS + THREADS - 1) / THREADS;
    static_assert(COLS % 4 == 0, "a slice's rows are whole 16-byte groups");
#pragma unroll
    for (int l = 0; l < COPIES; ++l) {
        const int g = l * THREADS + threadIdx.x, e = g * 4, r = e / COLS, c = e % COLS;
        if (COPIES * THREADS != GROUPS && g >= GROUPS) break;
        const bool valid = row0 + r < rows && col0 + c < cols;
        copy_async<16>(S + e, valid ? X + (long long)(row0 + r) * ld + col0 + c : X, valid);
    }
}

}  // namespace loclab

#endif  // LOCLAB_WARP_TILE_CUH
