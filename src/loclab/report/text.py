"""Report text shared by the console, HTML and Markdown renderers: the table, roofs, machine."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loclab.cases.base import dims_text


@dataclass(frozen=True)
class Table:
    headers: list[str]
    rows: list[list[str]]
    valid: list[bool]
    numeric: list[bool]  # right-align these columns

    def without(self, *headers: str) -> Table:
        """The same table less some columns (the console shows case and size as titles)."""
        keep = [i for i, header in enumerate(self.headers) if header not in headers]
        return Table(headers=[self.headers[i] for i in keep],
                     rows=[[row[i] for i in keep] for row in self.rows], valid=self.valid,
                     numeric=[self.numeric[i] for i in keep])


def number(value: float | None, digits: int = 3) -> str:
    """Three significant digits, thousands grouped; a dash for missing values."""
    if value is None:
        return "-"
    if abs(value) >= 10 ** digits:
        return f"{value:,.0f}"
    return f"{value:.{digits}g}"


def prefixed(value: float | None) -> str:
    """Three significant digits and an SI prefix: '5.49 T', '812 M', '12'; a dash when
    missing."""
    if value is None:
        return "-"
    for prefix, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if value >= scale:
            return f"{number(value / scale)} {prefix}"
    return number(value)


def per_second(value: float | None, unit: str | None) -> str:
    """A rate of a case's unit with an SI prefix: '5.49 T pairs/s'; a dash when missing."""
    if value is None or not unit:
        return "-"
    return f"{prefixed(value)} {unit}/s"


def ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}%"


def spread(row: dict[str, Any]) -> str:
    """Interquartile range relative to the median."""
    if not row.get("median_s") or row.get("iqr_s") is None:
        return "-"
    return f"{100 * row['iqr_s'] / row['median_s']:.1f}%"


def valid_cell(row: dict[str, Any]) -> str:
    if row.get("skipped"):
        return "skipped"
    return "yes" if row["valid"] else "NO"


def results_table(document: dict[str, Any]) -> Table:
    rows = document["results"]
    with_flops = any(row["flops"] for row in rows)
    with_peak = any(row["pct_of_peak"] is not None for row in rows)
    with_unit = any(row.get("unit") for row in rows)
    with_unit_roof = any(row.get("pct_of_unit_roof") is not None for row in rows)
    columns: list[tuple[str, bool, Any]] = [
        ("case", False, lambda r: r["case"]),
        ("variant", False, lambda r: r["variant"]),
        ("dev", False, lambda r: r["device"]),
        ("size", False, lambda r: dims_text(r["size"])),
        ("median ms", True, lambda r: number(r["median_s"] * 1e3 if r["median_s"] else None)),
        ("IQR", True, spread),
        ("GB/s", True, lambda r: number(r["gbps"])),
    ]
    if with_flops:
        columns.append(("GFlop/s", True, lambda r: number(r["gflops"]) if r["flops"] else "-"))
    if with_unit:
        columns.append(("rate", True, lambda r: per_second(r.get("items_per_s"), r.get("unit"))))
    columns.append(("% copy", True, lambda r: percent(r["pct_of_copy"])))
    if with_peak:
        columns.append(("% peak", True, lambda r: percent(r["pct_of_peak"])))
    if with_unit_roof:
        columns.append(("% limit", True, lambda r: percent(r.get("pct_of_unit_roof"))))
    columns += [
        ("vs naive", True, lambda r: ratio(r["speedup_vs_naive"])),
        ("vs lib", True, lambda r: ratio(r["vs_library"])),
        ("valid", False, valid_cell),
    ]
    return Table(headers=[name for name, _, _ in columns],
                 rows=[[cell(row) for _, _, cell in columns] for row in rows],
                 valid=[bool(row["valid"] or row.get("skipped")) for row in rows],
                 numeric=[right for _, right, _ in columns])


def roof_line(document: dict[str, Any]) -> str:
    """One sentence naming the roofs every percentage refers to."""
    refs = document["references"]
    parts = []
    for device in ("cpu", "gpu"):
        copy = refs.get(f"{device}_copy_gbps")
        if copy:
            parts.append(f"{device.upper()} copy {number(copy)} GB/s")
        peak = refs.get(f"{device}_peak_gflops_fp32")
        if peak and device in document.get("devices", []):
            kind = "estimated" if device == "cpu" else "theoretical"
            parts.append(f"{device.upper()} fp32 peak {number(peak)} GFlop/s ({kind})")
    for (case, device), roof in _unit_roofs(document).items():
        parts.append(f"{case} {device.upper()} {roof['what']}: "
                     f"{per_second(roof['per_s'], roof['unit'])}")
    return ("Roofs, measured in this run: " + "; ".join(parts)) if parts else "No roof measured."


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
    lines = [
        ("CPU", f"{cpu['model']}: {cores}"),
        ("caches", f"L1d {binary_size(cpu['l1d_bytes'])}, L2 {binary_size(cpu['l2_bytes'])}, "
                   f"LLC {binary_size(cpu['llc_bytes'])} (from {cpu['cache_source']})"),
    ]
    if cpu.get("peak_gflops_fp32"):
        lines.append(("CPU peak", f"{cpu['clock_mhz']:.0f} MHz, {cpu['isa']}: fp32 peak about "
                                  f"{number(cpu['peak_gflops_fp32'])} GFlop/s (estimate)"))
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
    return lines
