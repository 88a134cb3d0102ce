"""Report text shared by the console, HTML and Markdown renderers: the table, roofs, machine."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from loclab.cases.base import dims_text
from loclab.report.metric import Metric, case_metric


def number(value: float | None, digits: int = 3) -> str:
    """``digits`` significant digits, trailing zeros kept ('1.00', '45.2', '0.0412'), whole
    numbers from 10^(digits-1) on with thousands grouped ('137', '25,153'); a dash for missing
    values."""
    if value is None:
        return "-"
    rounded = float(f"{value:.{digits}g}")  # 99.96 -> 100.0: then shown whole
    if abs(rounded) >= 10 ** (digits - 1):
        return f"{rounded:,.0f}" if abs(value) < 10 ** digits else f"{value:,.0f}"
    return f"{value:#.{digits}g}"


def prefixed(value: float | None) -> str:
    """Three significant digits and an SI prefix: '5.49 T', '812 M', '12'; a dash when
    missing."""
    if value is None:
        return "-"
    for prefix, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if value >= scale * 0.9995:  # what rounds to 1,000 G is 1 T
            return f"{number(value / scale)} {prefix}"
    return number(value)


def per_second(value: float | None, unit: str | None) -> str:
    """A rate of a case's unit with an SI prefix: '5.49 T pairs/s'; a dash when missing."""
    if value is None or not unit:
        return "-"
    return f"{prefixed(value)} {unit}/s"


def ratio(value: float | None) -> str:
    """A speedup or slowdown to three significant figures: '124x', '7.52x', '0.14x'."""
    return "-" if value is None else f"{number(value)}x"


def percent(value: float | None) -> str:
    """A fraction of a roof to three significant figures: '97%', '82.9%', '0.44%'."""
    return "-" if value is None else f"{number(value)}%"


def spread(row: dict[str, Any]) -> str:
    """Interquartile range relative to the median."""
    if not row.get("median_s") or row.get("iqr_s") is None:
        return "-"
    return percent(100 * row["iqr_s"] / row["median_s"])


def valid_cell(row: dict[str, Any]) -> str:
    if row.get("skipped"):
        return "n/a"
    return "yes" if row["valid"] else "NO"


Row = dict[str, Any]


@dataclass(frozen=True)
class Column:
    header: str
    cell: Callable[[Row], str]
    numeric: bool = True  # right-aligned; left out where every row shows '-'


@dataclass(frozen=True)
class Table:
    headers: list[str]
    rows: list[list[str]]
    valid: list[bool]  # rows to show as failures are False
    numeric: list[bool]  # right-align these columns

    @classmethod
    def of(cls, rows: list[Row], columns: list[Column]) -> Table:
        """The cells of ``rows``, less the numeric columns no row fills."""
        cells = [[column.cell(row) for column in columns] for row in rows]
        keep = [i for i, column in enumerate(columns)
                if not column.numeric or any(line[i] != "-" for line in cells)]
        return cls(headers=[columns[i].header for i in keep],
                   rows=[[line[i] for i in keep] for line in cells],
                   valid=[bool(row["valid"] or row.get("skipped")) for row in rows],
                   numeric=[columns[i].numeric for i in keep])


def metric_columns(metric: Metric) -> list[Column]:
    """The rate a case is judged by and its fraction of that roof: GB/s and % of copy,
    GFlop/s and % of peak, or the case's unit per second ('5.49 T' under 'pairs/s') and % of
    its limit."""
    if metric.limit == "unit":
        rate = Column(metric.rate_header, lambda r: prefixed(r.get(metric.rate_key)))
    else:
        rate = Column(metric.rate_header, lambda r: number(r.get(metric.rate_key)))
    return [rate, Column(metric.percent_header, lambda r: percent(r.get(metric.percent_key)))]


