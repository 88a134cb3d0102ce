def jacobi_1d(A, B, TSTEPS, N):
    """PolyBench jacobi-1d: three-point averages, A into B and back each step."""
    for t in range(TSTEPS):
        for i in range(1, N - 1):
            B[i] = 0.33333 * (A[i - 1] + A[i] + A[i + 1])
        for i in range(1, N - 1):
            A[i] = 0.33333 * (B[i - 1] + B[i] + B[i + 1])
