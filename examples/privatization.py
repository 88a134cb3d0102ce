"""False dependences (WAR, WAW) and how to remove them: the "Loop Parallelism I" slides.

A cross-iteration WAR reads the array as it was before the loop: read from a copy instead.
A cross-iteration WAW whose every read is covered by a same-iteration write: privatize.
"""

import numpy as np


def eliminating_war(A, N):
    """Eliminating WAR dependencies: the loop shifting A left carries only a WAR [<] on A."""
    tmp = A[1]
    for i in range(N - 1):
        A[i] = A[i + 1]
    A[N - 1] = tmp


def eliminating_war_by_copy(A, Acopy, N):
    """Eliminating WAR dependencies, rewritten: reading a copy of A makes both loops parallel."""
    for i in range(N):
        Acopy[i] = A[i]
    tmp = A[1]
    for i in range(N - 1):
        A[i] = Acopy[i + 1]
    A[N - 1] = tmp


def eliminating_waw(X, N, M):
    """Eliminating WAW dependencies by privatization: one A for all i carries WAWs on loop i."""
    A = np.empty(M, dtype=np.int64)
    for i in range(N):
        for j in range(M):
            A[j] = (4 * i + 4 * j) % M
        # The slide starts k at 0, reading X[i][-1] (out of bounds, and never written, so the
        # dependences are the same); here every access is in bounds.
        for k in range(1, N):
            X[i, k] = X[i, k - 1] * A[A[(2 * i + k) % M] % M]


def eliminating_waw_privatized(X, N, M):
    """Eliminating WAW dependencies by privatization: with A declared inside, loop i is parallel."""
    for i in range(N):
        A = np.empty(M, dtype=np.int64)
        for j in range(M):
            A[j] = (4 * i + 4 * j) % M
        for k in range(1, N):
            X[i, k] = X[i, k - 1] * A[A[(2 * i + k) % M] % M]
