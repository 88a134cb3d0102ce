"""The occupancy model against CUDA's own answer (cuOccupancyMaxActiveBlocksPerMultiprocessor)
on the GPU at hand: for every kernel every case launches, and for a sweep of block sizes and
shared memory over those kernels (each with its own register count). Marked ``gpu``."""

from __future__ import annotations

import pytest

import loclab
from loclab.bench.auto import get_case
from loclab.gpu.kernels import recording_launches
from loclab.model.occupancy import occupancy

pytestmark = pytest.mark.gpu

@pytest.fixture(scope="module")
def small_run() -> dict:
    return loclab.run(device="gpu", size="small")


def test_every_kernel_of_every_case_agrees_with_cuda(small_run: dict) -> None:
    kernels = [(row["case"], row["variant"], kernel) for row in small_run["results"]
               for kernel in row["kernels"]]
    assert kernels, "no kernel recorded"
    assert [k for k in kernels if k[2]["error"]] == []
    wrong = [k for k in kernels if k[2]["blocks_per_sm"] != k[2]["cuda_blocks_per_sm"]]
    assert wrong == []
    handwritten = {(row["case"], row["variant"]) for row in small_run["results"]
                   if row["role"] != "library" and row["valid"] and not next(
                       v for v in get_case(row["case"]).variants
                       if v.name == row["variant"]).no_kernel}
    recorded = {(case, variant) for case, variant, _ in kernels}
    assert handwritten - recorded == set()


def test_a_sweep_of_block_sizes_and_shared_memory_agrees_with_cuda(machine) -> None:
    with recording_launches() as recorded:
        loclab.run(device="gpu", size="small", cases=["transpose", "mmm", "histogram"])
    checked = 0
    for launch in {launch.name: launch for launch in recorded}.values():
        resources = launch.resources()
        registers, static = resources["registers"], resources["static_shared"]
        for threads in range(32, launch.max_threads() + 1, 96):
            for dynamic in (0, 1000, 8192, 20000, 40000):
                if static + dynamic > 48 * 1024:
                    continue
                ours = occupancy(machine.gpu.compute_capability, threads, registers, static,
                                 dynamic)
                assert ours.blocks_per_sm == launch.cuda_blocks_per_sm(threads, dynamic), \
                    (launch.name, threads, registers, static, dynamic)
                checked += 1
    assert checked > 100
