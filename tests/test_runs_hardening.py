"""Issue 31, ``loclab run`` and ``loclab tune``: a size refused in the name of the case the user
asked for (not the roof run beside it), no stray empty line on stderr, charts that plot one
point per variant and label a bar of phases with what it is, every GPU row's kernels recorded
(the auto-gpu rows' too), and an expected time that counts the machine's load and the numba
functions still to compile."""

from __future__ import annotations

import math
import os
import sys
import time
import types
from dataclasses import replace

import numpy as np
import pytest

from loclab.bench import runner
from loclab.bench.auto import AUTO_VARIANTS, get_case
from loclab.bench.runner import (AUTO_CASE_S, COMPILE_S, HOST_BYTES_PER_WORK_BYTE, Plan, plan,
                                 uncached_numba_functions)
from loclab.cases import case_names
from loclab.cli import main
from loclab.gpu.kernels import CompiledLaunches, recording_launches
from loclab.measure.timing import Budget
from loclab.report.text import expectation
from tests.fakes import GOOD, toy_case
from tests.report_documents import full_run
from tests.test_cli import one_line_error

GIB = 2**30


# -- a size too large for memory ------------------------------------------------------------

def _memory_needed(case: str, dims: dict[str, int]) -> float:
    return get_case(case).work(dims).bytes * HOST_BYTES_PER_WORK_BYTE


def test_a_size_too_large_is_refused_in_the_name_of_the_case_asked_for(monkeypatch, capsys):
    monkeypatch.setattr(runner, "read_meminfo", lambda key: GIB)
    argv = ["run", "--case", "summed-area", "--dims", "rows=20000,cols=20000", "--device",
            "cpu"]
    assert main(argv) == 2
    assert one_line_error(capsys) == (
        "loclab run: error: summed-area at 20000x20000 (--dims) on the cpu needs about "
        "3.7 GiB of memory, 1.0 GiB is free")


def test_the_roof_runs_at_its_default_size_where_the_users_does_not_fit(monkeypatch, machine):
    """copy at the user's size needs 16 bytes an element, summed-area 10: memory for the
    latter (and copy's default size) only runs copy at its default."""
    default = get_case("copy").dims("default", "cpu", machine)[0]
    side = math.isqrt(int(_memory_needed("copy", default) * 1.2 / 10)) + 1
    asked = {"rows": side, "cols": side}
    free = max(_memory_needed("summed-area", asked), _memory_needed("copy", default)) * 1.01
    assert _memory_needed("copy", asked) > free
    monkeypatch.setattr(runner, "read_meminfo", lambda key: free)
    request = plan(cases=["summed-area"], device="cpu", dims=asked)
    assert [(case.name, dims) for case, _, dims in request.work] == [
        ("copy", default), ("summed-area", asked)]
    monkeypatch.setattr(runner, "read_meminfo", lambda key: None)  # unknown: all fits
    request = plan(cases=["summed-area"], device="cpu", dims=asked)
    assert [dims for _, _, dims in request.work] == [asked, asked]


# -- loclab tune's stderr ---------------------------------------------------------------------

@pytest.mark.parametrize("quiet", [[], ["--quiet"]])
def test_tune_writes_nothing_on_stderr_when_all_goes_well(quiet, capsys, tmp_path):
    argv = ["tune", "transpose", "--variant", "cpu-blocked", "--dims", "rows=64,cols=64",
            "--budget", "1", "--device", "cpu", "--tuning-cache", str(tmp_path / "t.json")]
    assert main([*argv, *quiet]) == 0
    assert capsys.readouterr().err == ""


# -- charts -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def run():
    return full_run()


@pytest.fixture(autouse=True)
def close_figures():
    yield
    if "matplotlib.pyplot" in sys.modules:
        sys.modules["matplotlib.pyplot"].close("all")


