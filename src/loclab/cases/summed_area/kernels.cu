// Summed-area table kernels: out[i][j] = sum of a[0..i][0..j] for a row-major uint8 image `a`
// of rows x cols, into a uint32 table `out` of the same shape. Sums wrap modulo 2^32 (unsigned
// arithmetic), so every order of adding gives the golden's result exactly.
// Every kernel checks bounds, so any shape works (the host keeps rows and cols below
// 2^31 - 2^16, so that no int index runs past INT_MAX when it steps past a side by a tile).
// Compiled through NVRTC (no host headers): templates are instantiated by name expression.
//
// The lesson: a summed-area table is a scan along the rows and a scan down the columns. Along a
// row, consecutive elements are consecutive in memory; down a column, they are a row apart. A
// warp must therefore never scan "one column per thread, down the row" with its threads on
// neighbouring rows (their loads are a row apart: uncoalesced), but either transpose (so that
// both scans run along rows) or put its threads on neighbouring columns while walking down
// (coalesced: each load is a contiguous segment of a row).

#include "../../gpu/block_scan.cuh"

constexpr unsigned FULL_MASK = 0xffffffffu;
constexpr int WARP = 32;

// ---- gpu-rows-then-columns: the two scans as plainly written --------------------------------

// Pass 1: thread `row` scans its row alone. At each step the 32 threads of a warp touch 32
// elements `cols` apart: every load and store is its own sector (uncoalesced); L1 keeps the
// lines of `a` a warp walks along, but each store writes 4 bytes of a 32-byte sector.
template <int THREADS>
__global__ void __launch_bounds__(THREADS)
sat_rows_naive(const unsigned char* __restrict__ a, unsigned* __restrict__ out, int rows,
               int cols) {
    const long long stride = (long long)gridDim.x * THREADS;
    for (long long row = (long long)blockIdx.x * THREADS + threadIdx.x; row < rows;
         row += stride) {
        const unsigned char* in = a + row * cols;
        unsigned* dst = out + row * cols;
        unsigned sum = 0;
        for (int j = 0; j < cols; ++j) {
            sum += in[j];
            dst[j] = sum;
        }
    }
}

// Pass 2: thread `col` scans its column in place, carrying its running sum down the rows. A
// warp's 32 threads are on neighbouring columns, so each step loads and stores 128 contiguous
// bytes of a row (coalesced). But there are only `cols` threads, each with one load in flight
// at a time: for a square image far too few to keep memory busy.
template <int THREADS>
__global__ void __launch_bounds__(THREADS)
sat_columns_naive(unsigned* __restrict__ out, int rows, int cols) {
    const long long stride = (long long)gridDim.x * THREADS;
    for (long long col = (long long)blockIdx.x * THREADS + threadIdx.x; col < cols;
         col += stride) {
        unsigned sum = 0;
        for (int i = 0; i < rows; ++i) {
            unsigned* p = out + (size_t)i * cols + col;
            sum += *p;
            *p = sum;
        }
    }
}

// ---- block-wide scans ------------------------------------------------------------------------

// Warp and block scans: block_scan.cuh (loclab::block_exclusive_scan leaves the warp totals
// in the caller's shared memory; the callers' loops pass a barrier before the next use).
using loclab::block_exclusive_scan;
using loclab::warp_inclusive_scan;
using loclab::warp_sum;

// Index of element i of a chunk in the shared tile: one word of padding every 32 words, so that
// thread t reading its ITEMS consecutive elements (t * ITEMS + k) hits 32 different banks.
__device__ __forceinline__ int padded(int i) { return i + i / WARP; }

// ---- gpu-transpose: scan rows, transpose, scan rows, transpose back ------------------------

// The element type of a row scan's input by its size: the image's bytes or the table's words.
template <int BYTES> struct Element;
template <> struct Element<1> { using type = unsigned char; };
template <> struct Element<4> { using type = unsigned; };

