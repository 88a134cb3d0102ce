"""``loclab compare``: rows matched, the speedup and its verdict, validation changes, rows in one
run only, the machines side by side, the console at 80 columns, the report, bad input.

Every document is a real ``loclab run --case transpose --device cpu --size small --json`` file
(tests/data/compare) or made from it; no test asserts a measured time.
"""

from __future__ import annotations

import copy
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rich.console import Console

from loclab.bench.compare import MIN_TIMINGS, QUARTILE_TIMINGS, compare, side, verdict
from loclab.bench.results import load_json
from loclab.cli import main
from loclab.errors import LoclabError
from loclab.measure.stats import summarize
from loclab.outputs import REPORT_MARK
from loclab.report.compare import print_comparison, write_comparison_report

RUN = Path(__file__).parent / "data" / "compare" / "transpose-cpu-small.json"
TIMES = ("median_s", "min_s", "max_s", "q1_s", "q3_s", "iqr_s")


@pytest.fixture
def base() -> dict[str, Any]:
    return load_json(RUN)


@pytest.fixture
def new(base: dict[str, Any]) -> dict[str, Any]:
    return copy.deepcopy(base)


def row(document: dict[str, Any], case: str, variant: str) -> dict[str, Any]:
    return next(r for r in document["results"] if r["case"] == case and r["variant"] == variant)


def scale(document: dict[str, Any], case: str, variant: str, factor: float) -> None:
    """The row's timings ``factor`` times as long (its spread relative to its median kept)."""
    found = row(document, case, variant)
    for key in TIMES:
        found[key] *= factor


def matched(comparison: dict[str, Any], case: str, variant: str) -> dict[str, Any]:
    return next(r for r in comparison["rows"]
                if r["case"] == case and r["variant"] == variant)


def printed(comparison: dict[str, Any], width: int = 80) -> str:
    console = Console(file=io.StringIO(), width=width, highlight=False)
    print_comparison(comparison, console)
    return console.file.getvalue()


def timed(samples: list[float], **extra: Any) -> dict[str, Any]:
    """A row's timing keys as the runner records ``samples`` (``stats.summarize``)."""
    summary = summarize(samples)
    return {"median_s": summary.median, "min_s": summary.min, "max_s": summary.max,
            "q1_s": summary.q1, "q3_s": summary.q3, "iqr_s": summary.iqr,
            "runs": summary.runs, "valid": True, **extra}


# -- matching and verdicts ------------------------------------------------------------------


def test_a_run_against_itself_is_unchanged_everywhere(base):
    comparison = compare(base, base)
    assert len(comparison["rows"]) == len(base["results"])
    assert {r["change"] for r in comparison["rows"]} == {"same"}
    assert all(r["speedup"] == 1.0 and r["validation"] is None for r in comparison["rows"])
    summary = comparison["summary"]
    assert (summary["matched"], summary["same"], summary["faster"], summary["slower"]) == (
        5, 5, 0, 0)
    assert not comparison["only_in_base"] and not comparison["only_in_new"]
    assert not comparison["machines"]["differ"]
    json.dumps(comparison)  # what --json writes


def test_speedup_is_base_over_new_and_clear_changes_are_marked(base, new):
    scale(new, "transpose", "cpu-naive", 2.0)
    scale(new, "transpose", "numpy", 0.25)
    comparison = compare(base, new)
    slower, faster = (matched(comparison, "transpose", v) for v in ("cpu-naive", "numpy"))
    assert slower["speedup"] == pytest.approx(0.5) and slower["change"] == "slower"
    assert faster["speedup"] == pytest.approx(4.0) and faster["change"] == "faster"
    assert faster["compared"] == "interquartile"  # both rows timed many times
    low, high = faster["speedup_range"]
    assert 1 < low < 4.0 < high
    summary = comparison["summary"]
    assert (summary["faster"], summary["slower"], summary["same"]) == (1, 1, 3)


def test_rows_match_by_case_variant_device_and_size(base, new):
    """The same variant name in two cases, and a size written in another key order."""
    for found in new["results"]:
        found["size"] = dict(reversed(list(found["size"].items())))
    scale(new, "copy", "numpy", 3.0)
    comparison = compare(base, new)
    assert len(comparison["rows"]) == 5
    assert matched(comparison, "copy", "numpy")["change"] == "slower"
    assert matched(comparison, "transpose", "numpy")["change"] == "same"


