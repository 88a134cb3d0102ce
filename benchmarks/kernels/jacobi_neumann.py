"""Jacobi iteration for Poisson's equation with mixed boundary conditions (the five-point
Laplacian): the left and right walls insulated (zero normal derivative, imposed the way
finite-difference texts do by copying the neighbouring interior column onto the wall before
each sweep), the top and bottom rows held at fixed values."""


def jacobi_neumann(u, unew, f, h2, N, STEPS):
    """STEPS sweeps for -laplace(u) = f with spacing h (h2 = h^2) on an N x N grid: each step
    first sets the wall columns u[:, 0] and u[:, N - 1] to their interior neighbours, then
    computes the new interior into unew and copies it back into u."""
    for t in range(STEPS):
        for i in range(1, N - 1):
            u[i, 0] = u[i, 1]
            u[i, N - 1] = u[i, N - 2]
        for i in range(1, N - 1):
            for j in range(1, N - 1):
                unew[i, j] = 0.25 * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1]
                                     + h2 * f[i, j])
        for i in range(1, N - 1):
            for j in range(1, N - 1):
                u[i, j] = unew[i, j]


SIZES = {"N": 2000, "STEPS": 200}
SMALL = {"N": 7, "STEPS": 3}
OUTPUTS = ("u", "unew")


def peer(xp, linalg, u, unew, f, h2, N, STEPS):
    """Per step: the two wall columns as column copies, then the sweep from shifted views of
    the interior."""
    def run():
        for _ in range(STEPS):
            u[1:N - 1, 0] = u[1:N - 1, 1]
            u[1:N - 1, N - 1] = u[1:N - 1, N - 2]
            unew[1:N - 1, 1:N - 1] = 0.25 * (u[0:N - 2, 1:N - 1] + u[2:N, 1:N - 1]
                                              + u[1:N - 1, 0:N - 2] + u[1:N - 1, 2:N]
                                              + h2 * f[1:N - 1, 1:N - 1])
            u[1:N - 1, 1:N - 1] = unew[1:N - 1, 1:N - 1]
    return run
