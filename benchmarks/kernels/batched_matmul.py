"""Many small independent matrix products, C_b = A_b B_b for a batch of 32 x 32 blocks (the
element matrices of a finite-element code, the blocks of a block-Jacobi preconditioner, the
per-head products of a small neural network): the textbook triple loop inside a loop over the
batch."""


def batched_matmul(A, B, C, S, N):
    """C[s] = A[s] B[s] for each of the S pairs of N x N matrices, each entry a dot product
    summed in a scalar."""
    for s in range(S):
        for i in range(N):
            for j in range(N):
                total = 0.0
                for k in range(N):
                    total += A[s, i, k] * B[s, k, j]
                C[s, i, j] = total


SIZES = {"S": 25_000, "N": 32}
SMALL = {"S": 3, "N": 4}
OUTPUTS = ("C",)


def peer(xp, linalg, A, B, C, S, N):
    """The library's batched matrix product (matmul broadcasts over the leading axis)."""
    def run():
        xp.matmul(A, B, out=C)
    return run
