"""Jacobi iteration for Poisson's equation on a square grid (the five-point Laplacian, fixed
boundary values), as numerical PDE texts first write it: a new grid from the old, copied
back after each sweep."""


def laplace_jacobi(u, unew, f, h2, N, STEPS):
    """STEPS sweeps for -laplace(u) = f with spacing h (h2 = h^2): each interior point becomes
    the mean of its four neighbours plus h2 f / 4, computed into unew, then copied into u."""
    for t in range(STEPS):
        for i in range(1, N - 1):
            for j in range(1, N - 1):
                unew[i, j] = 0.25 * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1]
                                     + h2 * f[i, j])
        for i in range(1, N - 1):
            for j in range(1, N - 1):
                u[i, j] = unew[i, j]


SIZES = {"N": 1000, "STEPS": 1000}
SMALL = {"N": 7, "STEPS": 3}
OUTPUTS = ("u", "unew")


def peer(xp, linalg, u, unew, f, h2, N, STEPS):
    """Each sweep from shifted views of the interior."""
    def run():
        for _ in range(STEPS):
            unew[1:N - 1, 1:N - 1] = 0.25 * (u[0:N - 2, 1:N - 1] + u[2:N, 1:N - 1]
                                              + u[1:N - 1, 0:N - 2] + u[1:N - 1, 2:N]
                                              + h2 * f[1:N - 1, 1:N - 1])
            u[1:N - 1, 1:N - 1] = unew[1:N - 1, 1:N - 1]
    return run
