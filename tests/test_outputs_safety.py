"""No user's file lost: every option that writes (``--json``, ``--report``, ``-o``, the tuning
cache) takes a new file or one loclab wrote and nobody edited since, never a file the same
command reads or another of its outputs writes, however it is spelled; refusals are one line,
exit 2, before any work, and leave every file as it was.

``loclab compare`` stands in for the commands whose work is long: its files are the real
``loclab run`` document of tests/data/compare, and it writes the same ``--json`` and
``--report`` through the same checks. ``run`` and ``tune`` are refused before they time
anything, so their tests take a second.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from loclab.cli import main
from loclab.measure import cache
from loclab.outputs import JSON_DIGEST, json_problem, replace_file
from loclab.transform.output import stamped

RUN = Path(__file__).parent / "data" / "compare" / "transpose-cpu-small.json"
KERNEL = "def kernel(A, B, N):\n    for i in range(N):\n        B[i] = A[i] + 1.0\n"
CACHE = '{"format": 1, "entries": {}}\n'
SMALL_RUN = ["run", "--case", "transpose", "--device", "cpu", "--size", "small", "--quiet"]
SMALL_TUNE = ["tune", "mmm", "--device", "cpu", "--size", "small", "--quiet"]


def one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    return lines[0]


def refused(argv: list[str], capsys: pytest.CaptureFixture[str], fragment: str) -> None:
    assert main(argv) == 2
    line = one_line_error(capsys)
    assert fragment in line, line


@pytest.fixture
def quick_charts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reports with a stand-in PNG per case and the roofline, named as the real charts are:
    what a report writes and removes, without drawing."""
    from loclab.report import charts

    def write_charts(document: dict, directory: Path) -> list[tuple[str, str]]:
        names = [f"{case}.png" for case in dict.fromkeys(r["case"] for r in
                                                          document["results"])]
        for name in [*names, "roofline.png"]:
            (directory / name).write_bytes(b"\x89PNG")
        return [(name, name) for name in [*names, "roofline.png"]]

    monkeypatch.setattr(charts, "write_charts", write_charts)


def marked_report(directory: Path) -> Path:
    """A directory an earlier report wrote (its page carries loclab's mark)."""
    from loclab.outputs import REPORT_MARK

    directory.mkdir()
    (directory / "index.html").write_text(f"<html><head>{REPORT_MARK}</head></html>")
    (directory / "results.json").write_text(RUN.read_text())
    return directory


@pytest.fixture
def base(tmp_path: Path) -> Path:
    """A copy of a real results file, as the user keeps one."""
    path = tmp_path / "a.json"
    path.write_text(RUN.read_text())
    return path


# -- --json: never a user's file, never an input --------------------------------------------


FOREIGN = "holds a file loclab did not write; name a new file"


@pytest.mark.parametrize("content, problem", [
    ('{"mine": 1}\n', FOREIGN), ("print('my code')\n", FOREIGN), ("[1, 2, 3]\n", FOREIGN),
    ('{"loclab": "mine"}', "holds JSON of another kind, not a comparison"),
    (CACHE, "is a tuning cache; name a new file")])
def test_compare_json_never_replaces_a_file_loclab_did_not_write(tmp_path, base, capsys,
                                                                content, problem):
    mine = tmp_path / "mine.json"
    mine.write_text(content)
    refused(["compare", str(base), str(RUN), "--json", str(mine)], capsys,
            f"--json {mine}: {problem}")
    assert mine.read_text() == content


def test_compare_json_is_never_one_of_its_inputs_however_spelled(tmp_path, base, capsys,
                                                                 monkeypatch):
    before = base.read_text()
    monkeypatch.chdir(tmp_path)
    os.link(base, tmp_path / "hard.json")
    (tmp_path / "soft.json").symlink_to(base)
    for argv in (["compare", "a.json", "a.json", "--json", "a.json"],
                 ["compare", "a.json", str(RUN), "--json", "./a.json"],
                 ["compare", str(RUN), "a.json", "--json", str(base)],
                 ["compare", "a.json", str(RUN), "--json", "hard.json"],
                 ["compare", "a.json", str(RUN), "--json", "soft.json"]):
        refused(argv, capsys, "which this command reads; name another file")
    assert base.read_text() == before


