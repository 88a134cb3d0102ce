"""The cosine similarity of every pair of rows of a data matrix (documents as term vectors in
information retrieval, Manning, Raghavan and Schuetze, section 6.3; user vectors in
collaborative filtering): the rows' Euclidean norms first, then each dot product divided by
the two norms."""

import math


def cosine_similarity(X, norms, S, N, D):
    """norms[i] = |X[i]|, the norm of row i of X (N x D); S[i, j] = X[i] . X[j] /
    (norms[i] norms[j]), each dot product summed in a scalar."""
    for i in range(N):
        total = 0.0
        for k in range(D):
            total += X[i, k] * X[i, k]
        norms[i] = math.sqrt(total)
    for i in range(N):
        for j in range(N):
            total = 0.0
            for k in range(D):
                total += X[i, k] * X[j, k]
            S[i, j] = total / (norms[i] * norms[j])


SIZES = {"N": 2500, "D": 200}
SMALL = {"N": 6, "D": 4}
OUTPUTS = ("norms", "S")


def peer(xp, linalg, X, norms, S, N, D):
    """The norms as a reduction along the rows, the dot products as X X^T, divided by the
    outer product of the norms."""
    def run():
        norms[...] = xp.sqrt((X * X).sum(axis=1))
        S[...] = (X @ X.T) / xp.outer(norms, norms)
    return run