// Inclusive scan of each row of `in` (rows x cols) into `out` (which may be `in` itself), a
// block per row. The row is taken THREADS * ITEMS elements at a time: the block loads the
// chunk coalesced (thread t: elements t, t + THREADS, ...; ITEMS loads in flight) into a shared
// tile, each thread scans ITEMS consecutive elements of the tile sequentially, a block-wide
// scan of the threads' sums gives each its offset, and the tile goes back out coalesced.
// `carry` holds the sum of the chunks before.
template <typename T, int THREADS, int ITEMS>
__device__ __forceinline__ void scan_rows(const T* in, unsigned* out, int rows, int cols) {
    constexpr int CHUNK = THREADS * ITEMS;
    __shared__ unsigned tile[CHUNK + CHUNK / WARP];
    __shared__ unsigned warp_totals[THREADS / WARP];
    const int t = threadIdx.x;
    for (int row = blockIdx.x; row < rows; row += gridDim.x) {
        const T* src = in + (size_t)row * cols;
        unsigned* dst = out + (size_t)row * cols;
        unsigned carry = 0;
        for (int k0 = 0; k0 < cols; k0 += CHUNK) {
            unsigned v[ITEMS];
#pragma unroll
            for (int k = 0; k < ITEMS; ++k) {
                const int i = k * THREADS + t;
                v[k] = k0 + i < cols ? (unsigned)src[k0 + i] : 0u;
            }
#pragma unroll
            for (int k = 0; k < ITEMS; ++k) tile[padded(k * THREADS + t)] = v[k];
            __syncthreads();
            unsigned sum = 0;
#pragma unroll
            for (int k = 0; k < ITEMS; ++k) {
                sum += tile[padded(t * ITEMS + k)];
                v[k] = sum;
            }
            unsigned total;
            const unsigned offset =
                carry + block_exclusive_scan<unsigned, THREADS>(sum, total, warp_totals);
#pragma unroll
            for (int k = 0; k < ITEMS; ++k) tile[padded(t * ITEMS + k)] = offset + v[k];
            __syncthreads();
#pragma unroll
            for (int k = 0; k < ITEMS; ++k) {
                const int i = k * THREADS + t;
                if (k0 + i < cols) dst[k0 + i] = tile[padded(i)];
            }
            carry += total;
            __syncthreads();  // the next chunk overwrites the tile
        }
    }
}

// gpu-transpose's row scans: of the image (IN_BYTES = 1) into the table, and of the transposed
// table in place (IN_BYTES = 4).
template <int IN_BYTES, int THREADS, int ITEMS>
__global__ void __launch_bounds__(THREADS)
sat_row_scan(const typename Element<IN_BYTES>::type* in, unsigned* out, int rows, int cols) {
    scan_rows<typename Element<IN_BYTES>::type, THREADS, ITEMS>(in, out, rows, cols);
}

