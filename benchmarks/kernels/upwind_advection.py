"""The linear advection equation u_t + a u_x = 0 (a > 0) on a periodic interval, by the
first-order upwind scheme (LeVeque, "Finite Volume Methods for Hyperbolic Problems",
section 4.8): each point looks back one cell, the first point back across the boundary to
the last."""

import numpy as np


def upwind_advection(u, unew, c, N, STEPS):
    """STEPS steps at the Courant number c = a dt / dx (stable for 0 <= c <= 1): the periodic
    point first, then the others, then unew copied back into u."""
    for t in range(STEPS):
        unew[0] = u[0] - c * (u[0] - u[N - 1])
        for i in range(1, N):
            unew[i] = u[i] - c * (u[i] - u[i - 1])
        for i in range(N):
            u[i] = unew[i]


SIZES = {"N": 4_000_000, "STEPS": 300}
SMALL = {"N": 9, "STEPS": 4}
OUTPUTS = ("u", "unew")


def inputs(N, STEPS):
    """A stable Courant number (c = 0.8: a random one past 1 would grow without bound) and a
    square pulse on a sine wave."""
    x = np.linspace(0.0, 1.0, N, endpoint=False)
    u = np.sin(2.0 * np.pi * x) + ((x > 0.2) & (x < 0.4))
    return {"u": u, "unew": np.zeros(N), "c": 0.8}


def peer(xp, linalg, u, unew, c, N, STEPS):
    """Each step with the neighbour to the left as the rolled array."""
    def run():
        for _ in range(STEPS):
            unew[...] = u - c * (u - xp.roll(u, 1))
            u[...] = unew
    return run
