"""A box blur of radius R done as two 1-D passes (the filter is separable): along the rows
into tmp, then along the columns of tmp (pixels whose whole box lies inside the image)."""


def box_blur(image, tmp, out, H, W, R):
    """tmp[i, j]: the mean of the 2R + 1 pixels of row i centred on j; out[i, j]: the mean of
    the 2R + 1 values of tmp's column j centred on i."""
    for i in range(H):
        for j in range(R, W - R):
            total = 0.0
            for k in range(-R, R + 1):
                total += image[i, j + k]
            tmp[i, j] = total / (2 * R + 1)
    for i in range(R, H - R):
        for j in range(R, W - R):
            total = 0.0
            for k in range(-R, R + 1):
                total += tmp[i + k, j]
            out[i, j] = total / (2 * R + 1)


SIZES = {"H": 5000, "W": 5000, "R": 8}
SMALL = {"H": 9, "W": 8, "R": 2}
OUTPUTS = ("tmp", "out")


def peer(xp, linalg, image, tmp, out, H, W, R):
    """Each pass a sum of 2R + 1 shifted views."""
    def run():
        tmp[:, R:W - R] = sum(image[:, R + k:W - R + k] for k in range(-R, R + 1)) / (2 * R + 1)
        out[R:H - R, R:W - R] = sum(tmp[R + k:H - R + k, R:W - R]
                                    for k in range(-R, R + 1)) / (2 * R + 1)
    return run
