"""The product of two polynomials (coefficients lowest degree first), which is the full
convolution of their coefficient sequences: every pair of terms adds into the coefficient
of its degree."""


def poly_product(a, b, c, NA, NB):
    """c = a * b: c[i + j] += a[i] * b[j] over every pair, c (NA + NB - 1 coefficients)
    cleared first."""
    for k in range(NA + NB - 1):
        c[k] = 0.0
    for i in range(NA):
        for j in range(NB):
            c[i + j] += a[i] * b[j]


SIZES = {"NA": 50000, "NB": 50000}
SMALL = {"NA": 5, "NB": 4}
OUTPUTS = ("c",)


def peer(xp, linalg, a, b, c, NA, NB):
    """The library's direct full convolution."""
    def run():
        c[...] = xp.convolve(a, b)
    return run
