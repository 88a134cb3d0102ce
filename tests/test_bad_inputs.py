"""A sweep of bad input across every command, as a new user types it (issue 31's second sweep).

Each row is a command line that must be refused, or warned about, in the project's way: the
documented exit code (2 for bad input), one line on stderr that names the problem, never a
traceback or an "internal error", never a hang, and no file of the user's created, changed or
removed. The rows run in a directory of the user's own files (a JSON of theirs, a script, a
results file loclab wrote, broken sources), so that a command that writes where it must not
is caught by comparing the directory before and after.
"""

from __future__ import annotations

import json
import shlex
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from loclab.cli import main

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
RESULTS = REPO / "tests" / "data" / "compare" / "transpose-cpu-small.json"
SECONDS = 30  # a row that takes longer hangs: each of them is refused in well under one

RECIPES = f"{EXAMPLES}/recipes.py::transpose"
LOOPS = f"{EXAMPLES}/loops.py::three_loops_1"

# (command line, exit code, a fragment of the one line on stderr)
ROWS = [
    # run: sizes, options, outputs
    ("run --case copy --dims rows=0,cols=5", 2, "rows=0: must be a whole number from 1"),
    ("run --case copy --dims rows=-5,cols=5", 2, "rows=-5"),
    ("run --case copy --dims rows=5", 2, "missing dimension cols"),
    ("run --case copy --dims rows=99999999999999999999,cols=2", 2, "rows=9999"),
    ("run --case mmm --dims m=1,n=1,k=1,z=3", 2, "unknown dimension z"),
    ("run --case mmm --dims m=x,n=1,k=1", 2, "m=x: not a whole number"),
    ("run --case mmm --dims m=4,,n=4", 2, "expected NAME=VALUE"),
    ("run --case mmm --dims m=4,m=5,n=1,k=1", 2, "m given twice"),
    ("run --case mmm --dims m=4,n=4,k=4 --dims m=4,n=4,k=4", 2, "given twice"),
    ("run --case scan --dims n=10,exclusive=2,integer=0", 2, "exclusive=2"),
    ("run --case compaction --dims n=10,percent=101", 2, "percent=101"),
    ("run --case spmv --dims rows=10,cols=10,nnz=1000,kind=9", 2, "kind=9"),
    ("run --case histogram --dims bins=0,n=10", 2, "bins=0"),
    ("run --case mmm --dims m=100000,n=100000,k=100000", 2, "mmm at 100000x100000x100000"),
    ("run --dims m=1", 2, "--dims needs --case"),
    ("run --threads 0", 2, "--threads: must be at least 1"),
    ("run --threads -1", 2, "--threads: must be at least 1"),
    ("run --threads 100000", 2, "--threads 100000: must be between 1 and"),
    ("run --size huge", 2, "invalid choice: 'huge'"),
    ("run --case nope", 2, "invalid choice: 'nope'"),
    ("run --case copy extra", 2, "loclab run: error: unrecognized arguments: extra"),
    ("run --case copy --json emptydir", 2, "--json emptydir: is a directory"),
    ("run --case copy --json user.json", 2, "holds a file loclab did not write"),
    ("run --case copy --json user.py", 2, "holds a file loclab did not write"),
    ("run --case copy --json comparison.json", 2, "holds a comparison, not a run's results"),
    ("run --case copy --json cache.json --tuning-cache cache.json", 2,
     "which this command reads"),
    ("run --case copy --report user.json", 2, "--report user.json: not a directory"),
    ("run --case copy --report mine", 2, "not a loclab report"),
    ("run --case copy --report rep --json rep/results.json", 2, "is inside --report rep"),
    ("run --case copy --tuning-cache emptydir", 2, "--tuning-cache emptydir"),
    # tune
    ("tune copy", 2, "copy has no tunable variant"),
    ("tune mmm --budget 0", 2, "--budget: must be at least 1"),
    ("tune mmm --seconds -1", 2, "--seconds: must be more than 0"),
    ("tune mmm --variant nope", 2, "unknown variant of mmm 'nope'"),
    ("tune mmm --dims m=0,n=1,k=1", 2, "m=0"),
    ("tune mmm --strategy nope", 2, "invalid choice: 'nope'"),
    ("tune mmm --dims m=100000,n=100000,k=100000", 2, "needs about"),
    ("tune mmm --size small --json user.py", 2, "holds a file loclab did not write"),
    ("tune mmm --size small --json run.json", 2, "holds a run's results"),
    ("tune mmm --size small --json t.json --tuning-cache t.json", 2,
     "which this command also writes"),
    ("tune mmm --size small --tuning-cache user.json", 2, "corrupt tuning cache"),
    ("tune transpose --size small --json emptydir", 2, "is a directory"),
    # compare and report: damaged files, outputs over inputs
    ("compare missing.json run.json", 2, "missing.json: cannot read"),
    ("compare emptydir emptydir", 2, "emptydir: cannot read"),
    ("compare user.py run.json", 2, "user.py:1: not JSON"),
    ("compare user.json run.json", 2, "not a loclab results file"),
    ("compare negative.json run.json", 2, "'median_s' is -1, not a positive number"),
    ("compare run.json fractional.json", 2, "'runs' is 2.5"),
    ("compare run.json negative-size.json", 2, "'size' is {'rows': -3}"),
    ("compare no-valid.json run.json", 2, "result 1 lacks valid"),
    ("compare nan.json run.json", 2, "'median_s' is nan"),
    ("compare inverted.json run.json", 2, "out of order"),
    ("compare run.json run.json --json user.json", 2, "holds a file loclab did not write"),
    ("compare run.json run.json --json run.json", 2, "which this command reads"),
    ("compare run.json run.json --json ./run.json", 2, "which this command reads"),
    ("compare run.json run.json --json link.json", 2, "which this command reads"),
    ("compare run.json run.json --json user.py", 2, "holds a file loclab did not write"),
    ("compare run.json run.json --report rep --json rep/c.json", 2, "is inside --report"),
    ("compare run.json run.json --report mine", 2, "not a loclab report"),
    ("report negative.json -o rep", 2, "'median_s' is -1"),
    ("report run.json -o user.json", 2, "not a directory"),
    ("report run.json -o mine", 2, "not a loclab report"),
    ("report user.py", 2, "not JSON"),
    ("devices --threads 0", 2, "--threads: must be at least 1"),
    ("devices --threads 99999", 2, "must be between 1 and"),
    # analyze: files, names, sizes
    ("analyze missing.py", 2, "missing.py: no such file"),
    ("analyze emptydir", 2, "emptydir: is a directory"),
    ("analyze /dev/null", 2, "not a regular file"),
    ("analyze binary.py", 2, "not UTF-8"),
    ("analyze broken.c", 2, "broken.c:1:"),
    ("analyze syntax.py", 2, "syntax.py:3:"),
    ("analyze twice.py::f", 2, "f is defined 2 times (twice.py:1, twice.py:5)"),
    ("analyze nests.py::rec", 2, "nests.py:16:"),
    ("analyze nests.py::whileloop", 2, "a while loop is not supported"),
    (f"analyze {EXAMPLES}/loops.py::nope", 2, "no function named 'nope'"),
    (f"analyze {EXAMPLES}/loops.py::", 2, "no function name after '::'"),
    ("analyze ::f", 2, "no file before '::'"),
    (f"analyze {LOOPS} --param N=0", 2, "N=0: a size must be at least 1"),
    (f"analyze {LOOPS} --param N=-1", 2, "N=-1: a size must be at least 1"),
    (f"analyze {LOOPS} --param N=3 --param N=4", 2, "N given twice (N=3, N=4)"),
    (f"analyze {LOOPS} --param =3", 2, "expected NAME=VALUE"),
    (f"analyze {LOOPS} --param N=3.5", 2, "N=3.5: not a whole number"),
    (f"analyze {LOOPS} --param NOPE=3", 2, "unknown size parameter NOPE"),
    (f"analyze {EXAMPLES}/loops.c -D 1X=3", 2, "not a macro name"),
    (f"analyze {EXAMPLES}/loops.c -I missing-dir", 2, "-I missing-dir: no such directory"),
    # transform: recipes
    (f"transform {RECIPES} --apply ''", 2, "the recipe has no steps"),
    (f"transform {RECIPES} --apply 'tile(i=32'", 2, "a ')' is missing"),
    (f"transform {RECIPES} --apply 'tile(i=32 j=32)'", 2, "bad tile size '32 j=32'"),
    (f"transform {RECIPES} --apply 'tile(i=0x20)'", 2, "bad tile size '0x20'"),
    (f"transform {RECIPES} --apply 'tile(i=32.5)'", 2, "bad tile size '32.5'"),
    (f"transform {RECIPES} --apply 'tile(i=-32, j=32)'", 2, "tile size -32"),
    (f"transform {RECIPES} --apply 'tile(i=32, i=32)'", 2, "i given twice"),
    (f"transform {RECIPES} --apply 'tile(q=32)'", 2, "no loop q (loops: i@24, j@25)"),
    (f"transform {RECIPES} --apply 'stripmine(i, 99999999999999)'", 2, "bad tile size"),
    (f"transform {RECIPES} --apply 'frobnicate(i)'", 2, "unknown step 'frobnicate'"),
    (f"transform {RECIPES} --apply 'unroll(i, 0)'", 2, "unroll factor 0"),
    (f"transform {RECIPES} --apply 'unroll(i, 1e9)'", 2, "bad unroll factor '1e9'"),
    (f"transform {RECIPES} --apply 'unroll(j, 1000)'", 2, "bad unroll factor 1000"),
    (f"transform {RECIPES} --apply 'unroll(j, 100000)'", 2, "bad unroll factor 100000"),
    (f"transform {RECIPES} --apply 'unroll(j, 4, jam=maybe)'", 2, "unknown option jam=maybe"),
    (f"transform {RECIPES} --apply 'unroll(j, 4, frob=True)'", 2, "unknown option frob"),
    (f"transform {RECIPES} --apply 'interchange(i)'", 2, "usage interchange(loop, loop)"),
    (f"transform {RECIPES} --apply 'fuse(i, j)'", 2, "j@25 must come right after i@24"),
    (f"transform {RECIPES} --apply 'fuse(i)'", 2, "usage fuse(loop, the loop right after"),
    (f"transform {RECIPES} --apply 'skew(i, j)'", 2, "j@25 is not around i@24"),
    (f"transform {RECIPES} --apply 'skew(j, i, 1.5)'", 2, "bad skew factor '1.5'"),
    (f"transform {RECIPES} --emit cuda --apply 'skew(j, i)'", 2,
     "the CUDA emitter takes no fused or skewed loops yet"),
    (f"transform {RECIPES} --apply 'interchange(i, i)'", 2, "names the loop i@24 twice"),
    (f"transform {RECIPES} --apply 'permute(i, j, k)'", 2, "no loop k"),
    (f"transform {RECIPES} --apply 'parallel()'", 2,
     "usage parallel(loop[, copies=True][, dynamic=True][, cyclic=N])"),
    (f"transform {RECIPES} --apply 'parallel(i,)'", 2, "an empty argument"),
    (f"transform {RECIPES} --apply 'parallel(i) parallel(j)'", 2, "separate steps with ';'"),
    (f"transform {RECIPES} --apply 'privatize(Q)'", 2, "no variable Q in transpose"),
    (f"transform {RECIPES} --apply 'stage(A)'", 2,
     "usage stage(array, loop[, transpose=True][, using=loop])"),
    (f"transform {RECIPES} --apply 'copy(A)'", 2, "usage copy(array, loop)"),
    (f"transform {RECIPES} --apply 'vectorize(i)'", 2, "only an innermost loop"),
    (f"transform {RECIPES} --apply 'distribute(q)'", 2, "no loop q"),
    (f"transform {RECIPES} --apply 'tile(i=32)' --emit fortran", 2, "invalid choice"),
    (f"transform {RECIPES} --apply 'tile(i=32)' --emit c", 2,
     "emitted as python or numba or cuda"),
    (f"transform {RECIPES} --apply 'grid(i)'", 2, "grid and block map loops onto a GPU"),
    (f"transform {RECIPES} --apply 'grid(i); block(j=0)' --emit cuda", 2, "thread count 0"),
    (f"transform {RECIPES} --apply 'grid(i); block(j=x)' --emit cuda", 2,
     "bad thread count 'x'"),
    (f"transform {RECIPES} --apply 'grid()' --emit cuda", 2, "usage grid(loop, ...)"),
    (f"transform {RECIPES} --apply 'grid(i); block(j)' --emit cuda", 2,
     "usage block(loop=threads, ...)"),
    (f"transform {RECIPES} --apply 'grid(i)' --emit cuda --dtype A", 2, "expected ARRAY=TYPE"),
    (f"transform {RECIPES} --apply 'grid(i)' --emit cuda --dtype A=half8", 2,
     "A=half8: not a NumPy type"),
    (f"transform {RECIPES} --apply 'grid(i)' --emit cuda --dtype A=float32 --dtype A=float64",
     2, "an array named twice"),
    ("transform nests.py::noloops --apply 'parallel(i)'", 2, "no loop i (loops: none)"),
    ("transform twice.py::f --apply 'parallel(i)'", 2, "f is defined 2 times"),
    # transform: outputs, sizes and inputs of --verify
    (f"transform {RECIPES} --apply 'parallel(i)' -o {EXAMPLES}/recipes.py", 2,
     "is the input file"),
    (f"transform {RECIPES} --apply 'parallel(i)' -o user.py", 2,
     "holds a file loclab did not write"),
    (f"transform {RECIPES} --apply 'parallel(i)' -o emptydir", 2, "is a directory"),
    (f"transform {RECIPES} --apply 'parallel(i)' -o edited.py", 2,
     "was edited since loclab wrote it; --force replaces it"),
    (f"transform {RECIPES} --apply 'parallel(i)' --verify --param N=3", 2,
     "transpose has no size N"),
    (f"transform {RECIPES} --apply 'parallel(i)' --verify --param rows=100000 "
     "--param cols=100000", 2, "statement instances"),
    (f"transform {RECIPES} --apply 'parallel(i)' --inputs inputs.py::make", 2,
     "add --verify"),
    (f"transform {RECIPES} --apply 'parallel(i)' --verify --inputs nocolon", 2,
     "expected MODULE.py::FUNCTION"),
    (f"transform {RECIPES} --apply 'parallel(i)' --verify --inputs missing.py::f", 2,
     "no such file"),
    (f"transform {RECIPES} --apply 'parallel(i)' --verify --inputs inputs.py::nope", 2,
     "defines no function nope"),
    ("transform nests.py::negative --apply 'parallel(i)' --verify", 2, "reads index -1"),
    ("transform huge.py::k --apply 'parallel(i)' --verify", 2, "GiB"),
    (f"transform {RECIPES} --apply 'parallel(i)' --param rows=3", 0,
     "--param gives the sizes of --verify"),
    (f"transform {RECIPES} --apply 'parallel(i)' --force", 0,
     "--force does nothing without -o"),
    # optimize
    (f"optimize {EXAMPLES}/recipes.py", 2, "name the function to optimize"),
    (f"optimize {EXAMPLES}/recipes.py::nope", 2, "no function named 'nope'"),
    (f"optimize {EXAMPLES}/recipes.py::", 2, "no function name after '::'"),
    (f"optimize {EXAMPLES}/loops.c::three_loops_2", 2, "reads Python loop nests"),
    (f"optimize {RECIPES} --target tpu", 2, "invalid choice: 'tpu'"),
    (f"optimize {RECIPES} --threads 0", 2, "--threads: must be at least 1"),
    (f"optimize {RECIPES} --param rows=0", 2, "rows=0: a size must be at least 1"),
    (f"optimize {RECIPES} --param rows=3 --param rows=3", 2, "rows given twice"),
    (f"optimize {RECIPES} --param N=3 --no-tune", 2, "transpose has no size N"),
    (f"optimize {RECIPES} --param rows=99999999999 --param cols=3 --no-tune", 2,
     "statement instances"),
    (f"optimize {RECIPES} --no-tune -o user.json", 2, "holds a file loclab did not write"),
    (f"optimize {RECIPES} --no-tune -o {EXAMPLES}/recipes.py", 2, "is the input file"),
    (f"optimize {RECIPES} --no-tune -o cache.json --tuning-cache cache.json", 2,
     "which this command reads"),
    (f"optimize {RECIPES} --tuning-cache user.py", 2, "corrupt tuning cache"),
    (f"optimize {RECIPES} --no-tune --inputs inputs.py::nope", 2, "defines no function"),
    ("optimize nests.py::noloops --no-tune", 2, "no loop to optimize"),
    ("optimize nests.py::rec --no-tune", 2, "nests.py:16:"),
    ("optimize nests.py::negative --no-tune", 2, "reads index -1"),
    ("optimize huge.py::k --no-tune", 2, "GiB"),
    ("optimize twice.py::f --no-tune", 2, "f is defined 2 times"),
    # model
    ("model occupancy --threads 1x1x65 --regs 32 --gpu h100", 2, "blockDim.z = 65"),
    ("model occupancy --threads 33x33 --regs 32 --gpu h100", 2, "1089 threads exceed 1024"),
    ("model occupancy --threads abc --regs 32 --gpu h100", 2, "bad block 'abc'"),
    ("model occupancy --threads 256 --regs 300 --gpu h100", 2, "0 to 255 registers"),
    ("model occupancy --threads 256 --regs 32 --gpu 6.1", 2,
     "known compute capabilities are 7.0"),
    ("model occupancy --threads 256 --regs 32 --gpu sm_100", 2, "compute capability 10.0"),
    ("model occupancy --threads 256 --regs 32 --gpu ''", 2, "unknown GPU ''"),
    ("model occupancy --threads 256 --regs 32 --gpu h100 --smem -5", 2, "--smem"),
    ("model occupancy --threads 256 --regs 32 --gpu h100 --smem 1TiB", 2,
     "more than a launch can ask for"),
    ("model coalescing 'a[threadIdx.x*99999999999999999999]'", 2, "too large"),
    ("model coalescing 'a[threadIdx.x // 2]'", 2, "// starts a comment in CUDA C"),
    ("model coalescing 'a[threadIdx.x] /* c */'", 2, "/* starts a comment"),
    ("model coalescing 'a[threadIdx.x / 0]'", 2, "divides by 0"),
    ("model coalescing 'a[blockIdx.q]'", 2, "unknown member blockIdx.q"),
    ("model coalescing 'a[threadIdx.x**2]'", 2, "unsupported in a subscript"),
    ("model coalescing 'a[threadIdx.x'", 2, "cannot parse access"),
    ("model coalescing ''", 2, "cannot parse access ''"),
    ("model coalescing 'a[threadIdx.x]' --elem 3", 2, "element size 3 bytes"),
    ("model coalescing 'a[threadIdx.x]' --block 1025", 2, "1025 threads exceed 1024"),
    ("model coalescing 'a[threadIdx.x]' --block 1x1x65", 2, "blockDim.z = 65"),
    ("model coalescing 'a[threadIdx.x]' --gpu nope", 2,
     "loclab model coalescing: error: unrecognized arguments: --gpu nope"),
    ("model banks 's[threadIdx.x]' --shape 100000000000", 2, "more than a block's shared"),
    ("model banks 's[threadIdx.x]' --shape 32 --elem 3", 2, "element size 3 bytes"),
    ("model banks 's[threadIdx.x][threadIdx.y]' --shape 32", 2, "2 subscripts"),
    ("model banks 's[threadIdx.x]' --shape 32x", 2, "bad shape '32x'"),
    ("model banks 's[threadIdx.x]' --shape 0", 2, "bad shape '0'"),
    (f"model cache {LOOPS} --param N=8 --cache 1TiB", 2, "at most 1 GiB"),
    (f"model cache {LOOPS} --param N=8 --cache 1.5.3K", 2, "bad cache size '1.5.3K'"),
    (f"model cache {LOOPS} --param N=8 --cache 1MiB:16,32KiB:8", 2, "is not larger than"),
    (f"model cache {LOOPS} --param N=8 --cache 32KiB:0", 2, "ways must be a positive"),
    (f"model cache {LOOPS} --param N=8 --elem 3", 2, "BYTES one of 1, 2, 4, 8, 16"),
    (f"model cache {LOOPS} --param N=1000000000000", 2, "more than the 30,000,000"),
    (f"model cache {LOOPS} --param N=-4", 2, "N=-4: a size must be at least 1"),
    (f"model cache {LOOPS} --param N=4 --param N=5", 2, "N given twice"),
    ("model cache nests.py::gather --param N=100", 2, "its subscript depends on data"),
    ("model cache huge.py::k --param N=4", 2, "too large"),
    ("model cache twice.py::f", 2, "f is defined 2 times"),
    ("model cache ::f", 2, "no file before '::'"),
    ("model reuse mmm --n 1", 2, "n of at least 4"),
    ("model reuse mmm --n 64 --tile 1000", 2, "--tile 1000 is larger than --n 64"),
    ("model reuse mmm --n 1000000000 --accesses 1000", 2, "--accesses 1,000 is too few"),
    ("model reuse mmm --n 64 --accesses 0", 2, "--accesses: must be at least 1"),
    ("model reuse mmm --n 1024 --cache 0", 2, "positive integer, not 0"),
    ("model reuse mmm --n 1024 --elem 3", 2, "element size 3 bytes"),
    ("model reuse foo", 2, "invalid choice: 'foo'"),
    ("--nope", 2, "unrecognized arguments: --nope"),
]

