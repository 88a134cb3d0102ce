"""Reports from a synthetic document: every renderer, invalid rows marked, charts written."""

import re

import pytest

from loclab.report import write_report
from loclab.report.text import (by_case, case_table, failures, number, per_second, ratio,
                                 reuse_lines, roof_line, skips)


def result(variant, device, role, median, valid=True, flops=0, case="transpose"):
    gbps = 8e9 / median / 1e9 if median else None
    return {"case": case, "variant": variant, "device": device, "role": role,
            "size": {"rows": 100, "cols": 200}, "params": {}, "median_s": median,
            "min_s": median and median * 0.9, "max_s": median and median * 1.2,
            "iqr_s": median and median * 0.05, "runs": 5, "bytes": 8e9, "flops": flops,
            "gbps": gbps, "gflops": flops / median / 1e9 if median else None, "valid": valid,
            "max_rel_err": 0.0, "error": None if valid else "max relative error 1 > 0",
            "pct_of_copy": gbps and gbps / 40 * 100, "pct_of_peak": None,
            "speedup_vs_naive": 1.0, "vs_library": 1.0, "tuned": None}


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


def test_each_case_shows_its_own_metric_first_and_drops_the_others(document):
    transpose = case_table(document, "transpose", by_case(document)["transpose"])
    assert transpose.headers[:5] == ["variant", "dev", "size", "GB/s", "% copy"]
    assert "GFlop/s" not in transpose.headers and "% peak" not in transpose.headers
    assert transpose.valid == [True, False, True, False, True]
    document["cases"]["mmm"] = {"lesson": "temporal locality", "limit": "compute"}
    rows = [{**result("cpu-blocked", "cpu", "optimized", 0.5, flops=1e12, case="mmm"),
             "pct_of_peak": 40.0}]
    mmm = case_table(document, "mmm", rows, place=False)
    assert mmm.headers[:3] == ["variant", "GFlop/s", "% peak"]
    assert mmm.rows[0][:3] == ["cpu-blocked", "2,000", "40.0%"]
    assert "GB/s" not in mmm.headers and "% copy" not in mmm.headers


def test_numbers_keep_three_significant_figures_whole():
    assert [number(v) for v in (0.683, 1.0, 12.45, 99.96, 137.3, 999.7, 25153.2)] == [
        "0.683", "1.00", "12.4", "100", "137", "1,000", "25,153"]
    assert [ratio(v) for v in (123.5, 1.0, 0.00282)] == ["124x", "1.00x", "0.00282x"]


def test_failures_say_why(document):
    assert failures(document) == [
        "transpose cpu-broken (cpu, 100x200): max relative error 1 > 0",
        "transpose gpu-crash (gpu, 100x200): max relative error 1 > 0"]


def test_a_skipped_row_is_neither_a_failure_nor_hidden(document, tmp_path):
    skipped = {**result("gpu-shared", "gpu", "optimized", None, valid=False),
               "error": None, "skipped": "sub-histograms do not fit"}
    document["results"].append(skipped)
    assert len(failures(document)) == 2
    assert skips(document) == ["transpose gpu-shared (gpu, 100x200): sub-histograms do not fit"]
    table = case_table(document, "transpose", by_case(document)["transpose"])
    assert table.rows[-1][-1] == "n/a" and table.valid[-1]
    markdown = (write_report(document, tmp_path / "r").parent / "README.md").read_text()
    assert "## Not applicable at their size" in markdown


def test_a_sweep_gets_a_time_chart_and_a_panel_per_size(document, tmp_path):
    document["cases"]["histogram"] = {"lesson": "LLC thrashing", "description": "h",
                                      "sweep": "bins"}
    for bins, median in ((1000, 0.001), (10**6, 0.01)):
        for variant, role in (("gpu-atomic", "naive"), ("gpu-multipass", "optimized")):
            row = result(variant, "gpu", role, median, case="histogram")
            document["results"].append({**row, "size": {"bins": bins, "n": 10**7}})
    index = write_report(document, tmp_path / "r")
    assert 'src="histogram-bins.png"' in index.read_text()
    assert (tmp_path / "r" / "histogram-bins.png").stat().st_size > 0


