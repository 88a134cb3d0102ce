// The lectures' contrived row program on row-major float32 matrices a and b (rows x cols):
//     for each row i (parallel): acc = 0; for each column j: acc = sqrt(acc) + a[i][j]^2,
//     b[i][j] = acc.
// The column loop carries acc, so one thread owns one row in every kernel here; what differs
// is how a warp's accesses fall in memory. Every kernel checks bounds, so any shape works.
// Compiled through NVRTC (no host headers): templates are instantiated by name expression.

#include "../../gpu/async_copy.cuh"

// One step of the program. nvcc fuses the add and the multiply into an FMA (one rounding
// fewer than the CPU's); sqrtf is IEEE round-to-nearest without -use_fast_math.
__device__ __forceinline__ float step(float acc, float x) {
    return sqrtf(acc) + x * x;
}

// gpu-naive: thread i walks row i of a and b. At every step a warp's 32 loads are `cols`
// floats apart, one 32-byte sector each of which the thread uses 4 bytes now (uncoalesced);
// the rest of each line pays only if it survives in L1 until the thread's next steps. Few
// do: ncu on an H100 at 1000003 x 61 counted 4.8 GB read from DRAM for 244 MB of input.
__global__ void rows_naive(const float* __restrict__ a, float* __restrict__ b,
                           int rows, int cols) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows) {
        return;
    }
    const float* in = a + (size_t)i * cols;
    float* out = b + (size_t)i * cols;
    float acc = 0.f;
    for (int j = 0; j < cols; ++j) {
        acc = step(acc, in[j]);
        out[j] = acc;
    }
}

// gpu-transposed, the middle of its three launches: the same program on at = transpose(a)
// and bt = transpose(b), both cols x rows. Thread i still owns row i of a, now column i of
// at: at step j a warp reads and writes 32 consecutive floats of row j (one 128-byte line,
// coalesced). The transpositions around it read and write the matrix twice more.
__global__ void columns_coalesced(const float* __restrict__ at, float* __restrict__ bt,
                                  int rows, int cols) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows) {
        return;
    }
    float acc = 0.f;
    for (int j = 0; j < cols; ++j) {
        const size_t k = (size_t)j * rows + i;
        acc = step(acc, at[k]);
        bt[k] = acc;
    }
}

// Scalar or 16-byte moves between global and shared memory (VEC floats at a time).
template <int VEC> struct Vector;
template <> struct Vector<1> { using type = float; };
template <> struct Vector<4> { using type = float4; };

// A tile of BLOCK rows x CHUNK columns in shared memory, row stride CHUNK + VEC: for VEC = 1
// odd (row t starts in bank (CHUNK + 1) t % 32, a different one for each thread of a warp);
// for VEC = 4 every row starts 16-byte aligned and (CHUNK + 4) / 4 16-byte units after the
// one before, an odd number, so any 8 consecutive rows start in 8 different groups of 4 banks
// (a 16-byte access is served 8 threads at a time: conflict-free).
// Thread t moves the VEC floats at column (t % LANES) VEC of rows t / LANES, t / LANES +
// PASS_ROWS, ... of the sub-matrix, so each warp reads or writes 32 VEC consecutive floats of
// one or more rows (whole 128-byte lines for CHUNK >= 32): coalesced. `global` points at the
// sub-matrix's first element, rows `cols` apart; the last block of rows (nrows < BLOCK) and the
// last chunk of columns (width < CHUNK, a multiple of VEC) leave the threads past them idle.
template <int CHUNK, int BLOCK, int VEC>
struct Tile {
    using V = typename Vector<VEC>::type;
    static constexpr int STRIDE = CHUNK + VEC;
    static constexpr int LANES = CHUNK / VEC;        // threads across a row of the tile
    static constexpr int PASS_ROWS = BLOCK / LANES;  // rows the block moves per pass
    static constexpr int MOVES = CHUNK / VEC;        // vectors a thread moves per chunk
    static_assert(CHUNK % VEC == 0 && BLOCK % LANES == 0, "whole vectors, whole rows a pass");

    float* smem;
    int row, col;  // this thread's first element

    __device__ __forceinline__ Tile(float* smem_)
        : smem(smem_), row(threadIdx.x / LANES), col(threadIdx.x % LANES * VEC) {}

    // How many of this thread's MOVES vectors (rows row, row + PASS_ROWS, ...) lie inside the
    // nrows x width sub-matrix: one count, so that a move's predicate is k < count.
    __device__ __forceinline__ int count(int nrows, int width) const {
        return col < width && row < nrows ? min(MOVES, (nrows - row + PASS_ROWS - 1) / PASS_ROWS)
                                          : 0;
    }

