/* The case studies' loop nests in C: the nests of examples/case_studies.py, statement for
 * statement. Scalars are declared where the slides declare them: inside the loop bodies, so
 * each is private to its iteration and the loops the slides mark parallel are parallel as written.
 */
#include <math.h>
#include <stdint.h>

/* Brute-force nearest neighbour: queries are independent, the pass over points sequential. */
void nearest_neighbor(int M, int N, float* queries, float* points, int* nns) {
    #pragma omp parallel for
    for (int i = 0; i < M; i++) {
        float query = queries[i];
        float nn_dist = INFINITY;
        int nn_ind = -1;
        for (int j = 0; j < N; j++) {
            float ref_pt = points[j];
            float dist = fabsf(query - ref_pt);
            if (dist < nn_dist) {
                nn_ind = j;
                nn_dist = dist;
            }
        }
        nns[i] = nn_ind;
    }
}

/* Matrix multiplication: direction vectors prove i and j parallel; k is a reduction. */
void matmul(int M, int N, int U, float A[M][U], float B[U][N], float C[M][N]) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float tmp = 0.0;
            for (int k = 0; k < U; k++)
                tmp += A[i][k] * B[k][j];
            C[i][j] = tmp;
        }
}

/* MMM golden sequential on flat arrays: i and j parallel, k sequential. */
void mmm_golden(float* A, float* B, float* C, int heightA, int widthB, int widthA) {
    #pragma omp parallel for collapse(2)
    for (int i = 0; i < heightA; i++) {
        for (int j = 0; j < widthB; j++) {
            float c = 0;
            for (int k = 0; k < widthA; k++)
                c += A[i * widthA + k] * B[k * widthB + j];
            C[i * widthB + j] = c;
        }
    }
}

/* Think like a compiler, loop distribution: acc, local to the body, is expanded to acc[N]. */
void loop_distribution(int N, float* A, float* B) {
    for (int i = 0; i < N; i++) {
        float acc = i * i;
        B[i] = A[i] + acc;
    }
}

/* Matrix transposition: no dependences, both loops parallel, so strip-mine and interchange. */
void transposition(float* A, float* trA, int rowsA, int colsA) {
    for (int i = 0; i < rowsA; i++)
        for (int j = 0; j < colsA; j++)
            trA[j * rowsA + i] = A[i * colsA + j];
}

/* Contrived but illustrative program: rows are parallel, a row is sequential (accum). */
void contrived_program(float* A, float* B, uint64_t num_rows, uint64_t num_cols) {
    #pragma omp parallel for schedule(static)
    for (uint64_t i = 0; i < num_rows; i++) {
        float accum = 0.0;
        for (uint64_t j = 0; j < num_cols; j++) {
            float a_el = A[i * num_cols + j];
            accum = sqrtf(accum) + a_el * a_el;
            B[i * num_cols + j] = accum;
        }
    }
}

/* Coalesced accesses, motivation: loop i parallel, loop j sequential by the RAW on accum. */
void coalescing_motivation(int height, int width, float A[height][width], float B[height][width]) {
    for (int i = 0; i < height; i++) {
        float accum = 0.0;
        for (int j = 0; j < width; j++) {
            float tmpA = A[i][j];
            accum = tmpA * tmpA - accum;
            B[i][j] = accum;
        }
    }
}

/* Batch MMM under a mask: i, j1, j2 parallel, q sequential (a + reduction on acc). */
void batch_mmm(int M, int K, int N, float A[K][N], float B[N][K], char X[M][N], float Y[M][K][K]) {
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < M; i++) {
        for (int j1 = 0; j1 < K; j1++) {
            for (int j2 = 0; j2 < K; j2++) {
                float acc = 0.0;
                for (int q = 0; q < N; q++) {
                    float a = A[j1][q];
                    float b = B[q][j2];
                    float v = (X[i][q] != 0) ? 1 : 0;
                    acc += a * b * v;
                }
                Y[i][j1][j2] = acc;
            }
        }
    }
}

/* Histogram-like computation: not parallel as written, a generalized reduction (atomics). */
void histogram(uint32_t* inp_inds, float* inp_vals, float* hist,
               const uint32_t N, const uint32_t H) {
    for (uint32_t i = 0; i < N; i++) {
        uint32_t ind = inp_inds[i];
        float val = inp_vals[i];
        if (ind < H) {
            hist[ind] += val;
        }
    }
}

/* Putting everything together: i is parallel once A is private; t, k sequential, j parallel.
 * The slide starts j and k at 0 in the convergence loop, reading A[-1][j] out of bounds. */
void putting_everything_together(int M, int N, int T, float X[M][N][N], float B[M][N][N]) {
    float A[N][N];
    for (int i = 0; i < M; i++) {
        for (int k = 0; k < N; k++) {
            for (int j = 0; j < N; j++) {
                float x = X[i][j][k];
                A[k][j] = x * x;
            }
        }
        for (int t = 0; t < T; t++) {
            for (int j = 1; j < N; j++) {
                for (int k = 1; k < N; k++) {
                    A[k][j] = sqrtf(A[k][j] * A[k - 1][j]);
                    X[i][k][j] += sqrtf(B[i][k - 1][j - 1]);
                }
            }
        }
    }
}
