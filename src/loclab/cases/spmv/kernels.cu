// Sparse matrix-vector product kernels: y = A x for a CSR matrix A of rows x cols with nnz
// nonzeros: float32 values `data`, int32 column `indices`, int32 row offsets `indptr` (rows + 1:
// row r holds nonzeros indptr[r] .. indptr[r + 1] - 1), float32 x (cols) and y (rows).
// The host keeps nnz below 2^31; rows + nnz (the merge path's length) is counted in 64 bits.
// Compiled through NVRTC (no host headers): templates are instantiated by name expression.
//
// The lesson: every kernel streams data and indices once and gathers x[indices[j]] (a random
// sector of x each time, from L2 while x fits there); what separates them is how rows of very
// different lengths are mapped onto threads.

#include "../../gpu/block_scan.cuh"

constexpr unsigned FULL_MASK = 0xffffffffu;
constexpr int WARP = 32;
constexpr int GROUPED_THREADS = 256;  // spmv_grouped's block size (gpu.py launches it so)
constexpr int NO_ROW = -1;

// A nonzero's product: its value times the entry of x its column selects. All three loads go
// through the read-only data cache; x's entries are the ones it may hit again.
__device__ __forceinline__ float product(const float* __restrict__ data,
                                         const int* __restrict__ indices,
                                         const float* __restrict__ x, int j) {
    return __ldg(data + j) * __ldg(x + __ldg(indices + j));
}

// gpu-row-per-thread, scalar CSR: thread i computes y[i] alone, walking its row. The 32 lanes
// of a warp walk 32 rows at once, so each load instruction touches 32 places a row length
// apart (uncoalesced), and the warp lasts as long as its longest row: a power-law matrix's
// longest rows keep a few threads busy long after the others have finished.
template <int THREADS>
__global__ void __launch_bounds__(THREADS)
spmv_row_per_thread(const float* __restrict__ data, const int* __restrict__ indices,
                    const int* __restrict__ indptr, const float* __restrict__ x,
                    float* __restrict__ y, int rows) {
    const long long stride = (long long)gridDim.x * THREADS;
    for (long long row = (long long)blockIdx.x * THREADS + threadIdx.x; row < rows;
         row += stride) {
        const int end = indptr[row + 1];
        float acc = 0.f;
        for (int j = indptr[row]; j < end; ++j) {
            acc += product(data, indices, x, j);
        }
        y[row] = acc;
    }
}

using loclab::group_sum;  // block_scan.cuh

// gpu-warp-per-row, vector CSR: a group of G lanes per row (G from the mean row length, 32 a
// full warp), the lanes strided along the row (consecutive nonzeros: coalesced), then a
// shuffle sum. With G < 32 a warp covers 32 / G consecutive rows. Rows longer than G nonzeros
// loop; a very long row still falls on one group. The warps loop over their rows together
// (warp-uniform), so every lane reaches the shuffles.
template <int G>
__global__ void __launch_bounds__(GROUPED_THREADS)
spmv_grouped(const float* __restrict__ data, const int* __restrict__ indices,
             const int* __restrict__ indptr, const float* __restrict__ x, float* __restrict__ y,
             int rows) {
    static_assert(G >= 1 && G <= WARP && (G & (G - 1)) == 0, "G: a power of two <= 32");
    constexpr int ROWS_PER_WARP = WARP / G;
    const int lane = threadIdx.x % G;
    const int group = threadIdx.x % WARP / G;
    const long long warp = ((long long)blockIdx.x * GROUPED_THREADS + threadIdx.x) / WARP;
    const long long warps = (long long)gridDim.x * GROUPED_THREADS / WARP;
    for (long long row0 = warp * ROWS_PER_WARP; row0 < rows; row0 += warps * ROWS_PER_WARP) {
        const long long row = row0 + group;
        float acc = 0.f;
        if (row < rows) {
            const int end = indptr[row + 1];
            for (int j = indptr[row] + lane; j < end; j += G) {
                acc += product(data, indices, x, j);
            }
        }
        acc = group_sum<G>(acc);
        if (lane == 0 && row < rows) {
            y[row] = acc;
        }
    }
}

// ---- block-wide scans of (row, partial sum) pairs ------------------------------------------

struct RowSum {
    int row;
    float sum;
};

__device__ __forceinline__ RowSum shuffle_up(RowSum v, int delta) {
    return {__shfl_up_sync(FULL_MASK, v.row, delta), __shfl_up_sync(FULL_MASK, v.sum, delta)};
}

