"""The power method for a matrix's dominant eigenvalue (Golub and Van Loan, section 7.3.1):
ITERS steps of a matrix-vector product, its norm, and a normalization."""

import math


def power_iteration(A, x, y, lam, N, ITERS):
    """Each step: y = A x, lam[t] = ||y|| (which tends to the dominant eigenvalue's magnitude
    for a unit x), then x = y / ||y||."""
    for t in range(ITERS):
        for i in range(N):
            total = 0.0
            for j in range(N):
                total += A[i, j] * x[j]
            y[i] = total
        norm = 0.0
        for i in range(N):
            norm += y[i] * y[i]
        norm = math.sqrt(norm)
        lam[t] = norm
        for i in range(N):
            x[i] = y[i] / norm


SIZES = {"N": 3000, "ITERS": 100}
SMALL = {"N": 6, "ITERS": 4}
OUTPUTS = ("x", "lam")


def peer(xp, linalg, A, x, y, lam, N, ITERS):
    """A matrix-vector product, a dot product and a division per step."""
    def run():
        for t in range(ITERS):
            y[...] = A @ x
            norm = xp.sqrt(y @ y)
            lam[t] = norm
            x[...] = y / norm
    return run
