"""Host and device: the farthest memory of all, and the roof of every case whose data starts
or ends on the host.

A copy between host memory and device memory crosses the link (PCIe, or NVLink-C2C on a
Grace Hopper), an order of magnitude slower than the device's own memory. From pageable host
memory (what ``malloc`` and NumPy give) the driver copies through a pinned staging buffer of
its own, and the host waits; from pinned (page-locked) memory the copy engines move the data
directly, asynchronously, and a copy to the device can run while another comes back: the
link is full duplex. Small copies are bound by latency (a few microseconds each), large ones
by bandwidth: the sweep goes from 4 KiB to 1 GiB.

The best pinned copy of each direction measured in a run is its interconnect roof
(``references``: ``gpu_h2d_gbps``, ``gpu_d2h_gbps``; pageable and both ways beside them), and
the cases of the ``transfers`` family are rated against it: this case runs at 256 MiB before
them when it was not asked for itself.
"""

from __future__ import annotations

import numpy as np

from loclab.cases.base import PINNED_HOST, Case, Placement, Variant, Work, lazy

GPU = "loclab.cases.host_device.gpu"
KIB, MIB, GIB = 2**10, 2**20, 2**30
SWEEP = (*(4 * KIB * 16**k for k in range(5)), GIB)  # 4 KiB, 64 KiB, ..., 256 MiB, 1 GiB
ROOF_BYTES = 256 * MIB


def make_inputs(dims: dict[str, int], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Random bytes below 255, the value that poisons a uint8 output: a byte never copied
    cannot match golden."""
    return {"a": rng.integers(0, 255, size=dims["bytes"], dtype=np.uint8)}


def golden(inputs: dict[str, np.ndarray]) -> np.ndarray:
    return inputs["a"].copy()


def output(dims: dict[str, int]) -> tuple[tuple[int, ...], type]:
    return (dims["bytes"],), np.uint8


def work(dims: dict[str, int]) -> Work:
    """The bytes delivered, as copy bandwidths are counted (a copy one way moves them over the
    link once; the round trips move them both ways, which their ``link_gbps`` counts)."""
    size = dims["bytes"]
    return Work(bytes=size, flops=0, to_device=size, to_host=size)


def sweep(sizes: tuple[int, ...]) -> list[dict[str, int]]:
    return [{"bytes": size} for size in sizes]


SIZES = {
    "small": {"gpu": sweep((4 * KIB, 1 * MIB, 64 * MIB))},
    "default": {"gpu": sweep(SWEEP)},
    "large": {"gpu": sweep((*SWEEP, 4 * GIB))},
}
# One byte, sizes that are no multiple of a word, of a chunk or of the four chunks.
TEST_DIMS = tuple({"bytes": size} for size in (1, 4097, 64 * KIB + 3, 2 * MIB + 5))

# What runs instead of a kernel (the rows record none).
COPIES_ONLY = "copies only: the driver and the copy engines move the bytes, no kernel runs"
PAGEABLE_TO_DEVICE = Placement(inputs="pageable", output="device")
PINNED_TO_DEVICE = Placement(inputs="pinned", output="device")
DEVICE_TO_PAGEABLE = Placement(inputs="device", output="pageable")
DEVICE_TO_PINNED = Placement(inputs="device", output="pinned")

CASE = Case(
    name="host-device",
    lesson="the link between host and device: pageable against pinned memory, latency "
           "against bandwidth, one direction against both at once",
    description="out = a, bytes copied from host to device memory or back (or both ways)",
    sizes=SIZES,
    make_inputs=make_inputs,
    golden=golden,
    output=output,
    work=work,
    tolerance=0.0,
    test_dims=TEST_DIMS,
    sweep="bytes",
    sweep_rate=True,
    limit="interconnect",
    dimensions=("bytes",),
    roof_dims={"bytes": ROOF_BYTES},
    variants=(
        Variant("h2d-pageable", "gpu", "naive",
                "cudaMemcpy from pageable host memory (staged by the driver; the host waits)",
                lazy(GPU, "one_way"), placement=PAGEABLE_TO_DEVICE, no_kernel=COPIES_ONLY),
        Variant("h2d-pinned", "gpu", "optimized",
                "cudaMemcpyAsync from pinned host memory (a DMA by the copy engine)",
                lazy(GPU, "one_way"), placement=PINNED_TO_DEVICE,
                baseline="h2d-pageable", no_kernel=COPIES_ONLY),
        Variant("d2h-pageable", "gpu", "naive",
                "cudaMemcpy to pageable host memory (staged by the driver; the host waits)",
                lazy(GPU, "one_way"), placement=DEVICE_TO_PAGEABLE, no_kernel=COPIES_ONLY),
        Variant("d2h-pinned", "gpu", "optimized",
                "cudaMemcpyAsync to pinned host memory (a DMA by the copy engine)",
                lazy(GPU, "one_way"), placement=DEVICE_TO_PINNED, baseline="d2h-pageable",
                no_kernel=COPIES_ONLY),
        Variant("round-trip-pinned", "gpu", "naive",
                "pinned host memory to the device and back, one direction after the other",
                lazy(GPU, "round_trip"), placement=PINNED_HOST, no_kernel=COPIES_ONLY),
        Variant("both-ways-pinned", "gpu", "optimized",
                "the same round trip in chunks of up to 8 MiB on two streams: chunk i comes "
                "back while chunk i + 1 goes in (the link is full duplex)",
                lazy(GPU, "both_ways"), placement=PINNED_HOST,
                baseline="round-trip-pinned", no_kernel=COPIES_ONLY),
    ),
)
