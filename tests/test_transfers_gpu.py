"""The transfers family on a real GPU (marked ``gpu``): inputs and outputs where each variant's
placement puts them, the pipelines under many stream and chunk configurations, run after run,
and a run of the whole family with the link's roofs, ideals and phases filled in."""

import numpy as np
import pytest

from loclab.bench.auto import get_case
from loclab.bench.backend import GpuBackend, Staging
from loclab.cases import CASE_FAMILIES
from tests.case_runs import run_on_gpu
from loclab.measure.timing import Budget

QUICK = Budget(seconds=0.01, min_runs=2, max_runs=4)

pytestmark = pytest.mark.gpu


def variant(case, name):
    return next(v for v in get_case(case).variants if v.name == name)


def memory_of(array):
    """Where an array lives: 'device', 'pinned' or 'pageable'."""
    import cupy

    if isinstance(array, cupy.ndarray):
        return "device"
    kind = cupy.cuda.runtime.pointerGetAttributes(array.ctypes.data).type
    return "pinned" if kind == cupy.cuda.runtime.memoryTypeHost else "pageable"


@pytest.mark.parametrize("case_name", CASE_FAMILIES["transfers"])
def test_inputs_and_outputs_live_where_each_variant_says(case_name):
    case = get_case(case_name)
    dims = case.test_dims[-1]
    staging = Staging(GpuBackend(), case.make_inputs(dims, np.random.default_rng(0)))
    shape, dtype = case.output(dims)
    for v in case.variants_on("gpu"):
        staged = staging.inputs_for(v)
        assert {memory_of(a) for a in staged.values()} == {v.placement.inputs}, v.name
        if v.placement.inputs != "device":
            assert not any(a.flags.writeable for a in staged.values()), v.name
        assert memory_of(staging.output_for(v, shape, dtype)) == v.placement.output, v.name


@pytest.mark.parametrize("streams", [1, 2, 3, 16])
@pytest.mark.parametrize("chunk_kib", [64, 100, 4096])
def test_streams_k_matches_golden_for_any_streams_and_chunks_run_after_run(streams, chunk_kib,
                                                                          machine):
    case = get_case("overlap")
    for dims in ({"n": 1_000_003, "rounds": 3}, {"n": 16_385, "rounds": 1}):
        check, bound = run_on_gpu(case, variant("overlap", "streams-k"), dims, machine,
                                  runs=3, streams=streams, chunk_kib=chunk_kib)
        assert check.valid, (dims, check.problem)
        chunk = chunk_kib * 1024 // 4
        assert bound.params["chunks"] == -(-dims["n"] // chunk)
        assert bound.params["streams"] == min(streams, bound.params["chunks"])


@pytest.mark.parametrize("case_name, name", [
    ("host-device", "both-ways-pinned"), ("host-device", "round-trip-pinned"),
    ("gemm-chain", "device-centric"), ("gemm-chain", "data-flow"),
    ("kernel-chain", "device-centric"), ("kernel-chain", "data-flow"),
    ("kernel-chain", "fused"), ("overlap", "serial"), ("overlap", "serial-pageable")])
def test_every_pipeline_is_right_run_after_run(case_name, name, machine):
    case = get_case(case_name)
    for dims in case.test_dims:
        check, _ = run_on_gpu(case, variant(case_name, name), dims, machine, runs=3)
        assert check.valid, (name, dims, check.problem)


def test_a_run_of_the_family_fills_in_the_link_and_the_ideals(machine):
    from loclab.bench.runner import run

    document = run(cases=["transfers"], device="gpu", size="small", budget=QUICK)
    rows = document["results"]
    assert document["failures"] == 0, [r["error"] for r in rows if not r["valid"]]
    refs = document["references"]
    for key in ("gpu_h2d_gbps", "gpu_d2h_gbps", "gpu_h2d_pageable_gbps",
                "gpu_d2h_pageable_gbps", "gpu_bidirectional_gbps"):
        assert refs[key] > 0, key
    overlap = [r for r in rows if r["case"] == "overlap"]
    assert all(r["ideal_s"] and r["pct_of_ideal"] and r["no_overlap_s"] >= r["ideal_s"]
               for r in overlap)
    serial = next(r for r in overlap if r["variant"] == "serial")
    assert set(serial["phases"]) == {"copy in", "compute", "copy out"}
    chain = next(r for r in rows if r["case"] == "gemm-chain" and r["variant"] ==
                 "device-centric")
    assert chain["params"]["round_trips"] == 1 and chain["phases"]["copy out"] > 0
    assert all(r["bound"] == "link" for r in rows if r["case"] == "host-device")


def test_a_case_rated_against_the_link_brings_the_roof_at_its_size(machine):
    from loclab.bench.runner import run

    document = run(cases=["kernel-chain"], device="gpu", size="small", budget=QUICK)
    link = [r for r in document["results"] if r["case"] == "host-device"]
    assert {r["size"]["bytes"] for r in link} == {get_case("host-device").roof_dims["bytes"]}
    assert document["references"]["gpu_h2d_gbps"] > 0


def test_devices_reports_the_link():
    from loclab.bench.devices import devices

    info = devices()
    assert info["references"]["gpu_h2d_gbps"] > 0 and info["references"]["gpu_d2h_gbps"] > 0
    assert {row["variant"] for row in info["links"]} == {
        v.name for v in get_case("host-device").variants}
