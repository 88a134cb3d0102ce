"""The weighted Jacobi smoother of a multigrid V-cycle for the 3-D Poisson equation (the
seven-point Laplacian; Briggs, Henson and McCormick, "A Multigrid Tutorial", chapter 2):
each point moves two thirds of the way to the plain Jacobi value, the boundary held fixed."""


def jacobi_smooth_3d(u, unew, f, h2, N, STEPS):
    """STEPS smoothing sweeps for -laplace(u) = f on an N x N x N grid with spacing h
    (h2 = h^2): unew from u at the interior points (weight 2/3), then copied back into u."""
    for t in range(STEPS):
        for i in range(1, N - 1):
            for j in range(1, N - 1):
                for k in range(1, N - 1):
                    jacobi = (u[i - 1, j, k] + u[i + 1, j, k] + u[i, j - 1, k]
                              + u[i, j + 1, k] + u[i, j, k - 1] + u[i, j, k + 1]
                              + h2 * f[i, j, k]) / 6.0
                    unew[i, j, k] = u[i, j, k] + (2.0 / 3.0) * (jacobi - u[i, j, k])
        for i in range(1, N - 1):
            for j in range(1, N - 1):
                for k in range(1, N - 1):
                    u[i, j, k] = unew[i, j, k]


SIZES = {"N": 200, "STEPS": 30}
SMALL = {"N": 6, "STEPS": 3}
OUTPUTS = ("u", "unew")


def peer(xp, linalg, u, unew, f, h2, N, STEPS):
    """Each sweep from the six shifted views of the interior."""
    def run():
        c = slice(1, N - 1)
        lo = slice(0, N - 2)
        hi = slice(2, N)
        for _ in range(STEPS):
            jacobi = (u[lo, c, c] + u[hi, c, c] + u[c, lo, c] + u[c, hi, c] + u[c, c, lo]
                      + u[c, c, hi] + h2 * f[c, c, c]) / 6.0
            unew[c, c, c] = u[c, c, c] + (2.0 / 3.0) * (jacobi - u[c, c, c])
            u[c, c, c] = unew[c, c, c]
    return run
