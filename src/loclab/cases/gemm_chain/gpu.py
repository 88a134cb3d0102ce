"""``A x B x C`` on a GPU through cuBLAS (cupy.matmul), operands and result in host memory.

Both variants are written as a user would write them, step by step, so that each row's
phases say where its time went: ``device-centric`` calls a ``gemm(A, B)`` that copies in,
multiplies and copies out a new host matrix, twice; ``data-flow`` copies each matrix in once
and D out once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from loclab.cases.base import COMPUTE, COPY_IN, COPY_OUT, Bound, Step, stepped
from loclab.gpu import require_fp32_matmul, transfers
from loclab.hw import Machine


def _to_device(host: np.ndarray) -> Any:
    """A new device matrix holding ``host`` (a device-centric call's upload)."""
    import cupy

    matrix = cupy.empty(host.shape, host.dtype)
    transfers.to_device(matrix, host)
    return matrix


def _to_host(matrix: Any, host: np.ndarray | None = None) -> np.ndarray:
    """``matrix`` copied into ``host``, or into a new host matrix (a device-centric call's
    result: its pages are faulted in as the copy writes them)."""
    host = np.empty(matrix.shape, matrix.dtype) if host is None else host
    transfers.to_host(host, matrix)
    return host


def _gemm_steps(state: dict[str, Any], left: Callable[[], np.ndarray], right: np.ndarray,
                out: np.ndarray | None) -> list[Step]:
    """One device-centric ``gemm``: the host matrices ``left()`` and ``right`` in, their
    product out into ``out``, or into a new host matrix ``state["product"]``."""
    import cupy

    def copy_in_left() -> None:
        state["a"] = _to_device(left())

    def copy_in_right() -> None:
        state["b"] = _to_device(right)

    def multiply() -> None:
        state["c"] = cupy.matmul(state.pop("a"), state.pop("b"))

    def copy_out() -> None:
        state["product"] = _to_host(state.pop("c"), out)

    return [Step(COPY_IN, copy_in_left), Step(COPY_IN, copy_in_right),
            Step(COMPUTE, multiply), Step(COPY_OUT, copy_out)]


def device_centric(inputs: dict, out: np.ndarray, machine: Machine) -> Bound:
    """``gemm(gemm(A, B), C)``: every product comes back to the host, a new matrix each time,
    and the next call sends it straight back (then it is dropped)."""
    require_fp32_matmul()
    first, *others = inputs.values()
    state: dict[str, Any] = {}
    steps: list[Step] = []
    for index, matrix in enumerate(others):
        left = (lambda: first) if index == 0 else (lambda: state.pop("product"))
        steps += _gemm_steps(state, left, matrix, out if index == len(others) - 1 else None)
    return stepped(steps, out, {"products": len(others), "tf32": False,
                                "round_trips": len(others) - 1})


def data_flow(inputs: dict, out: np.ndarray, machine: Machine) -> Bound:
    """Each matrix to the device once, the products there, D back once."""
    import cupy

    require_fp32_matmul()
    matrices = list(inputs.values())
    on_device: list[Any] = []

    def copy_in(host: np.ndarray) -> Step:
        return Step(COPY_IN, lambda: on_device.append(_to_device(host)))

    def multiply() -> None:
        product = on_device[0]
        for matrix in on_device[1:]:
            product = cupy.matmul(product, matrix)
        on_device[:] = [product]

    return stepped([*(copy_in(matrix) for matrix in matrices), Step(COMPUTE, multiply),
                    Step(COPY_OUT, lambda: _to_host(on_device.pop(), out))],
                   out, {"products": len(matrices) - 1, "tf32": False, "round_trips": 0})
