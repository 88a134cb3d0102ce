def bicg(A, s, q, p, r, M, N):
    """PolyBench bicg: s = A^T r and q = A p in one sweep over A."""
    for i in range(M):
        s[i] = 0.0
    for i in range(N):
        q[i] = 0.0
        for j in range(M):
            s[j] = s[j] + r[i] * A[i, j]
            q[i] = q[i] + A[i, j] * p[j]
