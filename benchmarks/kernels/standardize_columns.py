"""Z-scores of a data matrix's columns (M samples of N variables): each variable to zero mean
and unit standard deviation, column by column as statistics texts write it."""

import math


def standardize_columns(X, Z, M, N):
    """Z[i, j] = (X[i, j] - mean_j) / std_j, with column j's mean and population standard
    deviation."""
    for j in range(N):
        mean = 0.0
        for i in range(M):
            mean += X[i, j]
        mean = mean / M
        ss = 0.0
        for i in range(M):
            ss += (X[i, j] - mean) ** 2
        std = math.sqrt(ss / M)
        for i in range(M):
            Z[i, j] = (X[i, j] - mean) / std


SIZES = {"M": 6000, "N": 6000}
SMALL = {"M": 7, "N": 4}
OUTPUTS = ("Z",)


def peer(xp, linalg, X, Z, M, N):
    """Column means and standard deviations as reductions along axis 0."""
    def run():
        Z[...] = (X - X.mean(axis=0)) / X.std(axis=0)
    return run
