"""A polynomial evaluated at many points by Horner's rule (Knuth, TAOCP volume 2, 4.6.4):
DEG multiply-adds a point, each waiting on the one before."""


def horner(coeffs, x, y, N, DEG):
    """y[i] = p(x[i]) for the polynomial of degree DEG whose coefficients, lowest degree first,
    are coeffs: (...(c_DEG x + c_DEG-1) x + ...) x + c_0."""
    for i in range(N):
        acc = coeffs[DEG]
        for k in range(DEG - 1, -1, -1):
            acc = acc * x[i] + coeffs[k]
        y[i] = acc


SIZES = {"N": 10_000_000, "DEG": 100}
SMALL = {"N": 6, "DEG": 4}
OUTPUTS = ("y",)


def peer(xp, linalg, coeffs, x, y, N, DEG):
    """Horner's rule over the whole vector of points, one coefficient at a time."""
    def run():
        y[...] = coeffs[DEG]
        for k in range(DEG - 1, -1, -1):
            y[...] = y * x + coeffs[k]
    return run
