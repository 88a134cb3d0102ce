"""A 2-D image filtered by a small K x K kernel (a blur, an edge or a matched filter), the
valid region only, written as the correlation image processing texts use."""


def conv2d(image, weights, out, H, W, K):
    """out[i, j] = sum over p, q of weights[p, q] * image[i + p, j + q], for the
    (H - K + 1) x (W - K + 1) positions where the kernel lies inside the image."""
    for i in range(H - K + 1):
        for j in range(W - K + 1):
            total = 0.0
            for p in range(K):
                for q in range(K):
                    total += weights[p, q] * image[i + p, j + q]
            out[i, j] = total


SIZES = {"H": 4000, "W": 4000, "K": 7}
SMALL = {"H": 8, "W": 9, "K": 3}
OUTPUTS = ("out",)


def peer(xp, linalg, image, weights, out, H, W, K):
    """A shifted copy of the image scaled and added for each of the K * K taps."""
    def run():
        out[...] = 0.0
        for p in range(K):
            for q in range(K):
                out[...] += weights[p, q] * image[p:p + H - K + 1, q:q + W - K + 1]
    return run