TIME_COLUMNS = [
    Column("median ms", lambda r: number(r["median_s"] * 1e3 if r["median_s"] else None)),
    Column("model ms", lambda r: number(r["predicted_s"] * 1e3 if r.get("predicted_s")
                                        else None)),
    Column("IQR", spread),
    Column("vs naive", lambda r: ratio(r["speedup_vs_naive"])),
    Column("vs lib", lambda r: ratio(r["vs_library"])),
    Column("valid", valid_cell, numeric=False),
]
PLACE_COLUMNS = [Column("dev", lambda r: r["device"], numeric=False),
                 Column("size", lambda r: dims_text(r["size"]), numeric=False)]


def case_table(document: dict[str, Any], case: str, rows: list[Row],
               place: bool = True) -> Table:
    """The rows of one case, its own metric first (``loclab.report.metric``); ``place``
    adds the device and size columns (the console puts them in each table's title)."""
    columns = [Column("variant", lambda r: r["variant"], numeric=False)]
    columns += (PLACE_COLUMNS if place else [])
    columns += metric_columns(case_metric(document, case)) + TIME_COLUMNS
    return Table.of(rows, columns)


def by_case(document: dict[str, Any]) -> dict[str, list[Row]]:
    """The rows of each case, cases and rows in run order."""
    grouped: dict[str, list[Row]] = {}
    for row in document["results"]:
        grouped.setdefault(row["case"], []).append(row)
    return grouped


def by_section(rows: list[Row]) -> dict[tuple[str, str], list[Row]]:
    """The rows of each (device, size) of a case: what is compared with what."""
    grouped: dict[tuple[str, str], list[Row]] = {}
    for row in rows:
        grouped.setdefault((row["device"], dims_text(row["size"])), []).append(row)
    return grouped


def case_heading(document: dict[str, Any], case: str) -> str:
    """The case's lesson, and what its rate is measured against."""
    lesson = (document.get("cases") or {}).get(case, {}).get("lesson")
    metric = case_metric(document, case)
    roofs = [row["unit_roof"]["what"] for row in document["results"]
             if row["case"] == case and row.get("unit_roof")]
    against = {"memory": "GB/s of the golden bytes against the copy roof",
               "compute": "GFlop/s against the fp32 peak",
               "interconnect": "GB/s of the bytes to and from host memory, against the ideal "
                               "time: the copies at the link's measured bandwidths overlapped "
                               "with the compute",
               "unit": f"{metric.unit} per second"
                       + (f" against the {roofs[0]}" if roofs else "")}[metric.limit]
    return (f"{lesson}; " if lesson else "") + f"rated in {against}"


def roof_line(document: dict[str, Any]) -> str:
    """One sentence naming the roofs every percentage refers to."""
    refs = document["references"]
    parts = []
    for device in ("cpu", "gpu"):
        copy = refs.get(f"{device}_copy_gbps")
        if copy:
            parts.append(f"{device.upper()} copy {number(copy)} GB/s")
        peak = peak_text(refs, device)
        if peak and device in document.get("devices", []):
            parts.append(f"{device.upper()} fp32 peak {peak}")
    link = link_text(refs)
    if link:
        parts.append(f"GPU link {link}")
    for (case, device), roof in _unit_roofs(document).items():
        parts.append(f"{case} {device.upper()} {roof['what']}: "
                     f"{per_second(roof['per_s'], roof['unit'])}")
    return ("Roofs, measured in this run: " + "; ".join(parts)) if parts else "No roof measured."


LINK_PARTS = (("gpu_h2d_gbps", "H2D"), ("gpu_d2h_gbps", "D2H"),
              ("gpu_bidirectional_gbps", "both ways"))
PAGEABLE_PARTS = (("gpu_h2d_pageable_gbps", "H2D"), ("gpu_d2h_pageable_gbps", "D2H"))


