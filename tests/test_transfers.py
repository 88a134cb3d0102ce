"""The transfers family (host-device, overlap, gemm-chain, kernel-chain) and what the harness
does for it, without a GPU: families and roofs in a plan, where inputs are staged, the bytes a
row moves over the link, the link's roofs, the ideal time, phases; goldens that the variants'
float32 arithmetic reproduces exactly; the CPU pipeline and its first-touch rule. The GPU
variants themselves run in tests/test_transfers_gpu.py (and the generic tests/test_gpu.py)."""

from dataclasses import replace
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loclab.bench import runner
from loclab.bench.auto import get_case
from loclab.bench.backend import CpuBackend, Staging, output_problem
from loclab.bench.interconnect import add_ideals, link_bytes, link_references
from loclab.bench.metrics import add_comparisons
from loclab.bench.phases import time_phases
from loclab.bench.runner import case_sizes, plan, resolve_cases
from loclab.cases import CASE_FAMILIES, expand_families, family_of
from loclab.cases.base import Bound, Placement, Step, Variant, stepped
from loclab.errors import UsageError
from tests.case_runs import run_variant

FAMILY = CASE_FAMILIES["transfers"]


def variant(case, name):
    return next(v for v in get_case(case).variants if v.name == name)


# --- families and roofs ------------------------------------------------------------------

def test_a_family_stands_for_its_cases_in_order_each_once():
    assert expand_families(["transfers", "overlap", "mmm"]) == [*FAMILY, "mmm"]
    assert all(family_of(name) == "transfers" for name in FAMILY)
    assert family_of("mmm") is None


def test_the_link_roof_runs_after_copy_on_a_gpu_only_where_a_case_needs_it():
    on_gpu = [case.name for case in resolve_cases(["gemm-chain"], ["cpu", "gpu"])]
    assert on_gpu == ["copy", "host-device", "gemm-chain"]
    assert [c.name for c in resolve_cases(["gemm-chain"], ["cpu"])] == ["copy", "gemm-chain"]
    assert [c.name for c in resolve_cases(["mmm"], ["gpu"])] == ["copy", "mmm"]
    assert [c.name for c in resolve_cases(["mmm"], ["gpu"], link_roof=True)] == [
        "copy", "host-device", "mmm"]
    asked = [c.name for c in resolve_cases(["transfers"], ["gpu"])]
    assert asked == ["copy", *FAMILY]


def test_the_link_roof_runs_at_its_roof_size_unless_asked_for(machine):
    case = get_case("host-device")
    gpu = replace(machine, gpu=object())  # case_sizes reads no more of it for this case
    assert case_sizes(case, "gpu", "default", gpu, None, asked=False) == [case.roof_dims]
    assert len(case_sizes(case, "gpu", "default", gpu, None, asked=True)) == 6
    assert case_sizes(case, "cpu", "default", machine, None, asked=True) == []


def test_a_family_on_the_cpu_runs_what_runs_there(monkeypatch):
    monkeypatch.setattr(runner, "gpu_unavailable_reason", lambda: "no GPU here")
    request = plan(cases=["transfers"], device="all", size="small")
    assert {case.name for case, device, _ in request.work} == {"copy", "overlap"}
    assert all(device == "cpu" for _, device, _ in request.work)


@pytest.mark.parametrize("name", ["gemm-chain", "kernel-chain", "host-device"])
def test_a_gpu_only_case_on_the_cpu_is_refused_in_one_line(name):
    with pytest.raises(UsageError, match=f"--case {name}: nothing runs on the CPU") as err:
        plan(cases=[name], device="cpu", size="small")
    assert "\n" not in str(err.value)


# --- staging and link bytes ---------------------------------------------------------------

def test_host_inputs_are_staged_read_only_once_per_kind_of_memory():
    inputs = {"x": np.arange(5, dtype=np.float32)}
    staging = Staging(CpuBackend(), inputs)
    first = staging.inputs_for(variant("overlap", "cpu-serial-init"))
    assert first is staging.inputs_for(variant("overlap", "cpu-first-touch"))
    assert not first["x"].flags.writeable and np.shares_memory(first["x"], inputs["x"])


def test_an_output_that_is_an_input_shares_its_memory():
    host = np.zeros(4, np.float32)
    assert output_problem(np.zeros(4, np.float32), {"x": host}) is None
    assert "shares memory" in output_problem(host, {"x": host})