// The segmented scan's operator (a, then b): a head in b (b.row != NO_ROW: b starts the row
// it names) restarts the sum; else b's products continue a's row. Identity: {NO_ROW, 0}.
struct HeadsOp {
    __device__ __forceinline__ RowSum operator()(RowSum a, RowSum b) const {
        return b.row != NO_ROW ? b : RowSum{a.row, a.sum + b.sum};
    }
};

// Reduce by key for rows that never decrease along the scan (merge path: a pair is the row a
// range ends in and the range's partial sum of that row): equal rows add up, a later row
// replaces. Used with {NO_ROW, 0} on the left only (no row is NO_ROW).
struct RowsOp {
    __device__ __forceinline__ RowSum operator()(RowSum a, RowSum b) const {
        return {b.row, a.row == b.row ? a.sum + b.sum : b.sum};
    }
};

// Exclusive scan of one pair per thread over a block of THREADS threads (a multiple of 32, at
// most 1024), under an associative Op with left identity {NO_ROW, 0}: Kogge-Stone in each warp
// through shuffles, then each warp combines the totals of the warps before it (at most 31).
// Every thread of the block must call it.
template <int THREADS, typename Op>
__device__ __forceinline__ RowSum block_exclusive_scan(RowSum item, Op op) {
    static_assert(THREADS % WARP == 0 && THREADS <= WARP * WARP, "THREADS: warps, at most 32");
    constexpr int WARPS = THREADS / WARP;
    __shared__ RowSum warp_totals[WARPS];
    const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
    RowSum inclusive = item;
#pragma unroll
    for (int delta = 1; delta < WARP; delta *= 2) {
        const RowSum before = shuffle_up(inclusive, delta);
        if (lane >= delta) inclusive = op(before, inclusive);
    }
    if (lane == WARP - 1) warp_totals[warp] = inclusive;
    __syncthreads();
    RowSum prefix{NO_ROW, 0.f};
    for (int w = 0; w < warp; ++w) prefix = op(prefix, warp_totals[w]);
    const RowSum previous = shuffle_up(inclusive, 1);
    __syncthreads();  // warp_totals may be reused by a later call
    return lane == 0 ? prefix : op(prefix, previous);
}

// ---- gpu-segmented-scan: the lecture's products + segmented scan by row ---------------------

// The row holding nonzero t: the last row r with indptr[r] <= t (empty rows before it share
// its start). For t < nnz it is below rows and not empty; for t = nnz it is rows.
__device__ __forceinline__ int row_of(const int* __restrict__ indptr, int rows, int t) {
    int low = 0, high = rows;  // indptr[low] <= t; the answer lies in [low, high]
    while (low < high) {
        const int mid = low + (high - low + 1) / 2;
        if (__ldg(indptr + mid) <= t) {
            low = mid;
        } else {
            high = mid - 1;
        }
    }
    return low;
}

// For each tile of TILE consecutive nonzeros: the rows holding its first and last nonzero (a
// thread per tile, a binary search each), so that the scan kernel reads them instead of
// searching in every block.
template <int TILE>
__global__ void spmv_tile_rows(const int* __restrict__ indptr, int rows, int nnz,
                               int* __restrict__ first_row, int* __restrict__ last_row) {
    const long long tiles = ((long long)nnz + TILE - 1) / TILE;
    const long long tile = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (tile < tiles) {
        const long long start = tile * TILE;
        first_row[tile] = row_of(indptr, rows, (int)start);
        last_row[tile] = row_of(indptr, rows, (int)(start + TILE < nnz ? start + TILE - 1 : nnz - 1));
    }
}

