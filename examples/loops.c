/* Dependence analysis basics in C: the nests of examples/loops.py, statement for statement.
 *
 * The Fortran nests (DO i = 2, N includes N) loop with <=; 2-D arrays are C99 variable-length
 * array parameters, indexed 1..N like the slides. A scalar declared inside a loop body is a
 * fresh variable per iteration, so disambiguation_tmp has fewer dependences here than in Python.
 */

/* Three loop examples, first nest: the only dependence is WAR [=,=], both loops parallel. */
void three_loops_1(int N, float A[N + 2][N + 2]) {
    for (int i = 1; i <= N; i++)
        for (int j = 1; j <= N; j++)
            A[j][i] = A[j][i] + 1;
}

/* Three loop examples, second nest: [<,<] and [=,<], no loop parallel, interchange legal. */
void three_loops_2(int N, float A[N + 2][N + 2], float B[N + 2][N + 2]) {
    for (int i = 2; i <= N; i++)
        for (int j = 2; j <= N; j++) {
            A[j][i] = A[j - 1][i - 1] + 1;
            B[j][i] = B[j - 1][i] + 1;
        }
}

/* The direction-matrix slides' second nest: S1->S1 [=,<], S2->S2 [<,<]; interchange legal. */
void three_loops_2_variant(int N, float A[N + 2][N + 2], float B[N + 2][N + 2]) {
    for (int i = 2; i <= N; i++)
        for (int j = 2; j <= N; j++) {
            A[j][i] = A[j - 1][i] + 1;
            B[j][i] = B[j - 1][i - 1] + 1;
        }
}

/* Three loop examples, third nest: RAW [<,>], only loop j parallel, interchange illegal. */
void three_loops_3(int N, float A[N + 2][N + 2]) {
    for (int i = 2; i <= N; i++)
        for (int j = 1; j <= N; j++)
            A[i][j] = A[i - 1][j + 1] + 1;
}

/* Important disambiguations: solving the subscripts gives [>,<]; reversed it is WAR [<,>]. */
void disambiguation(int N, float A[N + 2][N + 2]) {
    for (int i = 2; i <= N; i++)
        for (int j = 1; j <= N; j++)
            A[i][j] = A[i + 1][j - 1] + 1;
}

/* Important disambiguations, load and store as two statements: WAR [<,>] from load to store.
 * tmp is declared in the body: private to each (i, j) iteration, unlike Python's tmp. */
void disambiguation_tmp(int N, float A[N + 2][N + 2]) {
    for (int i = 2; i <= N; i++)
        for (int j = 1; j <= N; j++) {
            float tmp = A[i + 1][j - 1];
            A[i][j] = tmp + 1;
        }
}

/* Vectorization example: distributed, S2's recurrence runs first, then S1 in parallel. */
void vectorization(int N, float* A, float* B) {
    for (int i = 3; i <= N; i++) {
        A[i] = B[i - 2] + 1;
        B[i] = B[i - 1] + 1;
    }
}

/* Loop distribution may require array expansion: {S1, S3} sequential, S2 parallel, tmp[N].
 * As on the slide, tmp is declared outside the loop: one variable for all iterations. */
void array_expansion(int N, float* A, float* B) {
    float tmp;
    for (int i = 2; i < N; i++) {
        tmp = 2 * B[i - 2];
        A[i] = tmp;
        B[i] = tmp + B[i - 1];
    }
}
