"""The running (inclusive prefix) sum along each row of a table: cumulative totals of a time
series per row, the integral image's first pass, a cumulative distribution."""


def prefix_sum_rows(A, S, M, N):
    """S[i, j] = A[i, 0] + ... + A[i, j], with the running total kept in a scalar."""
    for i in range(M):
        total = 0.0
        for j in range(N):
            total += A[i, j]
            S[i, j] = total


SIZES = {"M": 8000, "N": 8000}
SMALL = {"M": 4, "N": 7}
OUTPUTS = ("S",)


def peer(xp, linalg, A, S, M, N):
    """The library's cumsum along the rows."""
    def run():
        xp.cumsum(A, axis=1, out=S)
    return run