@pytest.mark.parametrize("placement, expected", [
    (Placement(), (0, 0)),
    (Placement(inputs="pinned", output="device"), (400, 0)),
    (Placement(inputs="device", output="pageable"), (0, 40)),
    (Placement(inputs="pageable", output="pinned"), (400, 40)),
])
def test_link_bytes_follow_where_the_data_lives(placement, expected):
    from loclab.cases.base import Work

    work = Work(bytes=440, flops=0, to_device=400, to_host=40)
    gpu = Variant("v", "gpu", "optimized", "", lambda *a: None, placement=placement)
    assert link_bytes(gpu, work) == expected
    assert link_bytes(replace(gpu, device="cpu"), work) == (0, 0)


def test_every_transfer_case_counts_its_data_once_each_way():
    for name, dims in (("host-device", {"bytes": 4097}), ("overlap", {"n": 10, "rounds": 3}),
                       ("gemm-chain", {"n": 5, "matrices": 3}),
                       ("kernel-chain", {"n": 10, "kernels": 4})):
        case = get_case(name)
        inputs = case.make_inputs(dims, np.random.default_rng(0))
        work = case.work(dims)
        data = sum(a.nbytes for key, a in inputs.items() if key not in ("rounds", "kernels"))
        assert work.to_device == data, name
        shape, dtype = case.output(dims)
        assert work.to_host == np.empty(shape, dtype).nbytes, name


# --- the link's roofs and the ideal time --------------------------------------------------

def link_row(variant_name, inputs, output, gbps, case="host-device", valid=True):
    return {"case": case, "variant": variant_name, "device": "gpu", "size": {"bytes": 1},
            "memory": {"inputs": inputs, "output": output}, "valid": valid,
            "link_gbps": gbps}


def test_the_link_roofs_are_the_best_valid_copy_of_each_kind():
    rows = [link_row("h2d-pinned", "pinned", "device", 50.0),
            link_row("h2d-pinned", "pinned", "device", 55.0),
            link_row("h2d-pinned", "pinned", "device", 90.0, valid=False),
            link_row("d2h-pageable", "device", "pageable", 20.0),
            link_row("both-ways-pinned", "pinned", "pinned", 101.0),
            link_row("serial", "pinned", "pinned", 300.0, case="overlap")]
    refs = link_references(rows)
    assert refs == {"gpu_h2d_gbps": 55.0, "gpu_d2h_gbps": None,
                    "gpu_h2d_pageable_gbps": None, "gpu_d2h_pageable_gbps": 20.0,
                    "gpu_bidirectional_gbps": 101.0}


def pipeline_row(variant_name, median, phases=None, valid=True, size=None):
    return {"case": "overlap", "variant": variant_name, "device": "gpu",
            "size": size or {"n": 1, "rounds": 1}, "valid": valid, "median_s": median,
            "to_device_bytes": 100 * 10**9, "to_host_bytes": 50 * 10**9,
            "phases": phases or {}}


def test_the_ideal_overlaps_the_copies_at_the_roofs_with_the_fastest_compute():
    serial = pipeline_row("serial", 9.0, {"copy in": 2.1, "compute": 3.0, "copy out": 1.2})
    faster = pipeline_row("other", 9.0, {"compute": 2.5}, valid=False)  # invalid: ignored
    streams = pipeline_row("streams-k", 4.0)
    elsewhere = pipeline_row("streams-k", 4.0, size={"n": 2, "rounds": 1})
    cpu = {**pipeline_row("cpu-serial-init", 1.0), "device": "cpu", "to_device_bytes": 0,
           "to_host_bytes": 0}
    rows = [serial, faster, streams, elsewhere, cpu]
    add_ideals(rows, {"gpu_h2d_gbps": 50.0, "gpu_d2h_gbps": 25.0})
    # in: 100 GB / 50 GB/s = 2 s; out: 50 GB / 25 GB/s = 2 s; compute 3 s (serial's)
    assert streams["ideal_s"] == pytest.approx(3.0)
    assert streams["no_overlap_s"] == pytest.approx(7.0)
    assert streams["pct_of_ideal"] == pytest.approx(75.0)
    assert streams["ideal"]["compute_of"] == "serial"
    assert elsewhere["ideal_s"] == pytest.approx(2.0)  # no compute measured at its size
    assert cpu["ideal_s"] is None and cpu["pct_of_ideal"] is None


def test_the_link_both_ways_at_once_bounds_the_ideal_too():
    streams = pipeline_row("streams-k", 4.0)
    one_way = {**pipeline_row("h2d", 4.0), "to_host_bytes": 0}
    add_ideals([streams, one_way], {"gpu_h2d_gbps": 50.0, "gpu_d2h_gbps": 25.0,
                                    "gpu_bidirectional_gbps": 60.0})
    assert streams["ideal_s"] == pytest.approx(150 / 60)  # > in 2 s, out 2 s
    assert streams["ideal"]["both_ways_s"] == pytest.approx(2.5)
    assert one_way["ideal_s"] == pytest.approx(2.0) and one_way["ideal"]["both_ways_s"] == 0


