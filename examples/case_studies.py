"""The case studies' loop nests: nearest neighbour, matrix multiplication, the think-like-a-compiler
loop distribution, transposition, the contrived row program, batch MMM under a mask, the
histogram and "Putting Everything Together".

Multi-dimensional arrays are flat where the slides flatten them (``A[i * colsA + j]``).
Python scalars are one variable for the whole function: where the C versions
(examples/case_studies.c) declare a scalar inside a loop body, the Python loop is parallel
only after privatizing it.
"""

import math

import numpy as np


def nearest_neighbor(queries, points, nns, M, N):
    """Brute-force nearest neighbour: queries are independent, the pass over points sequential."""
    for i in range(M):
        query = queries[i]
        nn_dist = math.inf
        nn_ind = -1
        for j in range(N):
            ref_pt = points[j]
            dist = abs(query - ref_pt)
            if dist < nn_dist:
                nn_ind = j
                nn_dist = dist
        nns[i] = nn_ind


def matmul(A, B, C, M, N, U):
    """Matrix multiplication: direction vectors prove i and j parallel; k is a reduction."""
    for i in range(M):
        for j in range(N):
            tmp = 0.0
            for k in range(U):
                tmp += A[i, k] * B[k, j]
            C[i, j] = tmp


def mmm_golden(A, B, C, heightA, widthB, widthA):
    """MMM golden sequential on flat arrays: i and j parallel, k sequential."""
    for i in range(heightA):
        for j in range(widthB):
            c = 0.0
            for k in range(widthA):
                c += A[i * widthA + k] * B[k * widthB + j]
            C[i * widthB + j] = c


def loop_distribution(A, B, N):
    """Think like a compiler, loop distribution: acc, local to the body, is expanded to acc[N]."""
    for i in range(N):
        acc = i * i
        B[i] = A[i] + acc


def transposition(A, trA, rowsA, colsA):
    """Matrix transposition: no dependences, both loops parallel, so strip-mine and interchange."""
    for i in range(rowsA):
        for j in range(colsA):
            trA[j * rowsA + i] = A[i * colsA + j]


def contrived_program(A, B, num_rows, num_cols):
    """Contrived but illustrative program: rows are parallel, a row is sequential (accum)."""
    for i in range(num_rows):
        accum = 0.0
        for j in range(num_cols):
            a_el = A[i * num_cols + j]
            accum = math.sqrt(accum) + a_el * a_el
            B[i * num_cols + j] = accum


def coalescing_motivation(A, B, height, width):
    """Coalesced accesses, motivation: loop i parallel, loop j sequential by the RAW on accum."""
    for i in range(height):
        accum = 0.0
        for j in range(width):
            tmpA = A[i, j]
            accum = tmpA * tmpA - accum
            B[i, j] = accum


def batch_mmm(A, B, X, Y, M, K, N):
    """Batch MMM under a mask: i, j1, j2 parallel, q sequential (a + reduction on acc)."""
    for i in range(M):
        for j1 in range(K):
            for j2 in range(K):
                acc = 0.0
                for q in range(N):
                    a = A[j1, q]
                    b = B[q, j2]
                    v = 1.0 if X[i, q] != 0 else 0.0
                    acc += a * b * v
                Y[i, j1, j2] = acc


def histogram(inp_inds, inp_vals, hist, N, H):
    """Histogram-like computation: not parallel as written, a generalized reduction (atomics)."""
    for i in range(N):
        ind = inp_inds[i]
        val = inp_vals[i]
        if ind < H:
            hist[ind] += val


def putting_everything_together(X, B, M, N, T):
    """Putting everything together: i is parallel once A is private; t, k sequential, j parallel."""
    A = np.empty((N, N), dtype=np.float32)
    for i in range(M):
        for k in range(N):
            for j in range(N):
                x = X[i, j, k]
                A[k, j] = x * x
        # The slide starts j and k at 0, which reads A[-1][j] and B[i][k-1][-1], out of bounds.
        for t in range(T):
            for j in range(1, N):
                for k in range(1, N):
                    A[k, j] = math.sqrt(A[k, j] * A[k - 1, j])
                    X[i, k, j] += math.sqrt(B[i, k - 1, j - 1])