def test_overlapping_spreads_are_the_same_whatever_the_medians():
    base = side(timed([1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8, 1.9]))
    new = side(timed([1.3, 1.4, 1.5, 1.6, 1.7, 1.8, 1.9, 2.0, 2.1, 2.2]))
    result = verdict(base, new)
    assert result["change"] == "same" and result["speedup"] < 1
    assert result["speedup_range"][0] < 1 < result["speedup_range"][1]


def test_a_change_under_two_percent_is_the_same_even_when_spreads_separate():
    tight = [1.0 + 1e-5 * i for i in range(20)]
    result = verdict(side(timed(tight)), side(timed([t * 1.01 for t in tight])))
    assert result["change"] == "same" and "2%" in result["reason"]
    result = verdict(side(timed(tight)), side(timed([t * 1.03 for t in tight])))
    assert result["change"] == "slower"


def test_few_timings_compare_whole_ranges_and_too_few_have_no_verdict():
    fast, slow = [1.0, 1.1, 1.2, 1.3, 1.9], [1.5, 1.6, 1.7, 1.8, 2.0]
    # Interquartile ranges [1.1, 1.3] and [1.6, 1.8] separate, the ranges do not: 5 timings
    # are too few for quartiles to say so.
    result = verdict(side(timed(fast)), side(timed(slow)))
    assert result["compared"] == "range" and result["change"] == "same"
    result = verdict(side(timed(fast[:4])), side(timed(slow[:4])))
    assert result["change"] == "slower"
    result = verdict(side(timed(fast[:MIN_TIMINGS - 1])), side(timed(slow)))
    assert result["change"] == "undecided" and result["speedup"] is not None
    assert str(MIN_TIMINGS - 1) in result["reason"]


@pytest.mark.parametrize("timings", [5, QUARTILE_TIMINGS, 30])
def test_identical_noise_is_rarely_marked(timings):
    """The rule's false alarms: two runs of the same thing, lognormal noise of 5%, timings
    summarized as the runner does. Fewer than 5% are marked at any number of timings."""
    rng = np.random.default_rng(timings)
    trials = 400
    marked = sum(
        verdict(side(timed(list(rng.lognormal(0, 0.05, timings)))),
                side(timed(list(rng.lognormal(0, 0.05, timings)))))["change"] != "same"
        for _ in range(trials))
    assert marked / trials < 0.05


def test_a_large_change_is_found_with_the_usual_number_of_timings():
    rng = np.random.default_rng(0)
    found = sum(
        verdict(side(timed(list(rng.lognormal(0, 0.05, 20)))),
                side(timed(list(1.3 * rng.lognormal(0, 0.05, 20)))))["change"] == "slower"
        for _ in range(200))
    assert found / 200 > 0.95


def test_rows_not_timed_have_no_speedup(base, new):
    found = row(new, "transpose", "cpu-blocked")
    found.update(median_s=None, min_s=None, max_s=None, q1_s=None, q3_s=None, iqr_s=None,
                 runs=0, valid=False, error="TypingError: bad kernel")
    result = matched(compare(base, new), "transpose", "cpu-blocked")
    assert result["speedup"] is None and result["change"] == "not timed"
    assert "NEW" in result["reason"]


def test_files_without_quartiles_approximate_them_and_say_so(base, new):
    for found in base["results"]:
        del found["q1_s"], found["q3_s"], found["skipped"], found["batch"]
    comparison = compare(base, new)
    first = comparison["rows"][0]["base"]
    assert first["quartiles"] == "approximated"
    assert first["q3_s"] - first["q1_s"] == pytest.approx(first["iqr_s"])
    assert first["q1_s"] + first["iqr_s"] / 2 == pytest.approx(first["median_s"])
    assert comparison["summary"]["approximated_quartiles"] == {"base": 5, "new": 0}
    assert "BASE records no quartiles" in printed(comparison)


# -- validation, rows in one run only, machines ---------------------------------------------


