"""The 2-D wave equation u_tt = c^2 laplace(u) on a membrane clamped at its edge, by the
explicit leapfrog scheme (centred differences in time and space): three time levels, the new
one from the two before, the levels then rotated by copying, as introductory PDE texts (and
Numerical Recipes, section 20.1) write it."""

import numpy as np


def wave_2d(uprev, u, unext, r2, N, STEPS):
    """STEPS steps at r2 = (c dt / h)^2 (stable for r2 <= 1/2): unext at the interior from u
    and uprev, then uprev = u and u = unext there; the boundary stays at zero."""
    for t in range(STEPS):
        for i in range(1, N - 1):
            for j in range(1, N - 1):
                unext[i, j] = (2.0 * u[i, j] - uprev[i, j]
                               + r2 * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1]
                                       - 4.0 * u[i, j]))
        for i in range(1, N - 1):
            for j in range(1, N - 1):
                uprev[i, j] = u[i, j]
                u[i, j] = unext[i, j]


SIZES = {"N": 2000, "STEPS": 200}
SMALL = {"N": 7, "STEPS": 4}
OUTPUTS = ("uprev", "u", "unext")


def inputs(N, STEPS):
    """A stable ratio (r2 = 0.25: a random one past 1/2 blows up) and a Gaussian bump at rest
    (uprev = u), zero on the edge."""
    x = np.linspace(-1.0, 1.0, N)
    u = np.exp(-20.0 * (x[:, None] ** 2 + x[None, :] ** 2))
    u[0, :] = u[-1, :] = u[:, 0] = u[:, -1] = 0.0
    return {"uprev": u.copy(), "u": u, "unext": np.zeros((N, N)), "r2": 0.25}


def peer(xp, linalg, uprev, u, unext, r2, N, STEPS):
    """Each step from shifted views of the interior, the levels rotated by slice copies."""
    def run():
        c = (slice(1, N - 1), slice(1, N - 1))
        for _ in range(STEPS):
            unext[c] = (2.0 * u[c] - uprev[c]
                        + r2 * (u[0:N - 2, 1:N - 1] + u[2:N, 1:N - 1] + u[1:N - 1, 0:N - 2]
                                + u[1:N - 1, 2:N] - 4.0 * u[c]))
            uprev[c] = u[c]
            u[c] = unext[c]
    return run
