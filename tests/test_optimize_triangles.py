"""GPU kernels of triangular nests (``KernelWriter._hull``): a loop whose bounds move with
the grid loops (trmm's ``k`` from ``i + 1``) runs over the block's hull of every thread's
range, so that the block stages along it and a thread's register tile jams it, each
iteration of the tile computing its own range alone. Written for several launch configs
(compiled by nvcc where installed) and, on a GPU, each config against the original."""

from __future__ import annotations

import re
import shutil
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings

from loclab.errors import UsageError
from tests.nestgen import recurrence_nests

from loclab.optimize.cuda import argument_types
from tests.test_optimize_gpu import TRMM, gpu_planned, make_inputs, nvcc_compiled

TRIANGLES = {
    "trmm": TRMM,
    "lower": """
def f(A, B, C, M, N):
    for i in range(M):
        for j in range(N):
            for k in range(i):
                C[i, j] += A[i, k] * B[k, j]
""",
    "by-column": """
def f(A, B, C, M, N):
    for i in range(M):
        for j in range(N):
            total = 0.0
            for k in range(j + 2, N):
                total += A[i, k] * B[k, j]
            C[i, j] = total
""",
}
TILES = [None, (4, 4), (2, 8), (8, 2)]


def emitted(source: str, tile: tuple[int, int] | None, **sizes: int):
    found, mapped = gpu_planned(source, **sizes)
    configs = [replace(c, tile=tile) if tile and len(c.tile) == 2 else c
               for c in mapped.default_configs()]
    inputs = make_inputs(found.as_written.program, found.sizes)
    return found, mapped, configs, mapped.emit(*argument_types(inputs, list(sizes)), configs)


def test_a_triangles_tile_is_staged_over_the_blocks_range_each_row_its_own(tmp_path):
    _, _, _, cuda = emitted(TRMM, (4, 4), M=100, N=120)
    (kernel,) = cuda.kernels
    assert sorted(t.split(" (")[0] for t in kernel.staged) == ["A along k", "B_copy along k"]
    # strips from the block's first row + 1; each row of the tile computes its own k > i
    assert "for (I k0 = ((first_i + by * 32) + 0 + 1); k0 < M; k0 += 8, k_turn++)" in kernel.text
    assert "if (k >= ((((long long)(i_3)) + 1LL)) && k < (M)) r_B_3_0 += " in kernel.text
    if shutil.which("nvcc"):
        assert nvcc_compiled(cuda, tmp_path).returncode == 0


def stray_tile_reads(text: str) -> list[str]:
    """Tiles read inside a strip loop (``for (I v0 = ...``) that the loop did not store (or
    copy into by cp.async)."""
    lines = text.splitlines()
    stray = []
    for n, line in enumerate(lines):
        opened = re.match(r"(\s*)for \(I \w+0 = ", line)
        if not opened:
            continue
        block = []
        for later in lines[n + 1:]:
            if later.strip() == "}" and len(later) - len(later.lstrip()) == len(opened[1]):
                break
            block.append(later)
        text = "\n".join(block)  # stored by assignment, or copied by cp.async
        stored = set(re.findall(r"(s_\w+)\[[^=]*\] = ", text)) | set(
            re.findall(r"loclab_copy_or_zero<\d+>\(&(s_\w+)\[", text))
        read = {name for b in block for name in re.findall(
            r"\b(s_\w+)\[", b.split(" = ", 1)[1] if re.match(r"\s*s_\w+\[.*\] = ", b) else b)}
        stray += [f"line {n + 1}: {name}" for name in sorted(read - stored)]
    return stray


@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(recurrence_nests())
def test_sibling_loops_never_read_each_others_tiles(source: str) -> None:
    # ``for j in range(i + 1, N)`` beside ``for j in range(i)``: both staged over their hulls,
    # each reads only what it loaded (a tile left by the other holds its last strip)
    try:
        found, mapped = gpu_planned(source, N=200)
    except UsageError:
        return
    inputs = make_inputs(found.as_written.program, {"N": 200})
    cuda = mapped.emit(*argument_types(inputs, ["N"]))
    assert not stray_tile_reads(cuda.source), source


@pytest.mark.gpu
@pytest.mark.parametrize("tile", TILES)
@pytest.mark.parametrize("sizes", [{"M": 70, "N": 45}, {"M": 9, "N": 300}, {"M": 130, "N": 6}])
@pytest.mark.parametrize("name", sorted(TRIANGLES))
def test_triangles_agree_with_the_original_in_every_config(name, sizes, tile):
    from loclab.gpu.transfers import on_host_arrays
    from loclab.optimize.gpu import rounding_length
    from loclab.transform.verify import compare_runs, compile_original

    found, _, _, cuda = emitted(TRIANGLES[name], tile, **sizes)
    program = found.as_written.program
    verification = compare_runs(compile_original(found.as_written),
                                on_host_arrays(cuda.compile()), program,
                                make_inputs(program, sizes), sizes,
                                rounding_length(program, sizes))
    assert verification.ok, verification
