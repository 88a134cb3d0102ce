def gesummv(A, B, tmp, x, y, alpha, beta, N):
    """PolyBench gesummv: y = alpha A x + beta B x."""
    for i in range(N):
        tmp[i] = 0.0
        y[i] = 0.0
        for j in range(N):
            tmp[i] = A[i, j] * x[j] + tmp[i]
            y[i] = B[i, j] * x[j] + y[i]
        y[i] = alpha * tmp[i] + beta * y[i]
