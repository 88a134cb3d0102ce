/* False dependences (WAR, WAW) and how to remove them, in C: the nests of
 * examples/privatization.py, statement for statement.
 */

/* Eliminating WAR dependencies: the loop shifting A left carries only a WAR [<] on A. */
void eliminating_war(int N, float* A) {
    float tmp = A[1];
    for (int i = 0; i < N - 1; i++)
        A[i] = A[i + 1];
    A[N - 1] = tmp;
}

/* Eliminating WAR dependencies, rewritten: reading a copy of A makes both loops parallel. */
void eliminating_war_by_copy(int N, float* A, float* Acopy) {
    #pragma omp parallel for
    for (int i = 0; i < N; i++)
        Acopy[i] = A[i];
    float tmp = A[1];
    #pragma omp parallel for
    for (int i = 0; i < N - 1; i++)
        A[i] = Acopy[i + 1];
    A[N - 1] = tmp;
}

/* Eliminating WAW dependencies by privatization: one A for all i carries WAWs on loop i.
 * The slide starts k at 0, reading X[i][-1]; k starts at 1 so that every access is in bounds. */
void eliminating_waw(int N, int M, float X[N][N]) {
    int A[M];
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < M; j++)
            A[j] = (4 * i + 4 * j) % M;
        for (int k = 1; k < N; k++)
            X[i][k] = X[i][k - 1] * A[A[(2 * i + k) % M] % M];
    }
}

/* Eliminating WAW dependencies by privatization: with A declared inside, loop i is parallel.
 * int A[M] inside the loop body: one A per iteration of i (OpenMP: one per thread). */
void eliminating_waw_privatized(int N, int M, float X[N][N]) {
    #pragma omp parallel for
    for (int i = 0; i < N; i++) {
        int A[M];
        for (int j = 0; j < M; j++)
            A[j] = (4 * i + 4 * j) % M;
        for (int k = 1; k < N; k++)
            X[i][k] = X[i][k - 1] * A[A[(2 * i + k) % M] % M];
    }
}