def test_no_ideal_without_the_roof_of_a_direction_the_row_crosses():
    row = pipeline_row("streams-k", 4.0)
    add_ideals([row], {"gpu_h2d_gbps": 50.0, "gpu_d2h_gbps": None})
    assert row["ideal_s"] is None


def test_a_declared_baseline_replaces_the_naive_row_in_the_speedup():
    def row(name, role, median, baseline=None):
        return {"case": "host-device", "variant": name, "device": "gpu", "role": role,
                "size": {"bytes": 8}, "median_s": median, "valid": True, "baseline": baseline,
                "gbps": 1.0, "gflops": 0.0, "flops": 0, "bytes": 8, "items_per_s": None,
                "unit_roof": None}
    rows = [row("h2d-pageable", "naive", 4.0), row("d2h-pageable", "naive", 8.0),
            row("d2h-pinned", "optimized", 2.0, baseline="d2h-pageable")]
    add_comparisons(rows, {"gpu_copy_gbps": 1.0, "gpu_peak_gflops_fp32": 1.0})
    assert rows[2]["speedup_vs_naive"] == pytest.approx(4.0)


# --- phases -------------------------------------------------------------------------------

class TickClock:
    """Each call of a step takes as many seconds as it says it does."""

    name = "ticks"

    def per_call(self, run, calls):
        return sum(run() for _ in range(calls))


def test_phases_add_up_steps_of_a_phase_within_a_run_and_keep_the_median():
    costs = iter([1, 2, 10, 3, 1, 2, 20, 3, 1, 2, 30, 5])
    steps = [Step("copy in", lambda: next(costs)), Step("copy in", lambda: next(costs)),
             Step("compute", lambda: next(costs)), Step("copy out", lambda: next(costs))]
    assert time_phases(steps, TickClock(), runs=3) == {"copy in": 3, "compute": 20,
                                                       "copy out": 3}


def test_a_stepped_run_is_its_steps_in_order():
    done = []
    bound = stepped([Step("a", lambda: done.append(1)), Step("b", lambda: done.append(2))],
                    "result", {"k": 1})
    assert bound.run() == "result" and done == [1, 2]
    assert [step.phase for step in bound.steps] == ["a", "b"] and bound.params == {"k": 1}
    assert Bound(lambda: None).steps == ()


def test_runs_timed_step_by_step_count_as_runs():
    from loclab.bench.kernels import counting_runs

    calls = []
    stepwise = Variant("v", "gpu", "optimized", "", lambda *a: stepped(
        [Step("copy in", lambda: calls.append("in")), Step("compute", lambda: None)], None))
    counted, counter = counting_runs(stepwise)
    bound = counted.setup()
    bound.run()
    bound.run()
    for _ in range(3):  # as time_phases runs them
        for step in bound.steps:
            step.run()
    assert counter.runs == 5 and calls == ["in"] * 5


def test_a_results_file_with_broken_phases_is_named_in_one_line(tmp_path):
    import json

    from loclab.bench.results import load_json
    from tests.report_documents import full_run

    document = full_run()
    document["results"][0]["phases"] = {"copy in": "fast"}
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(document))
    with pytest.raises(UsageError, match="result 1: 'phases' is .* not an object of seconds"):
        load_json(path)


# --- goldens the variants' float32 arithmetic meets exactly -------------------------------

@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 300), rounds=st.integers(1, 3000), seed=st.integers(0, 2**16))
def test_overlap_rounds_in_float32_are_exact(n, rounds, seed):
    from loclab.cases.overlap import SCALE, SHIFT

    case = get_case("overlap")
    inputs = case.make_inputs({"n": n, "rounds": rounds}, np.random.default_rng(seed))
    v = inputs["x"].copy()
    for _ in range(rounds):
        v = v * np.float32(SCALE) + np.float32(SHIFT)
    np.testing.assert_array_equal(v, case.golden(inputs))


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 300), kernels=st.integers(1, 200), seed=st.integers(0, 2**16))
def test_kernel_chain_in_float32_is_exact_and_order_matters(n, kernels, seed):
    from loclab.cases.kernel_chain import coefficients

    case = get_case("kernel-chain")
    inputs = case.make_inputs({"n": n, "kernels": kernels}, np.random.default_rng(seed))
    v = inputs["x"].copy()
    for kernel in range(1, kernels + 1):
        a, b = coefficients(kernel)
        v = v * np.float32(a) + np.float32(b)
    np.testing.assert_array_equal(v, case.golden(inputs))
    if kernels > 1:  # one kernel missing is caught
        assert not np.array_equal(v, case.golden({**inputs, "kernels": np.array([kernels - 1])}))


