def doitgen(A, C4, total, NR, NQ, NP):
    """PolyBench doitgen: a tensor contraction through the scratch row ``total``."""
    for r in range(NR):
        for q in range(NQ):
            for p in range(NP):
                total[p] = 0.0
                for s in range(NP):
                    total[p] += A[r, q, s] * C4[s, p]
            for p in range(NP):
                A[r, q, p] = total[p]
