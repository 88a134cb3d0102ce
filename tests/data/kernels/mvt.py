def mvt(x1, x2, y_1, y_2, A, N):
    """PolyBench mvt: x1 += A y_1, x2 += A^T y_2."""
    for i in range(N):
        for j in range(N):
            x1[i] = x1[i] + A[i, j] * y_1[j]
    for i in range(N):
        for j in range(N):
            x2[i] = x2[i] + A[j, i] * y_2[j]