def test_the_chain_coefficients_are_exact_in_float32():
    from loclab.cases.kernel_chain import MAX_KERNELS, coefficients

    for kernel in (1, 2, MAX_KERNELS):
        a, b = coefficients(kernel)
        assert Fraction(float(np.float32(b))) == b and a in (-1, 1)


def test_gemm_chain_golden_multiplies_left_to_right_within_its_tolerance():
    case = get_case("gemm-chain")
    inputs = case.make_inputs({"n": 9, "matrices": 4}, np.random.default_rng(1))
    assert list(inputs) == ["a", "b", "c", "d"]
    a, b, c, d = (m.astype(np.float32) for m in inputs.values())
    single = ((a @ b) @ c) @ d  # float32 products in another order of additions
    reference = case.golden(inputs)
    error = np.max(np.abs(single - reference)) / np.max(np.abs(reference))
    assert error <= case.tolerance_for(inputs)
    assert case.tolerance_for(inputs) == pytest.approx(3 * 1.05 * 10 * 2.0**-24)


def test_a_gemm_chain_beyond_float32_is_refused_in_one_line():
    case = get_case("gemm-chain")
    with pytest.raises(UsageError, match="beyond float32's range"):
        case.checked_dims({"n": 8192, "matrices": 16})
    assert case.checked_dims({"n": 8192, "matrices": 3}) == {"n": 8192, "matrices": 3}
    with pytest.raises(UsageError, match="matrices=1: must be a whole number from 2"):
        case.checked_dims({"n": 8, "matrices": 1})


def test_host_device_bytes_never_hold_the_poison():
    inputs = get_case("host-device").make_inputs({"bytes": 100_000}, np.random.default_rng(0))
    assert inputs["a"].max() < 255


# --- the CPU pipeline and first touch -----------------------------------------------------

def test_first_touch_applies_only_with_more_than_one_numa_node(machine):
    first_touch = variant("overlap", "cpu-first-touch")
    one = replace(machine, cpu=replace(machine.cpu, numa_nodes=1))
    two = replace(machine, cpu=replace(machine.cpu, numa_nodes=2))
    assert "one NUMA node" in first_touch.skip_reason({"n": 8, "rounds": 1}, one)
    assert first_touch.skip_reason({"n": 8, "rounds": 1}, two) is None


@pytest.mark.parametrize("name", ["cpu-serial-init", "cpu-first-touch"])
@pytest.mark.parametrize("dims", get_case("overlap").test_dims)
def test_the_cpu_pipelines_match_golden_wherever_they_run(name, dims, machine):
    check = run_variant(get_case("overlap"), variant("overlap", name), dims, machine)
    assert check.valid, check.problem


def test_the_cpu_pipeline_touches_fresh_pages_every_run_and_keeps_none(machine):
    from loclab.cases.overlap import cpu

    case = get_case("overlap")
    dims = {"n": 100_003, "rounds": 3}
    inputs = case.make_inputs(dims, np.random.default_rng(0))
    out = np.full(dims["n"], np.nan, np.float32)
    made = []
    fresh = cpu.fresh
    try:
        cpu.fresh = lambda n: made.append(fresh(n)) or made[-1]
        bound = cpu.first_touch(inputs, out, machine)
        for _ in range(3):
            out[:] = np.nan
            for step in bound.steps:
                step.run()
            np.testing.assert_array_equal(out, case.golden(inputs))
    finally:
        cpu.fresh = fresh
    assert len(made) == 3 and len({id(buffer) for buffer in made}) == 3
    assert [step.phase for step in bound.steps] == ["copy in", "compute", "copy out"]


def test_the_numa_node_count_reads_the_nodes_that_hold_our_cpus(tmp_path):
    from loclab.hw.cpu import count_numa_nodes, parse_cpu_list

    assert parse_cpu_list("0-3,8,10-11\n") == {0, 1, 2, 3, 8, 10, 11}
    for node, cpus in (("node0", "0-3"), ("node1", "4-7"), ("node2", "")):
        (tmp_path / node).mkdir()
        (tmp_path / node / "cpulist").write_text(cpus + "\n")
    assert count_numa_nodes({0, 5}, tmp_path) == 2
    assert count_numa_nodes({0, 1}, tmp_path) == 1
    assert count_numa_nodes({0}, tmp_path / "missing") == 1