def test_validation_changes_are_called_out(base, new):
    row(base, "transpose", "numpy").update(valid=False, error="max relative error 1 > 0")
    row(new, "transpose", "cpu-blocked").update(valid=False,
                                                error="max relative error 0.5 > 1e-05")
    row(new, "copy", "numpy").update(skipped="does not apply at this size")
    comparison = compare(base, new)
    changes = {r["variant"] + " " + r["case"]: r["validation"]
               for r in comparison["rows"] if r["validation"]}
    assert changes == {"cpu-blocked transpose": {"base": "valid", "new": "invalid"},
                       "numpy transpose": {"base": "invalid", "new": "valid"},
                       "numpy copy": {"base": "valid", "new": "skipped"}}
    assert comparison["summary"]["validation_changes"] == 3
    text = printed(comparison)
    assert ("VALIDATION transpose cpu-blocked (cpu, 1999x3001): valid in BASE, INVALID in NEW "
            "(NEW: max relative error 0.5 > 1e-05)") in " ".join(text.split())
    assert "yes → NO" in text and "NO → yes" in text and "yes → n/a" in text


def test_rows_in_one_run_only_are_listed(base, new):
    new["results"] = [r for r in new["results"] if r["variant"] != "cpu-naive"]
    extra = copy.deepcopy(row(new, "transpose", "numpy"))
    extra["size"] = {"rows": 4096, "cols": 4096}
    new["results"].append(extra)
    comparison = compare(base, new)
    assert [(r["variant"], r["size"]) for r in comparison["only_in_base"]] == [
        ("cpu-naive", {"rows": 1999, "cols": 3001})]
    assert [(r["variant"], r["size"]) for r in comparison["only_in_new"]] == [
        ("numpy", {"rows": 4096, "cols": 4096})]
    text = printed(comparison)
    assert "only in BASE transpose (cpu, 1999x3001): cpu-naive" in text
    assert "only in NEW transpose (cpu, 4096x4096): numpy" in text
    assert "1 row only in BASE, 1 only in NEW" in " ".join(text.split())


def test_other_machine_is_shown_side_by_side(base, new):
    new["machine"]["cpu"].update(model="Intel(R) Xeon(R) Platinum 8480+", numba_threads=16)
    new["machine"]["gpu"] = {"name": "NVIDIA H200"}
    new["references"]["cpu_copy_gbps"] = 202.0
    comparison = compare(base, new)
    machines = comparison["machines"]
    assert machines["differ"]
    differing = {f["key"] for f in machines["fields"] if f["differs"]}
    assert {"cpu", "cpu_threads", "gpu", "cpu_copy_gbps"} <= differing
    text = printed(comparison)
    assert "The runs' machines differ" in text
    for shown in ("AMD EPYC", "Platinum 8480+", "NVIDIA H200", "90.6", "202"):
        assert shown in text


def test_the_same_machine_is_one_line(base, new):
    new["references"]["cpu_copy_gbps"] *= 1.1  # measured again: not a different machine
    comparison = compare(base, new)
    assert not comparison["machines"]["differ"]
    assert "Same machine and settings in both runs: AMD EPYC, 2 threads, no GPU" in " ".join(
        printed(comparison).split())


# -- the console ----------------------------------------------------------------------------


def test_console_fits_80_columns_and_cuts_nothing(base, new):
    long_name = "cpu-blocked-with-a-very-long-descriptive-variant-name-x"
    for document in (base, new):  # 25,153 ms: a number as wide as a table shows
        scale(document, "transpose", "cpu-blocked",
              25.153 / row(document, "transpose", "cpu-blocked")["median_s"])
        row(document, "transpose", "cpu-blocked")["variant"] = long_name
    scale(new, "transpose", "numpy", 0.5)
    comparison = compare(base, new, base_label="before.json", new_label="after.json")
    text = printed(comparison)
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "…" not in text
    assert long_name in "".join(line.strip().split(" ")[0] for line in text.splitlines())
    assert "25,153" in text  # ms, whole
    assert "2.00x" in text and "faster" in text
    assert "BASE before.json" in text and "NEW  after.json" in text
    assert text.rstrip().endswith("only in NEW.")
    assert "5 rows matched: 1 faster, 0 slower, 4 same (within the noise)" in " ".join(
        text.split())


def test_the_legend_states_the_convention_and_the_rule(base):
    text = " ".join(printed(compare(base, base)).split())
    assert "speedup = BASE median / NEW median: above 1x NEW is faster" in text
    assert "interquartile ranges do not overlap" in text and "whole ranges" in text


# -- the command line -----------------------------------------------------------------------


def one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    return lines[0]