// out (cols x rows) = in (rows x cols) transposed, through a TILE x (TILE + 1) shared tile (the
// padding puts a column of the tile in 32 banks): reads and writes are rows, coalesced. Blocks
// of TILE x BLOCK_ROWS threads; gridDim.y is capped at 65535, so a block steps down by
// gridDim.y tiles until every row is done.
template <int TILE, int BLOCK_ROWS>
__global__ void __launch_bounds__(TILE * BLOCK_ROWS)
sat_transpose(const unsigned* __restrict__ in, unsigned* __restrict__ out, int rows, int cols) {
    static_assert(TILE % BLOCK_ROWS == 0, "BLOCK_ROWS must divide TILE");
    __shared__ unsigned tile[TILE][TILE + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int col0 = blockIdx.x * TILE;
    for (int row0 = blockIdx.y * TILE; row0 < rows; row0 += gridDim.y * TILE) {
#pragma unroll
        for (int k = 0; k < TILE; k += BLOCK_ROWS) {
            const int r = row0 + ty + k, c = col0 + tx;
            if (r < rows && c < cols) tile[ty + k][tx] = in[(size_t)r * cols + c];
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TILE; k += BLOCK_ROWS) {
            const int r = col0 + ty + k, c = row0 + tx;  // row r of `out` is column r of `in`
            if (r < cols && c < rows) out[(size_t)r * rows + c] = tile[tx][ty + k];
        }
        __syncthreads();  // the next tile-row overwrites the tile
    }
}

// ---- gpu-coalesced-columns: one read-only pass for carries, one pass writing the table ------
//
// The image is cut into tiles of TILE_ROWS rows x TILE_COLS (128) columns: bands of rows, strips
// of columns. A warp owns a tile; lane l owns its 4 consecutive columns c = strip * 128 + 4 l,
// so a row of the tile is one 128-byte load of the warp (VEC = 4: one 4-byte load per lane)
// and one 512-byte store (VEC = 4: a 16-byte store per lane): every access is coalesced.
// Inside the tile the warp walks down the rows; the table's value is
//   out[i][j] = out[r0 - 1][j] + sum over rows r0..i of (rowoff[r] + local row prefix to j),
// where r0 is the band's first row and rowoff[r] the sum of a[r] left of the strip. So a tile
// needs, before it starts, the table's row above its band (`top`, its 128 values) and the
// row offsets of its rows (`rowoff`). They come from a first, read-only pass:
//   sat_tile_totals: per tile, its column totals (T: bands x cols) and row totals
//                    (R: strips x rows);
//   sat_scan_down:   exclusive running sums down T (U: sums of the bands above) and down R
//                    (rowoff: sums of the strips to the left), in place;
//   sat_top_scan:    inclusive scan along each row of U, in place: top, the table's row
//                    above each band (zeros for band 0);
//   sat_tile_scan:   each tile starts from `top` and its rows' `rowoff` and writes its table.
// The image is read twice (1 byte an element each time), the table written once (4 bytes); T,
// R and their scans are a 1/TILE_ROWS and a 1/TILE_COLS of the table and stay in L2.
// VEC = 4 needs cols % 4 == 0 and a 4-byte aligned image, a 16-byte aligned table (the host
// checks); VEC = 1 loads and stores element by element, with the same tiles.

constexpr int LANE_COLS = 4;
constexpr int TILE_COLS = WARP * LANE_COLS;
constexpr int TILE_WARPS = 8;  // warps (tiles) per block of the tile kernels: 256 threads

// The 4 bytes of row `row` at columns c..c+3 as one word (byte k = column c + k), zero bytes
// past the row's end.
template <int VEC>
__device__ __forceinline__ unsigned load_bytes(const unsigned char* __restrict__ a, size_t row,
                                               int cols, int c) {
    const unsigned char* p = a + row * cols + c;
    if constexpr (VEC == 4) {
        return c < cols ? __ldg(reinterpret_cast<const unsigned*>(p)) : 0u;
    } else {
        static_assert(VEC == 1, "VEC is 1 or 4");
        unsigned word = 0;
#pragma unroll
        for (int k = 0; k < LANE_COLS; ++k) {
            if (c + k < cols) word |= (unsigned)__ldg(p + k) << (8 * k);
        }
        return word;
    }
}

// Columns c..c+3 of row `row` of a uint32 matrix of `cols` columns: a 16-byte load (VEC = 4)
// or one load per column inside the row (zeros past its end).
template <int VEC>
__device__ __forceinline__ void load_words(const unsigned* __restrict__ m, size_t row, int cols,
                                           int c, unsigned (&v)[LANE_COLS]) {
    const unsigned* p = m + row * cols + c;
    if constexpr (VEC == 4) {
        const uint4 w = c < cols ? *reinterpret_cast<const uint4*>(p) : make_uint4(0, 0, 0, 0);
        v[0] = w.x, v[1] = w.y, v[2] = w.z, v[3] = w.w;
    } else {
#pragma unroll
        for (int k = 0; k < LANE_COLS; ++k) v[k] = c + k < cols ? p[k] : 0u;
    }
}

// Columns c..c+3 of row `row` of a uint32 matrix of `cols` columns: a 16-byte store (VEC = 4)
// or one store per column inside the row.
template <int VEC>
__device__ __forceinline__ void store_words(unsigned* __restrict__ m, size_t row, int cols,
                                            int c, const unsigned (&v)[LANE_COLS]) {
    unsigned* p = m + row * cols + c;
    if constexpr (VEC == 4) {
        if (c < cols) *reinterpret_cast<uint4*>(p) = make_uint4(v[0], v[1], v[2], v[3]);
    } else {
#pragma unroll
        for (int k = 0; k < LANE_COLS; ++k) {
            if (c + k < cols) p[k] = v[k];
        }
    }
}

// Where a warp's tile is: its band and strip, its first and last-plus-one rows, its lane's
// first column. Tiles are numbered strip fastest, so a block's 8 warps cover 1024 neighbouring
// columns of one band.
struct Tile {
    int band, strip, r0, r1, c;
    bool valid;

    template <int TILE_ROWS>
    __device__ __forceinline__ static Tile of_warp(int rows, int cols) {
        const int strips = (cols + TILE_COLS - 1) / TILE_COLS;
        const int bands = (rows + TILE_ROWS - 1) / TILE_ROWS;
        const long long tile = (long long)blockIdx.x * TILE_WARPS + threadIdx.x / WARP;
        Tile t;
        t.valid = tile < (long long)bands * strips;
        t.band = (int)(tile / strips);
        t.strip = (int)(tile % strips);
        t.r0 = t.band * TILE_ROWS;
        t.r1 = min(t.r0 + TILE_ROWS, rows);
        t.c = t.strip * TILE_COLS + (int)(threadIdx.x % WARP) * LANE_COLS;
        return t;
    }
};

// First pass: the warp walks down its tile with UNROLL rows' loads in flight, adding each
// lane's 4 columns (column totals) and, with a butterfly over the warp, each row's sum over the
// strip (row totals; lane k keeps the one of row k of every 32, so that the warp writes 32 row
// totals as one coalesced store). T[band][c..c+3] and R[strip][r0..r1) get the totals.
template <int TILE_ROWS, int VEC, int UNROLL>
__global__ void __launch_bounds__(TILE_WARPS * WARP)
sat_tile_totals(const unsigned char* __restrict__ a, unsigned* __restrict__ col_totals,
                unsigned* __restrict__ row_totals, int rows, int cols) {
    static_assert(TILE_ROWS % WARP == 0 && WARP % UNROLL == 0, "whole warps of rows");
    const Tile tile = Tile::of_warp<TILE_ROWS>(rows, cols);
    if (!tile.valid) return;  // the whole warp: a warp's lanes share their tile
    const int lane = threadIdx.x % WARP;
    unsigned col[LANE_COLS] = {0u, 0u, 0u, 0u};
    for (int r = tile.r0; r < tile.r1; r += WARP) {
        const int n = min(WARP, tile.r1 - r);  // rows in this group of 32, warp-uniform
        unsigned mine = 0;
        for (int k0 = 0; k0 < n; k0 += UNROLL) {
            unsigned word[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                word[u] = k0 + u < n ? load_bytes<VEC>(a, (size_t)(r + k0 + u), cols, tile.c)
                                     : 0u;
            }
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                unsigned sum = 0;
#pragma unroll
                for (int k = 0; k < LANE_COLS; ++k) {
                    const unsigned x = (word[u] >> (8 * k)) & 0xffu;
                    col[k] += x;
                    sum += x;
                }
                sum = warp_sum(sum);
                if (lane == k0 + u) mine = sum;
            }
        }
        if (lane < n) row_totals[(size_t)tile.strip * rows + r + lane] = mine;
    }
    store_words<VEC>(col_totals, (size_t)tile.band, cols, tile.c, col);
}

