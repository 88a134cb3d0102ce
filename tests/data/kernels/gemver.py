def gemver(A, u1, v1, u2, v2, w, x, y, z, alpha, beta, N):
    """PolyBench gemver: a rank-2 update of A, then x = x + beta A^T y + z and
    w = w + alpha A x."""
    for i in range(N):
        for j in range(N):
            A[i, j] = A[i, j] + u1[i] * v1[j] + u2[i] * v2[j]
    for i in range(N):
        for j in range(N):
            x[i] = x[i] + beta * A[j, i] * y[j]
    for i in range(N):
        x[i] = x[i] + z[i]
    for i in range(N):
        for j in range(N):
            w[i] = w[i] + alpha * A[i, j] * x[j]
