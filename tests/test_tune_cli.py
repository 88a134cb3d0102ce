"""``loclab tune`` end to end on a toy case in the registry, and ``loclab run`` using the cache.

The toy (``tests.fakes.tiles_case``) is fastest and correct at tile=8 unroll=2; tile 16 is
faster but wrong, tile=1 unroll=4 fails to compile, tile x unroll > 32 is rejected unbuilt.
"""

from __future__ import annotations

import json
import sys
import types
from dataclasses import replace

import pytest

from loclab.cases import CASE_MODULES
from loclab.cli import main
from loclab.bench import tune as session
from loclab.measure import cache
from loclab.measure.space import Space
from tests.conftest import QUICK
from tests.fakes import tiles_case
from tests.test_cli import one_line_error

TUNE = ["tune", "tiles", "--device", "cpu", "--size", "small"]
RUN = ["run", "--case", "tiles", "--device", "cpu", "--size", "small", "--quiet"]


def register(monkeypatch, case) -> None:
    module = types.ModuleType("tests.registered_case")
    module.CASE = case
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setitem(CASE_MODULES, case.name, module.__name__)


@pytest.fixture
def built(monkeypatch):
    """The toy case registered as 'tiles'; the configurations its setup built."""
    configs: list[dict[str, int]] = []
    register(monkeypatch, tiles_case(configs))
    monkeypatch.setattr(session, "TUNE_TIMING", QUICK)
    return configs


@pytest.fixture
def tuned(built, tmp_path, capsys):
    """One exhaustive tune: its exit code, printed table, JSON document and cache file."""
    path = tmp_path / "tuning.json"
    code = main([*TUNE, "--strategy", "exhaustive", "--tuning-cache", str(path),
                 "--json", str(tmp_path / "tune.json")])
    out = " ".join(capsys.readouterr().out.split())  # the table wraps long cells
    return code, out, json.loads((tmp_path / "tune.json").read_text()), path


def rows(tmp_path, *options: str) -> dict[str, dict]:
    out = tmp_path / "run.json"
    code = main([*RUN, "--json", str(out), *options])
    document = json.loads(out.read_text())
    return code, {r["variant"]: r for r in document["results"] if r["case"] == "tiles"}


def test_exhaustive_tune_keeps_the_fastest_valid_and_never_builds_the_rejected(tuned, built):
    code, out, document, path = tuned
    assert code == 0
    (record,) = document["tunings"]
    assert record["best"]["config"] == {"tile": 8, "unroll": 2}
    assert record["default"]["config"] == {"tile": 2, "unroll": 1}
    assert record["speedup"] > 1.5 and record["evaluated"] == 14 and record["stored"]
    assert {"tile": 16, "unroll": 4} not in built and len(built) == 14
    statuses = {(t["config"]["tile"], t["config"]["unroll"]): t["status"]
                for t in record["trials"]}
    assert statuses[16, 4] == "rejected" and statuses[1, 4] == "error"
    assert statuses[16, 1] == "invalid"
    entry = cache.load(path).lookup(record["device_name"], "tiles", "tiled", {"n": 1001})
    assert entry["params"] == {"tile": 8, "unroll": 2} and entry["evaluated"] == 14
    assert entry["strategy"] == "exhaustive"


def test_tune_prints_a_table_and_the_best_against_the_default(tuned):
    _, out, _, path = tuned
    assert "tiles tiled (cpu, n=1001) exhaustive, 14 built" in out
    assert "tile=8 unroll=2 (best)" in out and "tile=2 unroll=1 (default)" in out
    assert "rejected by the restrictions (never built)" in out
    assert "64 threads per block > 32" in out
    assert "error: tiled<1, 4>: compilation failed" in out
    assert "GFlop/s" in out and "x the default (tile=2 unroll=1:" in out
    assert f"storedin{path}" in "".join(out.split())  # a long path may fold anywhere


def test_run_uses_the_tuned_configuration_unless_told_not_to(tuned, tmp_path, capsys):
    path = tuned[3]
    code, found = rows(tmp_path, "--tuning-cache", str(path))
    assert code == 0
    assert found["tiled"]["tuned"]["params"] == {"tile": 8, "unroll": 2}
    assert found["tiled"]["params"] == {"tile": 8, "unroll": 2} and found["tiled"]["valid"]
    assert found["tiled"]["tuned"]["date"] and found["good"]["tuned"] is None
    code, found = rows(tmp_path, "--tuning-cache", str(path), "--no-tuned")
    assert found["tiled"]["tuned"] is None
    assert found["tiled"]["params"] == {"tile": 2, "unroll": 1}
    assert main([*RUN[:-1], "--tuning-cache", str(path)]) == 0
    assert "tuned tiles tiled n=1001: tile=8 unroll=2 (tuning cache, " in capsys.readouterr().out


