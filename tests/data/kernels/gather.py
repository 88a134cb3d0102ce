def gather_add(y, x, idx, N):
    """An indirect subscript: y[i] += x[idx[i]] (idx's values index x)."""
    for i in range(N):
        y[i] += x[idx[i]]