def test_compare_command_writes_json_and_report(tmp_path, new, capsys):
    scale(new, "transpose", "cpu-naive", 1.5)
    new_path = tmp_path / "new.json"
    new_path.write_text(json.dumps(new))
    code = main(["compare", str(RUN), str(new_path), "--json", str(tmp_path / "c.json"),
                 "--report", str(tmp_path / "report")])
    out = capsys.readouterr().out
    assert code == 0
    assert "slower" in out and f"report: {tmp_path / 'report' / 'index.html'}" in out
    written = json.loads((tmp_path / "c.json").read_text())
    assert written["base"]["label"] == str(RUN) and written["new"]["label"] == str(new_path)
    assert written["summary"]["slower"] == 1
    report = tmp_path / "report"
    assert json.loads((report / "comparison.json").read_text())["rows"] == written["rows"]
    page = (report / "index.html").read_text()
    assert REPORT_MARK in page and 'src="speedup.png"' in page and "slower" in page
    markdown = (report / "README.md").read_text()
    assert "| cpu-naive |" in markdown and "(speedup.png)" in markdown
    assert (report / "speedup.png").read_bytes().startswith(b"\x89PNG")
    # A later comparison may replace the report it wrote.
    assert main(["compare", str(RUN), str(RUN), "--report", str(report)]) == 0


def test_nothing_in_common_exits_0_and_says_so(tmp_path, new, capsys):
    for found in new["results"]:
        found["device"] = "gpu"
    new_path = tmp_path / "gpu.json"
    new_path.write_text(json.dumps(new))
    assert main(["compare", str(RUN), str(new_path), "--report", str(tmp_path / "r")]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "No rows in common (matched by case, variant, device and size): 5 rows only in " \
           "BASE, 5 only in NEW." in out
    assert not (tmp_path / "r" / "speedup.png").exists()  # nothing to chart
    assert "speedup.png" not in (tmp_path / "r" / "index.html").read_text()


@pytest.mark.parametrize("content, fragment", [
    (None, "cannot read: No such file or directory"),
    ("{not json", "not JSON"),
    ("[1, 2]", "not a loclab results file"),
    ('{"loclab": "0.1.0"}', "not a loclab results file ('created' missing"),
])
def test_bad_files_are_one_line_and_exit_2(tmp_path, capsys, content, fragment):
    path = tmp_path / "bad.json"
    if content is not None:
        path.write_text(content)
    assert main(["compare", str(RUN), str(path)]) == 2
    line = one_line_error(capsys)
    assert line.startswith(f"loclab compare: error: {path}") and fragment in line
    assert main(["compare", str(path), str(RUN)]) == 2
    assert one_line_error(capsys).startswith(f"loclab compare: error: {path}")


@pytest.mark.parametrize("key, value, fragment", [
    ("size", "oops", "'size' is 'oops', not an object of whole numbers >= 0"),
    ("size", {"rows": -3, "cols": 4}, "not an object of whole numbers >= 0"),
    ("median_s", "fast", "'median_s' is 'fast', not a positive number or null"),
    ("median_s", -1.0, "'median_s' is -1.0, not a positive number or null"),
    ("min_s", 0.0, "'min_s' is 0.0, not a positive number or null"),
    ("median_s", float("nan"), "'median_s' is nan, not a positive number or null"),
    ("gbps", float("inf"), "'gbps' is inf, not a number >= 0 or null"),
    ("bytes", -8, "'bytes' is -8, not a number >= 0 or null"),
    ("runs", -2, "'runs' is -2, not a whole number >= 0 or null"),
    ("runs", 2.5, "'runs' is 2.5, not a whole number >= 0 or null"),
    ("speedup_vs_naive", -0.5, "'speedup_vs_naive' is -0.5, not a positive number or null"),
    ("phases", {"compute": -1e-3}, "'phases' is {'compute': -0.001}, not an object of seconds"),
    ("min_s", 1.0, "'min_s' 1.0 is above 'q1_s'"),
    ("max_s", 1e-9, "is above 'max_s' 1e-09 (the timings are out of order)"),
    ("valid", "yes", "'valid' is 'yes', not true or false"),
    ("device", "tpu", "'device' is 'tpu', not 'cpu' or 'gpu'"),
])
@pytest.mark.parametrize("command", ["compare", "report"])
def test_a_hand_edited_row_is_named_in_one_line(tmp_path, capsys, key, value, fragment,
                                                command):
    document = json.loads(RUN.read_text())
    document["results"][1][key] = value
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(document))
    argv = (["compare", str(RUN), str(path)] if command == "compare"
            else ["report", str(path), "-o", str(tmp_path / "r")])
    assert main(argv) == 2
    line = one_line_error(capsys)
    assert line.startswith(f"loclab {command}: error: {path}: result 2: ") and fragment in line


