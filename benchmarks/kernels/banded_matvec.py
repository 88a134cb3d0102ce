"""A band matrix times a block of vectors, the matrix stored by diagonals (LAPACK's general
band storage, laid out by rows): the operator of a finite-difference scheme of wide stencil
applied to R fields at once."""


def banded_matvec(band, X, Y, N, R, KL, KU):
    """Y = A X for the N x N band matrix A with KL sub- and KU super-diagonals, held as
    band[i, k] = A[i, i + k - KL] (entries outside A never read), and the R columns of X."""
    for r in range(R):
        for i in range(N):
            total = 0.0
            for k in range(max(0, KL - i), min(KL + KU + 1, N + KL - i)):
                total += band[i, k] * X[i + k - KL, r]
            Y[i, r] = total


SIZES = {"N": 200_000, "R": 64, "KL": 16, "KU": 16}
SMALL = {"N": 9, "R": 3, "KL": 2, "KU": 1}
OUTPUTS = ("Y",)


def peer(xp, linalg, band, X, Y, N, R, KL, KU):
    """A diagonal at a time: each one scales the rows of X it meets and adds them up."""
    def run():
        Y[...] = 0.0
        for k in range(KL + KU + 1):
            lo, hi = max(0, KL - k), min(N, N + KL - k)
            Y[lo:hi] += band[lo:hi, k, None] * X[lo + k - KL:hi + k - KL]
    return run
