"""A weighted histogram with logarithmic bins (the binning of heavy-tailed data: incomes,
file sizes, particle energies, degree distributions; Newman, "Power laws, Pareto
distributions and Zipf's law", section 2): each sample's bin from the logarithm of its value,
values outside the range counted in the first or last bin."""

import math

import numpy as np


def weighted_histogram(x, w, hist, lo, scale, N, NB):
    """hist[b] += w[i] for each of the N (positive) samples, b = int(log(x[i] / lo) * scale)
    clamped to the NB bins (scale = NB / log(hi / lo): bins of equal width in log x from lo
    to hi)."""
    for i in range(N):
        b = min(max(int(math.log(x[i] / lo) * scale), 0), NB - 1)
        hist[b] += w[i]


SIZES = {"N": 32_000_000, "NB": 1000}
SMALL = {"N": 40, "NB": 7}
OUTPUTS = ("hist",)


def inputs(N, NB):
    """Log-normal samples binned from 1e-3 to 1e3 (some fall outside), positive weights and
    an empty histogram (loclab's own arguments would size the histogram by the loop, not by
    NB)."""
    rng = np.random.default_rng(5)
    return {"x": rng.lognormal(0.0, 2.0, N), "w": rng.uniform(0.0, 1.0, N),
            "hist": np.zeros(NB), "lo": 1e-3, "scale": NB / math.log(1e6)}


def peer(xp, linalg, x, w, hist, lo, scale, N, NB):
    """The bins as one clipped integer array, then the library's weighted bincount."""
    def run():
        bins = xp.clip((xp.log(x / lo) * scale).astype(xp.int64), 0, NB - 1)
        hist[...] += xp.bincount(bins, weights=w, minlength=NB)
    return run
