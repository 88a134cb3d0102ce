import numpy as np


def ludcmp(A, b, x, y, N):
    """PolyBench ludcmp: LU decomposition in place, then forward and backward substitution
    (a scalar accumulator per element, a loop running downwards)."""
    for i in range(N):
        for j in range(i):
            w = A[i, j]
            for k in range(j):
                w -= A[i, k] * A[k, j]
            A[i, j] = w / A[j, j]
        for j in range(i, N):
            w = A[i, j]
            for k in range(i):
                w -= A[i, k] * A[k, j]
            A[i, j] = w
    for i in range(N):
        w = b[i]
        for j in range(i):
            w -= A[i, j] * y[j]
        y[i] = w
    for i in range(N - 1, -1, -1):
        w = y[i]
        for j in range(i + 1, N):
            w -= A[i, j] * x[j]
        x[i] = w / A[i, i]


def inputs(N):
    """A diagonally dominant matrix (no pivoting needed) and a right-hand side."""
    rng = np.random.default_rng(3)
    return {"A": rng.uniform(0.0, 1.0, (N, N)) + N * np.eye(N),
            "b": rng.uniform(0.0, 1.0, N), "x": np.zeros(N), "y": np.zeros(N), "N": N}
