"""Squared Euclidean distances between two sets of points (the first step of nearest
neighbours, kernel methods and clustering), summed coordinate by coordinate."""


def pairwise_distances(X, Y, D, M, N, K):
    """D[i, j] = sum over k of (X[i, k] - Y[j, k])^2 for the M points of X and the N points
    of Y, in K dimensions."""
    for i in range(M):
        for j in range(N):
            total = 0.0
            for k in range(K):
                diff = X[i, k] - Y[j, k]
                total += diff * diff
            D[i, j] = total


SIZES = {"M": 3000, "N": 3000, "K": 128}
SMALL = {"M": 5, "N": 6, "K": 4}
OUTPUTS = ("D",)


def peer(xp, linalg, X, Y, D, M, N, K):
    """|x|^2 + |y|^2 - 2 x.y, the cross terms a matrix product (as scikit-learn does)."""
    def run():
        D[...] = ((X * X).sum(axis=1)[:, None] + (Y * Y).sum(axis=1)[None, :]
                  - 2.0 * (X @ Y.T))
    return run
