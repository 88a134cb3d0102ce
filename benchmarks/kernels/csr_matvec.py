"""A sparse matrix times a vector, the matrix in compressed sparse row form (CSR: Saad,
Iterative Methods for Sparse Linear Systems, section 3.4): a row's entries found through
indptr, their columns through indices."""

import importlib

import numpy as np


def csr_matvec(indptr, indices, data, x, y, N):
    """y = A x for the N x N sparse A: row i's nonzeros are data[indptr[i]:indptr[i + 1]],
    in the columns indices[indptr[i]:indptr[i + 1]]."""
    for i in range(N):
        total = 0.0
        for k in range(indptr[i], indptr[i + 1]):
            total += data[k] * x[indices[k]]
        y[i] = total


SIZES = {"N": 4_000_000}
SMALL = {"N": 9}
OUTPUTS = ("y",)


def inputs(N):
    """A valid CSR structure: 4 to 28 nonzeros a row (16 on average) in random columns."""
    rng = np.random.default_rng(8)
    indptr = np.zeros(N + 1, dtype=np.int64)
    np.cumsum(rng.integers(4, 29, N), out=indptr[1:])
    nonzeros = int(indptr[-1])
    return {"indptr": indptr, "indices": rng.integers(0, N, nonzeros),
            "data": rng.uniform(-1.0, 1.0, nonzeros), "x": rng.uniform(-1.0, 1.0, N),
            "y": np.zeros(N)}


def peer(xp, linalg, indptr, indices, data, x, y, N):
    """The sparse module beside ``linalg`` (scipy.sparse, or cupyx.scipy.sparse): its CSR
    matrix times the vector."""
    sparse = importlib.import_module(linalg.__name__.rsplit(".", 1)[0] + ".sparse")
    matrix = sparse.csr_matrix((data, indices, indptr), shape=(N, N))

    def run():
        y[...] = matrix @ x
    return run
