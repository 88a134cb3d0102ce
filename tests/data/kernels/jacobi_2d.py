def jacobi_2d(A, B, TSTEPS, N):
    """PolyBench jacobi-2d: two five-point sweeps per time step, A into B and back."""
    for t in range(TSTEPS):
        for i in range(1, N - 1):
            for j in range(1, N - 1):
                B[i, j] = 0.2 * (A[i, j] + A[i, j - 1] + A[i, 1 + j] + A[1 + i, j]
                                 + A[i - 1, j])
        for i in range(1, N - 1):
            for j in range(1, N - 1):
                A[i, j] = 0.2 * (B[i, j] + B[i, j - 1] + B[i, 1 + j] + B[1 + i, j]
                                 + B[i - 1, j])
