"""CPU detection: model, cores, cache sizes (sysfs first), clock and an fp32 peak estimate.

Cache sizes drive tile sizes (never hard-coded, ARCHITECTURE.md), so where they come from is
recorded: ``sysfs``, ``sysconf`` or ``assumed`` when neither answers.
"""

from __future__ import annotations

import math
import os
import platform
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

SYSFS_CPU = Path("/sys/devices/system/cpu")
SYSFS_NODES = Path("/sys/devices/system/node")
PROC_CPUINFO = Path("/proc/cpuinfo")
PROC_MEMINFO = Path("/proc/meminfo")

# Used only when neither sysfs nor sysconf knows the caches; reported as "assumed".
ASSUMED_CACHES = {"l1d": 32 * 1024, "l2": 1024 * 1024, "llc": 32 * 1024 * 1024}

# fp32 flops per cycle per core by widest vector ISA, assuming two FMA pipes (an upper bound:
# some cores run 512-bit FMAs as two halves).
FLOPS_PER_CYCLE = (("avx512f", "AVX-512", 64), ("avx2", "AVX2", 32), ("avx", "AVX", 16),
                   ("asimd", "NEON", 16), ("sse2", "SSE2", 8))


LLC_SHARE_PER_CORE = 16 * 2**20  # more than any server core's share of its LLC


@dataclass(frozen=True)
class CpuInfo:
    model: str
    logical_cpus: int
    physical_cores: int | None
    l1d_bytes: int
    l2_bytes: int
    llc_bytes: int
    cache_source: str
    clock_mhz: float | None
    isa: str | None
    flops_per_cycle: int | None
    memory_bytes: int | None
    clock_source: str = "/proc/cpuinfo"  # where clock_mhz comes from
    numa_nodes: int = 1  # NUMA nodes with CPUs this process may run on

    @property
    def peak_gflops_fp32(self) -> float | None:
        """Cores x clock x flops/cycle at the detected clock: an estimate, the CPU publishes
        no peak (a run rates against ``peak_gflops_at`` its measured clock)."""
        return self.peak_gflops_at(self.clock_mhz)

    def peak_gflops_at(self, clock_mhz: float | None) -> float | None:
        """Cores x ``clock_mhz`` x flops/cycle."""
        if clock_mhz is None or self.flops_per_cycle is None:
            return None
        return self.cores * clock_mhz * 1e-3 * self.flops_per_cycle

    @property
    def llc_share_bytes(self) -> int:
        """The last-level cache these cores can count on: all of it, or 16 MiB a core where
        that is less. A small VM on a server shares the LLC with the host's other cores (2
        cores of a 480 MiB LLC: sizing the default run for all of it took 12 minutes)."""
        return min(self.llc_bytes, LLC_SHARE_PER_CORE * self.cores)

    @property
    def cores(self) -> int:
        """The cores a peak counts: physical ones where known."""
        return self.physical_cores or self.logical_cpus

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "peak_gflops_fp32": self.peak_gflops_fp32}


def parse_size(text: str) -> int:
    """'48K' -> 49152, '2048K', '300M', '1G', '512' (bytes) as sysfs writes them; also as
    people write them: '32KiB', '48 KB', '1.5MiB', '1TiB' (K, M, G and T are powers of 1024
    with or without 'B' or 'iB'). A fraction must come to whole bytes ('0.3K' does not)."""
    from fractions import Fraction

    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(?:([KMGT])(?:i?B)?|B)?\s*", text,
                         flags=re.IGNORECASE)
    if not match:
        raise ValueError(f"not a size in bytes: {text!r}")
    scale = 1024 ** " KMGT".index((match.group(2) or " ").upper())
    size = Fraction(match.group(1)) * scale
    if size.denominator != 1:
        raise ValueError(f"{text.strip()!r} is not a whole number of bytes")
    return int(size)


def read_sysfs_caches(cpu_dir: Path = SYSFS_CPU / "cpu0") -> dict[str, int] | None:
    """L1d, L2 and last-level cache sizes of one core from sysfs, or None if absent."""
    found: dict[int, int] = {}
    l1d = None
    for index in sorted((cpu_dir / "cache").glob("index*")):
        try:
            level = int((index / "level").read_text())
            kind = (index / "type").read_text().strip()
            size = parse_size((index / "size").read_text())
        except (OSError, ValueError):
            continue
        if kind == "Instruction":
            continue
        if level == 1:
            l1d = size
        found[level] = max(size, found.get(level, 0))
    if l1d is None or 2 not in found:
        return None
    return {"l1d": l1d, "l2": found[2], "llc": found[max(found)]}