// Exclusive running sums down each column of a rows x cols matrix, in place: thread `col`
// walks down its column (neighbouring threads on neighbouring columns: coalesced), loading
// BATCH rows before storing them (BATCH loads in flight). For T (bands x cols) and R
// (strips x rows): both small and in L2.
template <int THREADS, int BATCH>
__global__ void __launch_bounds__(THREADS)
sat_scan_down(unsigned* m, int rows, int cols) {
    const long long stride = (long long)gridDim.x * THREADS;
    for (long long col = (long long)blockIdx.x * THREADS + threadIdx.x; col < cols;
         col += stride) {
        unsigned sum = 0;
        for (int r0 = 0; r0 < rows; r0 += BATCH) {
            unsigned v[BATCH];
#pragma unroll
            for (int b = 0; b < BATCH; ++b) {
                v[b] = r0 + b < rows ? m[(size_t)(r0 + b) * cols + col] : 0u;
            }
#pragma unroll
            for (int b = 0; b < BATCH; ++b) {
                if (r0 + b < rows) {
                    m[(size_t)(r0 + b) * cols + col] = sum;
                    sum += v[b];
                }
            }
        }
    }
}

// The table's row above each band: the inclusive scan along each row of U (bands x cols), in
// place.
template <int THREADS, int ITEMS>
__global__ void __launch_bounds__(THREADS)
sat_top_scan(unsigned* sums_above, int bands, int cols) {
    scan_rows<unsigned, THREADS, ITEMS>(sums_above, sums_above, bands, cols);
}

