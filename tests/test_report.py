"""Reports from a synthetic document: every renderer, invalid rows marked, charts written."""

import pytest

from loclab.report import write_report
from loclab.report.text import failures, results_table


def result(variant, device, role, median, valid=True, flops=0, case="transpose"):
    gbps = 8e9 / median / 1e9 if median else None
    return {"case": case, "variant": variant, "device": device, "role": role,
            "size": {"rows": 100, "cols": 200}, "params": {}, "median_s": median,
            "min_s": median and median * 0.9, "max_s": median and median * 1.2,
            "iqr_s": median and median * 0.05, "runs": 5, "bytes": 8e9, "flops": flops,
            "gbps": gbps, "gflops": flops / median / 1e9 if median else None, "valid": valid,
            "max_rel_err": 0.0, "error": None if valid else "max relative error 1 > 0",
            "pct_of_copy": gbps and gbps / 40 * 100, "pct_of_peak": None,
            "speedup_vs_naive": 1.0, "vs_library": 1.0}


@pytest.fixture
def document(machine):
    return {
        "loclab": "0.0", "created": "2026-11-21T00:00:00+00:00", "size": "small",
        "devices": ["cpu", "gpu"],
        "machine": {**machine.to_json(), "cpu": {**machine.cpu.to_json(), "numba_threads": 2}},
        "references": {"cpu_copy_gbps": 40.0, "gpu_copy_gbps": 4000.0,
                       "cpu_peak_gflops_fp32": 500.0, "gpu_peak_gflops_fp32": 60000.0},
        "cases": {"transpose": {"lesson": "spatial locality", "description": "a.T"}},
        "results": [result("cpu-copy", "cpu", "optimized", 0.2, case="copy"),
                    result("cpu-naive", "cpu", "naive", 1.0),
                    result("cpu-broken", "cpu", "optimized", 0.5, valid=False),
                    result("gpu-naive", "gpu", "naive", 0.01),
                    result("gpu-crash", "gpu", "optimized", None, valid=False),
                    result("gpu-mmm", "gpu", "optimized", 0.002, flops=1e12)],
    }


def test_table_has_flops_column_only_when_some_row_computes(document):
    table = results_table(document)
    assert "GFlop/s" in table.headers
    assert table.valid == [True, True, False, True, False, True]
    document["results"] = [r for r in document["results"] if not r["flops"]]
    assert "GFlop/s" not in results_table(document).headers


def test_failures_say_why(document):
    assert failures(document) == [
        "transpose cpu-broken (cpu): max relative error 1 > 0",
        "transpose gpu-crash (gpu): max relative error 1 > 0"]


def test_report_directory(document, tmp_path):
    index = write_report(document, tmp_path / "r")
    page = index.read_text()
    assert page.count('class="invalid"') == 2 and "cpu-broken" in page
    assert 'src="transpose.png"' in page and 'src="roofline.png"' in page
    markdown = (tmp_path / "r" / "README.md").read_text()
    assert "| **transpose** | **cpu-broken** |" in markdown
    assert "## Failures" in markdown
    for png in ("copy.png", "transpose.png", "roofline.png"):
        assert (tmp_path / "r" / png).read_bytes()[:4] == b"\x89PNG"
