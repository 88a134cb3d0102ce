"""The coalescing case's golden program, as ``loclab optimize`` reads it (the auto rows):
rows independent, each row a dependent chain along its columns."""

import math


def row_program(a, out, rows, cols):
    for i in range(rows):
        acc = 0.0
        for j in range(cols):
            acc = math.sqrt(acc) + a[i, j] * a[i, j]
            out[i, j] = acc


def arguments(inputs, out):
    rows, cols = inputs["a"].shape
    return [inputs["a"], out, rows, cols]


# The golden nest the harness's auto rows optimize (loclab.bench.auto).
NEST = row_program
