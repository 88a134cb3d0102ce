import numpy as np


def trisolv(L, x, b, N):
    """PolyBench trisolv: forward substitution, L x = b with L lower triangular (every row
    needs the rows before it)."""
    for i in range(N):
        x[i] = b[i]
        for j in range(i):
            x[i] -= L[i, j] * x[j]
        x[i] = x[i] / L[i, i]


def inputs(N):
    """A well-conditioned lower-triangular L (N on its diagonal) and a right-hand side."""
    rng = np.random.default_rng(2)
    return {"L": np.tril(rng.uniform(0.0, 1.0, (N, N))) + N * np.eye(N),
            "x": np.zeros(N), "b": rng.uniform(0.0, 1.0, N), "N": N}
