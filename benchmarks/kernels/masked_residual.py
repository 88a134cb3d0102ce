"""The residual of a low-rank model on the observed entries only, R = mask * (X - U V^T):
the gradient step of matrix completion and collaborative filtering (alternating least
squares, Koren, Bell and Volinsky's matrix factorization), where a 0/1 mask marks the ratings
that are known."""

import numpy as np


def masked_residual(X, U, V, mask, R, M, N, K):
    """R[i, j] = mask[i, j] * (X[i, j] - sum over k of U[i, k] * V[j, k]): the model's
    prediction a rank-K dot product, summed in a scalar."""
    for i in range(M):
        for j in range(N):
            total = 0.0
            for k in range(K):
                total += U[i, k] * V[j, k]
            R[i, j] = mask[i, j] * (X[i, j] - total)


SIZES = {"M": 4000, "N": 4000, "K": 64}
SMALL = {"M": 6, "N": 5, "K": 3}
OUTPUTS = ("R",)


def inputs(M, N, K):
    """Ratings from 1 to 5, factors of rank K, and a 0/1 mask with about a fifth of the
    entries observed (loclab's random mask would weight every entry)."""
    rng = np.random.default_rng(11)
    return {"X": rng.integers(1, 6, (M, N)).astype(np.float64),
            "U": rng.uniform(0.0, 1.0, (M, K)), "V": rng.uniform(0.0, 1.0, (N, K)),
            "mask": (rng.uniform(0.0, 1.0, (M, N)) < 0.2).astype(np.float64),
            "R": np.full((M, N), np.nan)}


def peer(xp, linalg, X, U, V, mask, R, M, N, K):
    """The predictions as one matrix product U V^T, then whole-array arithmetic."""
    def run():
        R[...] = mask * (X - U @ V.T)
    return run
