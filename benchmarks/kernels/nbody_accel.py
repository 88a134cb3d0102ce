"""The gravitational accelerations of N bodies on one another, summed over every pair with
a softening length (the direct-summation step of an N-body code, G = 1)."""

import math


def nbody_accel(pos, mass, acc, N):
    """acc[i] = sum over j of mass[j] (pos[j] - pos[i]) / (|pos[j] - pos[i]|^2 + eps^2)^(3/2)
    in three dimensions (a body's pull on itself is zero: its offset is)."""
    eps2 = 1e-4
    for i in range(N):
        ax = 0.0
        ay = 0.0
        az = 0.0
        for j in range(N):
            dx = pos[j, 0] - pos[i, 0]
            dy = pos[j, 1] - pos[i, 1]
            dz = pos[j, 2] - pos[i, 2]
            r2 = dx * dx + dy * dy + dz * dz + eps2
            scale = mass[j] / (r2 * math.sqrt(r2))
            ax += dx * scale
            ay += dy * scale
            az += dz * scale
        acc[i, 0] = ax
        acc[i, 1] = ay
        acc[i, 2] = az


SIZES = {"N": 12000}
SMALL = {"N": 7}
OUTPUTS = ("acc",)


BLOCK = 256  # the peer's bodies a block: the N x N x 3 offsets at once would take gigabytes


def peer(xp, linalg, pos, mass, acc, N):
    """The offsets of a block of bodies to every body at once (a BLOCK x N x 3 array),
    broadcast and summed over j, block after block."""
    def run():
        for lo in range(0, N, BLOCK):
            offset = pos[None, :, :] - pos[lo:lo + BLOCK, None, :]
            r2 = (offset * offset).sum(axis=2) + 1e-4
            acc[lo:lo + BLOCK] = (offset * (mass / (r2 * xp.sqrt(r2)))[:, :, None]).sum(axis=1)
    return run
