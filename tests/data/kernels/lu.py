import numpy as np


def lu(A, N):
    """PolyBench lu: Doolittle factorization in place, no pivoting (a zero pivot divides by
    zero: A must be diagonally dominant, say)."""
    for i in range(N):
        for j in range(i):
            for k in range(j):
                A[i, j] -= A[i, k] * A[k, j]
            A[i, j] /= A[j, j]
        for j in range(i, N):
            for k in range(i):
                A[i, j] -= A[i, k] * A[k, j]


def inputs(N):
    """A diagonally dominant matrix (no pivot is small), as a tuple in parameter order."""
    a = np.random.default_rng(2).uniform(0.0, 1.0, (N, N))
    return a + N * np.eye(N), N
