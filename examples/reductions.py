"""Reductions are easy to recognize, scans are not: the "Loop Parallelism I" slides."""


def reduction(A, N):
    """Reduction is typically easy to recognize: x only appears in x += e, so both loops reduce."""
    x = 6.0
    for i in range(1, N):
        for j in range(1, N):
            if A[i, j] >= 2.0:
                x += 2 * A[i, j - 1]
            elif A[i, j] > 0.0:
                x += A[i - 1, j + 1]
            if i % (j + 1) == 3:
                x += A[i, i]
    return x


def scan_sum(A, B, N):
    """Scans are difficult (1, a + scan): a cross-iteration RAW on A that no remedy removes."""
    A[0] = B[0]
    for i in range(1, N):
        A[i] = A[i - 1] + B[i]


def scan_xor(A, N):
    """Scans are difficult (2, a ^ scan of iota N): acc is read after its update: no reduction."""
    acc = 0
    for i in range(N):
        acc = acc ^ i
        A[i] = acc


def scan_rows(A, B, N, M):
    """Scans are difficult (3, a scan of rows): i carries a RAW [<,=], j is a parallel map."""
    for j in range(M):
        A[0, j] = B[0, j]
    for i in range(1, N):
        for j in range(M):
            A[i, j] = A[i - 1, j] + B[i, j]
