"""Matrix-vector product's golden loop nest, as ``loclab optimize`` reads it (the auto
rows): a dot product per row, summed in a scalar."""


def matvec(a, x, y, rows, cols):
    for i in range(rows):
        s = 0.0
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
