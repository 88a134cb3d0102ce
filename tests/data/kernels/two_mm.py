def two_mm(tmp, A, B, C, D, alpha, beta, NI, NJ, NK, NL):
    """PolyBench 2mm: D = alpha A B C + beta D."""
    for i in range(NI):
        for j in range(NJ):
            tmp[i, j] = 0.0
            for k in range(NK):
                tmp[i, j] += alpha * A[i, k] * B[k, j]
    for i in range(NI):
        for j in range(NL):
            D[i, j] *= beta
            for k in range(NJ):
                D[i, j] += tmp[i, k] * C[k, j]
