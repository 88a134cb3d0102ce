import pytest

from loclab.hw import cpu as cpu_module
from loclab.hw import gpu as gpu_module
from loclab.hw.cpu import (CpuInfo, detect_caches, detect_cpu, parse_cpuinfo, parse_size,
                           read_meminfo, read_sysfs_caches, square_tile)
from loclab.hw.gpu import GpuInfo, detect_gpu


@pytest.mark.parametrize("text, size", [("48K", 49152), ("2048K\n", 2 * 2**20),
                                        ("300M", 300 * 2**20), ("1G", 2**30), ("512", 512),
                                        ("32KiB", 32768)])
def test_parse_size(text, size):
    assert parse_size(text) == size


def test_parse_size_rejects_garbage():
    with pytest.raises(ValueError):
        parse_size("lots")


def make_sysfs(root, entries):
    for number, (level, kind, size) in enumerate(entries):
        index = root / "cache" / f"index{number}"
        index.mkdir(parents=True)
        (index / "level").write_text(f"{level}\n")
        (index / "type").write_text(f"{kind}\n")
        (index / "size").write_text(f"{size}\n")
    return root


def test_sysfs_caches(tmp_path):
    root = make_sysfs(tmp_path, [(1, "Data", "48K"), (1, "Instruction", "32K"),
                                 (2, "Unified", "2048K"), (3, "Unified", "307200K")])
    assert read_sysfs_caches(root) == {"l1d": 48 * 1024, "l2": 2 * 2**20, "llc": 300 * 2**20}


def test_without_l3_the_l2_is_the_last_level(tmp_path):
    root = make_sysfs(tmp_path, [(1, "Data", "32K"), (2, "Unified", "1024K")])
    assert read_sysfs_caches(root)["llc"] == 2**20


def test_missing_sysfs_gives_none(tmp_path):
    assert read_sysfs_caches(tmp_path) is None


def test_caches_fall_back_to_sysconf_then_to_assumed_sizes(monkeypatch):
    monkeypatch.setattr(cpu_module, "read_sysfs_caches", lambda: None)
    monkeypatch.setattr(cpu_module, "read_sysconf_caches",
                        lambda: {"l1d": 1, "l2": 2, "llc": 3})
    assert detect_caches() == ({"l1d": 1, "l2": 2, "llc": 3}, "sysconf")
    monkeypatch.setattr(cpu_module, "read_sysconf_caches", lambda: None)
    caches, source = detect_caches()
    assert source == "assumed" and caches == cpu_module.ASSUMED_CACHES


CPUINFO = """processor\t: 0
model name\t: Example CPU 9000
cpu MHz\t\t: 2100.000
physical id\t: 0
core id\t\t: 0
flags\t\t: fpu sse2 avx avx2 fma

processor\t: 1
model name\t: Example CPU 9000
cpu MHz\t\t: 2100.000
physical id\t: 0
core id\t\t: 0
flags\t\t: fpu sse2 avx avx2 fma

processor\t: 2
model name\t: Example CPU 9000
physical id\t: 0
core id\t\t: 1
flags\t\t: fpu sse2 avx avx2 fma
"""


def test_parse_cpuinfo_counts_physical_cores_not_hyperthreads():
    info = parse_cpuinfo(CPUINFO)
    assert info["model"] == "Example CPU 9000"
    assert info["mhz"] == 2100.0
    assert info["physical_cores"] == 2
    assert {"avx2", "fma"} <= info["flags"]


def test_meminfo(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       1000 kB\nMemAvailable:    600 kB\n")
    assert read_meminfo("MemTotal", meminfo) == 1000 * 1024
    assert read_meminfo("MemAvailable", meminfo) == 600 * 1024
    assert read_meminfo("SwapTotal", meminfo) is None
    assert read_meminfo("MemTotal", tmp_path / "absent") is None


@pytest.mark.parametrize("cache, tile", [(48 * 1024, 32), (32 * 1024, 32), (2 * 2**20, 256),
                                         (2**20, 256), (64, 2), (1, 1)])
def test_square_tile_fills_at_most_half_the_cache(cache, tile):
    assert square_tile(cache, itemsize=4) == tile
    assert 2 * tile * tile * 4 <= max(cache // 2, 8)


def test_detected_cpu_is_plausible():
    cpu = detect_cpu()
    assert cpu.logical_cpus >= 1
    assert 0 < cpu.l1d_bytes <= cpu.l2_bytes <= cpu.llc_bytes
    assert cpu.cache_source in ("sysfs", "sysconf", "assumed")
    assert cpu.to_json()["peak_gflops_fp32"] == cpu.peak_gflops_fp32


def test_cpu_peak_is_cores_times_clock_times_flops_per_cycle():
    info = CpuInfo(model="x", logical_cpus=8, physical_cores=4, l1d_bytes=1, l2_bytes=2,
                   llc_bytes=3, cache_source="sysfs", clock_mhz=2000.0, isa="AVX2",
                   flops_per_cycle=32, memory_bytes=None)
    assert info.peak_gflops_fp32 == pytest.approx(4 * 2.0 * 32)


def test_gpu_peaks_from_clocks_and_widths():
    h200 = GpuInfo(name="H200", compute_capability="9.0", sms=132, memory_bytes=0, l2_bytes=0,
                   shared_mem_per_block=0, shared_mem_per_block_optin=0, shared_mem_per_sm=0,
                   registers_per_sm=0, max_threads_per_sm=0, max_threads_per_block=0,
                   clock_mhz=1980.0, memory_clock_mhz=3201.0, memory_bus_bits=6016,
                   fp32_lanes_per_sm=128)
    assert h200.theoretical_gbps == pytest.approx(2 * 3201e6 * 752 / 1e9)
    assert h200.peak_gflops_fp32 == pytest.approx(132 * 128 * 2 * 1.98)


def test_no_gpu_is_a_normal_state(monkeypatch):
    monkeypatch.setattr(gpu_module, "gpu_unavailable_reason", lambda: "CuPy is not installed")
    assert detect_gpu() == (None, "CuPy is not installed")
