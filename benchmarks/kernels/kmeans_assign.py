"""The assignment step of Lloyd's k-means: each point to its nearest centroid, an argmin
kept with its index (the first centroid on a tie)."""

import math


def kmeans_assign(X, C, labels, dist, N, K, D):
    """labels[i]: the index of the centroid (row of C) nearest the point X[i] in D
    dimensions; dist[i]: its squared distance."""
    for i in range(N):
        best = 0
        best_dist = math.inf
        for c in range(K):
            total = 0.0
            for d in range(D):
                diff = X[i, d] - C[c, d]
                total += diff * diff
            if total < best_dist:
                best_dist = total
                best = c
        labels[i] = best
        dist[i] = best_dist


SIZES = {"N": 1_000_000, "K": 64, "D": 16}
SMALL = {"N": 9, "K": 4, "D": 3}
OUTPUTS = ("labels", "dist")


def peer(xp, linalg, X, C, labels, dist, N, K, D):
    """Every point's distances to every centroid at once (expanded as |x|^2 - 2 x.c + |c|^2,
    the cross terms a matrix product), then the minimum and its index along each row."""
    def run():
        d2 = ((X * X).sum(axis=1)[:, None] - 2.0 * (X @ C.T)
              + (C * C).sum(axis=1)[None, :])
        labels[...] = d2.argmin(axis=1)
        dist[...] = d2.min(axis=1)
    return run
