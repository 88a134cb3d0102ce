import math

import numpy as np


def cholesky(A, N):
    """PolyBench cholesky: in place, the lower triangle; A must be symmetric positive
    definite (on random matrices it takes the square root of a negative number)."""
    for i in range(N):
        for j in range(i):
            for k in range(j):
                A[i, j] -= A[i, k] * A[j, k]
            A[i, j] /= A[j, j]
        for k in range(i):
            A[i, i] -= A[i, k] * A[i, k]
        A[i, i] = math.sqrt(A[i, i])


def inputs(N):
    """A symmetric positive definite matrix: B B^T plus N on the diagonal."""
    b = np.random.default_rng(1).uniform(0.0, 1.0, (N, N))
    return {"A": b @ b.T + N * np.eye(N), "N": N}