def test_compare_json_apart_from_its_report(tmp_path, base, capsys):
    report = tmp_path / "report"
    refused(["compare", str(base), str(RUN), "--json", str(report / "c.json"), "--report",
             str(report)], capsys, f"is inside --report {report}; name a file outside it")
    assert not report.exists()
    refused(["compare", str(base), str(RUN), "--report", str(tmp_path)], capsys,
            f"--report {tmp_path}: holds BASE {base}, which this command reads")


def test_a_report_never_holds_an_input_it_would_replace(tmp_path, capsys, quick_charts):
    report = marked_report(tmp_path / "report")
    results = (report / "results.json").read_text()
    refused(["compare", str(report / "results.json"), str(RUN), "--report", str(report)],
            capsys, "holds BASE")
    assert (report / "results.json").read_text() == results
    # A report made again from its own results.json writes it back as it was read.
    assert main(["report", str(report / "results.json"), "-o", str(report)]) == 0
    assert json.loads((report / "results.json").read_text())["results"] == json.loads(
        results)["results"]


def test_json_written_again_only_while_nobody_edited_it(tmp_path, base, capsys):
    out = tmp_path / "c.json"
    argv = ["compare", str(base), str(RUN), "--json", str(out)]
    assert main(argv) == 0
    written = json.loads(out.read_text())
    assert list(written)[0] == "loclab" and list(written)[-1] == JSON_DIGEST
    out.write_text(json.dumps(written, indent=4, sort_keys=True))  # reindented: not an edit
    assert main(argv) == 0
    edited = json.loads(out.read_text())
    edited["summary"]["same"] = 99
    out.write_text(json.dumps(edited))
    capsys.readouterr()
    refused(argv, capsys, f"--json {out}: was edited since loclab wrote it")
    assert json.loads(out.read_text())["summary"]["same"] == 99
    older = json.loads(out.read_text())  # a document from before the digest
    del older[JSON_DIGEST]
    out.write_text(json.dumps(older))
    assert main(argv) == 0


def test_run_json_is_never_the_tuning_cache_it_reads(tmp_path, capsys):
    """The issue's `--json same.json --tuning-cache same.json`: exit 0 and the cache lost."""
    same = tmp_path / "same.json"
    same.write_text(CACHE)
    refused([*SMALL_RUN, "--json", str(same), "--tuning-cache", str(same)], capsys,
            f"--json {same}: is --tuning-cache {same}, which this command reads")
    assert same.read_text() == CACHE


def test_run_json_never_replaces_a_users_file(tmp_path, capsys):
    mine = tmp_path / "mine.json"
    mine.write_text('{"mine": 1}')
    refused([*SMALL_RUN, "--json", str(mine)], capsys, "holds a file loclab did not write")
    assert mine.read_text() == '{"mine": 1}'


def test_tune_json_never_replaces_a_source_nor_the_cache(tmp_path, capsys):
    source = tmp_path / "r.py"
    source.write_text(KERNEL)
    refused([*SMALL_TUNE, "--json", str(source)], capsys, "holds a file loclab did not write")
    assert source.read_text() == KERNEL
    same = tmp_path / "same.json"
    refused([*SMALL_TUNE, "--json", str(same), "--tuning-cache", str(same)], capsys,
            f"--json {same}: is --tuning-cache {same}, which this command also writes")
    assert not same.exists()
    other = tmp_path / "other-cache.json"
    other.write_text(CACHE)
    refused([*SMALL_TUNE, "--json", str(other)], capsys, "is a tuning cache")
    assert other.read_text() == CACHE


def test_json_to_a_directory_or_a_dangling_link_is_one_line(tmp_path, base, capsys):
    refused(["compare", str(base), str(RUN), "--json", str(tmp_path)], capsys,
            "is a directory")
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to(tmp_path / "nowhere" / "x.json")
    refused(["compare", str(base), str(RUN), "--json", str(dangling)], capsys,
            "is a link to a missing file")
    assert not (tmp_path / "nowhere").exists()


def test_every_json_loclab_writes_to_a_file_is_recognized_as_its_own(tmp_path, base,
                                                                     quick_charts):
    assert main(["compare", str(base), str(RUN), "--json", str(tmp_path / "c.json")]) == 0
    assert main(["report", str(RUN), "-o", str(tmp_path / "rep")]) == 0
    assert json_problem(tmp_path / "c.json", "a comparison") is None
    assert json_problem(tmp_path / "rep" / "results.json", "a run's results") is None
    cache.store(tmp_path / "tuning.json", "CPU", "mmm", "cpu-blocked",
                cache.make_entry({"m": 1, "n": 1, "k": 1}, {"T": 8}, 1.0, "local", 1))
    document = json.loads((tmp_path / "tuning.json").read_text())
    assert document["loclab"] and document["format"] == 1
    assert json_problem(tmp_path / "tuning.json", "a tune's configurations") == (
        "is a tuning cache; name a new file")


