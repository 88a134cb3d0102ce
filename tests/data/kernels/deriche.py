import math


def deriche(imgIn, imgOut, y1, y2, alpha, W, H):
    """PolyBench deriche: a recursive edge-detection filter (scalars carried along each row
    and column, forwards and backwards, then sums of the two passes)."""
    k = (1.0 - math.exp(-alpha)) * (1.0 - math.exp(-alpha)) / (
        1.0 + 2.0 * alpha * math.exp(-alpha) - math.exp(2.0 * alpha))
    a1 = a5 = k
    a2 = a6 = k * math.exp(-alpha) * (alpha - 1.0)
    a3 = a7 = k * math.exp(-alpha) * (alpha + 1.0)
    a4 = a8 = -k * math.exp(-2.0 * alpha)
    b1 = 2.0 ** (-alpha)
    b2 = -math.exp(-2.0 * alpha)
    c1 = c2 = 1.0
    for i in range(W):
        ym1 = 0.0
        ym2 = 0.0
        xm1 = 0.0
        for j in range(H):
            y1[i, j] = a1 * imgIn[i, j] + a2 * xm1 + b1 * ym1 + b2 * ym2
            xm1 = imgIn[i, j]
            ym2 = ym1
            ym1 = y1[i, j]
    for i in range(W):
        yp1 = 0.0
        yp2 = 0.0
        xp1 = 0.0
        xp2 = 0.0
        for j in range(H - 1, -1, -1):
            y2[i, j] = a3 * xp1 + a4 * xp2 + b1 * yp1 + b2 * yp2
            xp2 = xp1
            xp1 = imgIn[i, j]
            yp2 = yp1
            yp1 = y2[i, j]
    for i in range(W):
        for j in range(H):
            imgOut[i, j] = c1 * (y1[i, j] + y2[i, j])
    for j in range(H):
        tm1 = 0.0
        ym1 = 0.0
        ym2 = 0.0
        for i in range(W):
            y1[i, j] = a5 * imgOut[i, j] + a6 * tm1 + b1 * ym1 + b2 * ym2
            tm1 = imgOut[i, j]
            ym2 = ym1
            ym1 = y1[i, j]
    for j in range(H):
        tp1 = 0.0
        tp2 = 0.0
        yp1 = 0.0
        yp2 = 0.0
        for i in range(W - 1, -1, -1):
            y2[i, j] = a7 * tp1 + a8 * tp2 + b1 * yp1 + b2 * yp2
            tp2 = tp1
            tp1 = imgOut[i, j]
            yp2 = yp1
            yp1 = y2[i, j]
    for i in range(W):
        for j in range(H):
            imgOut[i, j] = c2 * (y1[i, j] + y2[i, j])
