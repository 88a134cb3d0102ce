"""The heat equation u_t = u_xx on a rod, explicit time steps (forward Euler in time,
centred differences in space: FTCS), both ends held at their initial temperature."""

import numpy as np


def heat_1d(u, unew, r, N, STEPS):
    """STEPS steps at the ratio r = dt / dx^2 (stable for r <= 1/2): unew from u at the
    interior points, then copied back into u."""
    for t in range(STEPS):
        for i in range(1, N - 1):
            unew[i] = u[i] + r * (u[i - 1] - 2.0 * u[i] + u[i + 1])
        for i in range(1, N - 1):
            u[i] = unew[i]


SIZES = {"N": 1_000_000, "STEPS": 1200}
SMALL = {"N": 9, "STEPS": 4}
OUTPUTS = ("u",)


def inputs(N, STEPS):
    """A stable ratio (r = 0.4: a random one past 1/2 would make the scheme blow up) and a
    sine profile, zero at both ends."""
    return {"u": np.sin(np.pi * np.linspace(0.0, 1.0, N)), "unew": np.zeros(N), "r": 0.4}


def peer(xp, linalg, u, unew, r, N, STEPS):
    """Each step from shifted views of the rod."""
    def run():
        for _ in range(STEPS):
            unew[1:N - 1] = u[1:N - 1] + r * (u[0:N - 2] - 2.0 * u[1:N - 1] + u[2:N])
            u[1:N - 1] = unew[1:N - 1]
    return run