NESTS = """\
def gather(A, B, idx, N):
    for i in range(N):
        A[i] = B[idx[i]]


def noloops(A, N):
    A[0] = 1.0


def negative(A, N):
    for i in range(N):
        A[i - 1] = 2.0

def rec(A, N):
    for i in range(N):
        A[i] = rec(A, N)


def whileloop(A, N):
    i = 0
    while i < N:
        A[i] = 0
        i += 1
"""


@pytest.fixture(scope="module")
def users_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory as a user has it: files of their own and files loclab wrote."""
    home = tmp_path_factory.mktemp("user")
    (home / "user.json").write_text('{"mine": 1}\n')
    (home / "user.py").write_text("def helper():\n    return 1\n")
    (home / "inputs.py").write_text("def make(**sizes):\n    return {}\n")
    (home / "emptydir").mkdir()
    (home / "mine").mkdir()
    (home / "mine" / "notes.txt").write_text("my notes\n")
    (home / "cache.json").write_text('{"format": 1, "entries": {}}\n')
    (home / "comparison.json").write_text('{"loclab": "0.1", "rows": []}\n')
    (home / "nests.py").write_text(NESTS)
    (home / "twice.py").write_text("def f(A, N):\n    for i in range(N):\n        A[i] = 1.0\n"
                                   "\ndef f(A, N):\n    for i in range(N):\n        A[i] = 2.0\n")
    (home / "binary.py").write_bytes(b"\xff\xfe not text")
    (home / "broken.c").write_text("void f(float *a, int n) { for (int i = 0; i < n; i++) "
                                   "a[i] = 1 }\n")
    (home / "syntax.py").write_text("def f(A, N):\n    for i in range(N):\n        A[i] = A[i] +"
                                    "\n")
    (home / "huge.py").write_text("def k(A, N):\n    for i in range(N):\n"
                                  "        A[i + 100000000000000000000000000000] = 1.0\n")
    (home / "edited.py").write_text("# loclab transform: transpose with parallel(i) [body "
                                    "sha256 0123456789abcdef]\ndef transpose(): pass\n")
    results = json.loads(RESULTS.read_text())
    (home / "run.json").write_text(json.dumps(results))
    (home / "link.json").symlink_to(home / "run.json")
    for name, change in _damaged(results):
        (home / name).write_text(change)
    return home


def _damaged(results: dict) -> Iterator[tuple[str, str]]:
    """Results files edited by hand into nonsense, one way each."""
    def edited(key: str, value: object) -> str:
        document = json.loads(json.dumps(results))
        document["results"][0][key] = value
        return json.dumps(document)

    yield "negative.json", edited("median_s", -1)
    yield "fractional.json", edited("runs", 2.5)
    yield "negative-size.json", edited("size", {"rows": -3})
    yield "nan.json", edited("median_s", "NAN").replace('"NAN"', "NaN")
    row = results["results"][0]
    yield "inverted.json", edited("min_s", row["max_s"] * 2)
    document = json.loads(json.dumps(results))
    del document["results"][0]["valid"]
    yield "no-valid.json", json.dumps(document)


def _snapshot(home: Path) -> dict[str, bytes | None]:
    """Every entry under ``home``: a file's bytes, a directory or link as None."""
    return {str(path.relative_to(home)): (path.read_bytes() if path.is_file()
                                          and not path.is_symlink() else None)
            for path in sorted(home.rglob("*"))}


