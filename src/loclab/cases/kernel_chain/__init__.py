"""A chain of element-wise kernels with and without the round trips: the data-flow lesson on
memory-bound work, where the copies are everything.

Kernel i of k computes v = a_i v + b_i on every element (a_i = -1 for odd i, 1 for even i;
b_i = i / 64). Called through a device-centric API (each call copies its input to the GPU and
its result back to a new host array) the chain crosses the link 2k times; with the data kept
on the device it crosses twice (``data-flow``: in, k kernels, out); fused into one kernel
(``fused``), the intermediates skip device memory too and the k passes become one, so only the
two copies remain. Inputs are multiples of 1/64 in [-1, 1]: every step is exact in float32,
and the output is checked exactly (a skipped, repeated or reordered kernel shows).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from loclab.cases.base import PAGEABLE_HOST, Case, Variant, Work, dyadic_nonzero, lazy

GPU = "loclab.cases.kernel_chain.gpu"
ELEMENT_BYTES = 4
SHIFT_STEP = Fraction(1, 64)
MAX_KERNELS = 1024  # |v| stays below 1 + k^2 / 128 = 8193: a multiple of 1/64, exact


def coefficients(kernel: int) -> tuple[int, Fraction]:
    """Kernel ``kernel`` (counted from 1) computes v = a v + b with these a and b."""
    return (-1 if kernel % 2 else 1), kernel * SHIFT_STEP


def make_inputs(dims: dict[str, int], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """``x``, and ``kernels`` as a one-element array for golden (a launch count, never
    copied)."""
    return {"x": dyadic_nonzero(rng, dims["n"]),
            "kernels": np.array([dims["kernels"]], np.int64)}


def golden(inputs: dict[str, np.ndarray]) -> np.ndarray:
    """The k affine maps composed exactly (rationals), applied once in float64: every
    intermediate of the chain is a multiple of 1/64 well inside float32's exact range."""
    scale, shift = Fraction(1), Fraction(0)
    for kernel in range(1, int(inputs["kernels"][0]) + 1):
        a, b = coefficients(kernel)
        scale, shift = a * scale, a * shift + b
    return (inputs["x"].astype(np.float64) * float(scale) + float(shift)).astype(np.float32)


def output(dims: dict[str, int]) -> tuple[tuple[int, ...], type]:
    return (dims["n"],), np.float32


def work(dims: dict[str, int]) -> Work:
    """x in from the host once, the result back once; a multiply and an add a kernel."""
    n = dims["n"]
    return Work(bytes=2 * ELEMENT_BYTES * n, flops=2 * dims["kernels"] * n,
                to_device=ELEMENT_BYTES * n, to_host=ELEMENT_BYTES * n)


SIZES = {
    "small": {"gpu": [{"n": 2**22, "kernels": 8}]},
    "default": {"gpu": [{"n": 2**26, "kernels": 8}]},
    "large": {"gpu": [{"n": 2**28, "kernels": 8}]},
}
TEST_DIMS = tuple({"n": n, "kernels": k} for n, k in ((1, 1), (1000, 2), (65537, 5),
                                                      (1_000_003, 3)))

CASE = Case(
    name="kernel-chain",
    lesson="k element-wise kernels: a round trip to the host per kernel, one round trip, one "
           "fused kernel",
    description="out = k kernels v = a_i v + b_i applied to x in order (float32, x and out in "
                "host memory)",
    sizes=SIZES,
    make_inputs=make_inputs,
    golden=golden,
    output=output,
    work=work,
    tolerance=0.0,
    test_dims=TEST_DIMS,
    limit="interconnect",
    dimensions=("n", "kernels"),
    ranges={"kernels": (1, MAX_KERNELS)},
    variants=(
        Variant("device-centric", "gpu", "naive",
                "each kernel a call that copies its input in and its result out to a new "
                "host array: 2k copies", lazy(GPU, "device_centric"),
                placement=PAGEABLE_HOST),
        Variant("data-flow", "gpu", "optimized",
                "x in once, k kernels on the device (each a pass over device memory), the "
                "result out once", lazy(GPU, "data_flow"), placement=PAGEABLE_HOST),
        Variant("fused", "gpu", "optimized",
                "x in once, one kernel applying all k maps in registers, the result out once",
                lazy(GPU, "fused"), placement=PAGEABLE_HOST),
    ),
)
