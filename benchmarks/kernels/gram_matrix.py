"""The Gram matrix of a tall matrix's columns, A^T A: the normal equations of least squares
(Golub and Van Loan, section 5.3), summed over the upper triangle and mirrored."""


def gram_matrix(A, G, M, N):
    """G[i, j] = sum over k of A[k, i] * A[k, j], the dot products of A's N columns (A is
    M x N); G is symmetric, so each product is computed once and stored twice."""
    for i in range(N):
        for j in range(i, N):
            total = 0.0
            for k in range(M):
                total += A[k, i] * A[k, j]
            G[i, j] = total
            G[j, i] = total


SIZES = {"M": 1200, "N": 1000}
SMALL = {"M": 7, "N": 5}
OUTPUTS = ("G",)


def peer(xp, linalg, A, G, M, N):
    """A^T A with the library's matrix product."""
    def run():
        G[...] = A.T @ A
    return run
