"""Copy: one matrix read, one written, nothing else. It defines the roof.

Every memory-bound row is reported as a fraction of the best copy measured on its device in
the same run, so the harness always runs this case first.
"""

from __future__ import annotations

import numpy as np

from loclab.cases.base import Variant, lazy
from loclab.cases.matrix import matrix_case

CPU = "loclab.cases.copy.cpu"
GPU = "loclab.cases.copy.gpu"
TRAFFIC = "loclab.cases.copy.traffic"


def golden(inputs: dict[str, np.ndarray]) -> np.ndarray:
    return inputs["a"].copy()  # a copy: nothing a variant does to its input can reach it


def output(dims: dict[str, int]) -> tuple[tuple[int, ...], type]:
    return (dims["rows"], dims["cols"]), np.float32


CASE = matrix_case(
    name="copy",
    lesson="the memory roof: what any memory-bound kernel is measured against",
    description="out = a for a float32 rows x cols matrix",
    golden=golden,
    output=output,
    variants=(
        Variant("cpu-copy", "cpu", "optimized", "numba prange over rows, one row slice each",
                lazy(CPU, "parallel"), traffic=lazy(TRAFFIC, "copy")),
        Variant("numpy", "cpu", "library", "numpy.copyto(out, a) (one thread)",
                lazy(CPU, "library"), traffic=lazy(TRAFFIC, "copy")),
        Variant("gpu-copy", "gpu", "optimized", "one 16-byte vector per thread",
                lazy(GPU, "vectorized")),
        Variant("cuda-memcpy", "gpu", "library", "cudaMemcpyAsync device to device",
                lazy(GPU, "memcpy")),
    ),
)
