"""The matrix product C = alpha A B + beta C in the row-oriented i-k-j order (Golub and Van
Loan's "saxpy" form of matrix multiplication, section 1.1.10): each row of C is first scaled
by beta, then row k of B, times alpha A[i, k], is added to it, so that the innermost loop runs
along rows of B and C."""


def matmul_ikj(A, B, C, alpha, beta, N, M, K):
    """C (N x M) = alpha A B + beta C, A N x K and B K x M: per row i, the scaling loop, then
    one saxpy of a row of B per k."""
    for i in range(N):
        for j in range(M):
            C[i, j] = beta * C[i, j]
        for k in range(K):
            a = alpha * A[i, k]
            for j in range(M):
                C[i, j] += a * B[k, j]


SIZES = {"N": 1500, "M": 1500, "K": 1500}
SMALL = {"N": 5, "M": 6, "K": 4}
OUTPUTS = ("C",)


def peer(xp, linalg, A, B, C, alpha, beta, N, M, K):
    """One scaled matrix product and a scaled add."""
    def run():
        C[...] = alpha * (A @ B) + beta * C
    return run
