"""Access parsing and per-thread evaluation (``loclab.model.access``): the C subset accepted,
thread numbering, parameters and block-index defaults, and each refusal's one-line message."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loclab.errors import UsageError
from loclab.model.access import (DeclaredAccess, parse_access, parse_block, parse_params,
                                 parse_shape, resolve, thread_indices)
from loclab.model.banks import Banks
from loclab.model.coalescing import Coalescing, coalescing
from loclab.nest.expr import Poly


def test_parse_two_subscripts_and_aliases() -> None:
    full = parse_access("tile[threadIdx.x][threadIdx.y]")
    short = parse_access("tile[tx][ty];")
    assert full.array == short.array == "tile"
    assert full.subscripts == short.subscripts == (Poly.symbol("threadIdx.x"),
                                                   Poly.symbol("threadIdx.y"))


def test_parse_folds_constants_and_keeps_floor_and_mod() -> None:
    access = parse_access("s[(tid / W) * 33 + tid % W]", {"W": 8})
    tid = Poly.symbol("tid")
    assert access.subscripts == (tid.floordiv(8) * Poly.const(33) + tid.mod(8),)


def test_c_names_that_are_python_keywords() -> None:
    """``in`` is a common C array name and a Python keyword."""
    access = parse_access("in[i*N + threadIdx.x*4]")
    assert access.array == "in"
    assert access.subscripts[0].symbols() == {"i", "N", "threadIdx.x"}


def test_threads_are_numbered_x_fastest() -> None:
    threads = thread_indices((4, 2, 2))
    assert threads[:, :6].T.tolist() == [[0, 0, 0], [1, 0, 0], [2, 0, 0], [3, 0, 0],
                                         [0, 1, 0], [1, 1, 0]]
    assert threads[:, 8].tolist() == [0, 0, 1]


def test_resolve_with_block_sizes_parameters_and_default_block_index() -> None:
    result = resolve("A[(by*32 + ty + 8*r) * cols + bx*32 + tx]", (32, 8, 1),
                     {"r": 3, "cols": 4096, "by": 2})
    assert result.params == {"r": 3, "cols": 4096, "blockIdx.y": 2}
    assert result.assumed == ("blockIdx.x = 0 (not given)",)
    x, y = result.threads[0], result.threads[1]
    assert np.array_equal(result.values[0], (2 * 32 + y + 24) * 4096 + x)


def test_block_dim_comes_from_the_block() -> None:
    result = resolve("a[threadIdx.y * blockDim.x + threadIdx.x]", (16, 4, 1), {})
    assert result.values[0].tolist() == list(range(64))


def test_linear_index_is_row_major_in_the_shape() -> None:
    result = resolve("t[ty][tx]", (4, 3, 1), {})
    assert result.linear((3, 5)).tolist() == [y * 5 + x for y in range(3) for x in range(4)]


@pytest.mark.parametrize("call, message", [
    (lambda: resolve("a[threadIdx.x*threadIdx.y]", (32, 1, 1), {}),
     "a[threadIdx.x*threadIdx.y] is not affine: threadIdx.x*threadIdx.y"),
    (lambda: resolve("a[(tx*ty)/2]", (32, 1, 1), {}), "is not affine: threadIdx.x*threadIdx.y"),
    (lambda: resolve("a[bx*tx]", (32, 1, 1), {}), "is not affine: blockIdx.x*threadIdx.x"),
    (lambda: resolve("a[i*N + tx]", (32, 1, 1), {"N": 4}), "give values to i (as parameters)"),
    (lambda: resolve("a[i*N + tx]", (32, 1, 1), {}), "give values to N, i"),
    (lambda: resolve("a[sqrt(tx)]", (32, 1, 1), {}), "unknown function sqrt()"),
    (lambda: resolve("a[tx", (32, 1, 1), {}), "cannot parse access 'a[tx'"),
    (lambda: resolve("a[tx, ty]", (32, 1, 1), {}), "one subscript per pair of brackets"),
    (lambda: resolve("a + 1", (32, 1, 1), {}), "expected an array access"),
    (lambda: resolve("a[foo.x]", (32, 1, 1), {}), "unknown member foo.x"),
    (lambda: resolve("a[tx / N]", (32, 1, 1), {}), "divides by N: give N a value"),
    (lambda: resolve("a[(tx - 3) / 2]", (32, 1, 1), {}), "threadIdx.x - 3 is negative"),
    (lambda: resolve("a[1.5]", (32, 1, 1), {}), "unsupported in a subscript: 1.5"),
    (lambda: resolve("a[tx]", (32, 64, 1), {}), "32x64 = 2048 threads exceed 1024 per block"),
    (lambda: resolve("a[tx]", (1, 1, 65), {}), "blockDim.z = 65 exceeds CUDA's limit of 64"),
    (lambda: resolve("a[tx]", (32, 1, 1), {"threadIdx.x": 3}), "comes from the block shape"),
    (lambda: resolve("a[tx]", (32, 1, 1), {"N": 2.5}), "parameter N = 2.5 is not an integer"),
    (lambda: resolve("a[tx-1]", (32, 1, 1), {}).linear(None),
     "thread (0,0,0) reads a[-1]: index -1 must not be negative"),
    (lambda: resolve("t[tx][ty+1]", (32, 8, 1), {}).linear((32, 8)),
     "thread (0,7,0) reads t[0][8]: index 8 is outside 0..7"),
    (lambda: resolve("t[tx][ty]", (32, 8, 1), {}).linear(None), "give the shape of t"),
    (lambda: resolve("t[tx][ty]", (32, 8, 1), {}).linear((4, 4, 4)),
     "2 subscripts on an array of shape 4x4x4"),
    (lambda: coalescing("a[tx]", elem_bytes=3), "element size 3 bytes: give one of 1, 2, 4"),
    (lambda: DeclaredAccess("s[tx]", "shared", 4).predict((32, 1, 1), {}), "needs the array's"),
])
def test_refusals_are_one_line(call, message: str) -> None:
    with pytest.raises(UsageError) as error:
        call()
    assert message in str(error.value)
    assert "\n" not in str(error.value)


def test_parse_block_shape_and_params() -> None:
    assert parse_block("32x8") == (32, 8, 1)
    assert parse_block("256") == (256, 1, 1)
    assert parse_block("8X8x4") == (8, 8, 4)
    assert parse_shape("32x33") == (32, 33)
    assert parse_params(["N=16384", "bx=5", "gridDim.x=4"]) == \
        {"N": 16384, "blockIdx.x": 5, "gridDim.x": 4}


@pytest.mark.parametrize("call, message", [
    (lambda: parse_block("32x"), "bad block '32x': give 1 to 3 positive sizes like 32x8"),
    (lambda: parse_block("1x2x3x4"), "bad block"),
    (lambda: parse_block("32x64"), "32x64 = 2048 threads exceed 1024 per block"),
    (lambda: parse_shape("0x3"), "bad shape '0x3': sizes must be positive"),
    (lambda: parse_params(["N"]), "bad parameter 'N': give NAME=INTEGER"),
    (lambda: parse_params(["N=1.5"]), "bad parameter 'N=1.5'"),
    (lambda: parse_params(["a b=1"]), "bad parameter name 'a b'"),
])
def test_option_parsers_refuse_in_one_line(call, message: str) -> None:
    with pytest.raises(UsageError, match="^" + re.escape(message)):
        call()


def test_declared_access_dispatches_to_its_model() -> None:
    read = DeclaredAccess("a[(by*32 + ty)*N + bx*32 + tx]", "global", 4, note="row read")
    tile = DeclaredAccess("tile[tx][ty]", "shared", 4, (32, 33))
    predicted = read.predict((32, 8, 1), {"N": 1024})
    assert isinstance(predicted, Coalescing) and predicted.sectors_per_request == 4
    banks = tile.predict((32, 8, 1), {})
    assert isinstance(banks, Banks) and banks.conflict_degree == 1


# -- a brute-force oracle, shared with the coalescing and bank tests ------------------------
PROPERTY = settings(deadline=None, derandomize=True, database=None)
BLOCKS = st.sampled_from([(32, 1, 1), (32, 8, 1), (16, 4, 1), (48, 2, 1), (8, 8, 2), (64, 1, 1),
                          (100, 1, 1), (4, 4, 4)])


@dataclass(frozen=True)
class Generated:
    """An access as text, with what the oracle needs to evaluate it thread by thread."""

    text: str
    subscripts: tuple[str, ...]  # each subscript's text
    block: tuple[int, int, int]
    params: dict[str, int]
    shape: tuple[int, ...]


def oracle_indices(gen: Generated) -> list[int]:
    """Each thread's row-major element index, by Python ``eval`` of the subscript texts
    (C's ``/`` on non-negative values is ``//``), threads numbered x fastest."""
    bx, by, bz = gen.block
    indices = []
    for tid in range(bx * by * bz):
        x, y, z = tid % bx, tid // bx % by, tid // (bx * by)
        names = {"threadIdx": SimpleNamespace(x=x, y=y, z=z), "tx": x, "ty": y, "tz": z,
                 **gen.params}
        index = [eval(s.replace("/", "//"), {}, names) for s in gen.subscripts]
        linear = 0
        for value, size in zip(index, gen.shape):
            linear = linear * size + value
        indices.append(linear)
    return indices


@st.composite
def terms(draw: st.DrawFn, params: dict[str, int]) -> str:
    """One subscript without its constant: small coefficients on the thread indices, at times
    a parameter, a floor division or a modulo by a constant."""
    parts = []
    for axis in "xyz":
        coefficient = draw(st.integers(-4, 9))
        name = draw(st.sampled_from([f"threadIdx.{axis}", f"t{axis}"]))
        if coefficient:
            parts.append(f"{coefficient}*{name}")
    if draw(st.booleans()):
        params.setdefault("N", draw(st.sampled_from([1, 3, 32, 33, 64])))
        parts.append("threadIdx.y*N")
    if draw(st.booleans()):
        parts.append(f"(threadIdx.x / {draw(st.integers(1, 8))})*{draw(st.integers(1, 40))}")
    if draw(st.booleans()):
        parts.append(f"threadIdx.x % {draw(st.integers(1, 8))}")
    return " + ".join(parts) or "0"


@st.composite
def generated(draw: st.DrawFn, max_subscripts: int = 2) -> Generated:
    """An affine access whose indices are all in bounds: constants shift each subscript to
    non-negative values, the shape leaves a little room past the largest index."""
    block = draw(BLOCKS)
    params: dict[str, int] = {}
    bodies = [draw(terms(params)) for _ in range(draw(st.integers(1, max_subscripts)))]
    probe = Generated("", tuple(bodies), block, params, (1,) * len(bodies))
    subscripts, shape = [], []
    for k, body in enumerate(bodies):
        values = oracle_indices(replace(probe, subscripts=(body,), shape=(1,)))
        shift = -min(values) + draw(st.integers(0, 40))
        subscripts.append(f"{body} + {shift}")
        shape.append(max(values) + shift + 1 + draw(st.integers(0, 3)))
    text = "a" + "".join(f"[{s}]" for s in subscripts)
    return Generated(text, tuple(subscripts), block, params, tuple(shape))


@given(generated())
@PROPERTY
def test_resolve_agrees_with_evaluating_the_text(gen: Generated) -> None:
    assert resolve(gen.text, gen.block, gen.params).linear(gen.shape).tolist() == \
        oracle_indices(gen)
