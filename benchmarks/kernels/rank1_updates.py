"""A rank-K update A += U V^T written as K outer products, one after another: how updates of
a factorization (or a sum of outer products, Golub and Van Loan's "outer product" gaxpy
form) are written when each rank-1 term is computed in turn."""


def rank1_updates(A, U, V, N, M, K):
    """For each p: A += u_p v_p^T, u_p and v_p the p-th columns of U (N x K) and V (M x K)."""
    for p in range(K):
        for i in range(N):
            for j in range(M):
                A[i, j] += U[i, p] * V[j, p]


SIZES = {"N": 2000, "M": 2000, "K": 256}
SMALL = {"N": 5, "M": 6, "K": 3}
OUTPUTS = ("A",)


def peer(xp, linalg, A, U, V, N, M, K):
    """The K updates as one matrix product."""
    def run():
        A[...] += U @ V.T
    return run
