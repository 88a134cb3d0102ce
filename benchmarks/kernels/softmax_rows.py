"""The softmax of each row (a classifier's class probabilities, attention weights),
stabilized by subtracting the row's maximum before the exponential."""

import math


def softmax_rows(X, P, M, N):
    """P[i, j] = exp(X[i, j] - m_i) / sum over j of exp(X[i, j] - m_i), m_i the maximum of
    row i: a maximum, a sum of exponentials and a division, row by row."""
    for i in range(M):
        largest = X[i, 0]
        for j in range(1, N):
            if X[i, j] > largest:
                largest = X[i, j]
        total = 0.0
        for j in range(N):
            P[i, j] = math.exp(X[i, j] - largest)
            total += P[i, j]
        for j in range(N):
            P[i, j] = P[i, j] / total


SIZES = {"M": 8000, "N": 8000}
SMALL = {"M": 4, "N": 6}
OUTPUTS = ("P",)


def peer(xp, linalg, X, P, M, N):
    """Row maxima, exponentials and row sums as whole-array operations."""
    def run():
        e = xp.exp(X - X.max(axis=1, keepdims=True))
        P[...] = e / e.sum(axis=1, keepdims=True)
    return run
