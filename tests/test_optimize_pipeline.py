"""Staged strips copied by cp.async into a ring of tiles (``optimize/cuda/pipeline.py``): the
ring's depth from shared memory, the emitted loop (strips sent ahead, one barrier a strip,
tiles read from the strip's slot), the registers' path where the config or the tiles ask for
it; compiled by nvcc where installed, and on a GPU against the original at sizes that leave
partial strips, partial blocks and loops shorter than the ring."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from loclab.optimize.cuda import argument_types, pipeline
from loclab.optimize.cuda.mapping import neighbours
from tests.test_optimize_gpu import CASES, gpu_agrees, gpu_planned, make_inputs
from tests.test_optimize_shapes import compiles, emitted

PRODUCT = """
def f(A, B, C, N, M, K):
    for i in range(N):
        for j in range(M):
            s = 0.0
            for k in range(K):
                s += A[i, k] * B[k, j]
            C[i, j] = s
"""
# a sequential loop around the staged one: the ring is filled again on every iteration
REPEATED = """
def f(A, B, C, T, N, M, K):
    for i in range(N):
        for j in range(M):
            for t in range(T):
                s = C[i, j]
                for k in range(K):
                    s += A[i, k] * B[k, j] * 0.5
                C[i, j] = s
"""
COALESCING = (CASES / "coalescing" / "nest.py").read_text()


def test_the_ring_is_the_deepest_that_fits():
    assert pipeline.ring_depth([1000, 2000], 0, 48 * 1024) == 3
    assert pipeline.ring_depth([10000, 10000], 0, 48 * 1024) == 2
    assert pipeline.ring_depth([10000, 10000], 10000, 48 * 1024) == 0


def test_a_slot_goes_before_the_tiles_subscripts():
    assert pipeline.ring_slot("k_slot", "s_a[(tid / 8) % 64][tid % 8]") == \
        "s_a[k_slot][(tid / 8) % 64][tid % 8]"


def test_a_products_strips_are_copied_into_a_ring(tmp_path):
    _, configs, module = emitted(PRODUCT, N=512, M=512, K=512)
    source = module.source
    assert configs[0].pipelined and configs[0].stage
    tiles = re.findall(r"__shared__ double (s_\w+)\[(\d+)\]", source)
    assert tiles and all(depth == "3" for _, depth in tiles)
    assert "loclab_copies_pending<1>();" in source
    assert "loclab_copy_or_zero<8>(&s_" in source
    assert re.search(r"s_\w+\[k_slot\]", source)  # the strip computed reads its own slot
    assert not re.search(r"\bp_\w+_0 = ", source)  # no registers hold the next strip
    loop = source[source.index("for (I k0"):]
    loop = loop[:loop.index("if (k0 + ")]
    assert loop.count("__syncthreads()") == 1  # one barrier a strip
    compiles(module, tmp_path)


def test_without_pipelining_the_next_strip_goes_through_registers(tmp_path):
    mapped, configs, _ = emitted(PRODUCT, N=512, M=512, K=512)
    off = [replace(c, pipelined=False) for c in configs]
    assert off[0].text().endswith("through registers")
    assert off[0].to_json()["pipelined"] is False
    assert off[0] in neighbours(mapped.mappings[0], configs[0])
    tiny, _ = gpu_planned(PRODUCT, "f", N=3, M=3, K=3)
    types = argument_types(make_inputs(tiny.as_written.program, tiny.sizes), ["N", "M", "K"])
    module = mapped.emit(*types, off)
    source = module.source
    assert "loclab_copies_pending" not in source and "loclab_copy_or_zero" not in source
    assert re.search(r"\bp_\w+_0 = ", source)  # the next strip's share in a register
    compiles(module, tmp_path)


def test_a_ring_that_does_not_fit_leaves_the_strips_in_registers():
    # coalescing's rows: a read tile and a written one of 256 x 17 floats; two read tiles
    # and the written one would pass the 48 KiB a block declares
    _, configs, module = emitted(COALESCING, "row_program", rows=1 << 20, cols=64)
    assert configs[0].pipelined
    assert "loclab_copies_pending" not in module.source
    assert re.search(r"\bp_a_0 = ", module.source)


@pytest.mark.parametrize("source,sizes", [
    (PRODUCT, {"N": 512, "M": 512, "K": 512}),
    (REPEATED, {"T": 3, "N": 300, "M": 200, "K": 100}),
])
def test_ringed_kernels_compile(source, sizes, tmp_path):
    _, _, module = emitted(source, **sizes)
    assert "loclab_copies_pending" in module.source
    compiles(module, tmp_path)


@pytest.mark.gpu
@pytest.mark.parametrize("source,sizes", [
    (PRODUCT, {"N": 67, "M": 45, "K": 37}),  # partial blocks and strips
    (PRODUCT, {"N": 100, "M": 300, "K": 5}),  # a loop shorter than one strip
    (PRODUCT, {"N": 64, "M": 256, "K": 13}),  # whole blocks, shorter than the ring
    (PRODUCT, {"N": 129, "M": 257, "K": 1000}),
    (REPEATED, {"T": 3, "N": 70, "M": 90, "K": 21}),
])
@pytest.mark.parametrize("pipelined", [True, False])
def test_ringed_and_register_strips_agree_with_the_original(source, sizes, pipelined):
    gpu_agrees(source, sizes, {"block": (8, 32), "pipelined": pipelined})
