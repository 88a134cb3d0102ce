"""Rates and ratios of each result row, against the roofs measured in the same run.

Rates come from the golden algorithm's bytes and flops, never from what a variant moves:
a variant that moves more bytes to do the same work is slower, and its rate says so.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from loclab.bench.interconnect import link_references
from loclab.cases import ROOF_CASE
from loclab.cases.base import dims_text
from loclab.hw import Machine

Row = dict[str, Any]


@dataclass(frozen=True)
class CpuClock:
    """The clock the CPU's fp32 peak is computed at, and where it comes from."""

    mhz: float | None
    source: str


def peak_clock(machine: Machine, measured_mhz: float | None) -> CpuClock:
    """The higher of the measured all-core clock and the detected one: a peak must bound
    what runs, and a measurement on a busy machine only comes out low."""
    detected = machine.cpu.clock_mhz
    if measured_mhz is not None and measured_mhz >= (detected or 0.0):
        return CpuClock(measured_mhz, "measured all-core clock")
    return CpuClock(detected, machine.cpu.clock_source)


def derive_references(rows: Iterable[Row], machine: Machine,
                      cpu_clock: CpuClock | None = None) -> dict[str, Any]:
    """The best valid copy on each device is its memory roof; the best host-device copies
    are the link's (``loclab.bench.interconnect``); peaks come from the hardware, the CPU's at
    ``cpu_clock`` (default: the detected clock)."""
    rows = list(rows)
    copy = {"cpu": None, "gpu": None}
    for row in rows:
        if row["case"] == ROOF_CASE and row["valid"] and row["gbps"]:
            copy[row["device"]] = max(copy[row["device"]] or 0.0, row["gbps"])
    gpu = machine.gpu
    clock = cpu_clock or CpuClock(machine.cpu.clock_mhz, machine.cpu.clock_source)
    return {
        "cpu_copy_gbps": copy["cpu"],
        "gpu_copy_gbps": copy["gpu"],
        "cpu_peak_gflops_fp32": machine.cpu.peak_gflops_at(clock.mhz),
        "cpu_peak_clock_mhz": clock.mhz,
        "cpu_peak_clock_source": clock.source,
        "gpu_peak_gflops_fp32": gpu.peak_gflops_fp32 if gpu else None,
        "gpu_theoretical_gbps": gpu.theoretical_gbps if gpu else None,
        **link_references(rows),
    }


def rates(row: Row) -> None:
    """GB/s, GFlop/s and items (of the case's unit) per second of a timed row, from the golden
    algorithm's work."""
    median = row["median_s"]
    row["gbps"] = row["bytes"] / median / 1e9 if median else None
    row["gflops"] = row["flops"] / median / 1e9 if median else None
    row["items_per_s"] = row["items"] / median if median and row.get("items") else None
    crossing = row.get("to_device_bytes", 0) + row.get("to_host_bytes", 0)
    row["link_gbps"] = crossing / median / 1e9 if median and crossing else None


def _percent(value: float | None, roof: float | None) -> float | None:
    return 100.0 * value / roof if value is not None and roof else None


def _ratio(reference: Row | None, row: Row) -> float | None:
    """reference time / this time (> 1: this row is faster)."""
    if not reference or not reference["median_s"] or not row["median_s"]:
        return None
    return reference["median_s"] / row["median_s"]


def _group(row: Row) -> tuple[str, str, str]:
    """Rows compared with each other: same case, device and size."""
    return row["case"], row["device"], dims_text(row["size"])


def add_comparisons(rows: list[Row], references: dict[str, float | None]) -> None:
    """Fraction of copy bandwidth, of peak and of the unit's roof, speedup over naive, ratio to
    the library row."""
    by_role: dict[tuple[str, str, str, str], Row] = {}
    by_name: dict[tuple[str, str, str, str], Row] = {}
    for row in rows:
        if row["role"] in ("naive", "library") and row["valid"]:
            by_role.setdefault((*_group(row), row["role"]), row)
        if row["valid"]:
            by_name[(*_group(row), row["variant"])] = row
    for row in rows:
        device = row["device"]
        copy = references[f"{device}_copy_gbps"]
        peak = references[f"{device}_peak_gflops_fp32"]
        row["pct_of_copy"] = _percent(row.get("gbps"), copy)
        # Compute-bound: arithmetic intensity at or beyond the ridge point peak / bandwidth.
        compute_bound = bool(row["flops"] and copy and peak and (
            not row["bytes"] or row["flops"] / row["bytes"] >= peak / copy))
        row["pct_of_peak"] = _percent(row.get("gflops"), peak) if compute_bound else None
        roof = row.get("unit_roof")
        row["pct_of_unit_roof"] = _percent(row.get("items_per_s"), roof and roof["per_s"])
        baseline = row.get("baseline")
        naive = by_role.get((*_group(row), "naive")) if not baseline else by_name.get(
            (*_group(row), baseline))
        library = by_role.get((*_group(row), "library"))
        row["speedup_vs_naive"] = _ratio(naive, row)
        row["vs_library"] = _ratio(library, row)
