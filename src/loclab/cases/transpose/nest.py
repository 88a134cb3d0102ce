"""Transposition's golden loop nest, as ``loclab optimize`` reads it (the auto rows)."""


def transpose(a, out, rows, cols):
    for i in range(rows):
        for j in range(cols):
            out[j, i] = a[i, j]


def arguments(inputs, out):
    rows, cols = inputs["a"].shape
    return [inputs["a"], out, rows, cols]


# The golden nest the harness's auto rows optimize (loclab.bench.auto).
NEST = transpose
