"""The Sobel edge detector (Gonzalez and Woods, section 10.2): the gradient's magnitude from
the horizontal and vertical 3 x 3 derivative filters, at every interior pixel."""

import math


def sobel(image, magnitude, H, W):
    """magnitude[i, j] = sqrt(gx^2 + gy^2), gx and gy the Sobel responses at (i, j); the
    border pixels are left as they are."""
    for i in range(1, H - 1):
        for j in range(1, W - 1):
            gx = (image[i - 1, j + 1] + 2.0 * image[i, j + 1] + image[i + 1, j + 1]
                  - image[i - 1, j - 1] - 2.0 * image[i, j - 1] - image[i + 1, j - 1])
            gy = (image[i + 1, j - 1] + 2.0 * image[i + 1, j] + image[i + 1, j + 1]
                  - image[i - 1, j - 1] - 2.0 * image[i - 1, j] - image[i - 1, j + 1])
            magnitude[i, j] = math.sqrt(gx * gx + gy * gy)


SIZES = {"H": 6000, "W": 6000}
SMALL = {"H": 6, "W": 7}
OUTPUTS = ("magnitude",)


def peer(xp, linalg, image, magnitude, H, W):
    """The two responses from shifted views of the image, whole-array arithmetic."""
    def run():
        top, middle, bottom = image[0:H - 2], image[1:H - 1], image[2:H]
        gx = (top[:, 2:W] + 2.0 * middle[:, 2:W] + bottom[:, 2:W]
              - top[:, 0:W - 2] - 2.0 * middle[:, 0:W - 2] - bottom[:, 0:W - 2])
        gy = (bottom[:, 0:W - 2] + 2.0 * bottom[:, 1:W - 1] + bottom[:, 2:W]
              - top[:, 0:W - 2] - 2.0 * top[:, 1:W - 1] - top[:, 2:W])
        magnitude[1:H - 1, 1:W - 1] = xp.sqrt(gx * gx + gy * gy)
    return run