@pytest.mark.parametrize("params, fragment", [
    ({"tile": 16, "unroll": 1}, "failed: max relative error"),
    ({"tile": 16, "unroll": 4}, "failed: rejected on this machine: 64 threads per block"),
    ({"tile": 8, "threads": 2}, "failed: tuned for another version of this variant (it lacks "
                                "unroll and has threads): run loclab tune again"),
    ({"tile": 8, "unroll": 2, "threads": 2}, "(it has threads): run loclab tune again"),
    ({"tile": 8}, "(it lacks unroll): run loclab tune again"),
])
def test_a_tuned_configuration_that_fails_is_reported_not_replaced(tuned, tmp_path, params,
                                                                   fragment):
    path = tuned[3]
    document = json.loads(path.read_text())
    (device,) = document["entries"]
    document["entries"][device]["tiles/tiled"]["n=1001"]["params"] = params
    path.write_text(json.dumps(document))
    code, found = rows(tmp_path, "--tuning-cache", str(path))
    assert code == 1
    row = found["tiled"]
    assert not row["valid"] and row["tuned"]["params"] == params
    assert row["error"].startswith("the tuned configuration ") and fragment in row["error"]
    assert found["good"]["valid"]


def test_run_with_a_corrupt_cache_warns_once_and_runs_untuned(built, tmp_path, capsys):
    path = tmp_path / "tuning.json"
    path.write_text("{")
    code, found = rows(tmp_path, "--tuning-cache", str(path))
    assert code == 0 and found["tiled"]["tuned"] is None
    assert "corrupt tuning cache" in one_line_error(capsys)


def test_random_and_local_search_from_the_command_line(built, tmp_path, capsys):
    path = tmp_path / "tuning.json"
    out = tmp_path / "t.json"
    for strategy in ("random", "local"):
        assert main([*TUNE, "--strategy", strategy, "--budget", "3", "--seed", "5", "--quiet",
                     "--tuning-cache", str(path), "--json", str(out)]) == 0
        (record,) = json.loads(out.read_text())["tunings"]
        assert record["evaluated"] == 3 and record["best"]["config"]["tile"] != 16
    assert capsys.readouterr().out == ""


def test_no_valid_configuration_stores_nothing_and_fails(built, monkeypatch, tmp_path,
                                                         capsys):
    case = tiles_case()
    wrong_only = replace(case.variants[1], space=lambda machine: Space(
        values={"tile": [16], "unroll": [1, 2, 4]}, default={"tile": 16, "unroll": 1}))
    register(monkeypatch, replace(case, variants=(case.variants[0], wrong_only)))
    path = tmp_path / "tuning.json"
    assert main([*TUNE, "--quiet", "--tuning-cache", str(path)]) == 1
    assert one_line_error(capsys) == ("loclab tune: FAILED tiles tiled (cpu, n=1001): no valid "
                                      "configuration: nothing stored")
    assert not path.exists()


@pytest.mark.parametrize("argv, fragment", [
    (["tune", "nope"], "argument CASE: invalid choice: 'nope'"),
    ([*TUNE, "--strategy", "annealing"], "invalid choice: 'annealing'"),
    ([*TUNE, "--budget", "0"], "--budget: must be at least 1"),
    ([*TUNE, "--seconds", "0"], "--seconds: must be more than 0"),
    ([*TUNE, "--seed", "x"], "invalid int value"),
])
def test_bad_tune_arguments_are_one_line_exit_2(built, argv, fragment, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert fragment in one_line_error(capsys)


@pytest.mark.parametrize("argv, fragment", [
    ([*TUNE, "--variant", "nope"], "unknown variant of tiles 'nope'; choose from good, tiled"),
    ([*TUNE, "--variant", "good"], "variant 'good' of tiles has no parameter space to tune; "
                                   "tunable: tiled"),
    (["tune", "copy", "--device", "cpu"], "copy has no tunable variant on the cpu"),
])
def test_untunable_requests_are_one_line_exit_2(built, argv, fragment, capsys):
    assert main(argv) == 2
    assert fragment in one_line_error(capsys)


def test_an_unwritable_cache_fails_before_tuning(built, tmp_path, capsys):
    (tmp_path / "file").write_text("")
    assert main([*TUNE, "--tuning-cache", str(tmp_path / "file" / "tuning.json")]) == 2
    assert "--tuning-cache" in one_line_error(capsys) and not built
    assert main([*TUNE, "--tuning-cache", str(tmp_path)]) == 2
    assert "is a directory" in one_line_error(capsys).lower()


def test_a_case_with_a_unit_is_tuned_in_that_unit(monkeypatch, tmp_path, capsys):
    case = tiles_case([])
    counted = replace(case, unit="cells",
                      work=lambda dims: replace(case.work(dims), items=dims["n"]))
    register(monkeypatch, counted)
    monkeypatch.setattr(session, "TUNE_TIMING", QUICK)
    assert main([*TUNE, "--strategy", "random", "--budget", "3",
                 "--tuning-cache", str(tmp_path / "tuning.json")]) == 0
    out = capsys.readouterr().out
    assert "G cells/s" in out and "GFlop/s" not in out


def test_a_case_whose_golden_fails_is_one_line_not_a_traceback(monkeypatch, tmp_path, capsys):
    def broken(inputs):
        raise KeyError("x")

    register(monkeypatch, replace(tiles_case([]), golden=broken))
    assert main([*TUNE, "--tuning-cache", str(tmp_path / "tuning.json")]) == 1
    assert one_line_error(capsys).endswith("inputs or golden output failed: KeyError: 'x'")
