"""What a user steers in a run: their own sizes (--dims), where the outputs go (checked before
anything runs, a user's file never replaced), the tuning cache, and what a log shows."""

import json
import os
from pathlib import Path

import pytest

from loclab.bench.auto import get_case
from loclab.bench.metrics import peak_clock
from loclab.bench.runner import plan
from loclab.cases import case_names
from loclab.cli import main
from loclab.errors import UsageError
from tests.test_cli import one_line_error

SMALL = ["run", "--size", "small", "--device", "cpu"]
RESULTS = Path(__file__).parent / "data" / "compare" / "transpose-cpu-small.json"


@pytest.mark.parametrize("name", case_names())
def test_every_case_names_its_dimensions_and_takes_its_own_sizes_back(name, machine):
    case = get_case(name)
    assert case.dimensions
    sizes = [dims for preset in ("small", "default") for dims in case.dims(preset, "cpu", machine)]
    for dims in (*sizes, *case.test_dims):
        assert case.checked_dims(dims) == dict(dims)
        assert list(case.checked_dims(dict(reversed(list(dims.items()))))) == list(
            case.dimensions)  # the case's order, whatever order the user wrote


@pytest.mark.parametrize("dims, fragment", [
    ({"m": 5, "n": 3}, "mmm: missing dimension k (give each of m, n, k)"),
    ({"m": 5, "n": 3, "k": 7, "q": 1}, "mmm: unknown dimension q (its dimensions: m, n, k)"),
    ({"m": 0, "n": 3, "k": 7}, "mmm: m=0: must be a whole number from 1 to 2,147,483,647"),
    ({"m": 2**31, "n": 3, "k": 7}, "must be a whole number from 1 to"),
    ({"m": 2.5, "n": 3, "k": 7}, "mmm: m=2.5: must be a whole number"),
    ({"m": True, "n": 3, "k": 7}, "m=True: must be a whole number"),
])
def test_a_bad_size_is_refused_in_one_line_naming_it(dims, fragment):
    with pytest.raises(UsageError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        get_case("mmm").checked_dims(dims)


def test_a_case_refuses_sizes_no_variant_can_run():
    with pytest.raises(UsageError, match="needs more slots than keys"):
        get_case("partitioning").checked_dims({"keys": 10, "slots": 10, "threads": 1})
    with pytest.raises(UsageError, match="queries = 2147483647: must be"):
        get_case("nearest-neighbour").checked_dims({"queries": 2**31 - 1, "points": 1})


def test_run_at_a_size_of_ones_own(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main([*SMALL, "--case", "transpose", "--dims", "rows=37,cols=129", "--dims",
                 "cols=3, rows=2", "--json", str(out)]) == 0
    document = json.loads(out.read_text())
    assert document["size"] == "custom"
    sizes = {(row["case"], json.dumps(row["size"])) for row in document["results"]}
    # copy, the roof, has the same dimensions: it runs at the user's sizes too
    assert sizes == {(case, json.dumps(size)) for case in ("copy", "transpose")
                     for size in ({"rows": 37, "cols": 129}, {"rows": 2, "cols": 3})}
    assert all(row["valid"] for row in document["results"])


def test_the_roof_keeps_its_preset_size_where_the_dimensions_differ(machine):
    request = plan(cases=["mmm"], device="cpu", size="small", dims={"m": 33, "n": 65, "k": 17})
    assert [(case.name, dims) for case, _, dims in request.work] == [
        ("copy", get_case("copy").dims("default", "cpu", machine)[0]),
        ("mmm", {"m": 33, "n": 65, "k": 17})]


@pytest.mark.parametrize("argv, fragment", [
    (["--case", "mmm", "--dims", "m=5,n=3"], "mmm: missing dimension k"),
    (["--case", "mmm", "--dims", "m=5,n=3,k=2,x=1"], "mmm: unknown dimension x"),
    (["--case", "mmm", "--case", "transpose", "--dims", "m=5,n=3,k=2"],
     "transpose: unknown dimension m, n, k"),
    (["--dims", "rows=5,cols=3"], "--dims needs --case"),
    (["--case", "partitioning", "--dims", "keys=9,slots=4,threads=1"],
     "needs more slots than keys"),
    (["--case", "mmm", "--dims", "m=2000000000,n=2000000000,k=2"], "GiB of memory"),
])
def test_bad_dims_stop_the_run_before_it_starts(argv, fragment, capsys):
    assert main([*SMALL, *argv]) == 2
    line = one_line_error(capsys)
    assert line.startswith("loclab run: error: ") and fragment in line


@pytest.mark.parametrize("text, fragment", [
    ("m5000", "expected NAME=VALUE"), ("m=5e3,n=1,k=1", "m=5e3: not a whole number"),
    ("m=1,m=2", "m given twice"),
])
def test_dims_that_do_not_parse_are_argument_errors(text, fragment, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([*SMALL, "--case", "mmm", "--dims", text])
    assert exit_info.value.code == 2 and fragment in one_line_error(capsys)


def test_tune_at_a_size_of_ones_own(tmp_path):
    out = tmp_path / "tune.json"
    assert main(["tune", "mmm", "--variant", "cpu-blocked", "--device", "cpu", "--size",
                 "small", "--dims", "m=33,n=65,k=17", "--strategy", "exhaustive", "--budget",
                 "2", "--tuning-cache", str(tmp_path / "cache.json"), "--json", str(out),
                 "--quiet"]) == 0
    record, = json.loads(out.read_text())["tunings"]
    assert record["size"] == {"m": 33, "n": 65, "k": 17} and record["stored"]


def test_a_tuning_cache_that_does_not_exist_is_an_error_for_a_run(tmp_path, capsys):
    assert main([*SMALL, "--case", "transpose", "--tuning-cache",
                 str(tmp_path / "typo.json")]) == 2
    assert one_line_error(capsys).endswith("typo.json: no such file")


def test_tune_keeps_a_corrupt_cache_and_says_so(tmp_path, capsys):
    cache = tmp_path / "tuning.json"
    cache.write_text("{my notes")
    assert main(["tune", "mmm", "--variant", "cpu-blocked", "--device", "cpu", "--size",
                 "small", "--tuning-cache", str(cache), "--quiet"]) == 2
    line = one_line_error(capsys)
    assert "corrupt tuning cache" in line and "keeps the file as it is" in line
    assert cache.read_text() == "{my notes"


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc")
@pytest.mark.parametrize("argv", [
    [*SMALL, "--case", "transpose", "--json", "/proc/loclab.json"],
    [*SMALL, "--case", "transpose", "--report", "/proc/loclab-report"],
])
def test_an_output_that_cannot_be_written_stops_the_run_before_it_starts(argv, capsys):
    """/proc refuses new files even to root, for whom os.access says yes."""
    assert main(argv) == 2
    assert "cannot" in one_line_error(capsys)


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc")
def test_report_refuses_a_path_it_cannot_write(capsys):
    assert main(["report", str(RESULTS), "-o", "/proc/loclab-report"]) == 2
    assert "cannot" in one_line_error(capsys)


def test_a_bad_request_leaves_no_output_directory_behind(tmp_path, capsys):
    json_path, report = tmp_path / "new" / "r.json", tmp_path / "report"
    assert main([*SMALL, "--case", "mmm", "--dims", "m=0,n=1,k=1", "--json", str(json_path),
                 "--report", str(report)]) == 2
    assert "m=0" in one_line_error(capsys)
    assert not json_path.parent.exists() and not report.exists()
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert main(["report", str(bad), "-o", str(report)]) == 2
    assert not report.exists()


def test_the_same_size_twice_is_refused(capsys):
    assert main([*SMALL, "--case", "transpose", "--dims", "rows=4,cols=8", "--dims",
                 "cols=8,rows=4"]) == 2
    assert "given twice" in one_line_error(capsys)


@pytest.mark.parametrize("files", [["README.md"], ["results.json", "transpose.png"]])
def test_a_directory_of_ones_own_files_is_not_a_report_directory(tmp_path, capsys, files):
    for name in files:
        (tmp_path / name).write_text("mine")
    assert main([*SMALL, "--case", "transpose", "--report", str(tmp_path)]) == 2
    assert f"holds {', '.join(files)}, not a loclab report" in one_line_error(capsys)
    assert all((tmp_path / name).read_text() == "mine" for name in files)


def test_a_report_replaces_an_earlier_report(tmp_path):
    report = tmp_path / "report"
    argv = [*SMALL, "--case", "copy", "--quiet", "--report", str(report)]
    assert main(argv) == 0
    assert main(argv) == 0
    assert (report / "README.md").exists()


def test_a_log_shows_the_expected_time_and_each_variant_as_it_finishes(capsys):
    assert main([*SMALL, "--case", "transpose"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("loclab run: 6 variants of 2 cases on the CPU; expect about ")
    assert err[1].startswith("loclab run: [1/6] copy cpu-copy (cpu, 1999x3001): ")
    assert err[1].endswith(" ms, valid")
    assert err[5].startswith("loclab run: [5/6] transpose numpy")
    assert err[6].startswith("loclab run: [6/6] transpose auto-cpu")


def test_the_expected_time_counts_budgets_and_the_golden_work():
    small = plan(cases=["mmm"], device="cpu", size="small", dims={"m": 8, "n": 8, "k": 8})
    large = plan(cases=["mmm"], device="cpu", size="small",
                 dims={"m": 4096, "n": 4096, "k": 4096})
    timing = small.variant_count * small.budget.seconds
    assert timing < small.expected_seconds() < large.expected_seconds()


def test_an_auto_row_is_expected_to_take_longer():
    """auto-cpu plans, compiles and times loclab optimize's candidates before its runs."""
    from dataclasses import replace

    from loclab.bench.runner import AUTO_CASE_S

    both = plan(cases=["transpose"], device="cpu", size="small")  # copy and transpose
    without = replace(both, work=[
        (replace(case, variants=tuple(v for v in case.variants if v.name != "auto-cpu")),
         device, dims) for case, device, dims in both.work])
    assert both.work_seconds() - without.work_seconds() > AUTO_CASE_S


def test_the_peak_clock_is_the_higher_of_measured_and_detected(machine):
    from dataclasses import replace

    nominal = replace(machine, cpu=replace(machine.cpu, clock_mhz=2600.0))
    assert peak_clock(nominal, 4300.0).mhz == 4300.0
    assert peak_clock(nominal, 4300.0).source == "measured all-core clock"
    assert peak_clock(nominal, 1200.0).mhz == 2600.0  # a busy machine measures low
    assert peak_clock(nominal, None).source == nominal.cpu.clock_source
    unknown = replace(machine, cpu=replace(machine.cpu, clock_mhz=None))
    assert peak_clock(unknown, 4300.0).mhz == 4300.0
    assert peak_clock(unknown, None).mhz is None


def test_a_run_rates_the_cpu_peak_at_the_clock_it_chose(machine):
    from loclab.bench.runner import execute

    document = execute(plan(cases=["copy"], device="cpu", size="small"))
    refs = document["references"]
    clock = refs["cpu_peak_clock_mhz"]
    assert refs["cpu_peak_clock_source"] in ("measured all-core clock",
                                             machine.cpu.clock_source)
    assert refs["cpu_peak_gflops_fp32"] == pytest.approx(machine.cpu.peak_gflops_at(clock))
