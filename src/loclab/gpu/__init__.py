"""CuPy glue. Importing this package never imports CuPy; nothing here fails without a GPU."""

from __future__ import annotations

import os

from loclab.errors import LaunchError
# Whether CuPy sees a device: a question about the machine, answered in ``hw`` (which imports
# nothing of loclab's but errors) and named here too for the callers of the CuPy glue.
from loclab.hw.gpu import gpu_unavailable_reason


def require_fp32_matmul() -> None:
    """cupy.matmul calls cuBLAS SGEMM in fp32 unless CUPY_TF32=1 asks for TF32 (10-bit
    mantissas): refuse that, so that a product row is fp32 against an fp32 golden bound."""
    if os.environ.get("CUPY_TF32", "0") != "0":
        raise LaunchError("CUPY_TF32 is set: cuBLAS would use TF32, not fp32; unset it")


__all__ = ["gpu_unavailable_reason", "require_fp32_matmul"]
