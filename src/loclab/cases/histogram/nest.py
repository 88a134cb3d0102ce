"""The histogram's golden loop nest, as ``loclab optimize`` reads it (the auto rows): the
bins cleared, then each value added to the bin its index names, where that is a bin."""


def histogram(inds, vals, hist, n, bins):
    for b in range(bins):
        hist[b] = 0.0
    for i in range(n):
        ind = inds[i]
        if ind < bins:
            hist[ind] += vals[i]


def arguments(inputs, out):
    return [inputs["inds"], inputs["vals"], out, len(inputs["inds"]), int(inputs["bins"][0])]


# The golden nest the harness's auto rows optimize (loclab.bench.auto).
NEST = histogram
