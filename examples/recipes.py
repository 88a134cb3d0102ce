"""The lectures' recipes, reproduced by ``loclab transform``: golden loop nests and the steps
that turn each into its optimized version.

Each golden function is the sequential version the slides start from; ``RECIPES`` names the
steps (checked one by one against the exact dependences) and what they reproduce. Try one::

    loclab transform examples/recipes.py::transpose --apply "tile(i=32, j=32); parallel(ii)"
    loclab transform examples/recipes.py::mmm --emit numba --verify \\
        --apply "privatize(c); tile(i=64, j=64); unroll(i, 4, jam=True); parallel(ii)"

``tests/test_recipes.py`` applies every recipe, checks its verdicts and verifies the result
by execution; ``scripts/transform-benchmark`` times the emitted Numba code beside the
hand-written case variants.
"""

import math

import numpy as np


def transpose(A, B, rows, cols):
    """Matrix transposition: both loops parallel, no reuse; blocking makes both arrays' lines
    useful (case study 5.2)."""
    for i in range(rows):
        for j in range(cols):
            B[j, i] = A[i, j]


def mmm(A, B, C, heightA, widthB, widthA):
    """The three-loop golden matrix multiplication of the MMM recipe slides: i and j
    parallel, k a sum in the private scalar c."""
    for i in range(heightA):
        for j in range(widthB):
            c = 0.0
            for k in range(widthA):
                c += A[i, k] * B[k, j]
            C[i, j] = c


def mmm_accumulate(A, B, C, heightA, widthB, widthA):
    """The three-loop product accumulated into C: every loop order is legal (the sums along
    k keep their order in all of them), so k can move outside j and rows of C and B are read
    along j, the order the CPU case's blocked variant uses."""
    for i in range(heightA):
        for j in range(widthB):
            for k in range(widthA):
                C[i, j] += A[i, k] * B[k, j]


def array_expansion(A, B, N):
    """Loop distribution needs array expansion: {S1, S3} form a cycle, S2 parallel, tmp[N]."""
    for i in range(2, N):
        tmp = 2 * B[i - 2]
        A[i] = tmp
        B[i] = tmp + B[i - 1]


def eliminating_war(A, N):
    """Cross-iteration WAR: a read of the array as it was before the loop. Reading a copy
    made before the loop leaves nothing carried."""
    for i in range(N - 1):
        A[i] = A[i + 1] + 1


def histogram(inp_inds, inp_vals, hist, N, H):
    """A generalized reduction: every iteration updates a data-dependent bin with +."""
    for i in range(N):
        ind = inp_inds[i]
        val = inp_vals[i]
        if ind < H:
            hist[ind] += val


def putting_everything_together(X, B, M, N, T):
    """Putting everything together: i is parallel once A (and x) are private to it; t and k
    carry dependences, j does not."""
    A = np.empty((N, N), dtype=np.float64)
    for i in range(M):
        for k in range(N):
            for j in range(N):
                x = X[i, j, k]
                A[k, j] = x * x
        for t in range(T):
            for j in range(1, N):
                for k in range(1, N):
                    A[k, j] = math.sqrt(A[k, j] * A[k - 1, j])
                    X[i, k, j] += math.sqrt(B[i, k - 1, j - 1])


# (function, recipe, what it reproduces)
RECIPES = (
    ("transpose", "tile(i=32, j=32); parallel(ii)",
     "blocked transposition: tiles of both arrays stay in cache"),
    ("transpose", "tile(i=256, j=256); tile(i=32, j=32); interchange(i, j); parallel(ii)",
     "the cpu-blocked variant's two levels: tiles for L2 run in parallel, tiles for L1 inside "
     "them, B written along its rows"),
    ("mmm", "privatize(c); tile(i=32, j=32); parallel(ii)",
     "block-tiled MMM: a tile of C per task, its rows of A and columns of B reused"),
    ("mmm", "privatize(c); tile(i=64, j=64); unroll(j, 4, jam=True); "
            "unroll(i, 4, jam=True); parallel(ii)",
     "register-tiled MMM: 4 x 4 results in registers (c_0_0 ... c_3_3), each value of A "
     "and B loaded once for four products"),
    ("mmm_accumulate", "tile(i=64, k=256, j=512); permute(i, k, j); unroll(i, 8, jam=True); "
                       "parallel(ii)",
     "register-tiled MMM in the blocked order: eight rows of C updated from one row of B "
     "read once, along j (vectorized)"),
    ("array_expansion", "distribute(i); parallel(i)",
     "distribution with array expansion: tmp[i], the cycle {S1, S3} first, S2 parallel"),
    ("eliminating_war", "copy(A, i); parallel(i)",
     "WAR removal by copying: the loop reads a copy of A made before it"),
    ("histogram", "privatize(ind); privatize(val); parallel(i)",
     "the histogram as a generalized reduction: atomic updates of hist"),
    ("putting_everything_together", "privatize(x); privatize(A); parallel(i); "
                                    "interchange(t, j@84); parallel(j@84)",
     "putting it all together: A private per i, the parallel j moved outside t"),
)