@pytest.mark.parametrize("speed, width, expected", [
    ("32.0 GT/s PCIe\n", "16\n", ("PCIe 5.0 x16", 32 * 16 * 128 / 130 / 8)),
    ("8.0 GT/s PCIe", "8", ("PCIe 3.0 x8", 8 * 8 * 128 / 130 / 8)),
    ("Unknown", "16", None), ("16.0 GT/s PCIe", "0", None)])
def test_the_pcie_link_is_read_from_the_bus(tmp_path, speed, width, expected):
    from loclab.hw.gpu import read_pcie_link

    device = tmp_path / "0000:01:00.0"
    device.mkdir()
    (device / "current_link_speed").write_text(speed)
    (device / "current_link_width").write_text(width)
    link = read_pcie_link("0000:01:00.0", tmp_path)
    assert (None if link is None else (link.text(), pytest.approx(link.gbps))) == (
        None if expected is None else (expected[0], pytest.approx(expected[1])))
    assert read_pcie_link("0000:02:00.0", tmp_path) is None


# --- a run of the family on the CPU, and what a user sees ---------------------------------

def test_a_cpu_run_of_the_family_has_the_new_keys_and_renders(machine, monkeypatch, tmp_path):
    from loclab.measure.timing import Budget
    from loclab.report import write_report
    from loclab.report.phases import phase_table

    monkeypatch.setattr(runner, "gpu_unavailable_reason", lambda: "no GPU here")
    document = runner.run(cases=["transfers"], size="small",
                          budget=Budget(seconds=0.01, min_runs=2, max_runs=3))
    rows = [row for row in document["results"] if row["case"] == "overlap"]
    assert {row["variant"] for row in rows} == {"cpu-serial-init", "cpu-first-touch"}
    assert document["cases"]["overlap"]["family"] == "transfers"
    assert document["cases"]["overlap"]["limit"] == "interconnect"
    ran = next(row for row in rows if row["variant"] == "cpu-serial-init")
    assert ran["valid"] and set(ran["phases"]) == {"copy in", "compute", "copy out"}
    assert ran["memory"] == {"inputs": "host", "output": "host"}
    assert ran["to_device_bytes"] == ran["to_host_bytes"] == 0 and ran["ideal_s"] is None
    assert phase_table(rows) is not None
    assert "gpu_h2d_gbps" in document["references"]
    index = write_report(document, tmp_path / "report")
    assert "Where the time goes" in (tmp_path / "report" / "README.md").read_text()
    assert index.exists()


def test_the_cli_refuses_a_gpu_only_case_on_the_cpu_in_one_line(capsys):
    from loclab.cli import main

    assert main(["run", "--case", "gemm-chain", "--device", "cpu", "--size", "small"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--case gemm-chain: nothing runs on the CPU" in err


def test_the_cli_knows_the_family_and_its_dimensions(capsys):
    from loclab.cli import main

    assert main(["run", "--case", "transfers", "--dims", "bytes=4096"]) == 2
    assert "overlap: unknown dimension bytes" in capsys.readouterr().err
    assert main(["run", "--case", "overlap", "--dims", "n=8,rounds=0"]) == 2
    assert "rounds=0: must be a whole number from 1 to 1,048,576" in capsys.readouterr().err


def test_devices_shows_the_links_roofs_beside_the_copies(monkeypatch, capsys, machine):
    import loclab.bench.devices as devices
    from loclab.cli import main

    link = {"variant": "h2d-pinned", "size": {"bytes": 2**28}, "link_gbps": 55.2,
            "memory": {"inputs": "pinned", "output": "device"}, "valid": True, "error": None}
    info = {"machine": {**machine.to_json(), "gpu": None}, "copies": [],
            "references": {"gpu_h2d_gbps": 55.2, "gpu_d2h_gbps": 55.1,
                           "gpu_bidirectional_gbps": 95.1, "gpu_h2d_pageable_gbps": 9.85},
            "links": [link, {**link, "variant": "d2h-pageable", "valid": False,
                             "error": "out of memory"}]}
    monkeypatch.setattr(devices, "devices", lambda measure, threads: info)
    assert main(["devices"]) == 0
    out = capsys.readouterr().out
    assert ("pinned H2D 55.2, D2H 55.1, both ways 95.1 GB/s (pageable: H2D 9.85 GB/s) "
            "(copies of 256 MiB, measured)") in " ".join(out.split())
    assert "d2h-pageable: FAILED: out of memory" in out