def test_an_unwritable_report_is_one_line(tmp_path, base):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(LoclabError, match="cannot write the report") as raised:
        write_comparison_report(compare(base, base), blocker / "report")
    assert "\n" not in str(raised.value)


def test_the_api_reads_paths_or_documents(base):
    import loclab

    by_path = loclab.compare(RUN, str(RUN), base_label="a", new_label="b")
    by_document = loclab.compare(base, base, base_label="a", new_label="b")
    assert by_path["rows"] == by_document["rows"] and by_path["base"]["label"] == "a"


def test_compare_loads_no_matplotlib():
    code = ("import sys, json; from loclab.bench.compare import compare; "
            "from loclab.report.compare import print_comparison; "
            "print('matplotlib' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip() == "False"


def test_a_narrow_terminal_leaves_out_the_spreads_not_the_names(base, new):
    long_name = "gpu-shared-padded-vectorized"
    for document in (base, new):
        row(document, "transpose", "cpu-blocked")["variant"] = long_name
    text = printed(compare(base, new), width=60)
    assert max(len(line) for line in text.splitlines()) <= 60
    assert "IQR columns left out to fit 60 columns." in text
    headers = [line for line in text.splitlines() if "BASE ms" in line]
    assert headers and not any("IQR" in line for line in headers)
    assert long_name in "".join(line.strip().split(" ")[0] for line in text.splitlines())


def test_references_far_apart_on_one_machine_are_pointed_out(base, new):
    new["references"]["cpu_copy_gbps"] = 2 * base["references"]["cpu_copy_gbps"]
    new["references"]["cpu_peak_gflops_fp32"] *= 1.05  # measured again: within 10%
    comparison = compare(base, new)
    text = " ".join(printed(comparison).split())
    assert "references differ CPU copy GB/s: 90.6 in BASE, 181 in NEW (2.00x)" in text
    assert "fp32 peak" not in text
    assert "references differ" not in printed(compare(base, base))


@pytest.mark.parametrize("value", [-90.6, float("nan"), float("inf")])
def test_a_reference_that_makes_no_sense_is_named_in_one_line(tmp_path, capsys, value):
    document = json.loads(RUN.read_text())
    document["references"]["cpu_copy_gbps"] = value
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(document))
    assert main(["compare", str(RUN), str(path)]) == 2
    assert one_line_error(capsys) == (f"loclab compare: error: {path}: references: "
                                      f"'cpu_copy_gbps' is {value!r}, not a number >= 0 or null")


def test_runs_of_different_cases_on_one_machine_say_so_not_that_machines_differ(base, new):
    new["results"] = [r for r in new["results"] if r["case"] == "copy"]
    extra = copy.deepcopy(row(base, "transpose", "numpy"))
    extra["case"] = "scan"
    new["results"].append(extra)
    comparison = compare(base, new)
    assert not comparison["machines"]["differ"]
    assert comparison["cases"] == {"base": ["copy", "transpose"], "new": ["copy", "scan"],
                                   "only_in_base": ["transpose"], "only_in_new": ["scan"]}
    text = " ".join(printed(comparison).split())
    assert "machines differ" not in text
    assert "Same machine and settings in both runs" in text
    assert "The runs ran different cases: transpose only in BASE; scan only in NEW." in text


def test_settings_that_differ_on_one_machine_are_named_as_settings(base, new, tmp_path):
    new["size"] = "custom"  # a run with --dims
    comparison = compare(base, new)
    assert comparison["machines"]["machine"] == []
    assert comparison["machines"]["settings"] == ["size preset"]
    text = " ".join(printed(comparison).split())
    assert "Same machine; the runs' settings differ: size preset" in text
    assert "machines differ" not in text
    page = (write_comparison_report(comparison, tmp_path / "r")).read_text()
    assert "Same machine; the runs&#x27; settings differ: size preset (highlighted)." in page
    new["machine"]["cpu"]["model"] = "Intel(R) Xeon(R) Platinum 8480+"
    text = " ".join(printed(compare(base, new)).split())
    assert "The runs' machines differ: CPU; and their settings: size preset" in text


def test_the_api_checks_documents_as_it_checks_files(base):
    import loclab

    row(base, "transpose", "numpy")["median_s"] = -1.0
    with pytest.raises(LoclabError, match=r"^the NEW document: result 5: 'median_s' is -1.0"):
        loclab.compare(RUN, base)
