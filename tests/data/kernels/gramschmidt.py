import math


def gramschmidt(A, R, Q, M, N):
    """PolyBench gramschmidt: QR by modified Gram-Schmidt (a norm, a scaling and, for each
    later column, a dot product and an update, inside a sequential k loop)."""
    for k in range(N):
        nrm = 0.0
        for i in range(M):
            nrm += A[i, k] * A[i, k]
        R[k, k] = math.sqrt(nrm)
        for i in range(M):
            Q[i, k] = A[i, k] / R[k, k]
        for j in range(k + 1, N):
            R[k, j] = 0.0
            for i in range(M):
                R[k, j] += Q[i, k] * A[i, j]
            for i in range(M):
                A[i, j] = A[i, j] - Q[i, k] * R[k, j]