def test_a_sweep_can_plot_what_each_variant_pays_in_theory(document, tmp_path):
    document["cases"]["partitioning"] = {
        "lesson": "partitioning", "description": "p", "sweep": "threads",
        "sweep_param": ["hashes_per_key", "hash computations per key"]}
    for threads in (1, 2, 4):
        for variant, role, hashes in (("cpu-input", "naive", 1),
                                      ("cpu-output", "optimized", threads)):
            row = result(variant, "cpu", role, 0.01 / threads, case="partitioning")
            document["results"].append({**row, "size": {"keys": 10, "threads": threads},
                                        "params": {"hashes_per_key": hashes}})
    page = write_report(document, tmp_path / "r").read_text()
    assert "partitioning: time and hash computations per key against threads" in page
    assert (tmp_path / "r" / "partitioning-threads.png").stat().st_size > 0


def test_report_directory(document, tmp_path):
    index = write_report(document, tmp_path / "r")
    page = index.read_text()
    assert page.count('class="invalid"') == 2 and "cpu-broken" in page
    assert 'src="transpose.png"' in page and 'src="roofline.png"' in page
    markdown = (tmp_path / "r" / "README.md").read_text()
    assert "## transpose" in markdown and "| **cpu-broken** | **cpu** |" in markdown
    assert "## Failures" in markdown
    for png in ("copy.png", "transpose.png", "roofline.png"):
        assert (tmp_path / "r" / png).read_bytes()[:4] == b"\x89PNG"


def test_reuse_in_theory_is_shown_next_to_the_measured_rate(document, tmp_path):
    stated = {**result("gpu-tiled", "gpu", "optimized", 0.004, flops=1e12, case="mmm"),
              "size": {"m": 10, "n": 20, "k": 30}, "pct_of_peak": 3.3,
              "params": {"reuse": "32 products per element staged in shared memory"}}
    wrong = {**stated, "variant": "gpu-wrong", "valid": False}
    document["results"] += [stated, wrong]
    assert reuse_lines(document) == [
        "mmm gpu-tiled (gpu, 10x20x30): reuse 32 products per element staged in shared "
        "memory; measured 250,000 GFlop/s (3.30% of peak)"]
    markdown = (write_report(document, tmp_path / "r").parent / "README.md").read_text()
    assert "## Data reuse in theory, next to the measured rate" in markdown


def pairs_row(variant, role, median, unit_roof=None):
    """A nearest-neighbour row: 4 G pairs, rated in pairs/s against an issue limit."""
    row = {**result(variant, "gpu", role, median, flops=8e9, case="nn"),
           "size": {"m": 2 ** 16, "n": 2 ** 16}, "unit": "pairs", "items": 4e9,
           "items_per_s": 4e9 / median, "unit_roof": unit_roof,
           "pct_of_unit_roof": 4e9 / median / unit_roof["per_s"] * 100 if unit_roof else None}
    row["params"] = {"reuse": "256 queries per point staged"}
    return row


def test_rates_in_a_case_unit_get_si_prefixes():
    assert per_second(5.49e12, "pairs") == "5.49 T pairs/s"
    assert per_second(812e6, "keys") == "812 M keys/s"
    assert per_second(12.0, "keys") == "12.0 keys/s"
    assert per_second(None, "keys") == per_second(3.0, None) == "-"


def test_a_unit_rate_is_a_column_and_its_limit_a_roof(document, tmp_path):
    limit = {"per_s": 8e12, "what": "issue limit at 4 instructions a pair"}
    document["results"] += [pairs_row("gpu-naive", "naive", 0.002, limit),
                            pairs_row("gpu-shared", "optimized", 0.001, limit)]
    table = case_table(document, "nn", by_case(document)["nn"])
    assert table.headers[3:5] == ["pairs/s", "% limit"]
    assert [cells[3] for cells in table.rows] == ["2.00 T", "4.00 T"]
    assert table.rows[-1][4] == "50.0%"
    assert "GB/s" not in table.headers and "GFlop/s" not in table.headers
    assert "nn GPU issue limit at 4 instructions a pair: 8.00 T pairs/s" in roof_line(document)
    assert reuse_lines(document)[-1].endswith(
        "measured 4.00 T pairs/s (50.0% of the issue limit at 4 instructions a pair)")
    write_report(document, tmp_path / "r")
    assert (tmp_path / "r" / "nn.png").read_bytes()[:4] == b"\x89PNG"


