import math

import pytest

from loclab.bench import runner
from loclab.bench.results import REFERENCE_KEYS, ROW_KEYS
from loclab.bench.runner import execute, plan, resolve_cases, resolve_devices
from loclab.errors import GpuUnavailableError, UsageError
from tests.fakes import (ALIAS, CRASH, GOOD, LAUNCH, LIBRARY, SCRIBBLE, UNWRITTEN, VIEW, WRONG,
                         toy_case, toy_plan)


@pytest.fixture(scope="module")
def document(machine):
    case = toy_case(GOOD, WRONG, UNWRITTEN, LAUNCH, CRASH, LIBRARY)
    calls, finished = [], []
    doc = execute(toy_plan(case, machine), progress=lambda *call: calls.append(call),
                  finished=lambda row: finished.append(dict(row)))
    doc["progress_calls"] = calls
    doc["finished_rows"] = finished
    return doc


def between_variants(calls):
    """The progress calls made as variants start (not for golden outputs or the clock)."""
    return [call for call in calls if "golden" not in call[2] and "clock" not in call[2]]


def rows_by_variant(document):
    return {row["variant"]: row for row in document["results"] if row["case"] == "toy"}


def test_every_variant_gets_a_row_and_the_run_goes_on(document):
    assert list(rows_by_variant(document)) == ["good", "off-by-one", "half", "no-launch",
                                               "crash", "lib"]
    assert rows_by_variant(document)["lib"]["valid"]


def test_correct_variant_is_valid_and_timed(document):
    good = rows_by_variant(document)["good"]
    assert good["valid"] and good["error"] is None and good["max_rel_err"] == 0.0
    assert good["runs"] >= 2 and good["min_s"] <= good["median_s"] <= good["max_s"]
    assert good["gbps"] == pytest.approx(good["bytes"] / good["median_s"] / 1e9)
    assert good["params"] == {"kind": "correct"}


def test_wrong_result_is_caught_and_counted(document):
    wrong = rows_by_variant(document)["off-by-one"]
    assert not wrong["valid"] and "relative error" in wrong["error"]
    assert wrong["median_s"] is not None  # still timed, shown in red
    assert document["failures"] == 4


def test_unwritten_output_is_caught_by_the_poison(document):
    half = rows_by_variant(document)["half"]
    assert not half["valid"] and "501 of 1001 outputs are NaN" in half["error"]


def test_launch_failure_names_the_kernel_and_shape(document):
    row = rows_by_variant(document)["no-launch"]
    assert not row["valid"] and row["median_s"] is None
    assert "toy<32>" in row["error"] and "block=(2048,)" in row["error"]


def test_unexpected_exception_is_reported_in_one_line(document):
    row = rows_by_variant(document)["crash"]
    assert row["error"] == "ZeroDivisionError: division by zero"


def test_comparisons_use_only_valid_rows(document):
    rows = rows_by_variant(document)
    assert rows["off-by-one"]["speedup_vs_naive"] == pytest.approx(
        rows["good"]["median_s"] / rows["off-by-one"]["median_s"])
    assert rows["lib"]["vs_library"] == pytest.approx(1.0)


def test_copy_row_defines_the_roof(document):
    copies = [r["gbps"] for r in document["results"] if r["case"] == "copy" and r["valid"]]
    assert document["references"]["cpu_copy_gbps"] == max(copies)
    good = rows_by_variant(document)["good"]
    assert good["pct_of_copy"] == pytest.approx(100 * good["gbps"] / max(copies))


def test_json_shape_follows_the_contract(document):
    assert {"loclab", "machine", "references", "results"} <= set(document)
    assert set(REFERENCE_KEYS) <= set(document["references"])
    assert {"cpu", "gpu"} <= set(document["machine"])
    for row in document["results"]:
        assert set(ROW_KEYS) <= set(row)
        assert {"unit", "items", "items_per_s", "unit_roof", "pct_of_unit_roof"} <= set(row)
        assert isinstance(row["size"], dict) and isinstance(row["params"], dict)
        assert row["device"] in ("cpu", "gpu")
        assert row["role"] in ("golden", "naive", "optimized", "library")
        for key in ("median_s", "gbps", "pct_of_copy"):
            assert row[key] is None or (isinstance(row[key], float) and math.isfinite(row[key]))


def test_progress_counts_every_variant(document):
    calls = between_variants(document["progress_calls"])
    total = calls[0][1]
    assert total == 8  # two copy variants, six toy variants
    assert [done for done, _, _ in calls] == list(range(total)) + [total]
    assert calls[1][2] == "copy numpy"
    assert ("toy: inputs and golden output" in
            [label for _, _, label in document["progress_calls"]])


def test_each_row_is_passed_on_as_soon_as_it_is_measured(document):
    finished = document["finished_rows"]
    assert [(row["case"], row["variant"]) for row in finished] == [
        (row["case"], row["variant"]) for row in document["results"]]
    assert all(row["median_s"] for row in finished if row["valid"])


def test_outputs_that_are_inputs_or_touch_them_are_rejected(machine):
    document = execute(toy_plan(toy_case(ALIAS, VIEW, SCRIBBLE, GOOD), machine))
    rows = rows_by_variant(document)
    assert "shares memory with input 'a'" in rows["alias"]["error"]
    assert "not a C-contiguous" in rows["view"]["error"]
    assert "read-only" in rows["scribble"]["error"]
    assert rows["good"]["valid"]  # the input is intact for the variants that follow
    assert not any(rows[name]["valid"] for name in ("alias", "view", "scribble"))


