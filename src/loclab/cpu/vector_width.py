"""The width of the vectors LLVM gives Numba's loops: the widest the CPU has, in loclab's
processes.

On Intel's AVX-512 cores LLVM's tuning prefers 256-bit vectors (``prefer-256-bit``, set by
the CPU's name and absent from the feature list Numba passes), so a loop Numba compiles runs
on half the lanes the CPU has: on an Emerald Rapids host (2026-11-30) register-tiled
products (PolyBench's gemm and 2mm) ran 1.14-1.35x slower so, and no zmm register appeared
in an FMA loop's code. Numba reads its CPU features once, when it builds its CPU target
(``NUMBA_CPU_FEATURES``, at its first ``njit``), and has no per-function setting; so
loclab, when imported before that, sets the variable to the host's features with the
preference turned off (``-prefer-256-bit`` is a no-op on a CPU that does not prefer 256
bits). The subprocesses that compile ahead and time inherit it. A user who chose what Numba
compiles for keeps that choice (``USERS_SETTINGS``). The code loclab emits is plain Numba:
run in a process without the setting, it runs at LLVM's width (``NOTE`` says how to match
the measured one).
"""

from __future__ import annotations

import os
import sys

VARIABLE = "NUMBA_CPU_FEATURES"
PREFERENCE_OFF = "-prefer-256-bit"
# A shell line that sets the variable as loclab does, for the user's own process.
COMMAND = (f"export {VARIABLE}=\"$(python -c 'import llvmlite.binding as b; "
           f"print(b.get_host_cpu_features().flatten())'),{PREFERENCE_OFF}\"")
NOTE = (f"compiled and timed with 512-bit vectors, LLVM's preference for 256-bit ones on "
        f"AVX-512 CPUs turned off ({VARIABLE}); to run this code so in your own process, "
        f"start Python after")


def widened_features(host: str) -> str | None:
    """The feature list for Numba on a host with features ``host`` (LLVM's ``+avx512f,...``
    list): the host's with LLVM's 256-bit preference turned off, or None where the CPU has no
    512-bit vectors to gain."""
    return f"{host},{PREFERENCE_OFF}" if "+avx512f" in host.split(",") else None


def _numba_target_built() -> bool:
    """Whether Numba has built its CPU target, whose features are then fixed."""
    registry = sys.modules.get("numba.core.registry")
    return registry is not None and "_toplevel_target_context" in vars(registry.cpu_target)


# The user's own choices of what Numba compiles for, which loclab never overrides: the CPU's
# features or name (a portable cache's ``generic``), or AVX turned off.
USERS_SETTINGS = (VARIABLE, "NUMBA_CPU_NAME", "NUMBA_ENABLE_AVX")


def widen() -> None:
    """Turn off LLVM's 256-bit preference for every Numba compile of this process and its
    children, unless the user chose what Numba compiles for (``USERS_SETTINGS``, or its
    config set in code) or Numba has compiled already (its features are then the ones
    ``vector_bits`` reads)."""
    config = sys.modules.get("numba.core.config")
    if any(name in os.environ for name in USERS_SETTINGS) or _numba_target_built() or (
            config is not None and config.CPU_FEATURES is not None):
        return
    try:
        import llvmlite.binding as llvm

        host = llvm.get_host_cpu_features().flatten()
    except (ImportError, RuntimeError):  # no Numba here, or LLVM cannot read this CPU
        return
    features = widened_features(host)
    if features is not None:
        os.environ[VARIABLE] = features
        if config is not None:  # imported before loclab: read the variable already
            config.CPU_FEATURES = features


def features_in_use() -> str:
    """The CPU features Numba compiles with (building its CPU target if it has not yet)."""
    from numba.core.registry import cpu_target

    return cpu_target.target_context.codegen().magic_tuple()[2]


def vector_bits(features: str) -> int | None:
    """The widest vectors LLVM's vectorizer uses under ``features``, or None where the list
    does not tell (AVX-512 with LLVM's preference left to the CPU's name)."""
    names = set(features.split(","))
    if "+avx512f" in names:
        return 512 if PREFERENCE_OFF in names else None
    if "+avx2" in names or "+avx" in names:
        return 256
    return 128 if names & {"+sse2", "+neon"} else None
