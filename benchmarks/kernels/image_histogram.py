"""The grey-level histogram of an 8-bit image (the first step of histogram equalization and
of Otsu's threshold): a count per value, the pixel's value the bin."""

import numpy as np


def image_histogram(image, hist, H, W):
    """hist[v] += 1 for each pixel of value v (image holds the integers 0 to 255)."""
    for i in range(H):
        for j in range(W):
            hist[image[i, j]] += 1


SIZES = {"H": 8000, "W": 8000}
SMALL = {"H": 5, "W": 7}
OUTPUTS = ("hist",)


def inputs(H, W):
    """An image of integers 0-255 (a gradient plus noise: some bins much fuller than others)
    and an empty histogram."""
    rng = np.random.default_rng(7)
    ramp = np.linspace(0.0, 200.0, W)[None, :] + rng.normal(0.0, 20.0, (H, W))
    return {"image": np.clip(ramp, 0, 255).astype(np.int64),
            "hist": np.zeros(256, dtype=np.int64)}


def peer(xp, linalg, image, hist, H, W):
    """The library's bincount over the flattened image."""
    def run():
        hist[...] += xp.bincount(image.ravel(), minlength=256)
    return run
