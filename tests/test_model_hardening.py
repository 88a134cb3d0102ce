"""``loclab model`` against bad input (issue 31): every refusal one line and exit code 2, no
overflow, no unbounded work, no self-contradicting output. Each case is quick; the cases that
once hung or ran out of memory run under :func:`returns_within`, so that a regression fails
instead of stalling the suite."""

from __future__ import annotations

import contextlib
import json
import re
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loclab.cli import main
from loclab.errors import UsageError
from loclab.hw.cpu import parse_size
from loclab.model.coalescing import coalescing

ROOT = Path(__file__).resolve().parents[1]
TRANSPOSE = "examples/recipes.py::transpose"
SMALL = ["--param", "rows=8", "--param", "cols=8"]
OCCUPANCY = ["occupancy", "--gpu", "h100", "--regs", "32"]
REUSE = ["reuse", "mmm", "--n", "64"]
PROPERTY = settings(deadline=None, derandomize=True, database=None, max_examples=60)


@contextlib.contextmanager
def returns_within(seconds: int) -> Iterator[None]:
    """Fail (rather than hang) when the block runs longer than ``seconds``."""
    def stop(*_: object) -> None:
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def model(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, list[str]]:
    """``loclab model ARGV``: exit code, stdout and stderr's non-blank lines (argparse
    refuses an option's value by exiting, after its usage lines)."""
    with returns_within(20):
        try:
            code = main(["model", *argv])
        except SystemExit as exit:
            code = int(exit.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, [line for line in captured.err.splitlines() if line.strip()]


def model_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    code, out, err = model(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


BAD_INPUTS = [
    # 1. numbers too large for int64 in an access: named, not an OverflowError
    (["coalescing", "a[threadIdx.x*99999999999999999999]"], 2,
     "99999999999999999999*threadIdx.x can reach 3.1e+21: too large"),
    (["coalescing", "a[99999999999999999999]"], 2, "99999999999999999999 can reach"),
    (["coalescing", "a[tx % 99999999999999999999]"], 2,
     "the divisor 99999999999999999999 is too large"),
    (["coalescing", "a[blockIdx.x*32 + tx]", "--param", "blockIdx.x=99999999999999999"], 2,
     "at blockIdx.x=99999999999999999: 3199999999999999968 can reach"),
    (["coalescing", "a[tx*N]", "--param", "N=99999999999999999999"], 2,
     "parameter N = 1e+20 is too large"),
    (["coalescing", "a[tx][ty]", "--shape", "99999999999x99999999999"], 2,
     "has 1e+22 elements: too many"),
    (["banks", "s[tx*99999999999999999999]", "--shape", "32"], 2, "can reach"),
    (["cache", TRANSPOSE, "--param", "rows=99999999999999999999", "--param", "cols=8",
      "--cache", "4KiB"], 2, "parameter values too large to trace: rows=1e+20"),
    # 2. one check of a block shape for every model
    (["occupancy", "--gpu", "h100", "--threads", "1x1x65", "--regs", "32"], 2,
     "--threads 1x1x65: blockDim.z = 65 exceeds CUDA's limit of 64"),
    ([*OCCUPANCY, "--threads", "2048"], 2, "--threads 2048: 2048 threads exceed 1024"),
    ([*OCCUPANCY, "--threads", "0"], 2, "sizes must be positive"),
    ([*OCCUPANCY, "--threads", "32x8x1x1"], 2, "give 1 to 3 positive sizes"),
    ([*OCCUPANCY, "--threads", ""], 2, "--threads : bad block ''"),
    (["coalescing", "a[tx]", "--block", "1x1x65"], 2, "--block 1x1x65: blockDim.z = 65"),
    (["banks", "s[tx]", "--shape", "32", "--block", "1024x2"], 2,
     "--block 1024x2: 1024x2 = 2048 threads exceed 1024 per block"),
    # 3. a __shared__ array past a block's shared memory
    (["banks", "s[threadIdx.x]", "--shape", "100000000000"], 2,
     "= 400,000,000,000 B: more than a block's shared memory on any GPU loclab knows"),
    (["banks", "s[tx]", "--shape", "64x1024", "--gpu", "v100"], 2,
     "on v100 (compute capability 7.0), 98,304 B"),
    (["banks", "s[tx]", "--shape", "16x1024", "--elem", "16"], 2, "262,144 B: more than"),
    (["banks", "s[tx]", "--shape", "48x1024", "--gpu", "h100"], 0, "conflict degree 1"),
    # 4. // and /* start comments in CUDA C
    (["coalescing", "a[threadIdx.x // 2]"], 2, "// starts a comment in CUDA C: write /"),
    (["banks", "s[tx /* pad */]", "--shape", "32"], 2, "/* starts a comment in CUDA C"),
    # 5. unknown GPUs list the known compute capabilities
    ([*OCCUPANCY[:1], "--gpu", "6.1", "--threads", "256", "--regs", "32"], 2,
     "unknown compute capability 6.1: the known compute capabilities are 7.0, 7.5, 8.0, "
     "8.6, 8.9, 9.0"),
    (["occupancy", "--gpu", "sm_100", "--threads", "256", "--regs", "32"], 2,
     "unknown compute capability 10.0 (sm_100): the known compute capabilities are 7.0"),
    (["occupancy", "--gpu", "b200", "--threads", "256", "--regs", "32"], 2,
     "unknown GPU 'b200': the known compute capabilities are 7.0"),
    (["occupancy", "--gpu", "", "--threads", "256", "--regs", "32"], 2, "unknown GPU ''"),
    (["banks", "s[tx]", "--shape", "32", "--gpu", "6.1"], 2, "compute capability 6.1"),
    # 6. cache levels in order, element sizes of C's types, one byte-size syntax
    (["cache", TRANSPOSE, *SMALL, "--cache", "1MiB:16,32KiB:8"], 2,
     "L2 (32 KiB) is not larger than L1 (1 MiB): list the levels nearest first"),
    (["cache", TRANSPOSE, *SMALL, "--cache", "32KiB,32KiB"], 2, "is not larger than L1"),
    (["cache", TRANSPOSE, *SMALL, "--cache", "4KiB", "--elem", "3"], 2,
     "--elem 3: expected BYTES or ARRAY=BYTES (4, A=4), BYTES one of 1, 2, 4, 8, 16"),
    (["cache", TRANSPOSE, *SMALL, "--cache", "4KiB", "--elem", "A=3"], 2, "--elem A=3"),
    (["cache", TRANSPOSE, *SMALL, "--cache", "4KiB", "--elem", "=4"], 2, "--elem =4"),
    (["cache", TRANSPOSE, *SMALL, "--cache", "4KiB", "--elem", "4", "--elem", "8"], 2,
     "the size of every array given twice"),
    ([*REUSE, "--elem", "3"], 2, "element size 3 bytes: give one of 1, 2, 4, 8, 16"),
    (["cache", TRANSPOSE, *SMALL, "--cache", "1TiB"], 2,
     "bad cache '1TiB': loclab simulates caches of at most 1 GiB"),
    ([*REUSE, "--cache", "1TiB"], 2, "cache L1 of 1 TiB: loclab simulates caches of at most"),
    (["cache", TRANSPOSE, *SMALL, "--cache", "1.5MiB"], 0, "1.5 MiB"),
    ([*OCCUPANCY, "--threads", "256", "--smem", "1.5K"], 0, "1536 B shared"),
    ([*OCCUPANCY, "--threads", "256", "--smem", "0"], 0, "0 B shared"),
    (["cache", TRANSPOSE, *SMALL, "--cache", "0"], 2, "its size must be a positive integer"),
    ([*REUSE, "--cache", "0"], 2, "its size must be a positive integer, not 0"),
    (["cache", TRANSPOSE, *SMALL, "--cache", "1.5.3K"], 2, "bad cache size '1.5.3K'"),
    (["cache", TRANSPOSE, *SMALL, "--cache", ""], 2, "bad cache size ''"),
    ([*REUSE, "--cache", "0.3K"], 2, "'0.3K' is not a whole number of bytes"),
    ([*OCCUPANCY, "--threads", "256", "--smem", "1.5.3K"], 2, "not a size in bytes"),
    ([*OCCUPANCY, "--threads", "256", "--smem", "-1"], 2, "not a size in bytes: '-1'"),
    ([*OCCUPANCY, "--threads", "256", "--smem", "4GiB"], 2, "at most 4294967295 B"),
    # 7. reuse: the work is bounded and the output agrees with itself
    ([*REUSE, "--tile", "1000"], 2, "--tile 1000 is larger than --n 64"),
    ([*REUSE, "--tile", "100"], 2, "--tile 100 is larger than --n 64"),
    (["reuse", "mmm", "--n", "1"], 2, "--n 1: the register-tiled variant needs n of at least 4"),
    (["reuse", "mmm", "--n", "99999999999999999999", "--accesses", "100000"], 2,
     "too large to simulate"),
    ([*REUSE, "--accesses", "1"], 2, "--accesses 1 is too few: the smallest corner"),
    ([*REUSE, "--tile", "64", "--accesses", "1000"], 2,
     "the smallest corner, 64 x 64 x 64, takes 532,480 accesses"),
    ([*REUSE, "--accesses", "100000000"], 2, "--accesses 100,000,000: 1 to 30,000,000"),
    ([*REUSE, "--line", "2"], 2, "--line 2: a line is at least an element (4 B)"),
    ([*REUSE, "--tile", "6"], 2, "tile 6 is not a multiple of the register tile 4"),
    # 8. sizes of a traced nest: positive, and a trace loclab can hold
    (["cache", TRANSPOSE, "--param", "rows=-4", "--param", "cols=8", "--cache", "4KiB"], 2,
     "rows=-4: a size must be at least 1"),
    (["cache", TRANSPOSE, "--param", "rows=100000", "--param", "cols=100000", "--cache",
      "4KiB"], 2, "loop j runs 10,000,000,000 times, more than the 30,000,000 accesses"),
    (["cache", TRANSPOSE, "--param", "rows=1", "--param", "cols=288230376151711743",
      "--cache", "4KiB"], 2, "loop j runs 288,230,376,151,711,744 times"),
    # 9. more of the same kind
    (["coalescing", ""], 2, "cannot parse access ''"),
    (["coalescing", "a[" + "tx+" * 3000 + "tx]"], 2, "too long or too deeply nested to read"),
    (["coalescing", "a[tx << 2]"], 2, "unsupported in a subscript: tx << 2"),
    (["coalescing", "a[tx]", "--elem", "3"], 2, "element size 3 bytes"),
    (["coalescing", "a[tx+N]", "--param", "N=1", "--param", "N=2"], 2,
     "parameter N given twice"),
    (["coalescing", "a[tx][ty]", "--shape", ""], 2, "bad shape ''"),
    ([*OCCUPANCY, "--threads", "256", "--carveout", "101"], 2, "a percentage, 0 to 100"),
    (["occupancy", "--gpu", "h100", "--threads", "256", "--regs", "99999999999999999999"], 2,
     "a thread has 0 to 255 registers"),
]


def case_id(argv: list[str]) -> str:
    return " ".join(argv).replace(TRANSPOSE, "T").replace(" ".join(SMALL), "8x8")[:70]


@pytest.mark.parametrize("argv, code, fragment", BAD_INPUTS,
                         ids=[case_id(argv) for argv, _, _ in BAD_INPUTS])
def test_bad_input(argv: list[str], code: int, fragment: str,
                   capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Exit code 2 and one line that names the problem (after argparse's usage, for an
    option's type); never an internal error, never a traceback."""
    monkeypatch.chdir(ROOT)
    got, out, err = model(capsys, *argv)
    assert got == code, (out, err)
    if code == 0:
        assert fragment in out and not err, (out, err)
        return
    usage = [line for line in err if line.startswith(("usage:", " "))]
    assert len(err) - len(usage) == 1, err
    assert fragment in err[-1] and "internal error" not in err[-1], err[-1]


@pytest.mark.parametrize("text, size", [("1TiB", 2**40), ("1T", 2**40), ("2tb", 2**41),
                                        ("1.5MiB", 3 * 2**19), ("48 KB", 49152), ("0", 0),
                                        ("512B", 512), ("0.5K", 512)])
def test_parse_size_takes_what_people_write(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["0.3K", "1.5.3K", "-1", "-1K", "1iB", "", "K", "1 KiBB",
                                  "1e3", "0x10"])
def test_parse_size_refuses_nonsense(text: str) -> None:
    with pytest.raises(ValueError):
        parse_size(text)


def test_reuse_honours_accesses_at_a_huge_n(capsys: pytest.CaptureFixture[str]) -> None:
    """--n 10^9 once hung in the search for a corner; every trace now stays in the budget."""
    document = model_json(capsys, "reuse", "mmm", "--n", "1000000000", "--accesses", "20000")
    assert document["simulated_n"] == document["tile_choice"]["simulated_n"] == 16
    assert all(0 < variant["accesses"] <= 20000 for variant in document["variants"])
    assert "within 20,000 accesses" in document["notes"][0]


def test_reuse_states_one_simulated_size(capsys: pytest.CaptureFixture[str]) -> None:
    """The table and the tile search ran at different sizes ("n=156" and "n=80"): one
    corner now serves both, and the text says the same n everywhere."""
    code, out, err = model(capsys, "reuse", "mmm", "--n", "1024", "--cache", "8KiB",
                           "--accesses", "50000")
    assert code == 0, err
    text = " ".join(out.split())
    sizes = set(re.findall(r"simulated at n=(\d+)", text) +
                re.findall(r"Simulated flops per element moved at n=(\d+)", text) +
                re.findall(r"the (\d+) x \1 x \1 corner", text))
    assert sizes == {"16"}, text


def test_reuse_with_a_given_tile_simulates_whole_tiles(capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    document = model_json(capsys, "reuse", "mmm", "--n", "100", "--tile", "16",
                          "--cache", "8KiB", "--accesses", "200000")
    assert document["simulated_n"] == 32 and document["tile"] == 16
    assert all(variant["accesses"] <= 200000 for variant in document["variants"])
    assert document["tile_choice"] is None


def test_reuse_search_is_bounded_for_a_large_cache(capsys: pytest.CaptureFixture[str]) -> None:
    """The whole-line multiples up to the rule's T were all candidates: a 64 MiB cache
    (T = 2364) made 148 of them, each simulated."""
    document = model_json(capsys, "reuse", "mmm", "--n", "100000", "--cache", "64MiB",
                          "--ways", "16", "--accesses", "20000")
    candidates = [c["tile"] for c in document["tile_choice"]["candidates"]]
    assert len(candidates) <= 16 and {2352, 2364, 2368} <= set(candidates)


def test_a_subscript_past_int64_is_refused_by_name(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """``A[i*M]`` with a large M: once wrapped around in int64, now one line naming it."""
    source = tmp_path / "scaled.py"
    source.write_text("def scaled(A, N, M):\n    for i in range(N):\n        A[i * M] = 0.0\n")
    code, _, err = model(capsys, "cache", f"{source}::scaled", "--param", "N=8", "--param",
                         f"M={2**56}", "--cache", "4KiB")
    assert code == 2 and len(err) == 1, err
    assert f"{source}:3: M*i can reach 6.49e+17: too large" in err[0], err


@given(st.integers(-2**70, 2**70), st.integers(-2**70, 2**70))
@PROPERTY
def test_any_coefficient_is_a_result_or_a_usage_error(scale: int, offset: int) -> None:
    """No number in an access escapes as an OverflowError or a wrapped-around index."""
    access = f"a[threadIdx.x*{scale} + {offset}]".replace("+ -", "- ")
    try:
        result = coalescing(access, (32, 1, 1))
    except UsageError:
        return
    assert abs(scale) * 31 + abs(offset) < 2**58
    assert result.warps[0].used_bytes == 4 * len({scale * t + offset for t in range(32)})


def test_an_array_indexed_below_zero_is_said_to_be_taken_as_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "shift.py"
    source.write_text("def shift(A, N):\n    for i in range(N):\n        A[i - 1] = 2.0\n")
    assert main(["model", "cache", f"{source}::shift", "--param", "N=100"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "A is indexed below 0 (down to [-1]): taken as written" in out