class _Hang(Exception):
    pass


def _raise_hang(signum: int, frame: object) -> None:
    raise _Hang


@pytest.mark.parametrize("line, code, fragment", ROWS, ids=[row[0][:60] for row in ROWS])
def test_bad_input_is_one_line_with_its_exit_code_and_loses_nothing(
        line: str, code: int, fragment: str, users_files: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(users_files)
    before = _snapshot(users_files)
    previous = signal.signal(signal.SIGALRM, _raise_hang)
    signal.alarm(SECONDS)
    try:
        got = main(shlex.split(line))
    except SystemExit as exit_:  # argparse's own errors exit
        got = exit_.code
    except _Hang:
        pytest.fail(f"still running after {SECONDS} s")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    err = capsys.readouterr().err
    lines = [text for text in err.splitlines() if text.strip()]
    assert got == code, err
    assert "Traceback" not in err and "internal error" not in err, err
    if code == 2:
        assert len(lines) == 1, err
    assert any(fragment in text for text in lines), err
    assert _snapshot(users_files) == before


def test_the_sweep_is_a_hundred_inputs_across_every_command() -> None:
    commands = {shlex.split(line)[0] for line, _, _ in ROWS}
    assert len(ROWS) >= 100
    assert {"run", "tune", "compare", "report", "devices", "analyze", "transform",
            "optimize", "model"} <= commands
