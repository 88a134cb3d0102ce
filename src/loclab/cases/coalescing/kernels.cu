// The lectures' contrived row program on row-major float32 matrices a and b (rows x cols):
//     for each row i (parallel): acc = 0; for each column j: acc = sqrt(acc) + a[i][j]^2,
//     b[i][j] = acc.
// The column loop carries acc, so one thread owns one row in every kernel here; what differs
// is how a warp's accesses fall in memory. Every kernel checks bounds, so any shape works.
// Compiled through NVRTC (no host headers): templates are instantiated by name expression.

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

// A tile of BLOCK rows x CHUNK columns in shared memory, row stride CHUNK + 1 (odd: row t
// starts in bank (CHUNK + 1) t % 32, a different one for each thread of a warp).
// Thread t moves column t % CHUNK of rows t / CHUNK, t / CHUNK + PASS_ROWS, ... of the
// sub-matrix, so each warp reads or writes 32 consecutive floats of one row (a whole 128-byte
// line for CHUNK >= 32): coalesced. `global` points at the sub-matrix's first element, rows
// `cols` apart; the last block of rows (nrows < BLOCK) and the last chunk of columns
// (width < CHUNK) leave the threads past them idle. For CHUNK = 32 the bank of element
// (r, c) is (r + c) % 32: the 32 threads of a warp, one row of the tile, hit 32 banks.
template <int CHUNK, int BLOCK>
struct Tile {
    static constexpr int STRIDE = CHUNK + 1;
    static constexpr int PASS_ROWS = BLOCK / CHUNK;  // rows the block moves per pass
    static_assert(BLOCK % CHUNK == 0, "a pass of the block covers whole rows");

    float* smem;
    int row, col;  // this thread's first element

    __device__ __forceinline__ Tile(float* smem_)
        : smem(smem_), row(threadIdx.x / CHUNK), col(threadIdx.x % CHUNK) {}

    // How many of this thread's CHUNK elements (rows row, row + PASS_ROWS, ...) lie inside
    // the nrows x width sub-matrix: one count, so that a load's predicate is k < count.
    __device__ __forceinline__ int count(int nrows, int width) const {
        return col < width && row < nrows ? min(CHUNK, (nrows - row + PASS_ROWS - 1) / PASS_ROWS)
                                          : 0;
    }

    // Every load is issued before the first store to shared memory: CHUNK floats in flight
    // per thread. Elements outside the sub-matrix load its first element instead (a select,
    // not a branch) and land in tile cells nobody reads. With a branch per element, or one
    // offset per load, the compiler kept 32 64-bit addresses live across the chunk loop
    // (162 to 255 registers).
    __device__ __forceinline__ void load(const float* __restrict__ global, int cols, int nrows,
                                         int width) {
        const int n = count(nrows, width);
        float v[CHUNK];
        const float* from = global + (size_t)row * cols + col;
#pragma unroll
        for (int k = 0; k < CHUNK; ++k, from += PASS_ROWS * (size_t)cols) {
            v[k] = __ldg(k < n ? from : global);
        }
#pragma unroll
        for (int k = 0; k < CHUNK; ++k) {
            smem[(row + k * PASS_ROWS) * STRIDE + col] = v[k];
        }
    }

    // Stores wait for nothing: a plain loop over this thread's elements of the sub-matrix.
    __device__ __forceinline__ void store(float* __restrict__ global, int cols, int nrows,
                                          int width) const {
        const int n = count(nrows, width);
        float* to = global + (size_t)row * cols + col;
        const float* from = smem + row * STRIDE + col;
        for (int k = 0; k < n; ++k, to += PASS_ROWS * (size_t)cols, from += PASS_ROWS * STRIDE) {
            *to = *from;
        }
    }

    // Thread t runs the program along row t of the tile, in place: element c lies in bank
    // ((CHUNK + 1) t + c) % 32, a different bank for each thread of a warp. WIDTH = CHUNK
    // unrolls a whole chunk; WIDTH = 0 walks the last, narrower one.
    template <int WIDTH>
    __device__ __forceinline__ float walk(float acc, int width) {
        float* cell = smem + threadIdx.x * STRIDE;
#pragma unroll
        for (int c = 0; c < (WIDTH ? WIDTH : width); ++c) {
            acc = step(acc, cell[c]);
            cell[c] = acc;
        }
        return acc;
    }
};

// gpu-staged, the lecture's fused program: a block of BLOCK threads owns BLOCK consecutive
// rows and moves them through shared memory CHUNK columns at a time, reading and writing
// global memory coalesced while each thread runs the program along its own row in shared
// memory. One pass over a and b, as in gpu-naive, but every line is used whole when it
// arrives. Shared memory: BLOCK * (CHUNK + 1) floats. 16-byte loads and stores (float4, for
// cols % 4 == 0) were no faster on an H200 (86.8% of copy against 87.2% for <32, 256>).
template <int CHUNK, int BLOCK>
__global__ void __launch_bounds__(BLOCK)
rows_staged(const float* __restrict__ a, float* __restrict__ b, int rows, int cols) {
    __shared__ float smem[BLOCK * (CHUNK + 1)];
    Tile<CHUNK, BLOCK> tile(smem);
    const int row0 = blockIdx.x * BLOCK;
    const int nrows = min(BLOCK, rows - row0);
    float acc = 0.f;
    // The barriers separate the phases: each reads what other threads wrote in the one
    // before, and the last frees the tile for the next chunk.
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
        __syncthreads();
    }
}
