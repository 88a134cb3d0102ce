def nussinov(seq, table, N):
    """PolyBench nussinov: RNA folding by dynamic programming over a triangle (rows from the
    bottom up, maxima, a data-dependent match score)."""
    for i in range(N - 1, -1, -1):
        for j in range(i + 1, N):
            if j - 1 >= 0:
                table[i, j] = max(table[i, j], table[i, j - 1])
            if i + 1 < N:
                table[i, j] = max(table[i, j], table[i + 1, j])
            if j - 1 >= 0 and i + 1 < N:
                if i < j - 1:
                    match = 1 if seq[i] + seq[j] == 3 else 0
                    table[i, j] = max(table[i, j], table[i + 1, j - 1] + match)
                else:
                    table[i, j] = max(table[i, j], table[i + 1, j - 1])
            for k in range(i + 1, j):
                table[i, j] = max(table[i, j], table[i, k] + table[k + 1, j])


def inputs(N):
    """Bases as the integers 0-3 (a match: two that sum to 3) and an empty table."""
    import numpy as np

    rng = np.random.default_rng(4)
    return {"seq": rng.integers(0, 4, N), "table": np.zeros((N, N)), "N": N}
