"""Matrix-vector product's golden loop nest, as ``loclab optimize`` reads it (the auto
rows): a dot product per row, summed in a single-precision scalar as the lectures' ``float
sum = 0`` and the hand-written variants (Python's ``0.0`` would sum the float32 products in
float64: on a 16-core host that ran the square shape at 0.5x the speed of the float32 sum).
"""

import numpy as np


def matvec(a, x, y, rows, cols):
    for i in range(rows):
        s = np.float32(0.0)
        for j in range(cols):
            s += a[i, j] * x[j]
        y[i] = s


def arguments(inputs, out):
    rows, cols = inputs["a"].shape
    return [inputs["a"], inputs["x"], out, rows, cols]


# The golden nest the harness's auto rows optimize (loclab.bench.auto).
NEST = matvec
# The auto rows may round as the hand-written variants do (they fuse multiply-adds and
# reorder the dot products): ``loclab optimize --fast-math``.
FAST_MATH = True
