"""Many independent tridiagonal systems solved by the Thomas algorithm (Numerical Recipes'
tridag): the implicit step of a 1-D diffusion on each of S lines of a grid."""

import numpy as np


def thomas_batched(a, b, c, d, cp, dp, x, S, N):
    """Solve S tridiagonal systems of N unknowns without pivoting: system s has sub-diagonal
    a[s], diagonal b[s], super-diagonal c[s] and right-hand side d[s] (a[s, 0] and
    c[s, N - 1] unused); cp and dp hold the forward sweep's coefficients, x the solutions."""
    for s in range(S):
        cp[s, 0] = c[s, 0] / b[s, 0]
        dp[s, 0] = d[s, 0] / b[s, 0]
        for i in range(1, N):
            m = b[s, i] - a[s, i] * cp[s, i - 1]
            cp[s, i] = c[s, i] / m
            dp[s, i] = (d[s, i] - a[s, i] * dp[s, i - 1]) / m
        x[s, N - 1] = dp[s, N - 1]
        for i in range(N - 2, -1, -1):
            x[s, i] = dp[s, i] - cp[s, i] * x[s, i + 1]


SIZES = {"S": 8000, "N": 2000}
SMALL = {"S": 4, "N": 7}
OUTPUTS = ("x",)


def inputs(S, N):
    """Diagonally dominant systems (|b| > |a| + |c|: no pivot needed, no growth)."""
    rng = np.random.default_rng(3)
    return {"a": rng.uniform(-1.0, 1.0, (S, N)), "b": rng.uniform(3.0, 4.0, (S, N)),
            "c": rng.uniform(-1.0, 1.0, (S, N)), "d": rng.uniform(-1.0, 1.0, (S, N)),
            "cp": np.zeros((S, N)), "dp": np.zeros((S, N)), "x": np.zeros((S, N))}


def peer(xp, linalg, a, b, c, d, cp, dp, x, S, N):
    """The same sweeps, each step a vector operation across the S systems."""
    def run():
        cp[:, 0] = c[:, 0] / b[:, 0]
        dp[:, 0] = d[:, 0] / b[:, 0]
        for i in range(1, N):
            m = b[:, i] - a[:, i] * cp[:, i - 1]
            cp[:, i] = c[:, i] / m
            dp[:, i] = (d[:, i] - a[:, i] * dp[:, i - 1]) / m
        x[:, N - 1] = dp[:, N - 1]
        for i in range(N - 2, -1, -1):
            x[:, i] = dp[:, i] - cp[:, i] * x[:, i + 1]
    return run
