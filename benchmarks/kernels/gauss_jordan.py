"""Gauss-Jordan elimination without pivoting (Numerical Recipes' gaussj, less the pivot
search, on a diagonally dominant matrix): A X = B solved in place, B becoming X."""

import numpy as np


def gauss_jordan(A, B, N, R):
    """Each pivot row scaled to a unit pivot, then eliminated from every other row, above and
    below: A ends as the identity, its R right-hand sides B as the solution."""
    for k in range(N):
        pivot = A[k, k]
        for j in range(N):
            A[k, j] = A[k, j] / pivot
        for j in range(R):
            B[k, j] = B[k, j] / pivot
        for i in range(N):
            if i != k:
                factor = A[i, k]
                for j in range(N):
                    A[i, j] -= factor * A[k, j]
                for j in range(R):
                    B[i, j] -= factor * B[k, j]


SIZES = {"N": 1000, "R": 500}
SMALL = {"N": 6, "R": 3}
OUTPUTS = ("B",)


def inputs(N, R):
    """A diagonally dominant A (N on the diagonal, the rest in [-1, 1]): no pivoting needed."""
    rng = np.random.default_rng(6)
    return {"A": rng.uniform(-1.0, 1.0, (N, N)) + N * np.eye(N),
            "B": rng.uniform(-1.0, 1.0, (N, R))}


def peer(xp, linalg, A, B, N, R):
    """LAPACK's LU solve (gesv), A left as it is."""
    def run():
        B[...] = linalg.solve(A, B)
    return run
