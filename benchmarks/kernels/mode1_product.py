"""The mode-1 product of a third-order tensor with a matrix, Y = X x_1 U (Kolda and Bader,
"Tensor Decompositions and Applications", section 2.5): every mode-1 fibre X[:, j, k] of the
tensor multiplied by U, the step of a Tucker decomposition (HOSVD, HOOI) that projects the
first mode, each entry a dot product summed in a scalar."""


def mode1_product(X, U, Y, I, L, J, K):
    """Y[i, j, k] = sum over l of U[i, l] * X[l, j, k], X L x J x K, U I x L, Y I x J x K."""
    for i in range(I):
        for j in range(J):
            for k in range(K):
                total = 0.0
                for l in range(L):
                    total += U[i, l] * X[l, j, k]
                Y[i, j, k] = total


SIZES = {"I": 128, "L": 128, "J": 200, "K": 200}
SMALL = {"I": 3, "L": 4, "J": 5, "K": 2}
OUTPUTS = ("Y",)


def peer(xp, linalg, X, U, Y, I, L, J, K):
    """The tensor unfolded along its first mode (an L x (J K) matrix, a reshape of the
    C-ordered array), one matrix product, folded back."""
    def run():
        Y[...] = (U @ X.reshape(L, J * K)).reshape(I, J, K)
    return run
