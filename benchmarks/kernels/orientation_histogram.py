"""Histograms of gradient orientations over the cells of an image, the core of the HOG
descriptor (Dalal and Triggs, 2005; Szeliski, "Computer Vision", section 7.1): at each
interior pixel the centred-difference gradient, its magnitude added to the bin of its
unsigned orientation (0 to pi) in the histogram of the C x C cell the pixel lies in."""

import math

import numpy as np


def orientation_histogram(image, hist, H, W, C, NB):
    """hist[i // C, j // C, b] += |g| at each interior pixel (i, j), g = (gx, gy) the
    centred differences along the row and the column and b = int(theta NB / pi) (at most
    NB - 1) for theta = atan2(gy, gx) taken into [0, pi]."""
    for i in range(1, H - 1):
        for j in range(1, W - 1):
            gx = image[i, j + 1] - image[i, j - 1]
            gy = image[i + 1, j] - image[i - 1, j]
            magnitude = math.sqrt(gx * gx + gy * gy)
            theta = math.atan2(gy, gx)
            if theta < 0.0:
                theta += math.pi
            b = min(int(theta * NB / math.pi), NB - 1)
            hist[i // C, j // C, b] += magnitude


SIZES = {"H": 4000, "W": 4000, "C": 8, "NB": 9}
SMALL = {"H": 9, "W": 11, "C": 4, "NB": 5}
OUTPUTS = ("hist",)


def inputs(H, W, C, NB):
    """A smooth image with noise (gradients of every orientation) and empty histograms, one
    per cell that holds an interior pixel (loclab's own would size the bins' axis by the
    largest size, not by NB)."""
    rng = np.random.default_rng(4)
    y, x = np.mgrid[0:H, 0:W] / 50.0
    image = 100.0 * np.sin(x) * np.cos(0.7 * y) + rng.normal(0.0, 10.0, (H, W))
    return {"image": image, "hist": np.zeros(((H - 2) // C + 1, (W - 2) // C + 1, NB))}


def peer(xp, linalg, image, hist, H, W, C, NB):
    """Gradients, magnitudes and bins as whole-array arithmetic on shifted views, each pixel's
    (cell, bin) as one flat index, the library's weighted bincount reshaped to the cells."""
    def run():
        gx = image[1:H - 1, 2:W] - image[1:H - 1, 0:W - 2]
        gy = image[2:H, 1:W - 1] - image[0:H - 2, 1:W - 1]
        magnitude = xp.sqrt(gx * gx + gy * gy)
        theta = xp.arctan2(gy, gx)
        theta = xp.where(theta < 0.0, theta + xp.pi, theta)
        bins = xp.minimum((theta * NB / xp.pi).astype(xp.int64), NB - 1)
        rows = (xp.arange(1, H - 1) // C)[:, None]
        cols = (xp.arange(1, W - 1) // C)[None, :]
        flat = (rows * hist.shape[1] + cols) * NB + bins
        hist[...] += xp.bincount(flat.ravel(), weights=magnitude.ravel(),
                                 minlength=hist.size).reshape(hist.shape)
    return run
