"""Back substitution with several right-hand sides, U X = B for an upper triangular U: the
last step of a solve after a QR or LU factorization (Golub and Van Loan, algorithm 3.1.2)."""

import numpy as np


def back_substitution(U, B, X, N, R):
    """Solve U X = B for the R columns of B, one right-hand side at a time, from the last
    unknown up (U's lower triangle never read)."""
    for r in range(R):
        for i in range(N - 1, -1, -1):
            total = B[i, r]
            for j in range(i + 1, N):
                total -= U[i, j] * X[j, r]
            X[i, r] = total / U[i, i]


SIZES = {"N": 2000, "R": 600}
SMALL = {"N": 7, "R": 3}
OUTPUTS = ("X",)


def inputs(N, R):
    """A well-conditioned U (off-diagonal entries in [-1, 1], diagonal about N: the solution
    does not grow from row to row)."""
    rng = np.random.default_rng(5)
    U = np.triu(rng.uniform(-1.0, 1.0, (N, N)), 1) + np.diag(rng.uniform(N, 2.0 * N, N))
    return {"U": U, "B": rng.uniform(-1.0, 1.0, (N, R)), "X": np.zeros((N, R))}


def peer(xp, linalg, U, B, X, N, R):
    """LAPACK's triangular solve (trsm) on all right-hand sides at once."""
    def run():
        X[...] = linalg.solve_triangular(U, B, lower=False)
    return run
