"""CUB's device-wide scan, select and radix sort, for the library rows of the scan family.

CUB's device-wide algorithms are host functions that choose and launch CUB's kernels, so NVRTC
(device code only) cannot build them; nvcc compiles ``cub_library.cu`` (its C interface) into a
shared library once per machine, cached (``$XDG_CACHE_HOME/loclab/cub``, else
``~/.cache/loclab/cub``) and keyed by the source, the
GPU's architecture and nvcc's version, and ctypes calls it with CuPy's pointers and stream.
Without nvcc the CUB rows are skipped, and say why (``unavailable``).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from loclab.errors import LaunchError

SOURCE = Path(__file__).with_name("cub_library.cu")
NVCC_OPTIONS = ("-O3", "-std=c++17", "-shared", "-Xcompiler", "-fPIC")
# cudaError_t values worth naming; any other is reported by number.
CUDA_ERRORS = {1: "invalid value", 2: "out of memory", 98: "invalid device function",
               209: "no kernel image for this device", 700: "illegal address"}


def unavailable() -> str | None:
    """Why the CUB rows cannot run here, or None (nvcc builds the library on first use)."""
    if shutil.which("nvcc") is None:
        return ("nvcc not found: CUB's device-wide algorithms are host code that nvcc must "
                "compile (NVRTC builds device code only)")
    return None


def skip_rule(dims: Any, machine: Any) -> str | None:
    """A Variant skip rule for the CUB rows."""
    return unavailable()


def cache_directory() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "loclab" / "cub"


def _arch() -> str:
    import cupy

    return f"sm_{cupy.cuda.Device().compute_capability}"


def _nvcc_version() -> str:
    done = subprocess.run(["nvcc", "--version"], capture_output=True, text=True, check=True)
    return done.stdout.strip().splitlines()[-1]


def build(arch: str, target: Path) -> None:
    """Compile ``cub_library.cu`` for ``arch`` (``sm_90``) into the shared library ``target``,
    atomically (a concurrent run sees all of it or nothing); a LaunchError naming nvcc's first
    error otherwise. CI builds it too (``loclab.tools.nvcc_check``)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        partial = Path(tmp) / target.name
        done = subprocess.run(["nvcc", *NVCC_OPTIONS, f"-arch={arch}", "-o", str(partial),
                               str(SOURCE)], capture_output=True, text=True)
        if done.returncode:
            first = next((line for line in done.stderr.splitlines() if "error" in line),
                         done.stderr.strip()[:200])
            raise LaunchError(f"CUB: nvcc failed to build {SOURCE.name}: {first}")
        os.replace(partial, target)


@functools.cache
def library() -> ctypes.CDLL:
    """The compiled library, built on first use (tens of seconds) and cached on disk."""
    if reason := unavailable():
        raise LaunchError(f"CUB: {reason}")
    arch = _arch()
    key = hashlib.sha256(SOURCE.read_bytes() + f"{arch} {_nvcc_version()} {NVCC_OPTIONS}"
                         .encode()).hexdigest()[:16]
    built = cache_directory() / f"libloclab_cub_{arch}_{key}.so"
    if not built.exists():
        build(arch, built)
    return ctypes.CDLL(str(built))


def _check(function: str, status: int) -> None:
    if status:
        raise LaunchError(f"CUB {function} failed: cudaError {status} "
                          f"({CUDA_ERRORS.get(status, 'see cudaGetErrorString')})")


def prepared(function: str, *arguments: Any, result: Any = None) -> Callable[[], Any]:
    """A call of ``loclab_cub_<function>`` with ``arguments`` (CuPy arrays pass their
    pointers; Python ints are the item count), its temporary storage allocated now, so that
    the returned call only enqueues CUB's kernels on the current stream (and returns
    ``result``, the array CUB writes)."""
    import cupy

    entry = getattr(library(), f"loclab_cub_{function}")
    values = [ctypes.c_void_p(a.data.ptr) if hasattr(a, "data") else ctypes.c_longlong(a)
              for a in arguments]
    temp_bytes = ctypes.c_size_t(0)
    stream = ctypes.c_void_p(cupy.cuda.get_current_stream().ptr)
    _check(function, entry(None, ctypes.byref(temp_bytes), *values, stream))
    temp = cupy.empty(max(temp_bytes.value, 1), cupy.uint8)

    def run() -> Any:
        stream = ctypes.c_void_p(cupy.cuda.get_current_stream().ptr)
        _check(function, entry(ctypes.c_void_p(temp.data.ptr), ctypes.byref(temp_bytes),
                               *values, stream))
        return result

    return run
