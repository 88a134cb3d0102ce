def durbin(r, y, z, N):
    """PolyBench durbin: the Levinson-Durbin recursion for a Toeplitz system (scalars carried
    from step to step, a reversed subscript, z a scratch vector)."""
    y[0] = -r[0]
    beta = 1.0
    alpha = -r[0]
    for k in range(1, N):
        beta = (1 - alpha * alpha) * beta
        total = 0.0
        for i in range(k):
            total += r[k - i - 1] * y[i]
        alpha = -(r[k] + total) / beta
        for i in range(k):
            z[i] = y[i] + alpha * y[k - i - 1]
        for i in range(k):
            y[i] = z[i]
        y[k] = alpha


def inputs(N):
    """PolyBench's r: values that keep beta away from zero."""
    import numpy as np

    return {"r": np.array([(N + 1 - i) / (N * 200.0) for i in range(N)]),
            "y": np.zeros(N), "z": np.zeros(N), "N": N}
