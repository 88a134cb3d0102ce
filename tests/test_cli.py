"""The command line: every option of ``run``, every error the issue names, exit codes."""

import json
import subprocess
import sys
from dataclasses import replace

import pytest

from loclab.bench import runner
from loclab.cli import main
from tests.fakes import LAUNCH, WRONG

SMALL_CPU = ["run", "--size", "small", "--device", "cpu", "--case", "transpose"]


def one_line_error(capsys):
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    return lines[0]


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    """One small CPU run with every output option, shared by the tests that read it."""
    out = tmp_path_factory.mktemp("run")
    code = main([*SMALL_CPU, "--threads", "1", "--json", str(out / "r.json"),
                 "--report", str(out / "report")])
    return code, out


def test_run_writes_json_and_report(small_run):
    code, out = small_run
    assert code == 0
    document = json.loads((out / "r.json").read_text())
    assert [r["variant"] for r in document["results"]] == [
        "cpu-copy", "numpy", "cpu-naive", "cpu-blocked", "numpy", "auto-cpu"]
    assert document["machine"]["cpu"]["numba_threads"] == 1
    assert all(r["valid"] for r in document["results"])
    for name in ("index.html", "README.md", "results.json", "copy.png", "transpose.png",
                 "roofline.png"):
        assert (out / "report" / name).stat().st_size > 0


def test_run_prints_a_table(capsys):
    assert main([*SMALL_CPU]) == 0
    out = capsys.readouterr().out
    assert "cpu-blocked" in out and "% copy" in out and "Roofs, measured in this run" in out