def test_json_never_replaces_another_kind_of_loclab_document(tmp_path, base, capsys):
    """A run's results (minutes of measurements) are not lost to a comparison written over
    them by a slip of the name."""
    before = base.read_text()
    refused(["compare", str(RUN), str(RUN), "--json", str(base)], capsys,
            f"--json {base}: holds a run's results, not a comparison; name a new file")
    assert base.read_text() == before


# -- -o: a generated file the user edited is not replaced without --force -------------------


@pytest.fixture
def kernel(tmp_path: Path) -> Path:
    path = tmp_path / "kernel.py"
    path.write_text(KERNEL)
    return path


def transform(kernel: Path, out: Path, *extra: str) -> list[str]:
    return ["transform", f"{kernel}::kernel", "--apply", "parallel(i)", "-o", str(out), *extra]


def test_an_edited_generated_file_is_replaced_only_with_force(kernel, tmp_path, capsys):
    out = tmp_path / "out.py"
    assert main(transform(kernel, out)) == 0
    assert main(transform(kernel, out)) == 0  # as loclab wrote it: written again
    edited = out.read_text() + "# my note\n"
    out.write_text(edited)
    capsys.readouterr()
    refused(transform(kernel, out), capsys,
            f"-o {out}: was edited since loclab wrote it; --force replaces it")
    assert out.read_text() == edited
    assert main(transform(kernel, out, "--force")) == 0
    assert "# my note" not in out.read_text()


def test_optimize_s_gpu_module_is_written_again_as_loclab_s_own(kernel, tmp_path, capsys):
    """The GPU target writes a module of its own (``optimize.cuda.module``): its first line
    is loclab's header too, so that a second ``-o`` replaces it and an edit is kept."""
    out = tmp_path / "gpu.py"
    command = ["optimize", f"{kernel}::kernel", "--target", "gpu", "--no-tune", "-o", str(out)]
    assert main(command) == 0
    assert out.read_text().startswith("# loclab optimize: kernel.py::kernel with ")
    assert main(command) == 0
    out.write_text(out.read_text() + "# my note\n")
    capsys.readouterr()
    refused(command, capsys, "was edited since loclab wrote it")


def test_a_file_an_older_loclab_wrote_needs_force(kernel, tmp_path, capsys):
    out = tmp_path / "out.py"
    older = "# loclab transform: kernel.py::kernel with parallel(i)\nprint('edited?')\n"
    out.write_text(older)
    refused(transform(kernel, out), capsys, "was written by an older loclab")
    assert out.read_text() == older
    assert main(transform(kernel, out, "--force")) == 0


@pytest.mark.parametrize("spelling", ["same", "dot", "hard", "soft"])
def test_force_never_replaces_the_input(kernel, tmp_path, capsys, monkeypatch, spelling):
    monkeypatch.chdir(tmp_path)
    out = {"same": kernel, "dot": Path("./kernel.py"), "hard": tmp_path / "hard.py",
           "soft": tmp_path / "soft.py"}[spelling]
    if spelling == "hard":
        os.link(kernel, out)
    if spelling == "soft":
        out.symlink_to(kernel)
    refused(transform(Path("kernel.py"), out, "--force"), capsys, "is the input file")
    assert kernel.read_text() == KERNEL


def test_force_never_replaces_a_file_loclab_did_not_write(kernel, tmp_path, capsys):
    mine = tmp_path / "mine.py"
    mine.write_text("print('mine')\n")
    refused(transform(kernel, mine, "--force"), capsys, "holds a file loclab did not write")
    assert mine.read_text() == "print('mine')\n"


def test_optimize_output_is_never_its_tuning_cache(kernel, tmp_path, capsys):
    both = tmp_path / "both.json"
    refused(["optimize", f"{kernel}::kernel", "--no-tune", "-o", str(both), "--tuning-cache",
             str(both)], capsys, f"-o {both}: is --tuning-cache {both}")
    assert not both.exists()


def test_optimize_output_is_never_its_inputs_module(kernel, tmp_path, capsys):
    module = tmp_path / "make.py"
    text = "def make(**sizes):\n    return {}\n"
    module.write_text(text)
    refused(["optimize", f"{kernel}::kernel", "--no-tune", "--inputs", f"{module}::make", "-o",
             str(module), "--force"], capsys, f"-o {module}: is --inputs {module}")
    assert module.read_text() == text


