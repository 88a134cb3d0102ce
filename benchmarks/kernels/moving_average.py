"""The rolling mean and standard deviation over a window of W values along each row of a
table (a time series per row: Bollinger bands, the rolling z-score of a sensor signal), by
the running-sum update of signal-processing texts: the first window summed, then each step
adds the value entering the window and subtracts the one leaving it, for the values and for
their squares."""

import math


def moving_average(A, mean, std, M, N, W):
    """mean[i, j] and std[i, j]: the mean and the population standard deviation of A[i, j],
    ..., A[i, j + W - 1], for the N - W + 1 full windows of each of the M rows of A (M x N),
    from the window's sum and sum of squares kept in scalars."""
    for i in range(M):
        s = 0.0
        s2 = 0.0
        for j in range(W):
            s += A[i, j]
            s2 += A[i, j] * A[i, j]
        mean[i, 0] = s / W
        std[i, 0] = math.sqrt(max(s2 / W - (s / W) * (s / W), 0.0))
        for j in range(1, N - W + 1):
            s += A[i, j + W - 1] - A[i, j - 1]
            s2 += A[i, j + W - 1] * A[i, j + W - 1] - A[i, j - 1] * A[i, j - 1]
            mean[i, j] = s / W
            std[i, j] = math.sqrt(max(s2 / W - (s / W) * (s / W), 0.0))


SIZES = {"M": 7000, "N": 6000, "W": 50}
SMALL = {"M": 4, "N": 9, "W": 3}
OUTPUTS = ("mean", "std")


def peer(xp, linalg, A, mean, std, M, N, W):
    """Windows' sums (of the values and of their squares) as differences of the rows'
    cumulative sums."""
    def run():
        c = xp.cumsum(A, axis=1)
        c2 = xp.cumsum(A * A, axis=1)
        s = xp.concatenate([c[:, W - 1:W], c[:, W:] - c[:, :N - W]], axis=1)
        s2 = xp.concatenate([c2[:, W - 1:W], c2[:, W:] - c2[:, :N - W]], axis=1)
        mean[...] = s / W
        std[...] = xp.sqrt(xp.maximum(s2 / W - mean * mean, 0.0))
    return run
