"""Batch MMM under a mask, the lectures' golden nest, as ``loclab optimize`` reads it (the
auto rows): Y[i][j1][j2] sums A[j1][q] B[q][j2] over the q where X[i][q] is not zero."""


def bmmm(a, b, x, y, m, k, n):
    for i in range(m):
        for j1 in range(k):
            for j2 in range(k):
                acc = 0.0
                for q in range(n):
                    v = 1.0 if x[i, q] != 0 else 0.0
                    acc += a[j1, q] * b[q, j2] * v
                y[i, j1, j2] = acc


def arguments(inputs, out):
    (m, n), k = inputs["x"].shape, inputs["a"].shape[0]
    return [inputs["a"], inputs["b"], inputs["x"], out, m, k, n]


# The golden nest the harness's auto rows optimize (loclab.bench.auto).
NEST = bmmm
