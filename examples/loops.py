"""Dependence analysis basics: the loop nests of the "Loop Parallelism I" slides (Oancea, PMPH).

The slides write Fortran (``DO i = 2, N`` includes N): here ``range(2, N + 1)``. Where a slide
leaves the right-hand side as ``...``, ``+ 1`` stands for it: only the accesses matter.
Arrays are indexed like the slides (1-based, up to N), so callers pass arrays of N + 2 per side.

Analyze one with ``loclab analyze examples/loops.py::three_loops_3``.
"""


def three_loops_1(A, N):
    """Three loop examples, first nest: the only dependence is WAR [=,=], both loops parallel."""
    for i in range(1, N + 1):
        for j in range(1, N + 1):
            A[j, i] = A[j, i] + 1


def three_loops_2(A, B, N):
    """Three loop examples, second nest: [<,<] and [=,<], no loop parallel, interchange legal."""
    for i in range(2, N + 1):
        for j in range(2, N + 1):
            A[j, i] = A[j - 1, i - 1] + 1
            B[j, i] = B[j - 1, i] + 1


def three_loops_2_variant(A, B, N):
    """The direction-matrix slides' second nest: S1->S1 [=,<], S2->S2 [<,<]; interchange legal."""
    for i in range(2, N + 1):
        for j in range(2, N + 1):
            A[j, i] = A[j - 1, i] + 1
            B[j, i] = B[j - 1, i - 1] + 1


def three_loops_3(A, N):
    """Three loop examples, third nest: RAW [<,>], only loop j parallel, interchange illegal."""
    for i in range(2, N + 1):
        for j in range(1, N + 1):
            A[i, j] = A[i - 1, j + 1] + 1


def disambiguation(A, N):
    """Important disambiguations: solving the subscripts gives [>,<]; reversed it is WAR [<,>]."""
    for i in range(2, N + 1):
        for j in range(1, N + 1):
            A[i, j] = A[i + 1, j - 1] + 1


def disambiguation_tmp(A, N):
    """Important disambiguations, load and store as two statements: WAR [<,>] from load to store."""
    for i in range(2, N + 1):
        for j in range(1, N + 1):
            tmp = A[i + 1, j - 1]
            A[i, j] = tmp + 1


def vectorization(A, B, N):
    """Vectorization example: distributed, S2's recurrence runs first, then S1 in parallel."""
    for i in range(3, N + 1):
        A[i] = B[i - 2] + 1
        B[i] = B[i - 1] + 1


def array_expansion(A, B, N):
    """Loop distribution may require array expansion: {S1, S3} sequential, S2 parallel, tmp[N]."""
    for i in range(2, N):
        tmp = 2 * B[i - 2]
        A[i] = tmp
        B[i] = tmp + B[i - 1]