// Block b owns nonzeros [b TILE, b TILE + TILE) (TILE = THREADS x ITEMS), in four steps:
// 1. every product, striped over the threads (coalesced loads of data and indices, gathered
//    x), into shared memory; no heads yet;
// 2. head flags: each row that starts in the tile marks its first product with its row index
//    (the lecture's scatter of rowPtr into the flags; a row of length 0 starts nowhere);
// 3. each thread sums its ITEMS consecutive products segment by segment (lane l reads word
//    l ITEMS + k: ITEMS odd puts the 32 lanes in 32 banks), and the block scans the threads'
//    (last head, sum since it) pairs: each thread's carry-in;
// 4. each thread walks its products again and, at each row's last product in the tile,
//    writes the row's total: a store for a row wholly inside the tile, an atomicAdd into y
//    (zeroed by the host) for the first and last rows of the tile, which may cross into the
//    neighbouring tiles. Rows of length 0 get no write: they stay zero.
template <int THREADS, int ITEMS>
__global__ void __launch_bounds__(THREADS)
spmv_segmented_scan(const float* __restrict__ data, const int* __restrict__ indices,
                    const int* __restrict__ indptr, const float* __restrict__ x,
                    float* __restrict__ y, const int* __restrict__ first_row,
                    const int* __restrict__ last_row, int nnz) {
    constexpr int TILE = THREADS * ITEMS;
    __shared__ float products[TILE];
    __shared__ int heads[TILE];
    const int tile = blockIdx.x;
    const int start = (int)((long long)tile * TILE);  // below nnz < 2^31
    const int count = min(TILE, nnz - start);
    const int first = first_row[tile], last = last_row[tile];
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        const int i = k * THREADS + threadIdx.x;
        if (i < count) {
            products[i] = product(data, indices, x, start + i);
            heads[i] = NO_ROW;
        }
    }
    __syncthreads();
    for (int row = first + threadIdx.x; row <= last; row += THREADS) {
        const int row_start = __ldg(indptr + row);
        if (row_start >= start && row_start < __ldg(indptr + row + 1)) {
            heads[row_start - start] = row;
        }
    }
    __syncthreads();
    const int mine = threadIdx.x * ITEMS;
    RowSum own{NO_ROW, 0.f};
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        if (mine + k < count) {
            own = HeadsOp()(own, RowSum{heads[mine + k], products[mine + k]});
        }
    }
    RowSum run = block_exclusive_scan<THREADS>(own, HeadsOp());
    if (run.row == NO_ROW) run.row = first;  // no head before: the row the tile starts in
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        const int i = mine + k;
        if (i < count) {
            run = HeadsOp()(run, RowSum{heads[i], products[i]});
            if (i == count - 1 || heads[i + 1] != NO_ROW) {  // the row's last product here
                if (run.row == first || i == count - 1) {
                    atomicAdd(y + run.row, run.sum);
                } else {
                    y[run.row] = run.sum;
                }
            }
        }
    }
}

// ---- gpu-merge-path: Merrill and Garland's merge-based CSR ------------------------------------

// Where a diagonal crosses the merge path of `rows` row ends (row_end(i): the offset one past
// row i's last nonzero, non-decreasing) and the nonzero indices first, first + 1, ... (nnz of
// them): how many row ends lie before it (the other diagonal - that are nonzeros). The merge
// takes a row end when it is at most the next nonzero's index (an empty row ends before the
// next row's first nonzero), so this is the least r with row_end(r) > first + diagonal - r - 1.
template <typename Index, typename RowEnd>
__device__ __forceinline__ Index merge_path_rows(Index diagonal, Index rows, Index nnz,
                                                 Index first, RowEnd row_end) {
    Index low = diagonal > nnz ? diagonal - nnz : 0;
    Index high = diagonal < rows ? diagonal : rows;
    while (low < high) {
        const Index mid = low + (high - low) / 2;
        if (row_end(mid) <= first + (diagonal - mid - 1)) {
            low = mid + 1;
        } else {
            high = mid;
        }
    }
    return low;
}

struct GlobalRowEnds {  // row i of the matrix ends at indptr[i + 1]
    const int* __restrict__ indptr;
    __device__ __forceinline__ int operator()(long long i) const { return __ldg(indptr + i + 1); }
};

struct SharedRowEnds {  // row i of a tile ends at ends[i]
    const int* ends;
    __device__ __forceinline__ int operator()(int i) const { return ends[i]; }
};

// The merge path's coordinate (rows before it) at the start of each tile of TILE items, and
// at the path's end: a thread per tile boundary, a binary search each.
template <int TILE>
__global__ void spmv_merge_tiles(const int* __restrict__ indptr, int rows, int nnz,
                                 int* __restrict__ tile_row) {
    const long long items = (long long)rows + nnz;
    const long long tiles = (items + TILE - 1) / TILE;
    const long long tile = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (tile <= tiles) {
        const long long diagonal = min(tile * TILE, items);
        tile_row[tile] = (int)merge_path_rows<long long>(diagonal, rows, nnz, 0LL,
                                                         GlobalRowEnds{indptr});
    }
}

