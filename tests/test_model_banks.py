"""The bank-conflict model (``loclab.model.banks``): the lectures' rules (stride s is
conflict-free iff gcd(s, 32) = 1; the padded transpose tile), the phases of 8- and 16-byte
accesses, and every warp of generated affine accesses against a brute-force count."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loclab.model.banks import bank_conflicts
from tests.test_model_access import PROPERTY, Generated, generated, oracle_indices


@given(st.integers(1, 96), st.sampled_from([(32, 1, 1), (32, 8, 1), (64, 2, 1)]))
@PROPERTY
def test_stride_rule_of_the_slides(stride: int, block: tuple[int, int, int]) -> None:
    """``s[threadIdx.x * stride]`` of floats: degree gcd(stride, 32) in every warp."""
    result = bank_conflicts("s[threadIdx.x * stride]", (block[0] * stride,), block, 4,
                            {"stride": stride})
    assert {w.degree for w in result.warps} == {math.gcd(stride, 32)}
    assert result.wavefronts_per_request == math.gcd(stride, 32)


@pytest.mark.parametrize("access, shape, elem, degree, wavefronts", [
    ("tile[threadIdx.x][threadIdx.y]", (32, 32), 4, 32, 32),  # transpose read down a column
    ("tile[threadIdx.x][threadIdx.y]", (32, 33), 4, 1, 1),  # ... of the padded tile
    ("tile[threadIdx.y][threadIdx.x]", (32, 32), 4, 1, 1),  # along a row
    ("s[0]", (1,), 4, 1, 1),  # one word for all: a broadcast
    ("s[threadIdx.x / 2]", (16,), 4, 1, 1),  # pairs share a word
    ("s[threadIdx.x]", (32,), 1, 1, 1),  # chars: four threads per word
    ("s[threadIdx.x * 2]", (64,), 2, 1, 1),  # every other half-word: still 16 words
    ("s[threadIdx.x * 64]", (2048,), 2, 32, 32),  # every half-word in bank 0
    ("s[threadIdx.x]", (32,), 8, 1, 2),  # doubles: two half-warps, conflict-free
    ("s[threadIdx.x * 2]", (64,), 8, 2, 4),  # stride 2 doubles: 2-way in each half
    ("s[threadIdx.x]", (32,), 16, 1, 4),  # float4: four quarter-warps
    ("s[threadIdx.x * 2]", (64,), 16, 2, 8),
    ("tile[threadIdx.x][threadIdx.y]", (32, 32), 8, 16, 32),  # 16 rows of a half in 2 banks
    ("tile[threadIdx.x][threadIdx.y]", (32, 33), 8, 1, 2),  # rows 66 words apart: 2x mod 32
])
def test_hand_derived(access: str, shape: tuple[int, ...], elem: int, degree: int,
                      wavefronts: int) -> None:
    result = bank_conflicts(access, shape, (32, 8, 1), elem)
    assert (result.conflict_degree, result.wavefronts_per_request) == (degree, wavefronts)
    assert result.bank_conflicts == 8 * (wavefronts - 1)
    phases = max(1, elem // 4)
    assert result.excess_wavefronts == 8 * (wavefronts - phases)


def test_json_and_console_text() -> None:
    result = bank_conflicts("tile[threadIdx.x][threadIdx.y]", (32, 32), (32, 8, 1), 4)
    data = result.to_json()
    assert {"access", "shape", "block", "elem_bytes", "params", "conflict_degree",
            "wavefronts_per_request", "bank_conflicts", "warps", "assumed"} <= data.keys()
    assert data["bank_conflicts"] == 8 * 31 and data["shape"] == [32, 32]
    assert data["example"]["bank"] == 0 and data["example"]["words"][:3] == [0, 32, 64]
    assert all(len(line) <= 80 for line in result.lines())
    text = " ".join(line.strip() for line in result.lines())
    assert "bank 0 serves 32 different words to threads (0,0,0), (1,0,0)" in text
    padded = bank_conflicts("tile[threadIdx.x][threadIdx.y]", (32, 33), (32, 8, 1), 4)
    assert "no conflict" in " ".join(padded.lines())


def oracle_warps(gen: Generated, elem: int) -> list[tuple[int, int]]:
    """(degree, wavefronts) of each warp: per phase of consecutive lanes, the distinct words
    each bank must serve, counted from every word each thread touches."""
    words_per_thread = max(1, elem // 4)
    phase = 32 // words_per_thread
    starts = [i * elem for i in oracle_indices(gen)]
    result = []
    for first in range(0, len(starts), 32):
        degrees = []
        for lane in range(first, min(first + 32, len(starts)), phase):
            words = {(s + k) // 4 for s in starts[lane:lane + phase] for k in range(elem)}
            degrees.append(max(sum(1 for w in words if w % 32 == bank) for bank in range(32)))
        result.append((max(degrees), sum(degrees)))
    return result


@given(generated(), st.sampled_from([1, 2, 4, 8, 16]))
@PROPERTY
def test_against_brute_force(gen: Generated, elem: int) -> None:
    result = bank_conflicts(gen.text, gen.shape, gen.block, elem, gen.params)
    assert [(w.degree, w.wavefronts) for w in result.warps] == oracle_warps(gen, elem)
    assert result.bank_conflicts == sum(w - 1 for _, w in oracle_warps(gen, elem))