// Second pass: the warp starts from the table's row above its band (top[band], its 4 columns
// per lane) and walks down its tile, UNROLL rows' loads in flight. For each row: each lane's
// prefix of its 4 bytes, a warp scan of the lanes' sums (the prefix along the strip), plus the
// row's offset (the sums of the strips to the left; lane k loaded the one of row k of every
// 32, a shuffle hands it to all) is the full row prefix; added to the carried row above, it
// is the table's row, stored at once (coalesced).
template <int TILE_ROWS, int VEC, int UNROLL>
__global__ void __launch_bounds__(TILE_WARPS * WARP)
sat_tile_scan(const unsigned char* __restrict__ a, const unsigned* __restrict__ top,
              const unsigned* __restrict__ rowoff, unsigned* __restrict__ out, int rows,
              int cols) {
    static_assert(TILE_ROWS % WARP == 0 && WARP % UNROLL == 0, "whole warps of rows");
    const Tile tile = Tile::of_warp<TILE_ROWS>(rows, cols);
    if (!tile.valid) return;  // the whole warp
    const int lane = threadIdx.x % WARP;
    unsigned col[LANE_COLS];
    load_words<VEC>(top, (size_t)tile.band, cols, tile.c, col);
    for (int r = tile.r0; r < tile.r1; r += WARP) {
        const int n = min(WARP, tile.r1 - r);  // warp-uniform
        const unsigned mine = lane < n ? rowoff[(size_t)tile.strip * rows + r + lane] : 0u;
        for (int k0 = 0; k0 < n; k0 += UNROLL) {
            unsigned word[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                word[u] = k0 + u < n ? load_bytes<VEC>(a, (size_t)(r + k0 + u), cols, tile.c)
                                     : 0u;
            }
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                if (k0 + u < n) {  // warp-uniform: every lane reaches the shuffles
                    unsigned prefix[LANE_COLS];
                    unsigned sum = 0;
#pragma unroll
                    for (int k = 0; k < LANE_COLS; ++k) {
                        sum += (word[u] >> (8 * k)) & 0xffu;
                        prefix[k] = sum;
                    }
                    const unsigned before = warp_inclusive_scan(sum) - sum +
                                            __shfl_sync(FULL_MASK, mine, k0 + u);
#pragma unroll
                    for (int k = 0; k < LANE_COLS; ++k) col[k] += before + prefix[k];
                    store_words<VEC>(out, (size_t)(r + k0 + u), cols, tile.c, col);
                }
            }
        }
    }
}
