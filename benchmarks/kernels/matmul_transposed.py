"""The product C = A^T B of two tall matrices with the same number of rows (the cross-product
matrix X^T Y of regression and of canonical correlation, the correlation step of a
least-squares fit): each entry the dot product of a column of A with a column of B, as the
inner-product form of matrix multiplication (Golub and Van Loan, section 1.1.10) writes it."""


def matmul_transposed(A, B, C, M, N, P):
    """C[i, j] = sum over k of A[k, i] * B[k, j], A M x N and B M x P: the M-term dot product
    of column i of A and column j of B, summed in a scalar."""
    for i in range(N):
        for j in range(P):
            total = 0.0
            for k in range(M):
                total += A[k, i] * B[k, j]
            C[i, j] = total


SIZES = {"M": 1200, "N": 800, "P": 800}
SMALL = {"M": 7, "N": 4, "P": 5}
OUTPUTS = ("C",)


def peer(xp, linalg, A, B, C, M, N, P):
    """The library's matrix product of A's transpose (a view) with B."""
    def run():
        C[...] = A.T @ B
    return run
