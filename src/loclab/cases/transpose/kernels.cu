// Matrix transposition kernels: out[c][r] = in[r][c] for a row-major float32 matrix `in` of
// rows x cols; `out` is cols x rows. Every kernel checks bounds, so any shape works.
// Compiled through NVRTC (no host headers): templates are instantiated by name expression.

// gpu-naive, the lecture's first kernel: one thread per element, blocks of TILE x TILE threads.
// A warp reads TILE consecutive floats of `in` (coalesced) and writes floats `rows` apart in
// `out` (strided: every thread touches its own 32-byte sector).
// gridDim.y is capped at 65535, so blocks step down by gridDim.y tiles until all rows are done
// (one step for any matrix under 2 million rows).
template <int TILE>
__global__ void transpose_naive(const float* __restrict__ in, float* __restrict__ out,
                                int rows, int cols) {
    const int col = blockIdx.x * TILE + threadIdx.x;
    for (int row = blockIdx.y * TILE + threadIdx.y; row < rows; row += gridDim.y * TILE) {
        if (col < cols) {
            out[(size_t)col * rows + row] = in[(size_t)row * cols + col];
        }
    }
}

// gpu-shared, gpu-shared-padded, gpu-optimized: a block stages a TILE x TILE tile of `in` in
// shared memory with coalesced reads, then writes it out as rows of `out`, also coalesced.
// The block is TILE x BLOCK_ROWS threads, so each thread moves TILE / BLOCK_ROWS elements per
// phase (BLOCK_ROWS = TILE: one element each, the lecture's version).
// PAD = 0 is the lecture's tile[T][T]: in the write phase a warp reads a column of the tile,
// TILE floats apart, all in one bank (a 32-way conflict for TILE = 32). PAD = 1 makes the row
// stride TILE + 1 words, so a column falls in 32 different banks.
template <int TILE, int BLOCK_ROWS, int PAD>
__global__ void transpose_staged(const float* __restrict__ in, float* __restrict__ out,
                                 int rows, int cols) {
    static_assert(TILE % BLOCK_ROWS == 0, "BLOCK_ROWS must divide TILE");
    __shared__ float tile[TILE][TILE + PAD];
    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int col0 = blockIdx.x * TILE;
    // As in transpose_naive, a block takes every gridDim.y-th tile-row (one for < 2M rows).
    for (int row0 = blockIdx.y * TILE; row0 < rows; row0 += gridDim.y * TILE) {
        const int in_col = col0 + tx;
#pragma unroll
        for (int k = 0; k < TILE; k += BLOCK_ROWS) {
            const int in_row = row0 + ty + k;
            if (in_col < cols && in_row < rows) {
                tile[ty + k][tx] = in[(size_t)in_row * cols + in_col];
            }
        }
        __syncthreads();

        // Row `col0 + ty + k` of `out` is column `col0 + ty + k` of `in`.
        const int out_col = row0 + tx;
#pragma unroll
        for (int k = 0; k < TILE; k += BLOCK_ROWS) {
            const int out_row = col0 + ty + k;
            if (out_col < rows && out_row < cols) {
                out[(size_t)out_row * rows + out_col] = tile[tx][ty + k];
            }
        }
        __syncthreads();  // the next tile-row overwrites the tile
    }
}

// gpu-optimized: TILE x TILE tiles with 16-byte global accesses. Each of the THREADS threads
// loads TILE*TILE/4/THREADS float4 from rows of `in` (all its loads are in flight before the
// first use), the block stages the tile in tile[TILE][TILE+1], and each thread then writes
// float4 made of 4 consecutive rows of one column. Needs rows % 4 == 0 and cols % 4 == 0 so
// that every row starts 16-byte aligned; the host uses transpose_staged otherwise.
// Blocks are numbered down the columns of tiles (tile-row fastest), so the few hundred blocks
// in flight cover one or two columns of tiles: each row of `out` they write is a long run,
// each row of `in` they read is short. Long write runs pay: on an H200 this order reached
// 97.7% of copy bandwidth at 16384 x 16384 (row-major order: 94.8%) and 96.2% at 32768 x 32768
// (blocks walking 64 tile-rows at a time: 89.4%).
template <int TILE, int THREADS>
__global__ void __launch_bounds__(THREADS)
transpose_vectorized(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
    constexpr int ROW_VECS = TILE / 4;
    constexpr int VECS = TILE * ROW_VECS / THREADS;
    static_assert(TILE * ROW_VECS % THREADS == 0, "THREADS must divide the tile's float4 count");
    __shared__ float tile[TILE][TILE + 1];

    const int tiles_down = (rows + TILE - 1) / TILE;
    const int row0 = (blockIdx.x % tiles_down) * TILE;
    const int col0 = (blockIdx.x / tiles_down) * TILE;

    float4 v[VECS];
#pragma unroll
    for (int k = 0; k < VECS; ++k) {
        const int q = threadIdx.x + k * THREADS;
        const int r = q / ROW_VECS, c = 4 * (q % ROW_VECS);
        v[k] = make_float4(0.f, 0.f, 0.f, 0.f);
        if (row0 + r < rows && col0 + c < cols) {
            v[k] = __ldg(reinterpret_cast<const float4*>(in + (size_t)(row0 + r) * cols + col0 + c));
        }
    }
#pragma unroll
    for (int k = 0; k < VECS; ++k) {
        const int q = threadIdx.x + k * THREADS;
        const int r = q / ROW_VECS, c = 4 * (q % ROW_VECS);
        tile[r][c] = v[k].x;
        tile[r][c + 1] = v[k].y;
        tile[r][c + 2] = v[k].z;
        tile[r][c + 3] = v[k].w;
    }
    __syncthreads();

#pragma unroll
    for (int k = 0; k < VECS; ++k) {
        const int q = threadIdx.x + k * THREADS;
        const int c = q / ROW_VECS, r = 4 * (q % ROW_VECS);  // column c of the tile, rows r..r+3
        if (col0 + c < cols && row0 + r < rows) {
            *reinterpret_cast<float4*>(out + (size_t)(col0 + c) * rows + row0 + r) =
                make_float4(tile[r][c], tile[r + 1][c], tile[r + 2][c], tile[r + 3][c]);
        }
    }
}

