"""The lectures' golden three-loop matrix multiplication, as ``loclab optimize`` reads it
(the auto rows): C[i][j] summed in a scalar over k, in single precision as the lectures'
``float c = 0`` (Python's ``0.0`` would sum the float32 products in float64)."""

import numpy as np


def mmm(a, b, c, m, n, k):
    for i in range(m):
        for j in range(n):
            s = np.float32(0.0)
            for q in range(k):
                s += a[i, q] * b[q, j]
            c[i, j] = s


def arguments(inputs, out):
    (m, k), n = inputs["a"].shape, inputs["b"].shape[1]
    return [inputs["a"], inputs["b"], out, m, n, k]


# The golden nest the harness's auto rows optimize (loclab.bench.auto).
NEST = mmm
# The auto rows may round as the hand-written variants do (they fuse multiply-adds):
# ``loclab optimize --fast-math``.
FAST_MATH = True