def console_text(document, width):
    from io import StringIO

    from rich.console import Console

    from loclab.report.console import print_results

    out = StringIO()
    print_results(document, Console(file=out, width=width))
    return out.getvalue()


def test_the_console_leaves_out_columns_a_section_does_not_need(document):
    document["results"] += [pairs_row("gpu-shared", "optimized", 0.001)]
    sections = re.split(r"\n *\n", console_text(document, 200))
    transpose = next(text for text in sections if "cpu-naive" in text)
    pairs = next(text for text in sections if "gpu-shared" in text)
    assert "GB/s" in transpose and "GFlop/s" not in transpose and "pairs/s" not in transpose
    assert "pairs/s" in pairs and "4.00 T" in pairs and "GFlop/s" not in pairs
    assert "GB/s" not in pairs and "% copy" not in pairs
    assert "4.00 T pairs/s" not in pairs  # the unit is in the header


def test_at_80_columns_no_name_or_number_is_cut(document):
    """The widest case tables (long variant names, tiny ratios, five-digit times) fit 80
    columns by wrapping headers and moving columns closer, never by shortening a cell."""
    document["cases"]["mmm"] = {"lesson": "temporal locality: block tiling, register "
                                "tiling, autotuned tiles", "limit": "compute"}
    names = ["cpu-output-partitioned-xy", "cpu-transposed-b", "cpu-register-tiled"]
    for name, median in zip(names, (25.153, 2.02, 0.0497)):
        document["results"].append({**result(name, "cpu", "optimized", median, flops=1.7e10,
                                              case="mmm"),
                                    "size": {"m": 2048, "n": 2048, "k": 2048},
                                    "pct_of_peak": 0.206, "vs_library": 0.00282,
                                    "speedup_vs_naive": 507.3})
    text = console_text(document, 80)
    assert "\u2026" not in text  # rich's ellipsis: nothing was shortened
    assert max(len(line.rstrip()) for line in text.splitlines()) <= 80
    for name in names:
        assert re.search(rf"^ {name} ", text, re.MULTILINE), name
    for cell in ("25,153", "0.00282x", "507x", "0.206%"):
        assert cell in text


def kernel(name, block, registers, shared, occupancy, limited_by, accesses, cuda=None):
    """A kernel entry as ``loclab.bench.kernels.kernel_rows`` writes it."""
    blocks = round(occupancy * 64 / (block[0] * block[1] / 32))
    return {"kernel": name, "block": block, "threads": block[0] * block[1],
            "registers": registers, "static_shared": shared, "dynamic_shared": 0,
            "local_bytes": 0, "blocks_per_sm": blocks, "warps_per_sm": round(occupancy * 64),
            "occupancy": occupancy, "limited_by": limited_by,
            "cuda_blocks_per_sm": blocks if cuda is None else cuda, "error": None,
            "accesses": [{"access": "", "space": space, "write": False, "note": "",
                          ("sectors_per_request" if space == "global" else
                           "conflict_degree"): value, "error": None}
                         for space, value in accesses]}


def test_gpu_rows_show_their_kernels_in_80_columns(document, tmp_path):
    naive = {**result("gpu-naive", "gpu", "naive", 0.004),
             "kernels": [kernel("transpose_naive<32>", [32, 32], 16, 0, 1.0, "warps",
                                [("global", 4), ("global", 32)])]}
    padded = {**result("gpu-shared-padded", "gpu", "optimized", 0.001),
              "kernels": [kernel("transpose_staged<32,8,1>", [32, 8], 18, 4224, 1.0, "warps",
                                 [("global", 4), ("shared", 1), ("shared", 1),
                                  ("global", 4)], cuda=7)]}
    document["results"] += [naive, padded]
    text = console_text(document, 80)
    assert all(len(line) <= 80 for line in text.splitlines())
    section = " ".join(text[text.index("GPU, 100x200: kernels"):].split())
    assert "transpose_staged" in section and "gpu-shared-padded" in section
    assert "4,32" in section and "1,1" in section
    assert "the occupancy model gives 8 blocks an SM, CUDA 7" in section
    markdown = (write_report(document, tmp_path / "r").parent / "README.md").read_text()
    assert "| gpu-naive | transpose_naive | 32x32 |" in markdown