    // Every copy of the chunk is in flight at once: MOVES cp.async per thread, a constant trip
    // count, no registers to wait in. (Loads into registers and then stores to the tile were
    // interleaved by ptxas, which kept 4 to 13 loads in flight; the whole-row tile below, so
    // loaded, reached 96.3% of copy on an H100, with cp.async 97.8%.) Cells outside the
    // sub-matrix are zero-filled from the sub-matrix's first element and nobody reads them.
    __device__ __forceinline__ void load(const float* __restrict__ global, int cols, int nrows,
                                         int width) {
        const int n = count(nrows, width);
        const float* from = global + (size_t)row * cols + col;
        const unsigned to = loclab::shared_address(smem + row * STRIDE + col);
#pragma unroll
        for (int k = 0; k < MOVES; ++k, from += PASS_ROWS * (size_t)cols) {
            loclab::copy_async<4 * VEC>(to + k * PASS_ROWS * STRIDE * sizeof(float),
                                        k < n ? from : global, k < n);
        }
        loclab::commit_copies();
        loclab::wait_copies<0>();
    }

    // Stores wait for nothing: a plain loop over this thread's vectors of the sub-matrix.
    __device__ __forceinline__ void store(float* __restrict__ global, int cols, int nrows,
                                          int width) const {
        const int n = count(nrows, width);
        float* to = global + (size_t)row * cols + col;
        const float* from = smem + row * STRIDE + col;
        for (int k = 0; k < n; ++k, to += PASS_ROWS * (size_t)cols, from += PASS_ROWS * STRIDE) {
            *reinterpret_cast<V*>(to) = *reinterpret_cast<const V*>(from);
        }
    }

    // Thread t runs the program along row t of the tile, in place, VEC floats a shared access
    // (conflict-free, see above). WIDTH = CHUNK unrolls a whole chunk; WIDTH = 0 walks the
    // last, narrower one.
    template <int WIDTH>
    __device__ __forceinline__ float walk(float acc, int width) {
        V* cell = reinterpret_cast<V*>(smem + threadIdx.x * STRIDE);
#pragma unroll
        for (int c = 0; c < (WIDTH ? WIDTH : width) / VEC; ++c) {
            V x = cell[c];
            if constexpr (VEC == 4) {
                x.x = acc = step(acc, x.x);
                x.y = acc = step(acc, x.y);
                x.z = acc = step(acc, x.z);
                x.w = acc = step(acc, x.w);
            } else {
                x = acc = step(acc, x);
            }
            cell[c] = x;
        }
        return acc;
    }
};

// gpu-staged, the lecture's fused program: a block of BLOCK threads owns BLOCK consecutive
// rows and moves them through shared memory CHUNK columns at a time, reading and writing
// global memory coalesced while each thread runs the program along its own row in shared
// memory. One pass over a and b, as in gpu-naive, but every line is used whole when it
// arrives. Shared memory: BLOCK * (CHUNK + VEC) floats. VEC = 4 (rows_staged_vec) needs
// cols % 4 == 0, so that every row starts 16-byte aligned. Rows of at most 64 floats go
// through whole (CHUNK = 64): one chunk, the block's rows one contiguous run of memory, two
// barriers. On an H100 at 1048576 x 64 (2026-11-27, same run, copy 2,976 GB/s): 32-column
// chunks 92.7% of copy, whole rows 96.3%, whole rows with 16-byte cp.async 97.8%.
template <int CHUNK, int BLOCK, int VEC>
__device__ __forceinline__ void staged(const float* __restrict__ a, float* __restrict__ b,
                                       int rows, int cols) {
    __shared__ __align__(16) float smem[BLOCK * Tile<CHUNK, BLOCK, VEC>::STRIDE];
    Tile<CHUNK, BLOCK, VEC> tile(smem);
    const int row0 = blockIdx.x * BLOCK;
    const int nrows = min(BLOCK, rows - row0);
    float acc = 0.f;
    // The barriers separate the phases: each reads what other threads wrote in the one
    // before, and the last (only where another chunk follows) frees the tile for it.
    for (int col0 = 0; col0 < cols; col0 += CHUNK) {
        const int width = min(CHUNK, cols - col0);
        tile.load(a + (size_t)row0 * cols + col0, cols, nrows, width);
        __syncthreads();
        if ((int)threadIdx.x < nrows) {
            acc = width == CHUNK ? tile.template walk<CHUNK>(acc, width)
                                 : tile.template walk<0>(acc, width);
        }
        __syncthreads();
        tile.store(b + (size_t)row0 * cols + col0, cols, nrows, width);
        if (col0 + CHUNK < cols) {
            __syncthreads();
        }
    }
}

template <int CHUNK, int BLOCK>
__global__ void __launch_bounds__(BLOCK)
rows_staged(const float* __restrict__ a, float* __restrict__ b, int rows, int cols) {
    staged<CHUNK, BLOCK, 1>(a, b, rows, cols);
}

template <int CHUNK, int BLOCK>
__global__ void __launch_bounds__(BLOCK)
rows_staged_vec(const float* __restrict__ a, float* __restrict__ b, int rows, int cols) {
    staged<CHUNK, BLOCK, 4>(a, b, rows, cols);
}