@pytest.mark.parametrize("header", ["# loclab transform: k.py::k with x",
                                    "/* loclab transform: k.c::k with x */"])
def test_the_header_records_the_body_in_either_language(tmp_path, header):
    from loclab.transform.output import check_output

    out = tmp_path / "out"
    out.write_bytes(stamped(f"{header}\nbody\n"))
    first = out.read_text().splitlines()[0]
    assert first.startswith(header.removesuffix(" */")) and " [body sha256 " in first
    assert first.endswith(" */") == header.endswith(" */")
    check_output(out, tmp_path / "source")  # as written: may be replaced
    out.write_bytes(out.read_bytes() + b"more\n")
    with pytest.raises(Exception, match="was edited since loclab wrote it"):
        check_output(out, tmp_path / "source")


# -- report directories: stale charts, links --------------------------------------------------


def test_a_report_over_an_older_one_removes_its_stale_charts_only(tmp_path, quick_charts):
    report = tmp_path / "report"
    assert main(["report", str(RUN), "-o", str(report)]) == 0
    assert (report / "transpose.png").exists()
    (report / "notes.png").write_bytes(b"mine")
    (report / "notes.txt").write_text("mine")
    copy_only = json.loads(RUN.read_text())
    copy_only["results"] = [r for r in copy_only["results"] if r["case"] == "copy"]
    smaller = tmp_path / "copy.json"
    smaller.write_text(json.dumps(copy_only))
    assert main(["report", str(smaller), "-o", str(report)]) == 0
    assert {p.name for p in report.iterdir()} == {
        "index.html", "README.md", "results.json", "copy.png", "roofline.png", "notes.png",
        "notes.txt"}
    # A comparison over it (nothing in common: no chart): the run report's data and charts
    # go, the user's files stay.
    for row in copy_only["results"]:
        row["device"] = "gpu"
    elsewhere = tmp_path / "gpu.json"
    elsewhere.write_text(json.dumps(copy_only))
    assert main(["compare", str(smaller), str(elsewhere), "--report", str(report)]) == 0
    assert {p.name for p in report.iterdir()} == {
        "index.html", "README.md", "comparison.json", "notes.png", "notes.txt"}


def test_a_report_never_writes_through_a_link_in_its_directory(tmp_path, capsys):
    report = marked_report(tmp_path / "report")
    mine = tmp_path / "mine.json"
    mine.write_text('{"mine": 1}')
    (report / "results.json").unlink()
    (report / "results.json").symlink_to(mine)
    refused(["report", str(RUN), "-o", str(report)], capsys, "results.json is a link")
    assert mine.read_text() == '{"mine": 1}'


# -- writing: whole or not at all ------------------------------------------------------------


def test_replace_file_keeps_mode_and_links_and_the_old_file_on_failure(tmp_path, monkeypatch):
    target = tmp_path / "target.json"
    target.write_text("old")
    target.chmod(0o640)
    link = tmp_path / "link.json"
    link.symlink_to(target)
    replace_file(link, b"new")
    assert link.is_symlink() and target.read_text() == "new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640

    def disk_full(source: str, destination: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", disk_full)
    with pytest.raises(OSError):
        replace_file(target, b"newer")
    assert target.read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.json", "target.json"]


def test_a_link_to_an_open_file_is_written_through_not_replaced(tmp_path, base):
    """/dev/stdout with the shell's output sent to a file: the JSON lands in that file, and
    what the process writes after it too (a rename would leave it writing to a lost file)."""
    captured = tmp_path / "captured.txt"
    link = tmp_path / "stdout"
    with open(captured, "a") as held:
        link.symlink_to(f"/proc/self/fd/{held.fileno()}")
        assert main(["compare", str(base), str(RUN), "--json", str(link)]) == 0
        held.write("written after\n")
    assert link.is_symlink()
    text = captured.read_text()
    assert text.startswith('{\n  "loclab"') and text.endswith("}\nwritten after\n")


def test_a_pipe_is_written_not_replaced(tmp_path, base):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # held open: no write can block
    try:
        assert main(["compare", str(base), str(RUN), "--json", str(fifo)]) == 0
        assert json.loads(os.read(reader, 1 << 20))["loclab"]
    finally:
        os.close(reader)
    assert stat.S_ISFIFO(fifo.stat().st_mode)
