"""CuPy glue. Importing this package never imports CuPy; nothing here fails without a GPU."""

from __future__ import annotations

import functools
import os

from loclab.errors import LaunchError


@functools.cache
def gpu_unavailable_reason() -> str | None:
    """None when CuPy sees a CUDA device, else one line saying what is missing."""
    try:
        import cupy
    except ImportError:
        return "CuPy is not installed (pip install 'loclab[gpu]')"
    except Exception as err:  # a broken CUDA install can fail CuPy's import in many ways
        return f"CuPy failed to import: {err}"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as err:  # CUDARuntimeError: no driver, no device
        return f"CuPy found no usable CUDA device ({err})"
    return None if count > 0 else "CuPy found no CUDA device"


def require_fp32_matmul() -> None:
    """cupy.matmul calls cuBLAS SGEMM in fp32 unless CUPY_TF32=1 asks for TF32 (10-bit
    mantissas): refuse that, so that a product row is fp32 against an fp32 golden bound."""
    if os.environ.get("CUPY_TF32", "0") != "0":
        raise LaunchError("CUPY_TF32 is set: cuBLAS would use TF32, not fp32; unset it")
