"""Charts of a full CPU + GPU run, read back as matplotlib objects (never as pixels): each case
in its own metric against its roofs, plain ticks with units, wrong rows marked, and a
roofline whose numbered points are all in its key and never overlap."""

import itertools
import re
import subprocess
import sys

import pytest

from loclab.report.charts import (case_figure, case_title, roofline_figure, sweep_figure,
                                  tick_text, whisker_times, write_charts)
from loclab.report.text import number
from tests.report_documents import full_run

pytest.importorskip("matplotlib")

INVALID_RED = "#c00000"
CASES = ("copy", "transpose", "partitioning", "nearest-neighbour", "coalescing", "matvec",
         "histogram", "mmm", "bmmm")


@pytest.fixture(scope="module")
def run():
    return full_run()


@pytest.fixture(scope="module")
def broken():
    return full_run(failing=(("transpose", "gpu-shared"), ("mmm", "cpu-blocked")),
                    crashed=(("transpose", "cpu-blocked"),))


@pytest.fixture(autouse=True)
def close_figures():
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


def rows_of(document, case, device, **size):
    return [row for row in document["results"] if row["case"] == case
            and row["device"] == device and all(row["size"][k] == v for k, v in size.items())]


def panels(fig, device):
    """The bar panels of one device's column, top to bottom (a column is a subfigure titled
    with the device)."""
    for subfig in fig.subfigs:
        if subfig._suptitle.get_text().startswith(device.upper()):
            return sorted((ax for ax in subfig.axes if ax.get_yticklabels()),
                          key=lambda ax: -ax.get_position().y0)
    raise AssertionError(f"no {device} column")


def vertical_lines(ax):
    """The x of each reference line drawn across a panel."""
    return [line.get_xdata()[0] for line in ax.get_lines()
            if len(set(line.get_xdata())) == 1 and list(line.get_ydata()) == [0, 1]]


def texts(ax):
    return [text.get_text() for text in ax.texts]


def bar_axis_label(fig):
    return next(ax.get_xlabel() for ax in fig.axes if ax.get_xlabel())


@pytest.mark.parametrize("case, unit", [
    ("copy", "GB/s"), ("transpose", "GB/s"), ("coalescing", "GB/s"), ("matvec", "GB/s"),
    ("histogram", "GB/s"), ("mmm", "GFlop/s"), ("bmmm", "GFlop/s"),
    ("nearest-neighbour", "pairs/s"), ("partitioning", "keys/s")])
def test_each_case_is_charted_in_its_own_metric(run, case, unit):
    label = bar_axis_label(case_figure(run, case))
    assert label.startswith(f"{unit}: the golden algorithm's")
    assert case_title(run, case).startswith(f"{case}: {unit} of each variant")


def test_a_memory_case_is_drawn_against_the_copy_roof(run):
    copy = run["references"]["gpu_copy_gbps"]
    (panel,) = panels(case_figure(run, "transpose"), "gpu")
    assert vertical_lines(panel) == [pytest.approx(copy)]
    assert f"copy roof {number(copy)} GB/s" in texts(panel)


def test_a_compute_case_is_drawn_against_the_peak_and_the_library(run):
    peak = run["references"]["gpu_peak_gflops_fp32"]
    fig = case_figure(run, "mmm")
    for panel, side in zip(panels(fig, "gpu"), (4096, 8192)):
        cublas = next(row for row in rows_of(run, "mmm", "gpu", m=side)
                      if row["variant"] == "cublas")
        assert sorted(vertical_lines(panel)) == [pytest.approx(cublas["gflops"]),
                                                 pytest.approx(peak)]
        assert {"fp32 peak 66,908 GFlop/s (theoretical)",
                f"cublas {number(cublas['gflops'])} GFlop/s"} <= \
            set(texts(panel))
    assert case_title(run, "mmm") == ("mmm: GFlop/s of each variant against the fp32 peak and "
                                      "the library (numpy, cublas)")


