"""CPU copies: numba over all cores, and NumPy's single-threaded one."""

from __future__ import annotations

from functools import partial

import numpy as np
from numba import njit, prange

from loclab.cases.base import Bound
from loclab.hw import Machine


@njit(parallel=True, cache=True)
def copy_rows(a, out):
    """Row slices compile to vectorized loops; an element-wise loop over a flattened view ran
    at a third of the speed on the 16-core host."""
    for i in prange(a.shape[0]):
        out[i, :] = a[i, :]
    return out


def _copyto(out: np.ndarray, a: np.ndarray) -> np.ndarray:
    np.copyto(out, a)
    return out


def parallel(inputs: dict, out: np.ndarray, machine: Machine) -> Bound:
    return Bound(partial(copy_rows, inputs["a"], out))


def library(inputs: dict, out: np.ndarray, machine: Machine) -> Bound:
    return Bound(partial(_copyto, out, inputs["a"]))
