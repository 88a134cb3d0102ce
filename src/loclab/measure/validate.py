"""Validation against the golden output: poison first, then compare every element.

Poisoning (NaN for floats, the largest value for integers) makes an output the variant never
wrote fail, even when the buffer happens to hold a correct result from an earlier run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

CHUNK_ELEMENTS = 1 << 22  # compare in float64 without a full-size temporary


@dataclass(frozen=True)
class Check:
    valid: bool
    max_rel_err: float | None
    problem: str | None = None


def poison_value(dtype: Any) -> float | int:
    dtype = np.dtype(dtype)
    if np.issubdtype(dtype, np.floating):
        return float("nan")
    if np.issubdtype(dtype, np.integer):
        return int(np.iinfo(dtype).max)
    raise TypeError(f"cannot poison arrays of {dtype}")


def poison(array: Any) -> None:
    """Fill a NumPy or CuPy array with a value no correct variant produces."""
    array.fill(poison_value(array.dtype))


def compare(result: Any, golden: np.ndarray, tolerance: float | np.ndarray) -> Check:
    """Normwise check: max |result - golden| / max |golden| <= tolerance, where both are finite,
    and NaN or infinity exactly where golden has them (nowhere, for every case so far).

    The error is relative to the largest finite golden magnitude (an infinity norm), so elements
    near zero do not inflate it. A ``tolerance`` shaped like golden instead bounds each
    element's absolute error by its own entry: where each output is a sum of its own terms (a
    sparse row of 3 beside one of 100,000), a normwise bound from the longest would let a
    short one be wrong. The normwise error is reported either way.
    """
    result = np.asarray(result)
    if result.shape != golden.shape:
        return Check(False, None, f"output shape {result.shape}, expected {golden.shape}")
    if result.dtype != golden.dtype:
        return Check(False, None, f"output dtype {result.dtype}, expected {golden.dtype}")
    if np.ndim(tolerance) == 0 and tolerance == 0 and np.array_equal(result, golden):
        return Check(True, 0.0)  # exact, at memory speed (a gigabyte copy checks in 0.1 s)
    elementwise = np.ndim(tolerance) > 0
    got = np.ascontiguousarray(result).reshape(-1)
    want = np.ascontiguousarray(golden).reshape(-1)
    bounds = np.asarray(tolerance, np.float64).reshape(-1) if elementwise else None
    mismatched = beyond = 0
    worst: tuple[int, float, float] | None = None  # index, error, bound of the first beyond
    max_diff = 0.0
    max_ref = 0.0
    for start in range(0, want.size, CHUNK_ELEMENTS):
        g = want[start:start + CHUNK_ELEMENTS].astype(np.float64)
        o = got[start:start + CHUNK_ELEMENTS].astype(np.float64)
        finite = np.isfinite(g) & np.isfinite(o)
        same_special = (np.isnan(g) & np.isnan(o)) | (~np.isnan(g) & (g == o))
        mismatched += int(np.count_nonzero(~finite & ~same_special))
        if finite.any():
            with np.errstate(invalid="ignore"):  # inf - inf where both are infinite
                errors = np.where(finite, np.abs(o - g), 0.0)
            max_diff = max(max_diff, float(errors.max()))
            max_ref = max(max_ref, float(np.max(np.abs(g[finite]))))
            if bounds is not None:
                over = np.flatnonzero(errors > bounds[start:start + CHUNK_ELEMENTS])
                beyond += over.size
                if over.size and worst is None:
                    at = start + int(over[0])
                    worst = (at, float(errors[over[0]]), float(bounds[at]))
    max_rel = max_diff / max_ref if max_ref > 0 else max_diff
    if mismatched:
        return Check(False, max_rel, f"{mismatched} of {want.size} outputs are NaN or infinite "
                                     f"where golden is not, or the reverse (never written?)")
    if worst is not None:
        at, error, bound = worst
        return Check(False, max_rel, f"{beyond} of {want.size} outputs beyond their own error "
                                     f"bound (first: element {at}, error {error:.3g} > "
                                     f"{bound:.3g})")
    if not elementwise and max_rel > tolerance:
        return Check(False, max_rel, f"max relative error {max_rel:.3g} > tolerance {tolerance:g}")
    return Check(True, max_rel)
