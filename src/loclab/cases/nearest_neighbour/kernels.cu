// Brute-force nearest neighbour in 1-D: nns[i] = the smallest j minimising |queries[i] -
// points[j]|, for m float32 queries and n float32 points. Every kernel computes the distance
// as fabsf(q - p) (one rounded subtraction, no multiply to contract), so every kernel, the
// CPU variants and the golden agree on every index, ties included. Every kernel checks
// bounds, so any m and n work (the host keeps both below 2^31 - 2^16, so no int overflows).
// Compiled through NVRTC (no host headers): templates are instantiated by name expression.
//
// The lesson (the lectures' case study): the queries are independent (a DOALL loop), and all
// of them read the same points in the same order, so a block can stage the points in shared
// memory once and serve all its queries from there: shared memory as a programmable cache.
// Once the points come from shared memory, the cost is instructions: a pair needs a
// subtraction, a compare of |d| with the best so far and two selects (the distance and the
// index), 4 instructions, and at one warp instruction per clock per scheduler that is the
// roof. nn_min_first drops the index from the inner loop: 2 instructions a pair.
// Which pipes: FADD and IMAD go to the FMA pipe (a warp instruction per clock per scheduler on
// sm_90, IMAD on its heavy half only); FSETP, FSEL, SEL, IADD3 and FMNMX to the ALU pipe, 16
// lanes per scheduler (a warp instruction every other clock). A pair written as C (FADD, FSETP,
// FSEL, SEL) has 3 ALU instructions, which bind it at 2/3 of the 4-instruction issue limit:
// measured on an H100, 66.1%. nn_shared therefore keeps one ALU instruction a pair (see
// note_pair); nn_min_first's one ALU and one FMA instruction can reach the issue limit of its 2.

// +infinity, for points past n: |q - inf| = inf never beats a finite best, so the last tile
// needs no test. (NVRTC knows no INFINITY without headers.)
__device__ __forceinline__ float past_the_end() { return __int_as_float(0x7f800000); }

// gpu-naive: the lectures' loop nest with a thread per query and the points read from global
// memory. All lanes of a warp read the same point (one sector, served by L1), but every pair
// still issues a load next to its four instructions, and one query per thread leaves a single
// dependent chain (best -> compare -> best) per thread to hide latency with.
template <int THREADS>
__global__ void __launch_bounds__(THREADS)
nn_naive(const float* __restrict__ queries, const float* __restrict__ points,
         int* __restrict__ nns, int m, int n) {
    const int i = blockIdx.x * THREADS + threadIdx.x;
    if (i >= m) return;
    const float q = queries[i];
    float best = past_the_end();
    int nearest = -1;
    for (int j = 0; j < n; ++j) {
        const float d = fabsf(q - __ldg(points + j));
        if (d < best) {
            best = d;
            nearest = j;
        }
    }
    nns[i] = nearest;
}

// Query k of this thread: threads of a block take consecutive queries, so loads and stores of
// one k are coalesced.
template <int THREADS, int Q>
__device__ __forceinline__ int query_index(int k) {
    return (blockIdx.x * Q + k) * THREADS + threadIdx.x;
}

// The block's threads copy points[j0, j0 + B) into the tile, coalesced, +inf past n.
template <int THREADS, int B>
__device__ __forceinline__ void stage(float* tile, const float* __restrict__ points, int j0,
                                      int n) {
#pragma unroll
    for (int t = threadIdx.x; t < B; t += THREADS) {
        tile[t] = j0 + t < n ? points[j0 + t] : past_the_end();
    }
}

// One pair of the lectures' loop: if |q - p| < best, then best = |q - p| and nearest = index,
// with the loop's strict < (the smaller index wins a tie). Written as C, ptxas makes the two
// updates an FSEL and a SEL, ALU instructions like the FSETP, and 3 ALU instructions a pair
// bind the kernel at 2/3 of its issue limit. Here the updates are predicated FMA-pipe
// instructions: best = |d| + -0 (an FADD; exactly |d|, +0 included) and nearest = nearest *
// zero + index (an IMAD). `zero` is 0 (the kernel's n >> 31, n >= 0) but ptxas cannot know
// it: a literal 0 would let it fold the IMAD back into a SEL. Per pair: FADD, FSETP, FADD,
// IMAD, one of them on the ALU pipe.
__device__ __forceinline__ void note_pair(float q, float p, float& best, int& nearest, int index,
                                          int zero) {
    const float d = q - p;  // one rounded subtraction, as in every kernel and the golden
    asm("{\n\t.reg .pred closer;\n\t.reg .f32 distance;\n\t"
        "abs.f32 distance, %2;\n\t"
        "setp.lt.f32 closer, distance, %0;\n\t"
        "@closer add.f32 %0, distance, 0f80000000;\n\t"
        "@closer mad.lo.s32 %1, %1, %3, %4;\n\t}"
        : "+f"(best), "+r"(nearest)
        : "f"(d), "r"(zero), "r"(index));
}

