/* Reductions are easy to recognize, scans are not, in C: the nests of examples/reductions.py,
 * statement for statement.
 */

/* Reduction is typically easy to recognize: x only appears in x += e, so both loops reduce. */
float reduction(int N, float A[N + 1][N + 1]) {
    float x = 6.0;
    #pragma omp parallel for reduction(+:x)
    for (int i = 1; i < N; i++) {
        for (int j = 1; j < N; j++) {
            if (A[i][j] >= 2.0)
                x += 2 * A[i][j - 1];
            else if (A[i][j] > 0.0)
                x += A[i - 1][j + 1];
            if (i % (j + 1) == 3)
                x += A[i][i];
        }
    }
    return x;
}

/* Scans are difficult (1, a + scan): a cross-iteration RAW on A that no remedy removes. */
void scan_sum(int N, float* A, float* B) {
    A[0] = B[0];
    for (int i = 1; i < N; i++)
        A[i] = A[i - 1] + B[i];
}

/* Scans are difficult (2, a ^ scan of iota N): acc is read after its update: no reduction. */
void scan_xor(int N, int* A) {
    int acc = 0;
    for (int i = 0; i < N; i++) {
        acc = acc ^ i;
        A[i] = acc;
    }
}

/* Scans are difficult (3, a scan of rows): i carries a RAW [<,=], j is a parallel map. */
void scan_rows(int N, int M, float A[N][M], float B[N][M]) {
    for (int j = 0; j < M; j++)
        A[0][j] = B[0][j];
    for (int i = 1; i < N; i++)
        for (int j = 0; j < M; j++)
            A[i][j] = A[i - 1][j] + B[i][j];
}