def test_a_unit_case_is_drawn_against_its_unit_roof(run):
    (panel,) = panels(case_figure(run, "nearest-neighbour"), "gpu")
    roof = rows_of(run, "nearest-neighbour", "gpu")[0]["unit_roof"]
    assert vertical_lines(panel) == [pytest.approx(roof["per_s"])]
    assert "issue limit at 4 instructions a pair: 8.36 T pairs/s" in texts(panel)
    (cpu,) = panels(case_figure(run, "nearest-neighbour"), "cpu")
    assert vertical_lines(cpu) == []  # no roof is known on a CPU


def bar_widths(ax):
    return [patch.get_width() for patch in ax.patches]


def test_a_roof_far_beyond_the_bars_is_named_at_the_edge_not_squashing_them(run):
    copy = run["references"]["cpu_copy_gbps"]  # 202 GB/s; matvec's CPU bars reach 45
    for panel in panels(case_figure(run, "matvec"), "cpu"):
        low, high = panel.get_xlim()
        assert high < copy and max(bar_widths(panel)) > 0.8 * high
        assert vertical_lines(panel) == []
        assert f"copy roof {number(copy)} GB/s: beyond the axis \u2192" in texts(panel)


def test_a_roof_within_reach_is_on_the_axis(run):
    (panel,) = panels(case_figure(run, "mmm"), "cpu")  # numpy beyond the 2,150 GFlop/s peak
    assert panel.get_xlim()[1] > max(bar_widths(panel)) > run["references"][
        "cpu_peak_gflops_fp32"]
    assert len(vertical_lines(panel)) == 2


SCIENTIFIC = re.compile(r"\de[+-]?\d|\u00d7|\\times|\^|\$")
PLAIN = re.compile(r"-?[\d,.]+( [kMGT])?")
UNITS = re.compile(r"GB/s|GFlop/s|pairs/s|keys/s|ms|threads|bins|flop/byte|per key")


def check_ticks(fig, counts: set[str]) -> None:
    """No offset ('x 10^3') or scientific notation on any tick of a drawn figure, and
    wherever ticks are numbers, a unit in the axis's label, or the name of the swept
    dimension they count (``counts``: ``k``, ``rounds``), or (panels stacked over one label)
    a unit in the label of another axis of the figure along the same direction."""
    for direction in ("xaxis", "yaxis"):
        axes = [getattr(ax, direction) for ax in fig.axes]
        labels = [axis.get_label_text() for axis in axes]
        for axis, label in zip(axes, labels):
            assert axis.get_offset_text().get_text() == ""
            shown = [tick.get_text() for tick in axis.get_ticklabels(which="both")
                     if tick.get_text()]
            for text in shown:
                assert not SCIENTIFIC.search(text), text
            if shown and all(PLAIN.fullmatch(text) for text in shown) and \
                    any(tick.get_visible() for tick in axis.get_ticklabels()):
                assert UNITS.search(label) or label.split(" ")[0] in counts or \
                    not label and any(UNITS.search(other) for other in labels), label


@pytest.mark.parametrize("value, text", [
    (0, "0"), (1e-17, "0"), (2.0, "2"), (2.5, "2.5"), (250, "250"), (0.3000000004, "0.3"),
    (1e-5, "0.00001"), (4000, "4,000"), (4242.16, "4,242"), (1e6, "1,000,000"), (10, "10")])
def test_ticks_are_plain_numbers(value, text):
    assert tick_text(value) == text


def test_wrong_and_failed_rows_are_marked(broken):
    fig = case_figure(broken, "transpose")
    (gpu,) = panels(fig, "gpu")
    shared = next(label for label in gpu.get_yticklabels() if label.get_text() == "gpu-shared")
    assert shared.get_color() == INVALID_RED
    assert any(text.startswith("INVALID output: ") for text in texts(gpu))
    assert [patch.get_hatch() for patch in gpu.patches].count("xxx") == 1
    (cpu,) = panels(fig, "cpu")
    assert "FAILED: no time" in texts(cpu)
    legend = [text.get_text() for legend in fig.legends for text in legend.get_texts()]
    assert "invalid output" in legend