def test_the_roofline_has_one_point_per_variant_at_its_largest_size(run):
    from loclab.report.charts.points import roofline_points

    found = roofline_points(run)
    for device, (strip, roofline) in found.items():
        points = [(p.row["case"], p.row["variant"]) for p in strip + roofline]
        timed = {(r["case"], r["variant"]) for r in run["results"] if r["device"] == device
                 and r["median_s"] and not r["to_device_bytes"] + r["to_host_bytes"]}
        assert sorted(points) == sorted(timed)
    scan = [p.row for p in found["gpu"][0] + found["gpu"][1] if p.row["case"] == "scan"]
    assert {row["size"]["n"] for row in scan} == {2**28}  # 7 sizes were run
    partitioned = next(p.row for p in found["gpu"][0]
                       if p.row["variant"] == "gpu-output-partitioned")
    assert partitioned["size"]["threads"] == 65536  # its largest timed: the last is skipped


def test_the_roofline_key_names_the_size_of_a_case_run_at_several(run):
    from loclab.report.charts.points import roofline_points, timed_rows
    from loclab.report.charts.roofline import case_sizes, key_label

    sizes = case_sizes(timed_rows(run, "gpu"))
    assert sizes["scan"] == ["n"] and sizes["transpose"] == []
    strip, roofline = roofline_points(run)["gpu"]
    blelloch = next(p for p in strip + roofline if p.row["variant"] == "gpu-blelloch")
    assert "scan gpu-blelloch n=268,435,456: " in key_label(blelloch, sizes)


def test_a_bar_of_phases_is_labelled_with_their_sum_and_the_whole_runs_median(run):
    from loclab.report.charts import phases_figure
    from loclab.report.charts.phases import bar_label

    pageable = next(r for r in run["results"] if r["variant"] == "serial-pageable")
    assert bar_label(pageable) == "phases 79.2 ms, whole run 76.5 ms"
    assert bar_label({**pageable, "phases": {}}) == "76.5 ms"
    fig = phases_figure(run, "overlap")
    labels = [text.get_text() for ax in fig.axes for text in ax.texts]
    assert "phases 79.2 ms, whole run 76.5 ms" in labels
    ticks = [x for ax in fig.axes for collection in ax.collections
             for x, _ in collection.get_offsets()]
    assert pytest.approx(76.53) in ticks  # the median, marked on the bar
    legend = [text.get_text() for legend in fig.legends for text in legend.get_texts()]
    assert "median of the whole run" in legend


# -- the kernels of every GPU row -------------------------------------------------------------

class FakeKernel:
    """A compiled kernel as CuPy gives it: called with (grid, block, args)."""

    def __init__(self, name: str, calls: list) -> None:
        self.name, self.calls = name, calls

    def __call__(self, grid, block, args, shared_mem=0):
        self.calls.append((self.name, tuple(grid), tuple(block), shared_mem))


def test_a_kernel_compiled_elsewhere_is_recorded_once_a_shape_and_counted():
    calls: list = []
    kernel = FakeKernel("k<int>", calls)
    launches = CompiledLaunches()
    with recording_launches() as recorded:
        for grid in ((4, 1, 1), (4, 1, 1), (8, 1, 1)):
            launches.launch(kernel, "k<int>", grid, (128, 1, 1), (np.int32(1),))
    assert [(launch.name, launch.grid, launch.calls) for launch in recorded] == [
        ("k<int>", (4, 1, 1), 2), ("k<int>", (8, 1, 1), 1)]
    assert recorded[0].declared_accesses() is None
    assert calls == [("k<int>", (4, 1, 1), (128, 1, 1), 0)] * 2 + [
        ("k<int>", (8, 1, 1), (128, 1, 1), 0)]


@pytest.fixture
def fake_cupy(monkeypatch):
    """CuPy as the module ``loclab optimize --target gpu`` writes uses it, on the host: NumPy
    arrays, and kernels that note their launches."""
    calls: list = []
    cupy = types.ModuleType("cupy")
    cupy.ndarray = np.ndarray

    class RawModule:
        def __init__(self, code, options, name_expressions):
            pass

        def get_function(self, name):
            return FakeKernel(name, calls)

    cupy.RawModule = RawModule
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    return calls


