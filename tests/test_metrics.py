import pytest

from loclab.bench.metrics import add_comparisons, derive_references, rates


def row(case, variant, device, role, median, nbytes=8e9, flops=0, valid=True, size=None):
    r = {"case": case, "variant": variant, "device": device, "role": role, "median_s": median,
         "bytes": nbytes, "flops": flops, "valid": valid, "size": size or {"n": 1000}}
    rates(r)
    return r


def references(cpu_copy=40.0, gpu_copy=4000.0, cpu_peak=1000.0, gpu_peak=60000.0):
    return {"cpu_copy_gbps": cpu_copy, "gpu_copy_gbps": gpu_copy,
            "cpu_peak_gflops_fp32": cpu_peak, "gpu_peak_gflops_fp32": gpu_peak}


def test_rates_come_from_the_golden_work():
    r = row("t", "v", "cpu", "optimized", median=2.0, nbytes=8e9, flops=4e9)
    assert r["gbps"] == pytest.approx(4.0)
    assert r["gflops"] == pytest.approx(2.0)


def test_a_case_with_a_unit_gets_its_rate_and_fraction_of_the_unit_roof():
    r = {**row("nn", "a", "gpu", "optimized", None), "median_s": 0.5, "items": 2e12,
         "unit": "pairs", "unit_roof": {"per_s": 8e12, "what": "issue limit"}}
    rates(r)
    add_comparisons([r], references())
    assert r["items_per_s"] == pytest.approx(4e12)
    assert r["pct_of_unit_roof"] == pytest.approx(50.0)
    plain = row("t", "b", "gpu", "optimized", 0.5)
    add_comparisons([plain], references())
    assert plain["items_per_s"] is None and plain["pct_of_unit_roof"] is None


def test_untimed_row_has_no_rates():
    r = row("t", "v", "cpu", "optimized", median=None)
    assert r["gbps"] is None and r["gflops"] is None


def test_each_size_is_compared_with_its_own_naive_and_library_rows():
    small, big = {"bins": 10}, {"bins": 1000}
    rows = [row("h", "naive", "gpu", "naive", 1.0, size=small),
            row("h", "lib", "gpu", "library", 3.0, size=small),
            row("h", "naive", "gpu", "naive", 8.0, size=big),
            row("h", "lib", "gpu", "library", 2.0, size=big),
            row("h", "fast", "gpu", "optimized", 1.0, size=big)]
    add_comparisons(rows, references())
    assert rows[1]["speedup_vs_naive"] == pytest.approx(1 / 3)
    assert rows[4]["speedup_vs_naive"] == pytest.approx(8.0)
    assert rows[4]["vs_library"] == pytest.approx(2.0)


def test_percent_of_copy_speedup_and_library_ratio():
    rows = [row("t", "naive", "gpu", "naive", 8e-3), row("t", "fast", "gpu", "optimized", 2e-3),
            row("t", "lib", "gpu", "library", 4e-3)]
    add_comparisons(rows, references())
    naive, fast, lib = rows
    assert fast["pct_of_copy"] == pytest.approx(100 * (8e9 / 2e-3 / 1e9) / 4000.0)
    assert fast["speedup_vs_naive"] == pytest.approx(4.0)
    assert fast["vs_library"] == pytest.approx(2.0)
    assert naive["speedup_vs_naive"] == pytest.approx(1.0)
    assert lib["vs_library"] == pytest.approx(1.0)


def test_comparisons_stay_within_case_and_device():
    rows = [row("t", "naive", "cpu", "naive", 1.0), row("t", "fast", "gpu", "optimized", 0.5),
            row("u", "naive", "gpu", "naive", 2.0)]
    add_comparisons(rows, references())
    assert rows[1]["speedup_vs_naive"] is None


def test_invalid_naive_is_not_a_baseline():
    rows = [row("t", "naive", "cpu", "naive", 1.0, valid=False),
            row("t", "fast", "cpu", "optimized", 0.5)]
    add_comparisons(rows, references())
    assert rows[1]["speedup_vs_naive"] is None


def test_peak_fraction_only_when_compute_bound():
    # ridge = 1000 GFlop/s / 40 GB/s = 25 flop/byte
    memory_bound = row("t", "a", "cpu", "optimized", 1.0, nbytes=1e9, flops=1e10)
    compute_bound = row("t", "b", "cpu", "optimized", 1.0, nbytes=1e9, flops=1e11)
    add_comparisons([memory_bound, compute_bound], references())
    assert memory_bound["pct_of_peak"] is None
    assert compute_bound["pct_of_peak"] == pytest.approx(10.0)


def test_missing_roof_gives_no_percentage():
    r = row("t", "a", "gpu", "optimized", 1.0)
    add_comparisons([r], references(gpu_copy=None))
    assert r["pct_of_copy"] is None


def test_the_best_valid_copy_is_the_roof(machine):
    rows = [row("copy", "a", "cpu", "optimized", 1.0), row("copy", "b", "cpu", "library", 0.5),
            row("copy", "c", "cpu", "library", 0.1, valid=False),
            row("transpose", "d", "cpu", "optimized", 0.01)]
    refs = derive_references(rows, machine)
    assert refs["cpu_copy_gbps"] == pytest.approx(16.0)
    assert refs["gpu_copy_gbps"] is None
    assert refs["cpu_peak_gflops_fp32"] == machine.cpu.peak_gflops_fp32
