def gemm(C, A, B, alpha, beta, NI, NJ, NK):
    """PolyBench gemm: C = alpha A B + beta C, C scaled row by row first."""
    for i in range(NI):
        for j in range(NJ):
            C[i, j] *= beta
        for k in range(NK):
            for j in range(NJ):
                C[i, j] += alpha * A[i, k] * B[k, j]