// gpu-optimized where rows of `in` or `out` do not start on a 16-byte boundary (rows or cols
// not a multiple of 4). There a tile's row of `out` starts mid-sector, so with tiles at
// multiples of TILE two blocks write parts of one 32-byte sector at different times; those
// partial writes, not the width of the accesses, held the staged kernel to 64-71% of copy
// at 16383 x 16385 on an H100 (16-byte loads and stores that straddle rows: no faster).
// Here every block owns whole sectors of `out`: in row c of `out` its window of TILE floats
// starts off_c = (c * rows) % 8 floats before rowb, its first row, so that the window starts
// on a sector, and the windows of the blocks down a column of tiles cover the row with no
// gap and no overlap (one block more down the column covers the last off_c). The block
// stages rows rowb - 8 ... rowb + TILE - 1 of `in` (SHIFT = 1; the 8 above for the shifted
// windows, read again by the block above, mostly from L2; SHIFT = 0 when rows % 8 == 0 and
// every window starts on a sector anyway) with all its loads in flight before the first
// store to shared memory (a loop whose trip count depended on threadIdx kept about 4 in
// flight: 80% of copy, against 99% with them all), and writes each window as aligned float4s,
// float by float only at the matrix's first and last rows. Blocks are numbered down the
// columns of tiles, as in transpose_vectorized.
template <int TILE, int THREADS, int SHIFT>
__global__ void __launch_bounds__(THREADS)
transpose_sectors(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
    constexpr int SECTOR = 8;  // floats in a 32-byte sector
    constexpr int ABOVE = SHIFT ? SECTOR : 0;
    constexpr int HIGH = TILE + ABOVE;
    constexpr int STEP = THREADS / TILE;
    constexpr int LOADS = (HIGH + STEP - 1) / STEP;
    constexpr int ROW_VECS = TILE / 4;
    constexpr int VECS = TILE * ROW_VECS / THREADS;
    static_assert(THREADS % TILE == 0 && TILE * ROW_VECS % THREADS == 0, "THREADS vs TILE");
    __shared__ float tile[HIGH][TILE + 1];

    const int tiles_down = (rows + ABOVE + TILE - 1) / TILE;  // windows reach rows + 7
    const int rowb = (blockIdx.x % tiles_down) * TILE;
    const int col0 = (blockIdx.x / tiles_down) * TILE;
    const int tx = threadIdx.x % TILE;
    const int ty = threadIdx.x / TILE;

    float v[LOADS];
#pragma unroll
    for (int k = 0; k < LOADS; ++k) {
        const int rr = ty + k * STEP;
        const int r = rowb - ABOVE + rr;
        v[k] = 0.f;
        if (rr < HIGH && r >= 0 && r < rows && col0 + tx < cols) {
            v[k] = __ldg(in + (size_t)r * cols + col0 + tx);
        }
    }
#pragma unroll
    for (int k = 0; k < LOADS; ++k) {
        const int rr = ty + k * STEP;
        if (rr < HIGH) tile[rr][tx] = v[k];
    }
    __syncthreads();

#pragma unroll
    for (int k = 0; k < VECS; ++k) {
        const int q = threadIdx.x + k * THREADS;
        const int cc = q / ROW_VECS, w = q % ROW_VECS;  // row col0 + cc of out, float4 w
        const int c = col0 + cc;
        if (c < cols) {
            const int off = SHIFT ? (int)(((long long)c * rows) & (SECTOR - 1)) : 0;
            const int p = rowb - off + 4 * w;    // the float4's first position in the row
            const int rr = ABOVE - off + 4 * w;  // and its row of the staged tile
            float* const to = out + (size_t)c * rows + p;
            if (p >= 0 && p + 3 < rows) {
                *reinterpret_cast<float4*>(to) =
                    make_float4(tile[rr][cc], tile[rr + 1][cc], tile[rr + 2][cc], tile[rr + 3][cc]);
            } else {
#pragma unroll
                for (int lane = 0; lane < 4; ++lane) {
                    if (p + lane >= 0 && p + lane < rows) to[lane] = tile[rr + lane][cc];
                }
            }
        }
    }
}