def link_text(refs: dict[str, Any]) -> str | None:
    """The link's measured bandwidths: 'pinned H2D 55.1, D2H 53.0, both ways 101 GB/s
    (pageable: H2D 24.8, D2H 19.9)'; None where the run measured none."""
    pinned = [f"{label} {number(refs[key])}" for key, label in LINK_PARTS if refs.get(key)]
    pageable = [f"{label} {number(refs[key])}" for key, label in PAGEABLE_PARTS
                if refs.get(key)]
    if not pinned and not pageable:
        return None
    text = f"pinned {', '.join(pinned)} GB/s" if pinned else ""
    if pageable:
        text += f"{' ' if text else ''}(pageable: {', '.join(pageable)} GB/s)"
    return text


def peak_text(refs: dict[str, Any], device: str) -> str | None:
    """A device's fp32 peak and what it is computed from: '551 GFlop/s (at 4.30 GHz,
    measured all-core clock)', '66,908 GFlop/s (theoretical)'; None where unknown."""
    peak = refs.get(f"{device}_peak_gflops_fp32")
    if not peak:
        return None
    clock = refs.get("cpu_peak_clock_mhz")
    if device == "gpu":
        basis = "theoretical"
    elif not clock:
        basis = "estimated"
    else:
        basis = f"at {number(clock / 1000)} GHz, {refs.get('cpu_peak_clock_source')}"
    return f"{number(peak)} GFlop/s ({basis})"


