"""The time model: the two roofs, the traffic the GPU kernels' declared accesses add up to,
the CPU loop nests' sampled cache traffic against a whole trace, the random-update model of
the histogram against the cache simulator, and every row of a run predicted."""

from __future__ import annotations

import numpy as np
import pytest

import loclab
from loclab.measure.timing import Budget
from loclab.model import loop_traffic as sampling
from loclab.model.cache import CacheLevel, simulate
from loclab.model.loop_traffic import loop_traffic
from loclab.model.time import Traffic, predict, sector_traffic
from loclab.model.trace import Trace

QUICK = Budget(seconds=0.01, min_runs=2, max_runs=4)


def test_the_slower_roof_bounds_the_time() -> None:
    memory = predict(Traffic(8e9, "m"), flops=1e9, copy_gbps=100.0, peak_gflops=1000.0)
    assert (memory.seconds, memory.bound) == (0.08, "memory")
    compute = predict(Traffic(8e6, "m"), flops=1e12, copy_gbps=100.0, peak_gflops=1000.0)
    assert (compute.seconds, compute.bound) == (1.0, "compute")
    assert predict(Traffic(1.0, "m"), 0.0, None, None) is None
    assert set(memory.to_json()) == {"predicted_s", "bound", "traffic_bytes", "traffic_model"}


def kernel(name: str, accesses: list[tuple[int, float]], launches: float = 1,
           per_run: bool = False, footprint: int | None = None) -> dict:
    return {"kernel": name, "error": None, "launches_per_run": launches,
            "accesses": [{"space": "global", "executions": count,
                          "mean_sectors_per_request": sectors, "error": None,
                          "count_per_run": per_run, "footprint_bytes": footprint}
                         for count, sectors in accesses]}


def test_sector_traffic_adds_requests_times_sectors_over_launches() -> None:
    # A coalesced float read (4 sectors a request) and a strided write (32): 1 + 8 bytes a
    # float; the kernel runs twice a run.
    l2 = 50 * 2**20
    traffic = sector_traffic([kernel("t<32>", [(1024, 4), (1024, 32)], launches=2)], l2)
    assert traffic.bytes == 2 * (1024 * 4 + 1024 * 32)
    assert "t" in traffic.model
    totals = sector_traffic([kernel("h", [(1024, 4)], launches=8, per_run=True)], l2)
    assert totals.bytes == 1024 * 4  # counts already over the run's eight launches
    cached = sector_traffic([kernel("x", [(2**20, 1)], footprint=4096)], l2)
    assert cached.bytes == 4096  # x read by every row: from memory once
    too_big = sector_traffic([kernel("x", [(2**20, 1)], footprint=l2)], l2)
    assert too_big.bytes == 2**20
    undeclared = kernel("u", [(1024, 4)])
    undeclared["accesses"][0]["executions"] = None
    assert sector_traffic([undeclared], l2) is None


NAIVE = """
void naive(int rows, int cols, int first, float A[rows][cols], float B[cols][rows]) {
    for (int i = 0; i < first; i++)
        for (int j = 0; j < cols; j++)
            B[j][i] = A[i][j];
}
"""


@pytest.mark.parametrize("rows, cols, cache", [(96, 256, 16 * 1024), (200, 130, 8 * 1024),
                                               (128, 128, 64 * 1024)])
def test_sampled_traffic_extends_the_steady_state_to_the_whole_nest(
        rows: int, cols: int, cache: int, monkeypatch: pytest.MonkeyPatch) -> None:
    whole = loop_traffic(NAIVE, {"rows": rows, "cols": cols}, rows, 2 * cols, cache)
    monkeypatch.setattr(sampling, "SAMPLE_ACCESSES", 32 * cols)  # 16 rows, then 32
    sampled = loop_traffic(NAIVE, {"rows": rows, "cols": cols}, rows, 2 * cols, cache)
    assert "outer iterations traced" in sampled.model
    assert sampled.bytes == pytest.approx(whole.bytes, rel=0.05)


def test_a_column_that_does_not_fit_costs_a_line_a_write() -> None:
    golden = 2 * 4 * 256 * 256
    fits = loop_traffic(NAIVE, {"rows": 256, "cols": 256}, 256, 512, 1024 * 1024)
    thrashes = loop_traffic(NAIVE, {"rows": 256, "cols": 256}, 256, 512, 16 * 1024)
    assert fits.bytes == golden  # each line read once and written once: the golden bytes
    assert thrashes.bytes == pytest.approx(golden / 2 + 256 * 256 * 64, rel=0.02)


def test_the_random_update_model_matches_the_simulator() -> None:
    from loclab.cases.histogram.traffic import LINE, _updates

    rng = np.random.default_rng(0)
    bins, n, cache = 16 * 1024, 200_000, 16 * 1024  # a 64 KiB histogram, a 16 KiB cache
    hist = rng.integers(0, bins, n) * 4 + (1 << 30)
    addresses = np.repeat(hist, 2)
    writes = np.tile([False, True], n)
    stats = simulate(Trace(addresses, writes), [CacheLevel("C", cache, LINE, 8)])[0]
    simulated = (stats.misses - stats.write_misses + stats.writebacks) * LINE
    assert simulated == pytest.approx(_updates(n, bins * 4, cache), rel=0.05)


def test_every_row_of_a_run_is_predicted() -> None:
    document = loclab.run(cases=["transpose", "histogram"], device="cpu", size="small",
                          budget=QUICK)
    rows = [row for row in document["results"] if row["median_s"]]
    assert rows and all(row["predicted_s"] and row["bound"] in ("memory", "compute")
                        for row in rows)
    by_variant = {row["variant"]: row for row in rows if row["case"] == "transpose"}
    assert by_variant["cpu-naive"]["traffic_model"].startswith("cache model")
    assert by_variant["numpy"]["traffic_model"].startswith("compulsory")
    assert document["references"]["cpu_model_copy_gbps"] > 0
    assert all(row["measured_vs_predicted"] > 0 for row in rows)
