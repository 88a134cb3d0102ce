"""``loclab model ...`` on the command line: answers, JSON contracts, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loclab.cli import main

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main(["model", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_occupancy_json(capsys: pytest.CaptureFixture[str]) -> None:
    document = run_json(capsys, "occupancy", "--gpu", "v100", "--threads", "256",
                        "--regs", "34", "--smem", "4096")
    assert (document["blocks_per_sm"], document["warps_per_sm"]) == (6, 48)
    assert document["occupancy"] == 0.75 and document["limited_by"] == "registers"


def test_occupancy_text_takes_a_2d_block_and_sizes_with_units(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["model", "occupancy", "--gpu", "sm_80", "--threads", "32x8", "--regs", "32",
                 "--smem", "48K"]) == 0
    out = capsys.readouterr().out
    assert "a block of 256 threads" in out and "49152 B shared" in out


def test_coalescing_and_banks_json(capsys: pytest.CaptureFixture[str]) -> None:
    document = run_json(capsys, "coalescing",
                        "a[(blockIdx.x*32 + threadIdx.y)*N + threadIdx.x]", "--block", "32x8",
                        "--elem", "4", "--param", "N=16384")
    assert document["sectors_per_request"] == 4 and document["efficiency"] == 1.0
    column = run_json(capsys, "coalescing", "b[threadIdx.x*N + threadIdx.y]", "--param",
                      "N=16384")
    assert column["sectors_per_request"] == 32
    padded = run_json(capsys, "banks", "tile[threadIdx.x][threadIdx.y]", "--shape", "32x33",
                      "--block", "32x8")
    square = run_json(capsys, "banks", "tile[threadIdx.x][threadIdx.y]", "--shape", "32x32",
                      "--block", "32x8")
    assert (padded["conflict_degree"], square["conflict_degree"]) == (1, 32)


def test_cache_json_names_levels_and_arrays(capsys: pytest.CaptureFixture[str]) -> None:
    document = run_json(capsys, "cache", f"{EXAMPLES / 'recipes.py'}::transpose",
                        "--param", "rows=64", "--param", "cols=64", "--cache", "4KiB:4",
                        "--elem", "4")
    assert document["accesses"] == 2 * 64 * 64
    level = document["levels"][0]
    assert {"name", "size_bytes", "misses", "bytes_from_below"} <= set(level)
    # A (read along rows) misses once a line; B (written down columns) more.
    assert document["arrays"]["A"]["misses"] == 64 * 64 * 4 // 64
    assert document["arrays"]["B"]["misses"] > document["arrays"]["A"]["misses"]


def test_cache_reads_c_with_macros(capsys: pytest.CaptureFixture[str],
                                    tmp_path: Path) -> None:
    source = tmp_path / "t.c"
    source.write_text("void t(float A[N][N], float B[N][N]) {\n"
                      "  for (int i = 0; i < N; i++)\n"
                      "    for (int j = 0; j < N; j++) B[j][i] = A[i][j];\n}\n")
    document = run_json(capsys, "cache", f"{source}::t", "-D", "N=16", "--cache", "4KiB")
    assert document["accesses"] == 2 * 16 * 16


def test_reuse_json(capsys: pytest.CaptureFixture[str]) -> None:
    document = run_json(capsys, "reuse", "mmm", "--n", "96", "--cache", "8KiB", "--tile", "16")
    assert document["tile"] == 16 and document["simulated_n"] == 96
    naive, blocked = (next(v for v in document["variants"] if v["variant"] == name)
                      for name in ("naive", "blocked"))
    assert blocked["simulated_reuse"] > naive["simulated_reuse"]
    corner = run_json(capsys, "reuse", "mmm", "--n", "96", "--cache", "8KiB", "--tile", "16",
                      "--accesses", "200000")
    assert corner["simulated_n"] < 96 and "corner" in corner["notes"][0]


@pytest.mark.parametrize("argv, message", [
    (["occupancy", "--gpu", "p100", "--threads", "256", "--regs", "32"], "unknown GPU"),
    (["occupancy", "--gpu", "h100", "--threads", "2048", "--regs", "32"], "--threads 2048"),
    (["coalescing", "a[threadIdx.x*threadIdx.y]"], "is not affine"),
    (["coalescing", "a[threadIdx.x*N]"], "give values to N"),
    (["banks", "t[threadIdx.x]", "--shape", "16"], "outside"),
    (["cache", "examples/recipes.py::transpose", "--param", "rows=8"], "cols"),
    (["cache", "examples/recipes.py::histogram", "--param", "N=8", "--param", "H=4"],
     "recipes.py:71"),
    (["cache", "examples/recipes.py", "--param", "N=8"], "name one with ::NAME"),
    (["cache", "examples/recipes.py::transpose", "--param", "rows=8", "--param", "cols=8",
      "--cache", "32Q"], "32Q"),
    (["reuse", "mmm", "--n", "64", "--tile", "6"], "multiple of the register tile"),
])
def test_bad_input_is_one_line_and_exit_code_2(argv: list[str], message: str,
                                               capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(EXAMPLES.parent)
    assert main(["model", *argv]) == 2
    error = capsys.readouterr().err
    assert message in error and error.count("\n") == 1, error
