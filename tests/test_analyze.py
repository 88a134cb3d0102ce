"""``loclab analyze``: the explanation, the JSON contract, remedies, and the command line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import loclab
import loclab.errors
from loclab.cli import main

THREE_LOOPS = '''\
def second(A, B, N):
    for i in range(2, N + 1):
        for j in range(2, N + 1):
            A[j][i] = A[j - 1][i] + 1
            B[j][i] = B[j - 1][i - 1] + 1
'''


@pytest.fixture()
def kernel_file(tmp_path: Path) -> Path:
    path = tmp_path / "kernels.py"
    path.write_text(THREE_LOOPS + '''
def tmp_expansion(A, B, N):
    for i in range(2, N):
        tmp = 2 * B[i - 2]
        A[i] = tmp
        B[i] = tmp + B[i - 1]
''')
    return path


def test_explanation_uses_the_slides_notation() -> None:
    text = loclab.analyze(THREE_LOOPS).explain()
    assert "S1->S1 RAW on A: (j1,i1) = (j2-1,i2) => i1 = i2 & j1 < j2 => [=,<]" in text
    assert "S2->S2 RAW on B: (j1,i1) = (j2-1,i2-1) => i1 < i2 & j1 < j2 => [<,<]" in text
    assert "(j i)  legal" in text


def test_json_has_the_architecture_shape() -> None:
    document = loclab.analyze(THREE_LOOPS).to_json()
    assert document["function"] == "second"
    assert {"id", "var", "line", "depth", "parallel", "parallel_after", "carries"} \
        <= set(document["loops"][0])
    assert {"id", "line", "source", "loops"} <= set(document["statements"][0])
    assert {"id", "kind", "array", "source", "sink", "direction", "distance",
            "carried_by"} <= set(document["dependences"][0])
    assert document["statements"][0] == {"id": "S1", "file": "<source>", "line": 4,
                                         "source": "A[j][i] = A[j - 1][i] + 1",
                                         "loops": ["L1", "L2"]}
    first = document["dependences"][0]
    assert (first["direction"], first["distance"], first["carried_by"]) == \
        (["=", "<"], [0, 1], "L2")
    assert {"order": ["j", "i"], "legal": True}.items() <= document["interchanges"][1].items()
    json.dumps(document)  # serializable as is


def test_distribution_expands_tmp_and_keeps_the_cycle_together(kernel_file: Path) -> None:
    (analysis,) = loclab.analyze_file(kernel_file, "tmp_expansion")
    pieces = analysis.distribution
    assert [p["statements"] for p in pieces] == [["S1", "S3"], ["S2"]]
    assert [p["parallel_loops"] for p in pieces] == [[], ["i"]]
    assert all(p["expand"] == ["tmp"] for p in pieces)


@pytest.mark.parametrize("source, remedy", [
    ("def f(A, N):\n    for i in range(N - 1):\n        A[i] = A[i + 1]\n",
     "copy A before the loop"),
    ("def f(A, N):\n    s = 0.0\n    for i in range(N):\n        s += A[i]\n",
     "reduction + on s"),
    ("def f(A, N):\n    m = 0.0\n    for i in range(N):\n        m = max(m, A[i])\n",
     "reduction max on m"),
    ("def f(A, B, N):\n    for i in range(1, N):\n        A[i] = A[i - 1] + B[i]\n",
     "scan + on A"),
    ("def f(h, ind, v, N):\n    for i in range(N):\n        h[ind[i]] += v[i]\n",
     "atomic updates on h"),
    ("def f(A, B, N):\n    for i in range(N):\n        t = A[i]\n        B[i] = t * t\n",
     "privatize t"),
])
def test_remedies(source: str, remedy: str) -> None:
    loop = loclab.analyze(source).loops[0]
    assert not loop.parallel
    assert any(r.startswith(remedy) for r in loop.parallel_after), loop.parallel_after


def test_a_true_recurrence_has_no_remedy() -> None:
    loop = loclab.analyze("def f(A, N):\n    for i in range(1, N):\n"
                          "        A[i] = A[i - 1] * A[i - 1] + 1\n").loops[0]
    assert not loop.parallel and loop.parallel_after == [] and loop.to_json()["blocking"]


def test_counting_down_loops_order_iterations_by_execution() -> None:
    analysis = loclab.analyze("def f(A, N):\n    for i in range(N, 0, -1):\n"
                              "        A[i] = A[i + 1]\n")
    (dependence,) = analysis.dependences
    assert (dependence.kind, dependence.direction, dependence.distance) == ("RAW", ("<",),
                                                                            (1,))


def test_cli_text_and_json(kernel_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(kernel_file)]) == 0
    out = capsys.readouterr().out
    assert "second" in out and "tmp_expansion" in out
    assert main(["analyze", f"{kernel_file}::second", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["function"] == "second"
    assert main(["analyze", str(kernel_file), "--json", "--param", "N=4"]) == 0
    documents = json.loads(capsys.readouterr().out)
    assert [d["params"] for d in documents] == [{"N": 4}, {"N": 4}]


@pytest.mark.parametrize("args, message", [
    (["analyze", "missing.py"], "missing.py: no such file"),
    (["analyze", "{file}::nope"], "no function named 'nope'"),
    (["analyze", "{file}", "--param", "Q=3"], "unknown size parameter Q"),
    (["analyze", "{file}", "--param", "N"], "expected NAME=VALUE"),
])
def test_cli_errors_are_one_line(args: list[str], message: str, kernel_file: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    try:
        code = main([a.format(file=kernel_file) for a in args])
    except SystemExit as exit_:  # argparse's own errors
        code = exit_.code
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1


def test_analyze_help_does_not_import_the_analysis() -> None:
    code = ("import sys\nfrom loclab.cli import main\ntry:\n    main(['analyze', '--help'])\n"
            "except SystemExit:\n    pass\n"
            "assert 'islpy' not in sys.modules and 'pycparser' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)


def test_a_size_fixed_for_a_file_applies_where_it_is_used(tmp_path: Path) -> None:
    path = tmp_path / "two.py"
    path.write_text("def f(A, N):\n    for i in range(N):\n        A[i] = 0\n\n"
                    "def g(A, M):\n    for i in range(M):\n        A[i] = 0\n")
    first, second = loclab.analyze_file(path, params={"N": 3})
    assert first.params == {"N": 3} and second.params == {}
    with pytest.raises(loclab.errors.UsageError, match="unknown size parameter Q"):
        loclab.analyze_file(path, params={"Q": 3})


def test_analyze_help_does_not_import_the_preprocessor() -> None:
    code = ("import sys\nfrom loclab.cli import main\ntry:\n    main(['analyze', '--help'])\n"
            "except SystemExit:\n    pass\n"
            "assert not {'pcpp', 'pycparserext'} & set(sys.modules)\n")
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)


def test_a_directory_is_not_a_missing_file(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", f"{tmp_path}::f"]) == 2
    err = capsys.readouterr().err
    assert "is a directory" in err and "no such file" not in err and err.count("\n") == 1
