def scatter_squares(A, B, N):
    """A non-affine subscript: A is written at the squares (A must hold (N - 1)^2 + 1)."""
    for i in range(N):
        A[i * i] = B[i]