def test_copy_golden_is_independent_of_the_input(machine):
    from loclab.bench.auto import get_case

    copy = get_case("copy")
    inputs = copy.make_inputs({"rows": 3, "cols": 5}, __import__("numpy").random.default_rng(0))
    assert copy.golden(inputs) is not inputs["a"]
    assert not __import__("numpy").shares_memory(copy.golden(inputs), inputs["a"])


def test_roof_case_runs_first_and_once():
    assert [c.name for c in resolve_cases(["transpose", "copy", "transpose"])] == [
        "copy", "transpose"]


@pytest.mark.parametrize("kind, call", [
    ("case", lambda: resolve_cases(["nope"])),
    ("device", lambda: resolve_devices("tpu")),
    ("size", lambda: plan(size="huge")),
])
def test_unknown_names_list_the_choices(kind, call):
    with pytest.raises(UsageError, match=f"unknown {kind} 'nope'|unknown {kind} 'tpu'|"
                                         f"unknown {kind} 'huge'") as err:
        call()
    assert "choose from" in str(err.value) and "\n" not in str(err.value)


def test_gpu_asked_for_without_one(monkeypatch):
    monkeypatch.setattr(runner, "gpu_unavailable_reason", lambda: "CuPy is not installed")
    with pytest.raises(GpuUnavailableError, match="no GPU: CuPy is not installed"):
        resolve_devices("gpu")
    assert resolve_devices("all") == ["cpu"]


def test_too_little_memory_is_a_one_line_error(monkeypatch):
    monkeypatch.setattr(runner, "read_meminfo", lambda key: 2**20)
    with pytest.raises(UsageError, match=r"copy at \d+x\d+ \(size default\) on the cpu needs "
                                         r"about \d.\d GiB of memory, 0.0 GiB is free"):
        plan(device="cpu")


def test_threads_without_the_cpu_is_an_error(monkeypatch):
    monkeypatch.setattr(runner, "gpu_unavailable_reason", lambda: None)
    with pytest.raises(UsageError, match="runs nothing on the CPU"):
        plan(device="gpu", threads=2)


def test_threads_out_of_range(monkeypatch):
    import numba

    with pytest.raises(UsageError, match="--threads"):
        plan(device="cpu", threads=numba.config.NUMBA_NUM_THREADS + 1)


def test_failed_staging_fails_every_variant_of_that_case_and_nothing_else(machine,
                                                                           monkeypatch):
    from loclab.bench.backend import CpuBackend

    stage = CpuBackend.stage

    def refuse_small_vectors(self, array, memory="pageable"):
        if array.ndim == 1:
            raise MemoryError("no room")
        return stage(self, array, memory)

    monkeypatch.setattr(CpuBackend, "stage", refuse_small_vectors)
    calls = []
    document = execute(toy_plan(toy_case(GOOD, LIBRARY), machine),
                       progress=lambda *call: calls.append(call))
    rows = rows_by_variant(document)
    assert all(row["error"] == "staging the inputs in pageable memory failed: MemoryError: "
                               "no room" for row in rows.values())
    assert all(r["valid"] for r in document["results"] if r["case"] == "copy")
    assert [done for done, _, _ in between_variants(calls)] == [0, 1, 2, 3, 4]


def test_a_case_whose_golden_fails_fails_its_rows_and_nothing_else(machine):
    from dataclasses import replace

    def broken(inputs):
        raise KeyError("x")

    case = replace(toy_case(GOOD, LIBRARY), golden=broken)
    document = execute(toy_plan(case, machine))
    rows = rows_by_variant(document)
    assert list(rows) == ["good", "lib"]
    assert all(row["error"] == "inputs or golden output failed: KeyError: 'x'"
               and not row["valid"] for row in rows.values())
    assert all(r["valid"] for r in document["results"] if r["case"] == "copy")
    assert document["failures"] == 2


def test_a_preset_may_sweep_sizes_and_a_variant_may_not_apply(machine):
    from dataclasses import replace

    from loclab.cases.base import Variant
    from tests.fakes import _doubled

    only_small = Variant("small-only", "cpu", "optimized", "applies below 1000",
                         _doubled, skip=lambda dims, m: "n >= 1000" if dims["n"] >= 1000 else None)
    case = replace(toy_case(GOOD, only_small), sweep="n",
                   sizes={"small": {"cpu": [{"n": 101}, {"n": 1001}]}},
                   tolerance=lambda inputs: inputs["a"].size * 0.0)
    request = toy_plan(case, machine)
    request = replace(request, work=request.work[:1] + [
        (case, "cpu", dims) for dims in case.dims("small", "cpu", machine)])
    document = execute(request)
    rows = [(r["variant"], r["size"]["n"], r["valid"], r["skipped"])
            for r in document["results"] if r["case"] == "toy"]
    assert rows == [("good", 101, True, None), ("small-only", 101, True, None),
                    ("good", 1001, True, None), ("small-only", 1001, False, "n >= 1000")]
    assert document["failures"] == 0
    assert document["cases"]["toy"]["sweep"] == "n"