def test_a_variant_that_does_not_apply_says_so(run):
    top, *_ = panels(case_figure(run, "mmm"), "gpu")
    _, bottom = panels(case_figure(run, "mmm"), "gpu")
    assert "not applicable at this size" in texts(bottom)
    assert "not applicable at this size" not in texts(top)


def test_whiskers_are_the_quartiles_where_recorded():
    row = {"median_s": 1.0, "min_s": 0.5, "max_s": 3.0, "q1_s": 0.9, "q3_s": 1.2}
    assert whisker_times(row) == (0.9, 1.2)
    assert whisker_times({**row, "q1_s": None, "q3_s": None}) == (0.5, 3.0)
    assert whisker_times({"median_s": None, "min_s": None, "max_s": None}) is None


def test_a_sweep_has_a_tick_at_each_size_and_units(run):
    fig = sweep_figure(run, "partitioning", "threads",
                       ("hashes_per_key", "hash computations per key"))
    fig.canvas.draw()
    gpu_time, gpu_hashes = fig.axes[1], fig.axes[3]
    sizes = sorted({row["size"]["threads"] for row in rows_of(run, "partitioning", "gpu")})
    assert list(gpu_hashes.get_xticks()) == sizes
    assert [label.get_text() for label in gpu_hashes.get_xticklabels()][:3] == [
        "256", "1,024", "4,096"]
    assert gpu_time.get_ylabel() == "median time (ms, log scale)"
    assert gpu_hashes.get_ylabel() == "hash computations per key (log scale)"
    assert gpu_hashes.get_xlabel() == "threads (log scale)"
    legend = [text.get_text() for text in gpu_hashes.get_legend().get_texts()]
    assert "gpu-output-partitioned (n/a at 1 of 6)" in legend


def test_histogram_sizes_in_millions_get_prefixes(run):
    fig = sweep_figure(run, "histogram", "bins")
    fig.canvas.draw()
    assert [label.get_text() for label in fig.axes[1].get_xticklabels()] == [
        "12.3 k", "3.93 M", "31.5 M", "126 M"]


def roofline_numbers(fig):
    return [text for ax in fig.axes for text in ax.texts if text.get_text().isdigit()]


def test_every_timed_variant_is_numbered_on_the_roofline_and_listed_in_its_key(broken):
    fig = roofline_figure(broken)
    timed = {(row["device"], row["case"], row["variant"]) for row in broken["results"]
             if row["median_s"] and not row["to_device_bytes"] + row["to_host_bytes"]}
    assert len(timed) < len({(row["device"], row["case"], row["variant"])
                             for row in broken["results"] if row["median_s"]})  # the link's
    keys = [text.get_text() for subfig in fig.subfigs for legend in subfig.legends
            for text in legend.get_texts()]
    assert len(keys) == len(timed)
    assert [int(key.split(" ")[0]) for key in keys] == list(range(1, len(timed) + 1))
    assert sorted(int(text.get_text()) for text in roofline_numbers(fig)) == list(
        range(1, len(timed) + 1))
    blocked = next(key for key in keys if " mmm cpu-blocked" in key)
    assert blocked.endswith("INVALID")
    assert "mmm gpu-optimized 8192x8192x8192: 44,569 GFlop/s" in " ".join(keys)


def test_roofline_numbers_overlap_no_other_number_or_roof_label(run):
    from matplotlib.text import Text

    fig = roofline_figure(run)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        # The text alone: an annotation's extent includes its leader line.
        boxes = [(text.get_text(), Text.get_window_extent(text, renderer)) for text in ax.texts]
        for (a, one), (b, other) in itertools.combinations(boxes, 2):
            if a.isdigit() or b.isdigit():
                assert not one.overlaps(other), (a, b)