def read_sysconf_caches() -> dict[str, int] | None:
    """The same sizes from glibc's sysconf, which reads CPUID where sysfs is missing."""
    names = {"l1d": "SC_LEVEL1_DCACHE_SIZE", "l2": "SC_LEVEL2_CACHE_SIZE",
             "l3": "SC_LEVEL3_CACHE_SIZE"}
    values = {}
    for key, name in names.items():
        try:
            values[key] = int(os.sysconf(name)) if name in os.sysconf_names else 0
        except (OSError, ValueError):
            values[key] = 0
    if values["l1d"] <= 0 or values["l2"] <= 0:
        return None
    return {"l1d": values["l1d"], "l2": values["l2"], "llc": max(values["l3"], values["l2"])}


def detect_caches() -> tuple[dict[str, int], str]:
    """Cache sizes and where they came from."""
    for source, reader in (("sysfs", read_sysfs_caches), ("sysconf", read_sysconf_caches)):
        caches = reader()
        if caches:
            return caches, source
    return dict(ASSUMED_CACHES), "assumed"


def parse_cpuinfo(text: str) -> dict[str, Any]:
    """Model name, physical core count, clock and flags out of /proc/cpuinfo's text."""
    model = None
    mhz = None
    flags: set[str] = set()
    cores: set[tuple[str, str]] = set()
    for block in text.split("\n\n"):
        fields = {}
        for line in block.splitlines():
            key, _, value = line.partition(":")
            fields[key.strip()] = value.strip()
        model = model or fields.get("model name") or fields.get("Model")
        if mhz is None and fields.get("cpu MHz"):
            mhz = float(fields["cpu MHz"])
        flags |= set((fields.get("flags") or fields.get("Features") or "").split())
        if "core id" in fields:
            cores.add((fields.get("physical id", "0"), fields["core id"]))
    return {"model": model, "mhz": mhz, "flags": flags, "physical_cores": len(cores) or None}


def read_max_clock_mhz() -> float | None:
    try:
        return int((SYSFS_CPU / "cpu0/cpufreq/cpuinfo_max_freq").read_text()) / 1000.0
    except (OSError, ValueError):
        return None


def parse_cpu_list(text: str) -> set[int]:
    """'0-3,8,10-11' (sysfs's CPU and node lists) -> {0, 1, 2, 3, 8, 10, 11}."""
    found: set[int] = set()
    for part in text.strip().split(","):
        if part:
            first, _, last = part.partition("-")
            found.update(range(int(first), int(last or first) + 1))
    return found


def count_numa_nodes(cpus: set[int], nodes: Path = SYSFS_NODES) -> int:
    """NUMA nodes that hold any of ``cpus`` (a node of memory alone places no thread's
    pages); 1 where sysfs does not say."""
    count = 0
    for node in nodes.glob("node[0-9]*"):
        try:
            if parse_cpu_list((node / "cpulist").read_text()) & cpus:
                count += 1
        except (OSError, ValueError):
            continue
    return max(count, 1)


def read_meminfo(key: str, meminfo: Path = PROC_MEMINFO) -> int | None:
    """One /proc/meminfo field in bytes (``MemTotal``, ``MemAvailable``), None where unknown."""
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def detect_cpu() -> CpuInfo:
    """Everything about the CPU that loclab uses, read without running anything."""
    try:
        info = parse_cpuinfo(PROC_CPUINFO.read_text())
    except OSError:
        info = {"model": None, "mhz": None, "flags": set(), "physical_cores": None}
    isa, per_cycle = next(((name, flops) for flag, name, flops in FLOPS_PER_CYCLE
                           if flag in info["flags"]), (None, None))
    caches, source = detect_caches()
    cpus = (os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity")
            else set(range(os.cpu_count() or 1)))
    logical = len(cpus)
    physical = info["physical_cores"]
    maximum = read_max_clock_mhz()
    return CpuInfo(
        model=info["model"] or platform.processor() or platform.machine(),
        logical_cpus=logical or 1,
        physical_cores=min(physical, logical) if physical and logical else physical,
        l1d_bytes=caches["l1d"],
        l2_bytes=caches["l2"],
        llc_bytes=caches["llc"],
        cache_source=source,
        clock_mhz=maximum or info["mhz"],
        clock_source="maximum frequency (sysfs)" if maximum else "/proc/cpuinfo",
        isa=isa,
        flops_per_cycle=per_cycle,
        memory_bytes=read_meminfo("MemTotal"),
        numa_nodes=count_numa_nodes(set(cpus)),
    )


def square_tile(cache_bytes: int, itemsize: int, arrays: int = 2, fraction: float = 0.5) -> int:
    """Largest power-of-two T such that ``arrays`` T x T tiles fill at most ``fraction`` of a cache.

    Half the cache, not all of it, leaves room for the lines the tiles' neighbours and the
    hardware prefetchers bring in, and for set conflicts.
    """
    side = math.isqrt(int(cache_bytes * fraction) // (arrays * itemsize))
    return 1 << max(side.bit_length() - 1, 0) if side else 1
