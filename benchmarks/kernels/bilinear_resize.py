"""Resizing an image by bilinear interpolation (Gonzalez and Woods, section 2.4; OpenCV's
INTER_LINEAR with aligned corners): each output pixel mapped back to a real position in the
input, its integer part the top-left of the four input pixels it is interpolated from."""

import numpy as np


def bilinear_resize(image, out, H, W, OH, OW):
    """out (OH x OW) from image (H x W), the corner pixels of both aligned: output (i, j) sits
    at y = i (H - 1) / (OH - 1), x = j (W - 1) / (OW - 1) in the input, between rows
    y0 = int(y) and y0 + 1 and columns x0 = int(x) and x0 + 1 (y0 at most H - 2, x0 at most
    W - 2)."""
    for i in range(OH):
        y = i * (H - 1) / (OH - 1)
        y0 = min(int(y), H - 2)
        fy = y - y0
        for j in range(OW):
            x = j * (W - 1) / (OW - 1)
            x0 = min(int(x), W - 2)
            fx = x - x0
            out[i, j] = ((1.0 - fy) * ((1.0 - fx) * image[y0, x0] + fx * image[y0, x0 + 1])
                         + fy * ((1.0 - fx) * image[y0 + 1, x0] + fx * image[y0 + 1, x0 + 1]))


SIZES = {"H": 4000, "W": 4000, "OH": 9000, "OW": 9000}
SMALL = {"H": 5, "W": 6, "OH": 8, "OW": 9}
OUTPUTS = ("out",)


def inputs(H, W, OH, OW):
    """A random H x W image (loclab cannot bound subscripts computed through the scalars y0
    and x0, and would make the image as large as the largest size in both dimensions)."""
    rng = np.random.default_rng(9)
    return {"image": rng.uniform(0.0, 255.0, (H, W)), "out": np.full((OH, OW), np.nan)}


def peer(xp, linalg, image, out, H, W, OH, OW):
    """The positions, integer parts and fractions as vectors over the output's rows and
    columns, the four neighbours gathered by fancy indexing."""
    def run():
        y = xp.arange(OH) * (H - 1) / (OH - 1)
        y0 = xp.minimum(y.astype(xp.int64), H - 2)
        fy = (y - y0)[:, None]
        x = xp.arange(OW) * (W - 1) / (OW - 1)
        x0 = xp.minimum(x.astype(xp.int64), W - 2)
        fx = x - x0
        rows, rows1 = y0[:, None], y0[:, None] + 1
        out[...] = ((1.0 - fy) * ((1.0 - fx) * image[rows, x0] + fx * image[rows, x0 + 1])
                    + fy * ((1.0 - fx) * image[rows1, x0] + fx * image[rows1, x0 + 1]))
    return run