def _unit_roofs(document: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """The roof of each case's unit rate on each device (the same for every row of both)."""
    return {(row["case"], row["device"]): {**row["unit_roof"], "unit": row["unit"]}
            for row in document["results"] if row.get("unit_roof")}


def gpu_note(document: dict[str, Any]) -> str | None:
    """Why the run had no GPU, when the user did not exclude it."""
    machine = document["machine"]
    reason = machine.get("gpu_unavailable")
    if machine.get("gpu") or not reason or reason == "not requested":
        return None
    return f"No GPU: {reason}; the CPU rows ran alone."


def failures(document: dict[str, Any]) -> list[str]:
    """One line per row that is not valid, saying why."""
    return [f"{_row_name(row)}: {row.get('error') or 'invalid'}"
            for row in document["results"] if not row["valid"] and not row.get("skipped")]


def reuse_lines(document: dict[str, Any]) -> list[str]:
    """Each valid variant that states its data reuse in theory (``params["reuse"]``: how many
    products one loaded element serves, per level), next to the rate it measured: where each
    factor of the ladder comes from."""
    lines = []
    for row in document["results"]:
        reuse = (row.get("params") or {}).get("reuse")
        if reuse and row["valid"] and (row.get("gflops") or row.get("items_per_s")):
            lines.append(f"{_row_name(row)}: reuse {reuse}; measured {_measured(row)}")
    return lines


def _measured(row: dict[str, Any]) -> str:
    """A row's rate in its case's unit (and fraction of that roof), else in GFlop/s."""
    if row.get("items_per_s"):
        limit = row.get("pct_of_unit_roof")
        return per_second(row["items_per_s"], row["unit"]) + (
            f" ({percent(limit)} of the {row['unit_roof']['what']})" if limit is not None else "")
    peak = row.get("pct_of_peak")
    return f"{number(row['gflops'])} GFlop/s" + (f" ({percent(peak)} of peak)" if peak else "")


def skips(document: dict[str, Any]) -> list[str]:
    """One line per variant that did not apply at its size, saying why."""
    return [f"{_row_name(row)}: {row['skipped']}"
            for row in document["results"] if row.get("skipped")]


def finished_line(row: dict[str, Any]) -> str:
    """A variant as it finishes, for a log: its name, median time and whether it is valid."""
    if row.get("skipped"):
        return f"{_row_name(row)}: not applicable ({row['skipped']})"
    if not row["valid"]:
        return f"{_row_name(row)}: FAILED: {row.get('error') or 'invalid'}"
    return f"{_row_name(row)}: {number(row['median_s'] * 1e3)} ms, valid"


def duration(seconds: float) -> str:
    """A time span as a person says it: '40 seconds', '3 minutes', '1.5 hours'."""
    if seconds < 90:
        return f"{max(10, round(seconds, -1)):.0f} seconds"
    if seconds < 90 * 60:
        return f"{round(seconds / 60):.0f} minutes"
    return f"{number(seconds / 3600, 2)} hours"


BUSY = 1.2  # a slowdown worth naming: the load stretches the run's own work by a fifth


def expectation(plan: Any) -> str:
    """How long a planned run (``loclab.bench.runner.Plan``) takes, and what stretches it:
    'about 9 minutes (this machine is busy: load 2 on 2 CPUs; numba compiles 45 functions
    first)'."""
    notes = []
    if plan.slowdown() >= BUSY:
        notes.append(f"this machine is busy: load {plan.load:.2g} on {os.cpu_count()} CPUs")
    if plan.uncompiled:
        notes.append(f"numba compiles {plan.uncompiled} functions first")
    return f"about {duration(plan.expected_seconds())}" + (
        f" ({'; '.join(notes)})" if notes else "")


def _row_name(row: dict[str, Any]) -> str:
    return f"{row['case']} {row['variant']} ({row['device']}, {dims_text(row['size'])})"


def binary_size(nbytes: int | None) -> str:
    if not nbytes:
        return "?"
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{nbytes} B"


def machine_lines(machine: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, text) lines describing the CPU and the GPU, or why there is no GPU."""
    cpu = machine["cpu"]
    cores = f"{cpu['logical_cpus']} logical CPUs"
    if cpu.get("physical_cores"):
        cores += f" ({cpu['physical_cores']} cores)"
    if cpu.get("numba_threads"):
        cores += f", numba threads {cpu['numba_threads']}"
    if (cpu.get("numa_nodes") or 1) > 1:
        cores += f", {cpu['numa_nodes']} NUMA nodes"
    lines = [
        ("CPU", f"{cpu['model']}: {cores}"),
        ("caches", f"L1d {binary_size(cpu['l1d_bytes'])}, L2 {binary_size(cpu['l2_bytes'])}, "
                   f"LLC {binary_size(cpu['llc_bytes'])} (from {cpu['cache_source']})"),
    ]
    if cpu.get("clock_mhz") and cpu.get("isa"):
        lines.append(("CPU clock", f"{number(cpu['clock_mhz'])} MHz "
                                   f"({cpu.get('clock_source', '/proc/cpuinfo')}), {cpu['isa']}: "
                                   f"{cpu['flops_per_cycle']} fp32 flops a cycle per core"))
    gpu = machine.get("gpu")
    if not gpu:
        lines.append(("GPU", f"none: {machine.get('gpu_unavailable') or 'not detected'}"))
        return lines
    lines += [
        ("GPU", f"{gpu['name']}: compute capability {gpu['compute_capability']}, "
                f"{gpu['sms']} SMs, {binary_size(gpu['memory_bytes'])}"),
        ("GPU memory", f"L2 {binary_size(gpu['l2_bytes'])}; shared memory "
                       f"{binary_size(gpu['shared_mem_per_block'])} per block "
                       f"({binary_size(gpu['shared_mem_per_block_optin'])} opt-in), "
                       f"{binary_size(gpu['shared_mem_per_sm'])} per SM"),
        ("GPU SM", f"{gpu['registers_per_sm']} registers, {gpu['max_threads_per_sm']} threads "
                   f"per SM; up to {gpu['max_threads_per_block']} threads per block"),
        ("GPU clocks", f"SM {gpu['clock_mhz']:.0f} MHz, memory {gpu['memory_clock_mhz']:.0f} MHz "
                       f"x {gpu['memory_bus_bits']}-bit bus"),
        ("GPU peaks", f"memory {number(gpu['theoretical_gbps'])} GB/s, fp32 "
                      f"{number(gpu['peak_gflops_fp32'])} GFlop/s (theoretical)"),
    ]
    if gpu.get("link"):
        lines.append(("GPU link", f"{gpu['link']}: {number(gpu['link_theoretical_gbps'])} GB/s "
                                  f"each way (theoretical)"))
    return lines
