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

// gpu-optimized's and gpu-subset-sums' step 1: C[q][j1 K + j2] = A[j1][q] B[q][j2], N x KKP
// (small: stays in L2), padded with zeros to KKP columns (whole column tiles of step 2) and
// to whole slices of BQ rows, so that step 2 copies C's slices without bounds checks. 64-bit
// indices: C passes 2^31 elements from N = 2^23 at K = 16.
template <int K, int KKP, int BQ>
__global__ void bmmm_products(const float* __restrict__ A, const float* __restrict__ B,
                              float* __restrict__ C, int N) {
    const i64 e = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= (i64)((N + BQ - 1) / BQ) * BQ * KKP) return;
    const int q = e / KKP, j = e % KKP;
    C[e] = j < K * K && q < N ? A[(i64)(j / K) * N + q] * B[(i64)q * K + j % K] : 0.0f;
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

// gpu-subset-sums, step 1: the mask as bits, S[g][m] bit b = (X[m][32 g + b] != 0), zeros past
// N and in the rows from M up to MP (whole row tiles of step 2). Transposed (a group's words
// of consecutive rows are consecutive), so that step 2 copies its rows' words of a group as
// 16-byte runs. Two lanes a word, 16 bytes each (VECTORS: one load, N % 16 == 0 and X 16-byte
// aligned; else byte loads): a row's 32 bytes are one sector, read once (a lane reading both
// halves in turn made L2 serve most sectors twice). A block's 128 rows walk their groups in
// turn, so that the sectors of a row's lines are read close together in time (blocks by
// group read a row's 16 sectors 16 blocks apart, at half the DRAM bandwidth).
__device__ __forceinline__ unsigned nonzero_bytes(unsigned w) {  // bit b: byte b of w != 0
    const unsigned set = __vcmpne4(w, 0u) & 0x08040201u;
    return (set | set >> 8 | set >> 16 | set >> 24) & 0xfu;
}

template <bool VECTORS>
__global__ void bmmm_mask_bits(const u8* __restrict__ X, unsigned* __restrict__ S, int M, int N,
                               int MP) {
    const int m = blockIdx.x * (blockDim.x / 2) + threadIdx.x / 2, half = threadIdx.x % 2;
    const u8* const row = X + (i64)m * N + 16 * half;
    const int groups = (N + 31) / 32;
#pragma unroll 4
    for (int g = 0; g < groups; ++g) {
        const int q0 = 32 * g + 16 * half;
        unsigned bits = 0;
        if (m < M && q0 < N) {
            if (VECTORS) {
                const uint4 v = __ldg(reinterpret_cast<const uint4*>(row + 32 * g));
                bits = nonzero_bytes(v.x) | nonzero_bytes(v.y) << 4 | nonzero_bytes(v.z) << 8
                     | nonzero_bytes(v.w) << 12;
            } else {
                for (int b = 0; b < 16 && q0 + b < N; ++b)
                    bits |= (row[32 * g + b] != 0 ? 1u : 0u) << b;
            }
        }
        const unsigned high = __shfl_down_sync(0xffffffffu, bits, 1);
        if (half == 0 && m < MP) S[(i64)g * MP + m] = bits | high << 16;
    }
}