def test_the_roofs_are_labelled_with_their_values(run):
    fig = roofline_figure(run)
    labels = [text.get_text() for ax in fig.axes for text in ax.texts]
    assert "fp32 peak 66,908 GFlop/s (ridge at 15.7 flop/byte)" in labels
    assert "copy 4,252 GB/s" in labels and "copy roof 4,252 GB/s" in labels
    assert "copy 202 GB/s" in labels


def test_write_charts_writes_each_chart_it_lists_with_plain_ticks_and_units(
        run, tmp_path, monkeypatch):
    """Every chart of a full run written, each checked as drawn for the file (check_ticks):
    drawing them all twice would double the slowest test of this file."""
    import loclab.report.charts

    save = loclab.report.charts.save

    counts = {case.get("sweep") for case in run["cases"].values()} - {None}

    def save_and_check(fig, path):
        save(fig, path)
        check_ticks(fig, counts)

    monkeypatch.setattr(loclab.report.charts, "save", save_and_check)
    charts = write_charts(run, tmp_path)
    names = [name for _, name in charts]
    assert names == ["copy.png", "transpose.png", "partitioning.png", "partitioning-threads.png",
                     "nearest-neighbour.png", "coalescing.png", "matvec.png", "histogram.png",
                     "histogram-bins.png", "mmm.png", "bmmm.png", "bmmm-k.png", "scan.png",
                     "scan-n.png", "compaction.png", "segmented-scan.png",
                     "segmented-scan-segment.png", "summed-area.png", "radix-sort.png", "spmv.png",
                     "host-device.png", "host-device-bytes.png", "overlap.png",
                     "overlap-rounds.png", "overlap-phases.png", "gemm-chain.png",
                     "gemm-chain-phases.png", "kernel-chain.png", "kernel-chain-phases.png",
                     "roofline.png"]
    for name in names:
        assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG"


def test_a_document_without_declared_limits_or_rows_still_charts(run, tmp_path):
    old = {**run, "cases": {}}
    assert bar_axis_label(case_figure(old, "mmm")).startswith("GFlop/s")
    assert [name for _, name in write_charts({**run, "results": []}, tmp_path)] == [
        "roofline.png"]


def test_a_device_where_nothing_was_timed_still_charts():
    document = full_run()
    for row in rows_of(document, "partitioning", "cpu"):
        row.update(median_s=None, gbps=None, items_per_s=None, valid=False, params={})
    fig = sweep_figure(document, "partitioning", "threads",
                       ("hashes_per_key", "hash computations per key"))
    assert "no variant has a value here" in texts(fig.axes[0])
    assert all(text == "FAILED: no time" for panel in panels(
        case_figure(document, "partitioning"), "cpu") for text in texts(panel))


def test_importing_the_charts_does_not_import_matplotlib():
    code = "import sys, loclab.report.charts; assert 'matplotlib' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_where_the_time_goes_stacks_each_rows_phases_against_the_bounds(run):
    from loclab.report.charts import phases_figure

    assert phases_figure(run, "mmm") is None  # no row of it runs in phases
    fig = phases_figure(run, "gemm-chain")
    rows = [r for r in run["results"] if r["case"] == "gemm-chain"]
    panels = [ax for ax in fig.axes if ax.get_yticklabels()]
    assert len(panels) == len({r["size"]["n"] for r in rows})
    for ax, n in zip(panels, (2048, 8192)):
        shown = [r for r in rows if r["size"]["n"] == n]
        assert [t.get_text() for t in ax.get_yticklabels()] == [r["variant"] for r in shown]
        widths = sum(patch.get_width() for patch in ax.patches)
        assert widths == pytest.approx(sum(sum(r["phases"].values()) for r in shown) * 1e3)
        lines = [line.get_xdata()[0] for line in ax.get_lines()]
        assert lines == pytest.approx([shown[0]["ideal_s"] * 1e3,
                                       shown[0]["no_overlap_s"] * 1e3])
