"""Device-centric against data-flow: ``D = A x B x C`` with a ``gemm`` that copies its
operands to the GPU and its result back on every call (the lecture's "device-centric APIs
considered harmful").

``AxBxC(A, B, C) = gemm(gemm(A, B), C)`` is natural code, and with a device-centric ``gemm``
it copies ``A x B`` to the host only to send it straight back: two more matrices over the
link, and a host buffer allocated and faulted in for each result. Keeping the operands on the
device and copying only the final result back (data flow: data moves only where it is needed)
saves those copies; what is left is each input in once, the products, and D out once. The
phases of each row say where its time goes (copies against cuBLAS's products).

``matrices`` n x n float32 matrices (3: A, B, C) in ordinary (pageable) host memory, as a
NumPy program holds them; products through cuBLAS SGEMM (TF32 off). Inputs in (0, 1]; each
product's elements are sums of n non-negative terms, so the chain of ``matrices - 1`` products
is within (matrices - 1) (n + 1) 2^-24 of golden, normwise, in any summation order.
"""

from __future__ import annotations

import math

import numpy as np

from loclab.cases.base import (PAGEABLE_HOST, Case, Variant, Work, lazy, summation_tolerance,
                               uniform_nonzero)
from loclab.errors import UsageError

GPU = "loclab.cases.gemm_chain.gpu"
ELEMENT_BYTES = 4
MAX_MATRICES = 16
# What computes instead of a kernel of loclab's (the rows record none, as the library rows).
CUBLAS = "cuBLAS SGEMM through cupy.matmul: a library's kernels are not recorded"
FLOAT32_HEADROOM = 100  # log2 of the largest product entry allowed (float32 reaches 2^128)


def names(count: int) -> list[str]:
    """The inputs' names in the order they multiply: a, b, c, ..."""
    return [chr(ord("a") + index) for index in range(count)]


def make_inputs(dims: dict[str, int], rng: np.random.Generator) -> dict[str, np.ndarray]:
    n = dims["n"]
    return {name: uniform_nonzero(rng, (n, n)) for name in names(dims["matrices"])}


def golden(inputs: dict[str, np.ndarray]) -> np.ndarray:
    """The products left to right in float64, rounded once to float32."""
    product = None
    for matrix in inputs.values():
        wide = matrix.astype(np.float64)
        product = wide if product is None else product @ wide
    return product.astype(np.float32)


def tolerance(inputs: dict[str, np.ndarray]) -> float:
    n = next(iter(inputs.values())).shape[0]
    return (len(inputs) - 1) * summation_tolerance(n)


def output(dims: dict[str, int]) -> tuple[tuple[int, ...], type]:
    return (dims["n"], dims["n"]), np.float32


def work(dims: dict[str, int]) -> Work:
    """Every matrix in from the host once, D back once; 2 n^3 flops a product."""
    n, count = dims["n"], dims["matrices"]
    matrix = ELEMENT_BYTES * n * n
    return Work(bytes=(count + 1) * matrix, flops=2 * n**3 * (count - 1),
                to_device=count * matrix, to_host=matrix)


def check(dims: dict[str, int]) -> None:
    """Refuse a chain whose product leaves float32's range: entries of a product of uniform
    (0, 1] matrices grow about n/2 times a product (2^128 is float32's largest)."""
    n, count = dims["n"], dims["matrices"]
    growth = (count - 1) * math.log2(max(n / 2, 1))
    if growth > FLOAT32_HEADROOM:
        raise UsageError(f"gemm-chain: n={n}, matrices={count}: the product's entries grow "
                         f"to about 2^{growth:.0f}, beyond float32's range; use fewer or "
                         f"smaller matrices")


SIZES = {
    "small": {"gpu": [{"n": 1024, "matrices": 3}]},
    "default": {"gpu": [{"n": 2048, "matrices": 3}, {"n": 8192, "matrices": 3}]},
    "large": {"gpu": [{"n": 8192, "matrices": 3}, {"n": 16384, "matrices": 3}]},
}
TEST_DIMS = tuple({"n": n, "matrices": m} for n, m in ((1, 2), (7, 3), (33, 4), (130, 3)))

CASE = Case(
    name="gemm-chain",
    lesson="device-centric APIs considered harmful: A x B x C with a gemm() that copies in "
           "and out on every call, against operands kept on the device",
    description="D = A x B x C (or a longer chain) of n x n float32 matrices in host memory, "
                "cuBLAS SGEMM on the GPU",
    sizes=SIZES,
    make_inputs=make_inputs,
    golden=golden,
    output=output,
    work=work,
    tolerance=tolerance,
    test_dims=TEST_DIMS,
    limit="interconnect",
    dimensions=("n", "matrices"),
    check=check,
    ranges={"matrices": (2, MAX_MATRICES)},
    variants=(
        Variant("device-centric", "gpu", "naive",
                "gemm(A, B) copies A and B in, multiplies, copies the product out into a new "
                "host matrix; then gemm(AxB, C) copies it straight back",
                lazy(GPU, "device_centric"), placement=PAGEABLE_HOST, no_kernel=CUBLAS),
        Variant("data-flow", "gpu", "optimized",
                "each matrix copied in once, the products on the device, D copied out once",
                lazy(GPU, "data_flow"), placement=PAGEABLE_HOST, no_kernel=CUBLAS),
    ),
)