def test_quiet_prints_nothing(capsys):
    assert main([*SMALL_CPU, "--quiet"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""


@pytest.mark.parametrize("argv, fragment", [
    (["run", "--case", "nope"], "invalid choice: 'nope' (choose from 'copy', 'transpose', "),
    (["run", "--device", "tpu"], "invalid choice: 'tpu' (choose from 'cpu', 'gpu', 'all')"),
    (["run", "--size", "huge"], "invalid choice: 'huge' (choose from 'small', 'default', "
                                "'large')"),
    (["run", "--threads", "0"], "must be at least 1"),
    (["run", "--threads", "many"], "not a whole number"),
    (["run", "--bogus"], "unrecognized arguments: --bogus"),
])
def test_bad_input_is_one_line_and_exit_code_2(argv, fragment, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert fragment in one_line_error(capsys)


def test_too_many_threads(capsys):
    import numba

    assert main([*SMALL_CPU, "--threads", str(numba.config.NUMBA_NUM_THREADS + 1)]) == 2
    assert "must be between 1 and" in one_line_error(capsys)


def test_gpu_without_gpu_is_one_line_exit_2(monkeypatch, capsys):
    monkeypatch.setattr(runner, "gpu_unavailable_reason",
                        lambda: "CuPy is not installed (pip install 'loclab[gpu]')")
    assert main(["run", "--device", "gpu"]) == 2
    assert one_line_error(capsys) == ("loclab run: error: --device gpu: no GPU: CuPy is not "
                                      "installed (pip install 'loclab[gpu]')")


def test_output_under_a_file_fails_before_running(tmp_path, capsys):
    (tmp_path / "file").write_text("")
    assert main([*SMALL_CPU, "--json", str(tmp_path / "file" / "x.json")]) == 2
    assert "is not a directory" in one_line_error(capsys)


def test_a_failed_write_after_the_run_is_one_line_and_the_report_still_written(
        tmp_path, monkeypatch, capsys):
    from loclab.bench import results
    from loclab.errors import LoclabError

    write_json = results.write_json

    def refuse_the_run_json(document, path):
        if path.name != "r.json":
            return write_json(document, path)
        raise LoclabError(f"{path}: cannot write: disk full")

    monkeypatch.setattr(results, "write_json", refuse_the_run_json)
    code = main([*SMALL_CPU, "--quiet", "--json", str(tmp_path / "r.json"),
                 "--report", str(tmp_path / "rep")])
    assert code == 1
    assert one_line_error(capsys) == (f"loclab run: error: {tmp_path / 'r.json'}: "
                                      f"cannot write: disk full")
    assert (tmp_path / "rep" / "index.html").exists()


def test_unexpected_errors_are_one_line_unless_debugging(monkeypatch, capsys):
    from loclab.bench import devices

    def broken(**kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(devices, "devices", broken)
    assert main(["devices"]) == 1
    assert one_line_error(capsys).startswith("loclab devices: internal error: RuntimeError: boom")
    monkeypatch.setenv("LOCLAB_DEBUG", "1")
    with pytest.raises(RuntimeError):
        main(["devices"])


def test_unwritable_json_fails_before_running(tmp_path, capsys):
    (tmp_path / "dir").mkdir()
    assert main([*SMALL_CPU, "--json", str(tmp_path / "dir")]) == 2
    assert "is a directory" in one_line_error(capsys)
    (tmp_path / "file").write_text("")
    assert main([*SMALL_CPU, "--report", str(tmp_path / "file")]) == 2
    assert "not a directory" in one_line_error(capsys)


@pytest.fixture
def broken_transpose(monkeypatch):
    """The transpose case with a wrong variant and one whose launch fails."""
    import loclab.cases.transpose as transpose

    case = replace(transpose.CASE, variants=transpose.CASE.variants + (WRONG, LAUNCH))
    monkeypatch.setattr(transpose, "CASE", case)


def test_failed_validation_and_launch_make_the_exit_code_1(broken_transpose, capsys):
    assert main(SMALL_CPU) == 1
    out = capsys.readouterr().out
    assert "FAILED transpose off-by-one (cpu, 1999x3001): " in out
    assert "FAILED transpose no-launch (cpu, 1999x3001): kernel toy<32> failed to launch" in out
    assert "cpu-blocked" in out  # the other variants still ran


def test_quiet_still_reports_failures(broken_transpose, capsys):
    assert main([*SMALL_CPU, "--quiet"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("FAILED") == 2


def test_report_from_saved_json(small_run, tmp_path, capsys):
    _, out = small_run
    assert main(["report", str(out / "r.json"), "-o", str(tmp_path / "again")]) == 0
    assert (tmp_path / "again" / "index.html").exists()


def test_report_from_bad_json(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert main(["report", str(bad)]) == 2
    assert f"{bad}:1: not JSON" in one_line_error(capsys)
    bad.write_text("{}")
    assert main(["report", str(bad)]) == 2
    assert "not a loclab results file" in one_line_error(capsys)
    assert main(["report", str(tmp_path / "missing.json")]) == 2
    assert "cannot read" in one_line_error(capsys)
    bad.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    assert main(["report", str(bad)]) == 2
    assert "not a text file" in one_line_error(capsys)


def test_report_from_a_damaged_results_file(small_run, tmp_path, capsys):
    _, out = small_run
    good = json.loads((out / "r.json").read_text())
    damaged = tmp_path / "damaged.json"
    for change, fragment in (
            (lambda d: d.update(results=[1]), "result 1 is not an object"),
            (lambda d: d.update(references=None), "'references' missing or not a dict"),
            (lambda d: d["results"][0].pop("gbps"), "result 1 lacks gbps"),
            (lambda d: d["machine"]["cpu"].pop("model"), "incomplete results file"),
            (lambda d: d.pop("machine"), "'machine' missing")):
        document = json.loads(json.dumps(good))
        change(document)
        damaged.write_text(json.dumps(document))
        assert main(["report", str(damaged), "-o", str(tmp_path / "rep")]) == 2
        assert fragment in one_line_error(capsys)


def test_devices_json_without_measuring(capsys):
    assert main(["devices", "--json", "--no-measure"]) == 0
    info = json.loads(capsys.readouterr().out)
    cpu = info["machine"]["cpu"]
    assert cpu["l1d_bytes"] > 0 and cpu["numba_threads"] >= 1
    assert (info["machine"]["gpu"] is None) == (info["machine"]["gpu_unavailable"] is not None)


def test_devices_text_reports_missing_gpu_plainly(monkeypatch, capsys):
    from loclab.hw import gpu as gpu_module

    monkeypatch.setattr(gpu_module, "gpu_unavailable_reason", lambda: "CuPy is not installed")
    assert main(["devices", "--no-measure"]) == 0
    out = capsys.readouterr().out
    assert "GPU         none: CuPy is not installed" in out
    assert "caches" in out


def test_devices_measures_the_copy(monkeypatch, capsys):
    monkeypatch.setattr(runner, "gpu_unavailable_reason", lambda: "none here")
    monkeypatch.setattr(runner, "BUDGETS", {**runner.BUDGETS,
                                            "default": runner.BUDGETS["small"]})
    assert main(["devices"]) == 0
    assert "CPU copy    cpu-copy:" in capsys.readouterr().out


def test_console_script_help_is_quick_and_light():
    code = ("import sys, loclab.cli; loclab.cli.build_parser(); "
            "print(sorted(m for m in ('numba', 'numpy', 'cupy', 'matplotlib') "
            "if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "[]", done.stderr
    done = subprocess.run([sys.executable, "-m", "loclab", "--help"], capture_output=True,
                          text=True)
    assert done.returncode == 0 and "run" in done.stdout and "devices" in done.stdout
    assert "tune" in done.stdout
