def fdtd_2d(ex, ey, hz, fict, TMAX, NX, NY):
    """PolyBench fdtd-2d: three field updates per time step, the first row driven by a
    source term."""
    for t in range(TMAX):
        for j in range(NY):
            ey[0, j] = fict[t]
        for i in range(1, NX):
            for j in range(NY):
                ey[i, j] = ey[i, j] - 0.5 * (hz[i, j] - hz[i - 1, j])
        for i in range(NX):
            for j in range(1, NY):
                ex[i, j] = ex[i, j] - 0.5 * (hz[i, j] - hz[i, j - 1])
        for i in range(NX - 1):
            for j in range(NY - 1):
                hz[i, j] = hz[i, j] - 0.7 * (ex[i, j + 1] - ex[i, j] + ey[i + 1, j] - ey[i, j])