// gpu-shared: the slides' kernel, strip-mined: the block's THREADS threads stage B points at a
// time in shared memory (one global load per point per block instead of one per pair), then
// every thread walks the tile for its queries. Made fast:
// - Q queries per thread, in registers: each point read from shared memory serves Q queries,
//   and Q independent best -> compare -> best chains hide the latency;
// - every lane reads the same tile word at the same time (a broadcast, no bank conflict), 4
//   points per 16-byte read;
// - branch-free pairs with one ALU instruction each (note_pair): 4 instructions a pair, and
//   the index j0 + j + c takes one IADD3 per point, shared by the Q queries.
template <int THREADS, int B, int Q>
__global__ void __launch_bounds__(THREADS)
nn_shared(const float* __restrict__ queries, const float* __restrict__ points,
          int* __restrict__ nns, int m, int n) {
    static_assert(B % 4 == 0, "B: whole float4s");
    __shared__ __align__(16) float tile[B];
    float q[Q], best[Q];
    int nearest[Q];
    const int zero = n >> 31;  // see note_pair
#pragma unroll
    for (int k = 0; k < Q; ++k) {
        const int i = query_index<THREADS, Q>(k);
        q[k] = i < m ? queries[i] : 0.f;
        best[k] = past_the_end();
        nearest[k] = -1;
    }
    for (int j0 = 0; j0 < n; j0 += B) {
        stage<THREADS, B>(tile, points, j0, n);
        __syncthreads();
#pragma unroll 4
        for (int j = 0; j < B; j += 4) {
            const float4 p = *reinterpret_cast<const float4*>(tile + j);
            const float four[4] = {p.x, p.y, p.z, p.w};
#pragma unroll
            for (int c = 0; c < 4; ++c) {
#pragma unroll
                for (int k = 0; k < Q; ++k) {
                    note_pair(q[k], four[c], best[k], nearest[k], j0 + j + c, zero);
                }
            }
        }
        __syncthreads();  // the next stage overwrites the tile
    }
#pragma unroll
    for (int k = 0; k < Q; ++k) {
        const int i = query_index<THREADS, Q>(k);
        if (i < m) nns[i] = nearest[k];
    }
}

// gpu-min-first: the same staging, but the inner loop only finds the smallest distance,
// best = fminf(best, fabsf(q - p)): an FADD and an FMNMX with |.| folded in, 2 instructions
// per pair. The index is recovered afterwards: after each chunk of C points a query notes the
// chunk if its best went strictly down there; the last chunk noted is the first one holding
// a point at the final distance (later chunks that only equal it are not noted), so the
// answer is the first point of that chunk at that distance, found by rescanning C points
// from global memory (C per query against n: a fraction C / n of the pairs).
template <int THREADS, int B, int Q, int C>
__global__ void __launch_bounds__(THREADS)
nn_min_first(const float* __restrict__ queries, const float* __restrict__ points,
             int* __restrict__ nns, int m, int n) {
    static_assert(C % 4 == 0 && B % C == 0, "C: whole float4s; B: whole chunks");
    __shared__ __align__(16) float tile[B];
    float q[Q], best[Q];
    int chunk[Q];
#pragma unroll
    for (int k = 0; k < Q; ++k) {
        const int i = query_index<THREADS, Q>(k);
        q[k] = i < m ? queries[i] : 0.f;
        best[k] = past_the_end();
        chunk[k] = 0;
    }
    for (int j0 = 0; j0 < n; j0 += B) {
        stage<THREADS, B>(tile, points, j0, n);
        __syncthreads();
        for (int jc = 0; jc < B; jc += C) {
            float before[Q];
#pragma unroll
            for (int k = 0; k < Q; ++k) before[k] = best[k];
#pragma unroll
            for (int j = jc; j < jc + C; j += 4) {
                const float4 p = *reinterpret_cast<const float4*>(tile + j);
#pragma unroll
                for (int k = 0; k < Q; ++k) {
                    best[k] = fminf(best[k], fabsf(q[k] - p.x));
                    best[k] = fminf(best[k], fabsf(q[k] - p.y));
                    best[k] = fminf(best[k], fabsf(q[k] - p.z));
                    best[k] = fminf(best[k], fabsf(q[k] - p.w));
                }
            }
#pragma unroll
            for (int k = 0; k < Q; ++k) chunk[k] = best[k] < before[k] ? j0 + jc : chunk[k];
        }
        __syncthreads();  // the next stage overwrites the tile
    }
#pragma unroll
    for (int k = 0; k < Q; ++k) {
        const int i = query_index<THREADS, Q>(k);
        if (i >= m) continue;
        const int end = min(chunk[k] + C, n);
        int nearest = end;
        for (int j = chunk[k]; j < end && nearest == end; ++j) {
            if (fabsf(q[k] - __ldg(points + j)) == best[k]) nearest = j;
        }
        nns[i] = nearest;
    }
}
