def syrk(A, C, alpha, beta, M, N):
    """PolyBench syrk: the lower triangle of C = alpha A A^T + beta C (a triangular band)."""
    for i in range(N):
        for j in range(i + 1):
            C[i, j] *= beta
        for k in range(M):
            for j in range(i + 1):
                C[i, j] += alpha * A[i, k] * A[j, k]