def test_an_auto_gpu_row_launches_its_kernels_where_the_run_records_them(fake_cupy,
                                                                         monkeypatch):
    from loclab.bench import auto

    monkeypatch.setattr(auto, "_COMPILED", {})  # compiled here with the fake CuPy
    a, out = np.ones((33, 65), np.float32), np.empty((65, 33), np.float32)
    nest = auto.Nest("loclab.cases.transpose", "transpose")
    with recording_launches() as recorded:
        bound = auto.gpu(nest, {"a": a}, out, None)
        bound.run()
        bound.run()
    assert len(recorded) == 1 and recorded[0].calls == 2
    assert recorded[0].name.startswith("nest_") and recorded[0].name.endswith("<int>")
    assert len(fake_cupy) == 2  # and each launch reached the kernel


def test_every_gpu_variant_launches_through_loclab_or_says_why_it_launches_none():
    """A row records the kernels made with ``Launch`` (the auto rows' through
    ``CompiledLaunches``); a GPU variant of loclab's own that makes none must say why."""
    import importlib.util

    for name in case_names():
        for variant in get_case(name).variants_on("gpu"):
            if variant.role == "library" or variant.name in AUTO_VARIANTS:
                continue
            module = importlib.util.find_spec(variant.setup.target[0]).origin
            with open(module) as source:
                launches = "Launch(" in source.read()
            assert launches != bool(variant.no_kernel), (name, variant.name)


# -- the expected time ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def transpose_plan() -> Plan:
    return plan(cases=["transpose"], device="cpu", size="small")


def test_the_expected_time_stretches_the_runs_own_work_by_the_machines_load(transpose_plan):
    idle = replace(transpose_plan, load=0.0)
    busy = replace(transpose_plan, load=4.0 * (os.cpu_count() or 1))
    assert busy.slowdown() > 4
    stretched = busy.expected_seconds() - idle.expected_seconds()
    assert stretched == pytest.approx(idle.work_seconds() * (busy.slowdown()
                                                             - idle.slowdown()))
    assert "this machine is busy: load" in expectation(busy)
    assert "busy" not in expectation(replace(idle, numba_threads=1))


def test_the_expected_time_counts_the_auto_rows_and_the_functions_to_compile(transpose_plan):
    idle = replace(transpose_plan, load=0.0, uncompiled=0)
    assert idle.work_seconds() > AUTO_CASE_S  # transpose has an auto-cpu row
    first = replace(idle, uncompiled=45)
    assert first.work_seconds() - idle.work_seconds() == pytest.approx(45 * COMPILE_S)
    assert expectation(first).endswith("(numba compiles 45 functions first)")


def test_only_the_variants_that_apply_spend_their_budget(machine):
    skipped = replace(GOOD, name="skipped", skip=lambda dims, machine: "not here")
    case = toy_case(GOOD, skipped)
    request = Plan(size="small", devices=["cpu"], machine=machine, numba_threads=1,
                   budget=Budget(seconds=10.0), work=[(case, "cpu", {"n": 1001})])
    budgets = request.expected_seconds() - request.work_seconds() * request.slowdown()
    assert budgets == pytest.approx(10.0)


def test_a_numba_function_without_a_cache_on_disk_is_counted(tmp_path, monkeypatch):
    module = tmp_path / "h4_kernels.py"
    module.write_text("from numba import njit\n\n@njit(cache=True)\ndef twice(x):\n"
                      "    return 2 * x\n\n@njit\ndef uncached(x):\n    return x\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "h4_kernels", raising=False)
    import h4_kernels

    assert uncached_numba_functions(["h4_kernels"]) == 1  # never compiled
    assert h4_kernels.twice(3) == 6  # compiled, and cached on disk
    assert uncached_numba_functions(["h4_kernels"]) == 0
    later = time.time() + 10
    os.utime(module, (later, later))  # its source edited since
    assert uncached_numba_functions(["h4_kernels"]) == 1


def test_the_load_is_the_other_work_running_now_not_the_last_minutes(monkeypatch):
    """/proc/loadavg's running threads (3, this one among them: 2 others), not its minute's
    average (4.5, which would count an install that ran just before)."""
    from pathlib import Path

    real = Path.read_text
    monkeypatch.setattr(Path, "read_text", lambda self, *args, **kwargs: (
        "4.50 1.40 1.40 3/75 12345\n" if str(self) == "/proc/loadavg"
        else real(self, *args, **kwargs)))
    monkeypatch.setattr(runner, "LOAD_SAMPLE_GAP_S", 0.0)
    assert runner.load_average() == 2.0