// gpu-subset-sums, step 2: the method of the Four Russians. Cut q into chunks of 8: a row's
// share of a chunk is the sum of C's rows that its 8 bits select, one of the 256 subset sums
// of the chunk's rows. A block builds a chunk's 256 sums of its 32 columns of C in shared
// memory, and each of its ROWS rows adds one of them: 8 times fewer additions than the product
// has multiply-adds. Each addition's operand is a load from shared memory (16 bytes a lane
// for 4 additions): shared memory's wavefronts bound the kernel, so everything else is cut to
// few of them. Any order of these sums is a sum of the same rounded products: the same bound.
// Lanes: 8 (a quarter warp: one wavefront) share a row and read one entry's 32 columns, 4
// each: conflict-free whatever the entries. Quarter warp u owns rows u, u + THREADS/8, ...
// (ROWS_PER_LANE of them), 4 columns x ROWS_PER_LANE sums a lane.
// Entries are 256 bytes, two chunks' halves, so that a lane's address is one byte_perm of its
// row's bits and its columns' offset in the half; two such tables (chunk c in table c / 2 % 2,
// half c % 2): the next two chunks' sums are built while two are read, one barrier for two
// chunks (one a chunk stalled warps a quarter of the time at the barrier).
// Building: 4 warps a chunk (in turns), a lane 16 entries of 4 columns (their high 4 bits
// fixed, h = the sum of rows 4..7 they pick), each entry its parent's plus one row (a tree
// walked depth first: few live values): 8 loads of C a lane for 16 entries. (Every lane
// building 4 entries read C's rows 4 times as often: 27% of the wavefronts.)
// Groups of 4 chunks (one 32-bit word of S a row): C's 32 x 32 floats and the block's words
// of group g + SLOTS - 1 arrive by cp.async while group g is summed.
template <int K, int KKP, int ROWS_PER_LANE, int THREADS, int SLOTS, int MIN_BLOCKS>
__global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
bmmm_subset_sums(const unsigned* __restrict__ S, const float* __restrict__ C,
                 float* __restrict__ Y, int M, int N, int MP) {
    constexpr int COLS = 32, CHUNK = 8, CHUNKS = 4, GROUP = CHUNK * CHUNKS, ENTRY = 2 * COLS;
    constexpr int QUARTERS = THREADS / 8, ROWS = QUARTERS * ROWS_PER_LANE;
    constexpr int BUILDERS = 128, TEAMS = THREADS / BUILDERS;  // 16 runs of 16 entries x 8 quads
    constexpr int COLUMN_TILES = KKP / COLS;
    static_assert(KKP % COLS == 0 && KKP >= K * K && TEAMS * BUILDERS == THREADS && SLOTS >= 2,
                  "whole column tiles, whole teams of builders, a group in flight");
    extern __shared__ __align__(16) float shared[];
    constexpr int TABLE = (1 << CHUNK) * ENTRY;  // floats
    float* const table = shared;                  // [2][256][2][COLS]
    float* const Cs = table + 2 * TABLE;          // [SLOTS][GROUP][COLS]
    unsigned* const Ss = reinterpret_cast<unsigned*>(Cs + SLOTS * GROUP * COLS);  // [SLOTS][ROWS]
    const int col0 = blockIdx.x % COLUMN_TILES * COLS, row0 = blockIdx.x / COLUMN_TILES * ROWS;
    const int groups = (N + GROUP - 1) / GROUP;
    const int quad = threadIdx.x % 8, quarter = threadIdx.x / 8;
    const int team = threadIdx.x / BUILDERS, run = threadIdx.x % BUILDERS / 8;

    auto fetch = [&](int g) {  // group g's slice of C and words of S into slot g % SLOTS
        if (g < groups) {
            const int slot = g % SLOTS;
            loclab::copy_slice<GROUP, COLS, THREADS>(Cs + slot * GROUP * COLS, C, groups * GROUP,
                                                     KKP, KKP, g * GROUP, col0);
#pragma unroll
            for (int e = threadIdx.x; e < ROWS / 4; e += THREADS)
                loclab::copy_async<16>(Ss + slot * ROWS + 4 * e, S + (i64)g * MP + row0 + 4 * e);
        }
        loclab::commit_copies();  // an empty group past the end: counts stay in step
    };

    // Entries 16 run + l, l < 16: rows 4..7 picked by run's bits, as 0/1 factors of
    // multiply-adds (exact: 0 x + y = y, 1 x + y = x + y); then depth first, entry l is entry
    // l & (l - 1) (l without its lowest bit) plus the row of that bit.
    auto build = [&](const float* rows, int chunk) {  // chunk (< 4) of a group: its 8 rows of C
        const float4* row = reinterpret_cast<const float4*>(rows) + quad;
        float4 h = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
        for (int r = 4; r < CHUNK; ++r) {
            const float4 c = row[r * COLS / 4];
            const float f = run >> (r - 4) & 1 ? 1.0f : 0.0f;
            h = make_float4(fmaf(f, c.x, h.x), fmaf(f, c.y, h.y), fmaf(f, c.z, h.z),
                            fmaf(f, c.w, h.w));
        }
        const float4 c[4] = {row[0], row[COLS / 4], row[2 * COLS / 4], row[3 * COLS / 4]};
        float4 e[16];
        float4* const entries = reinterpret_cast<float4*>(
            table + chunk / 2 * TABLE + 16 * run * ENTRY + chunk % 2 * COLS) + quad;
        constexpr int DEPTH_FIRST[16] = {0, 8, 12, 14, 15, 13, 10, 11, 9, 4, 6, 7, 5, 2, 3, 1};
#pragma unroll
        for (int i = 0; i < 16; ++i) {
            const int l = DEPTH_FIRST[i];
            if (l == 0) {
                e[0] = h;
            } else {
                // The row of l's lowest bit, by constant tests (c[__ffs(l) - 1] put c in local
                // memory: __ffs is not folded before the array is placed).
                const float4 p = e[l & (l - 1)], r = c[l & 1 ? 0 : l & 2 ? 1 : l & 4 ? 2 : 3];
                e[l] = make_float4(p.x + r.x, p.y + r.y, p.z + r.z, p.w + r.w);
            }
            entries[l * ENTRY / 4] = e[l];
        }
    };

    float4 acc[ROWS_PER_LANE];
#pragma unroll
    for (int i = 0; i < ROWS_PER_LANE; ++i) acc[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    // Byte offsets of this lane's columns in either half of an entry (below 256).
    const unsigned halves[2] = {16u * quad, 4u * COLS + 16u * quad};
    const char* const entries = reinterpret_cast<const char*>(table);

#pragma unroll
    for (int g = 0; g < SLOTS - 1; ++g) fetch(g);
    loclab::wait_copies<SLOTS - 2>();  // group 0 landed (this thread's copies)
    __syncthreads();
    int turn = 0;  // the team building the next chunk
    auto build_pair = [&](const float* group, int first) {  // chunks first, first + 1 of a group
        for (int chunk = first; chunk < first + 2; ++chunk) {
            if (team == turn) build(group + chunk * CHUNK * COLS, chunk);
            turn = turn == TEAMS - 1 ? 0 : turn + 1;
        }
    };
    build_pair(Cs, 0);
    for (int g = 0; g < groups; ++g) {
        const int slot = g % SLOTS;
        __syncthreads();  // chunks 4 g, 4 g + 1 built, group g's words landed, slot g - 1 free
        unsigned words[ROWS_PER_LANE];
#pragma unroll
        for (int i = 0; i < ROWS_PER_LANE; ++i) words[i] = Ss[slot * ROWS + quarter + QUARTERS * i];
        fetch(g + SLOTS - 1);
#pragma unroll
        for (int pair = 0; pair < 2; ++pair) {
            // The next pair's sums into the other table: this group's last two chunks, or the
            // next group's first two.
            if (pair == 0)
                build_pair(Cs + slot * GROUP * COLS, 2);
            else if (g + 1 < groups)
                build_pair(Cs + (g + 1) % SLOTS * GROUP * COLS, 0);
#pragma unroll
            for (int j = 2 * pair; j < 2 * pair + 2; ++j) {
#pragma unroll
                for (int i = 0; i < ROWS_PER_LANE; ++i) {
                    // [half's column byte, the row's bits of chunk j, 0, 0]: entry * 256 + column
                    const unsigned at = __byte_perm(words[i], halves[j % 2], 0x5504 | j << 4);
                    const float4 t = *reinterpret_cast<const float4*>(
                        entries + j / 2 * TABLE * sizeof(float) + at);
                    acc[i] = make_float4(acc[i].x + t.x, acc[i].y + t.y, acc[i].z + t.z,
                                         acc[i].w + t.w);
                }
            }
            if (pair == 0) {
                loclab::wait_copies<SLOTS - 2>();  // group g + 1 landed
                __syncthreads();  // chunks 4 g + 2, 4 g + 3 built, the first table free
            }
        }
    }

    const int col = col0 + 4 * quad;
#pragma unroll
    for (int i = 0; i < ROWS_PER_LANE; ++i) {
        const int row = row0 + quarter + QUARTERS * i;
        if (row >= M) continue;
        float* y = Y + (i64)row * K * K + col;
        if (K * K % 4 == 0) {
            if (col < K * K) *reinterpret_cast<float4*>(y) = acc[i];
        } else {
            const float v[4] = {acc[i].x, acc[i].y, acc[i].z, acc[i].w};
#pragma unroll
            for (int c = 0; c < 4; ++c)
                if (col + c < K * K) y[c] = v[c];
        }
    }
}
