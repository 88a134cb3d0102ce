"""The coalescing model (``loclab.model.coalescing``): the lectures' examples derived by hand,
and every warp of generated affine accesses against a byte-by-byte brute-force count."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loclab.model.coalescing import coalescing
from tests.test_model_access import PROPERTY, Generated, generated, oracle_indices

ROW = "a[(blockIdx.x*32 + threadIdx.y)*N + threadIdx.x]"
COLUMN = "b[(blockIdx.x*32 + threadIdx.x)*N + blockIdx.y*32 + threadIdx.y]"


@pytest.mark.parametrize("access, elem, sectors, lines, efficiency", [
    (ROW, 4, 4, 1, 1.0),  # 32 floats in a row: one line, 4 sectors
    (ROW, 8, 8, 2, 1.0),  # doubles: 256 bytes
    (ROW, 16, 16, 4, 1.0),  # float4: 512 bytes
    (COLUMN, 4, 32, 32, 0.125),  # naive transpose's column write: a line per thread
    ("a[threadIdx.x + 1]", 4, 5, 2, 0.8),  # misaligned by one element: 5 sectors
    ("a[2*threadIdx.x]", 4, 8, 2, 0.5),  # stride 2: every other float
    ("a[0]", 4, 1, 1, 0.125),  # one float for the whole warp: 4 of 32 bytes
    ("in[i*N + threadIdx.x*4]", 4, 16, 4, 0.25),  # every fourth float
])
def test_lecture_examples(access: str, elem: int, sectors: int, lines: int,
                          efficiency: float) -> None:
    result = coalescing(access, (32, 8, 1), elem, {"N": 1024, "i": 3})
    assert (result.sectors_per_request, result.lines_per_request) == (sectors, lines)
    assert result.mean_sectors_per_request == sectors  # every warp alike
    assert result.efficiency == pytest.approx(efficiency)
    assert result.ideal_sectors_per_request == (1 if access == "a[0]" else elem)


def test_warps_differ_and_the_worst_is_reported() -> None:
    """Warp 0 reads floats 0..31 (4 sectors), warp 1 floats 1..32 (5 sectors)."""
    result = coalescing("a[threadIdx.x + threadIdx.y]", (32, 2, 1))
    assert [w.sectors for w in result.warps] == [4, 5]
    assert result.sectors_per_request == 5 and result.mean_sectors_per_request == 4.5


def test_a_partial_last_warp_is_a_warp() -> None:
    result = coalescing("a[threadIdx.x]", (48, 1, 1))
    assert [(w.threads, w.sectors) for w in result.warps] == [(32, 4), (16, 2)]


def test_json_and_console_text() -> None:
    result = coalescing(COLUMN, (32, 8, 1), 4, {"N": 4096})
    data = result.to_json()
    assert {"access", "block", "elem_bytes", "params", "sectors_per_request",
            "mean_sectors_per_request", "lines_per_request", "efficiency",
            "ideal_sectors_per_request", "warps", "assumed"} <= data.keys()
    assert data["sectors_per_request"] == 32 and len(data["warps"]) == 8
    assert "blockIdx.x = 0 (not given)" in data["assumed"]
    text = " ".join(line.strip() for line in result.lines())
    assert all(len(line) <= 80 for line in result.lines())
    assert ("its 32 threads touch 32 different 128-byte lines: 32 sectors for 128 useful "
            "bytes (12.5%)") in text


def oracle_warps(gen: Generated, elem: int) -> list[tuple[int, int, int]]:
    """(sectors, lines, used bytes) of each warp, from the set of every byte touched."""
    starts = [i * elem for i in oracle_indices(gen)]
    result = []
    for first in range(0, len(starts), 32):
        touched = {b for s in starts[first:first + 32] for b in range(s, s + elem)}
        result.append((len({b // 32 for b in touched}), len({b // 128 for b in touched}),
                       len(touched)))
    return result


@given(generated(), st.sampled_from([1, 2, 4, 8, 16]))
@PROPERTY
def test_against_brute_force(gen: Generated, elem: int) -> None:
    shape = gen.shape if len(gen.shape) > 1 else None
    result = coalescing(gen.text, gen.block, elem, gen.params, shape)
    assert [(w.sectors, w.lines, w.used_bytes) for w in result.warps] == \
        oracle_warps(gen, elem)
    assert len(result.warps) == math.ceil(math.prod(gen.block) / 32)