// Block b owns merge items [b TILE, b TILE + TILE) (TILE = THREADS x ITEMS), rows
// row0 = tile_row[b] .. row1 = tile_row[b + 1] and nonzeros nz0 .. nz1 (nz = item - row):
// 1. the tile's row ends and products, striped over the threads (coalesced) into shared
//    memory; together at most TILE of them;
// 2. each thread finds where its diagonal (ITEMS apart) crosses the tile's merge path (a binary
//    search in shared memory) and walks its ITEMS items (a nonzero adds its product, a row end
//    starts the next row's sum) to the row it ends in and that row's partial sum;
// 3. an exclusive scan by row of those pairs gives each thread the partial sum of its first
//    row from the threads before it;
// 4. each thread walks its items again from that sum and writes every row it completes. The
//    last thread ends with the tile's carry-out, the partial sum of row1 (which ends in a later
//    tile): spmv_merge_fixup adds it into y after every tile has written.
// Rows of length 0 are row ends like any other: their y is written 0.
// The launch bounds ask for 2048 threads per SM (32 registers a thread): every gather of x in
// flight counts.
template <int THREADS, int ITEMS>
__global__ void __launch_bounds__(THREADS, 2048 / THREADS)
spmv_merge_path(const float* __restrict__ data, const int* __restrict__ indices,
                const int* __restrict__ indptr, const float* __restrict__ x,
                float* __restrict__ y, const int* __restrict__ tile_row,
                int* __restrict__ carry_row, float* __restrict__ carry_sum, int rows, int nnz) {
    constexpr int TILE = THREADS * ITEMS;
    __shared__ int row_ends[TILE + 1];
    __shared__ float products[TILE];
    const int tile = blockIdx.x;
    const long long item0 = (long long)tile * TILE;
    const long long item1 = min(item0 + TILE, (long long)rows + nnz);
    const int row0 = tile_row[tile], row1 = tile_row[tile + 1];
    const int nz0 = (int)(item0 - row0), nz1 = (int)(item1 - row1);
    const int tile_rows = row1 - row0, tile_nnz = nz1 - nz0;
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        const int i = k * THREADS + threadIdx.x;
        if (i < tile_rows) row_ends[i] = __ldg(indptr + row0 + 1 + i);
        if (i < tile_nnz) products[i] = product(data, indices, x, nz0 + i);
    }
    // Past the tile's last row end, the items left are row1's nonzeros (all below nz1).
    if (threadIdx.x == 0) row_ends[tile_rows] = nz1;
    __syncthreads();

    const int diagonal = min((int)threadIdx.x * ITEMS, tile_rows + tile_nnz);
    const int steps = min(ITEMS, tile_rows + tile_nnz - diagonal);
    const int first = merge_path_rows<int>(diagonal, tile_rows, tile_nnz, nz0,
                                           SharedRowEnds{row_ends});
    const int first_nz = nz0 + diagonal - first;
    int row = first, nz = first_nz;
    float sum = 0.f;
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        if (k < steps) {
            if (nz < row_ends[row]) {  // the next nonzero belongs to this row
                sum += products[nz - nz0];
                ++nz;
            } else {  // the row ends
                sum = 0.f;
                ++row;
            }
        }
    }
    const RowSum before = block_exclusive_scan<THREADS>(RowSum{row, sum}, RowsOp());
    row = first;
    nz = first_nz;
    sum = before.row == first ? before.sum : 0.f;
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        if (k < steps) {
            if (nz < row_ends[row]) {
                sum += products[nz - nz0];
                ++nz;
            } else {
                y[row0 + row] = sum;
                sum = 0.f;
                ++row;
            }
        }
    }
    if (threadIdx.x == THREADS - 1) {  // its end is the tile's: row = tile_rows
        carry_row[tile] = row0 + row;
        carry_sum[tile] = sum;
    }
}

// After spmv_merge_path: each tile's carry-out added into its row (atomically: a long row is
// the carry of every tile it spans but its last). The path's end (row = rows) carries nothing.
template <int TILE>
__global__ void spmv_merge_fixup(const int* __restrict__ carry_row,
                                 const float* __restrict__ carry_sum, int rows, int nnz,
                                 float* __restrict__ y) {
    const long long tiles = ((long long)rows + nnz + TILE - 1) / TILE;
    const long long tile = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (tile < tiles && carry_row[tile] < rows) {
        atomicAdd(y + carry_row[tile], carry_sum[tile]);
    }
}
