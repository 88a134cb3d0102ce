"""A results document of a full run (every case, CPU and GPU) built without running anything:
the real cases' sizes, work and roofs on an H200 and its 16-core Xeon host, with the medians
of benchmarks/RESULTS.md, so that report code can be tested, and looked at, on the numbers a
user sees."""

from __future__ import annotations

from typing import Any

from loclab.bench.auto import get_case
from loclab.bench.interconnect import add_ideals
from loclab.bench.metrics import add_comparisons, derive_references, rates
from loclab.bench.results import build_document
from loclab.bench.runner import empty_row
from loclab.cases import case_names, family_of
from loclab.cases.partitioning import gpu_threads
from loclab.hw import Machine
from loclab.hw.cpu import CpuInfo
from tests.gpus import H200

XEON = CpuInfo(model="Intel(R) Xeon(R) Platinum 8480+", logical_cpus=16, physical_cores=16,
               l1d_bytes=48 * 2**10, l2_bytes=2 * 2**20, llc_bytes=300 * 2**20,
               cache_source="sysfs", clock_mhz=2100.0, isa="AVX-512", flops_per_cycle=64,
               memory_bytes=512 * 2**30)
MACHINE = Machine(cpu=XEON, gpu=H200, gpu_unavailable=None)
CPU_THREADS = [1, 2, 4, 8, 16]
KEYS = {"keys": 2**22, "slots": 2**23}
SKIP = None  # a variant that does not apply at that size
LINK_SWEEP = [*(4 * 2**10 * 16**k for k in range(5)), 2**30]  # 4 KiB ... 256 MiB, 1 GiB

# Median ms of each variant at each of its case's sizes on its device, in run order. The
# auto-gpu rows: an H100 on 2026-11-27 (RESULTS.md, issue 18); the auto-cpu rows are not
# measured here, shown as not run.
MEDIAN_MS: dict[str, dict[str, list[float | None]]] = {
    "copy": {"cpu-copy": [2.66], "numpy": [14.4], "gpu-copy": [0.505], "cuda-memcpy": [0.505]},
    "transpose": {"cpu-naive": [97.9], "cpu-blocked": [7.95], "numpy": [721],
                  "gpu-naive": [3.91], "gpu-shared": [1.35], "gpu-shared-padded": [0.609],
                  "gpu-optimized": [0.521], "cupy": [1.88], "auto-gpu": [0.809]},
    "partitioning": {
        "cpu-input-partitioned": [54.9, 32.0, 18.2, 12.2, 6.82],
        "cpu-output-partitioned": [54.9, 56.4, 54.4, 47.7, 41.3],
        "cpu-both": [54.8, 32.9, 31.2, 18.8, 16.1],
        "gpu-input-partitioned": [137.7, 35.5, 9.31, 2.53, 0.725, 0.309],
        "gpu-output-partitioned": [527.1, 428.4, 441.3, 440.2, 447.3, SKIP],
        "gpu-both": [349.1, 105.9, 34.2, 11.8, 4.55, 4.18]},
    "nearest-neighbour": {"cpu-naive": [75.4], "cpu-tiled": [6.49], "cpu-min-first": [3.62],
                          "numpy": [231], "gpu-naive": [14.39], "gpu-shared": [12.52],
                          "gpu-min-first": [5.44], "cupy": [1057], "auto-gpu": [19.9]},
    "coalescing": {"cpu-rows": [96.5], "cpu-transposed": [132], "gpu-naive": [3.701],
                   "gpu-transposed": [0.447], "gpu-staged": [0.145], "auto-gpu": [1.70]},
    "matvec": {"cpu-rows": [9.27, 20.3, 18.4], "cpu-split": [6.49, 6.57, 6.38],
               "numpy": [7.03, 6.03, 6.02], "gpu-row-per-thread": [1.097, 2.242, 296.6],
               "gpu-block-thread0": [4.306, 1.460, 21.57],
               "gpu-block-reduce": [3.890, 0.261, 2.384],
               "gpu-warp-per-row": [0.484, 0.248, 12.96],
               "gpu-optimized": [0.292, 0.247, 0.241], "cublas": [0.582, 0.264, 0.263],
               "auto-gpu": [0.591, 0.367, 13.1]},
    "histogram": {"cpu-atomic": [652, 375, 1126, 1450], "cpu-multipass": [688, 376, 3995, 7509],
                  "cpu-privatized": [70.5, 145, SKIP, SKIP], "numpy": [860, 843, 1246, 1426],
                  "gpu-atomic": [10.6, 5.63, 24.9, 31.8],
                  "gpu-multipass": [10.6, 5.63, 11.9, 25.7],
                  "gpu-partitioned": [14.8, 9.86, 12.4, 20.9],
                  "gpu-bucketed": [6.75, 5.62, 6.72, 10.3],
                  "gpu-shared": [3.71, SKIP, SKIP, SKIP],
                  "cupy.bincount": [27.3, 25.5, 48.6, 53.2],
                  "cupy.add.at": [25.95, 21.06, 40.29, 47.13],
                  "auto-gpu": [10.4, 6.45, 30.0, 38.1]},
    "mmm": {"cpu-naive": [1233], "cpu-transposed-b": [278], "cpu-blocked": [39.2],
            "cpu-register-tiled": [13.6], "numpy": [5.81], "gpu-naive": [23.49, SKIP],
            "gpu-block-tiled": [16.59, 132.26], "gpu-register-tiled": [4.936, 39.24],
            "gpu-optimized": [3.123, 24.67], "cublas": [2.699, 21.54],
            "auto-gpu": [5.00, SKIP]},
    "bmmm": {"cpu-naive": [168, 45.0, SKIP], "cpu-tiled": [26.1, 12.7, 87.2],
             "gpu-naive": [3.115, 1.565, 8.371], "gpu-tiled": [0.920, 0.870, 2.980],
             "gpu-optimized": [0.248, 0.112, 0.914], "cublas": [0.868, 0.785, 1.373],
             "auto-gpu": [2.98, 1.02, 11.5]},
    # The scan family, measured on an H100 (RESULTS.md, issue 16); the CUB rows as skipped
    # (no nvcc), as on a machine without the CUDA toolkit.
    "scan": {"cpu-sequential": [15.4], "cpu-two-pass": [11.1], "numpy": [43.0],
             "gpu-hillis-steele": [0.0282, 0.0276, 0.0477, 0.0501, 0.1704, 0.6235, 2.4511],
             "gpu-blelloch": [0.028, 0.0278, 0.0287, 0.0473, 0.1604, 0.5778, 2.2579],
             "gpu-reduce-then-scan": [0.0285, 0.0274, 0.0286, 0.0308, 0.1035, 0.3652, 1.4281],
             "gpu-decoupled-lookback": [0.0117, 0.0119, 0.0108, 0.0193, 0.0802, 0.2977, 1.1431],
             "cupy": [0.0349, 0.0381, 0.0362, 0.0429, 0.1475, 0.5556, 2.1824],
             "cub": [SKIP] * 7},
    "compaction": {"cpu-sequential": [19.7], "cpu-two-pass": [21.6], "numpy": [168],
                   "gpu-three-pass": [0.054, 0.0839, 0.8567],
                   "gpu-single-pass": [0.0379, 0.1025, 1.1895],
                   "cupy": [0.1486, 0.2683, 3.5616], "cub": [SKIP] * 3},
    "segmented-scan": {"cpu-sequential": [22.0], "cpu-two-pass": [10.4], "numpy": [214],
                       "gpu-flags-blelloch": [2.504, 3.082, 3.461],
                       "gpu-single-pass": [0.820, 0.983, 0.986],
                       "gpu-offsets": [45.6, 1.687, 0.872], "cupy": [16.4, 12.0, 11.45],
                       "cub": [SKIP] * 3},
    "summed-area": {"cpu-sequential": [41.1], "cpu-parallel": [27.5], "cpu-bands": [18.7],
                    "numpy": [324], "gpu-rows-then-columns": [6.1], "gpu-transpose": [0.705],
                    "gpu-coalesced-columns": [0.201], "cupy": [7.6]},
    "radix-sort": {"cpu-split": [70.9, 117], "cpu-lsd": [8.03, 32.6], "numpy": [7.61, 228],
                   "gpu-split": [98.0, 120], "gpu-lsd": [10.05, 15.9], "cupy": [6.9, 34.0],
                   "cub": [SKIP] * 2},
    "spmv": {"cpu-row-parallel": [3.77, 5.32], "cpu-merge-path": [3.13, 4.66],
             "scipy": [3.93, 5.58], "gpu-row-per-thread": [0.841, 14.69],
             "gpu-warp-per-row": [0.603, 3.864], "gpu-segmented-scan": [0.635, 0.616],
             "gpu-merge-path": [0.652, 0.635], "cusparse": [0.645, 0.671]},
    # The transfers family on an H100's PCIe 5.0 x16 link (RESULTS.md, issue 17); the CPU
    # row an estimate for a one-node host (first touch does not apply), not a measurement.
    "host-device": {"h2d-pageable": [0.005187, 0.0139, 0.08785, 1.518, 41.19, 176.0],
                    "h2d-pinned": [0.008294, 0.007984, 0.02347, 0.3277, 5.097, 20.36],
                    "d2h-pageable": [0.01439, 0.02278, 0.151, 1.453, 27.11, 136.9],
                    "d2h-pinned": [0.007549, 0.007819, 0.02127, 0.3133, 5.015, 19.57],
                    "round-trip-pinned": [0.01646, 0.01579, 0.05194, 0.629, 10.14, 39.15],
                    "both-ways-pinned": [0.03165, 0.08377, 0.07985, 0.4329, 6.249, 23.91]},
    "overlap": {"cpu-serial-init": [412], "cpu-first-touch": [SKIP],
                "serial": [10.15, 12.56, 20.38, 51.83],
                "serial-pageable": [76.53, 77.95, 68.12, 93.95],
                "streams-k": [5.955, 6.21, 10.89, 42.42]},
    "gemm-chain": {"device-centric": [12.58, 297.2], "data-flow": [8.251, 159.9]},
    "kernel-chain": {"device-centric": [840.2], "data-flow": [60.54], "fused": [49.02]},
}
# The phases (ms) of the rows made of steps at each of their sizes, measured with their medians.
PHASES_MS = {
    ("overlap", "cpu-serial-init"): [
        {"copy in": 288.0, "compute": 82.4, "copy out": 41.2},
    ],
    ("overlap", "serial"): [
        {"copy in": 5.14, "compute": 0.321, "copy out": 4.93},
        {"copy in": 4.97, "compute": 2.79, "copy out": 4.93},
        {"copy in": 4.88, "compute": 10.6, "copy out": 4.92},
        {"copy in": 4.94, "compute": 42.1, "copy out": 4.95},
    ],
    ("overlap", "serial-pageable"): [
        {"copy in": 43.5, "compute": 0.346, "copy out": 35.4},
        {"copy in": 46.3, "compute": 2.81, "copy out": 32.3},
        {"copy in": 31.7, "compute": 10.6, "copy out": 18.6},
        {"copy in": 31.5, "compute": 42.1, "copy out": 19.3},
    ],
    ("gemm-chain", "device-centric"): [
        {"copy in": 8.78, "compute": 0.893, "copy out": 3.06},
        {"copy in": 129.0, "compute": 43.1, "copy out": 99.1},
    ],
    ("gemm-chain", "data-flow"): [
        {"copy in": 5.84, "compute": 0.786, "copy out": 1.52},
        {"copy in": 97.0, "compute": 42.8, "copy out": 19.9},
    ],
    ("kernel-chain", "device-centric"): [
        {"copy in": 278.0, "compute": 2.73, "copy out": 648.0},
    ],
    ("kernel-chain", "data-flow"): [
        {"copy in": 33.2, "compute": 2.15, "copy out": 23.1},
    ],
    ("kernel-chain", "fused"): [
        {"copy in": 29.3, "compute": 0.337, "copy out": 18.6},
    ],
}


def _square(side: int) -> dict[str, int]:
    return {"rows": side, "cols": side}


def _matrices(side: int, long: int) -> list[dict[str, int]]:
    """matvec's three shapes: tall-skinny, square, short-wide."""
    return [{"rows": long, "cols": 64}, _square(side), {"rows": 64, "cols": long}]


def _bmmm(m: int) -> list[dict[str, int]]:
    return [{"m": m, "k": k, "n": 512} for k in (8, 4, 16)]


# The sizes MEDIAN_MS were measured at (the presets' rules have moved since, and read the
# machine running the tests): (CPU sizes, GPU sizes) of each case, in run order.
SIZES: dict[str, tuple[list[dict[str, int]], list[dict[str, int]]]] = {
    "copy": ([_square(8192)], [_square(16384)]),
    "transpose": ([_square(8192)], [_square(16384)]),
    "partitioning": ([{**KEYS, "threads": t} for t in CPU_THREADS],
                     [{**KEYS, "threads": t} for t in gpu_threads(MACHINE)]),
    "nearest-neighbour": ([{"queries": 2**15, "points": 2**15}],
                          [{"queries": 2**18, "points": 2**18}]),
    "coalescing": ([{"rows": 2**20, "cols": 64}], [{"rows": 2**20, "cols": 64}]),
    "matvec": (_matrices(8192, 2**20), _matrices(16384, 2**22)),
    "histogram": ([{"bins": b, "n": 2**27} for b in (65536, 2097152, 16777216, 67108864)],
                  [{"bins": b, "n": 2**29} for b in (12288, 3932160, 31457280, 125829120)]),
    "mmm": ([{"m": 2048, "n": 2048, "k": 2048}],
            [{"m": s, "n": s, "k": s} for s in (4096, 8192)]),
    "bmmm": (_bmmm(131000), _bmmm(131000)),
    "scan": ([{"n": 2**24, "exclusive": 0, "integer": 0}],
             [{"n": 2**k, "exclusive": 0, "integer": 0} for k in range(16, 29, 2)]),
    "compaction": ([{"n": 2**25, "percent": 50}],
                   [{"n": n, "percent": 50} for n in (2**20, 2**24, 2**28)]),
    "segmented-scan": ([{"n": 2**24, "segment": 1000, "empty": 0}],
                       [{"n": 2**28, "segment": s, "empty": 0} for s in (1, 32, 1000)]),
    "summed-area": ([_square(5632)], [_square(8192)]),
    "radix-sort": ([{"n": 2**21, "values": v, "order": 0} for v in (0, 1)],
                   [{"n": 2**28, "values": v, "order": 0} for v in (0, 1)]),
    "spmv": ([{"rows": 2**18, "cols": 2**18, "nnz": 2**22, "kind": k} for k in (0, 1)],
             [{"rows": 2**22, "cols": 2**22, "nnz": 2**26, "kind": k} for k in (0, 1)]),
    "host-device": ([], [{"bytes": size} for size in LINK_SWEEP]),
    "overlap": ([{"n": 2**28, "rounds": 1}],
                [{"n": 2**26, "rounds": r} for r in (1, 512, 2048, 8192)]),
    "gemm-chain": ([], [{"n": n, "matrices": 3} for n in (2048, 8192)]),
    "kernel-chain": ([], [{"n": 2**26, "kernels": 8}]),
}


# Hash computations per key of the `both` plans (k_o of their grid), by threads (RESULTS.md).
BOTH_HASHES = {1: 1, 2: 1, 4: 2, 8: 2, 16: 4, 256: 16, 1024: 32, 4096: 64, 16384: 128,
               65536: 256, 270336: 512}


def _hashes_per_key(variant: str, threads: int) -> int:
    """Hash computations per key of a partitioning plan: input 1, output t, both k_o."""
    if "input" in variant:
        return 1
    return threads if "output" in variant else BOTH_HASHES[threads]


def _timed(row: dict[str, Any], median_ms: float, spread: float) -> None:
    """A valid row timed at ``median_ms``, its quartiles and extremes ``spread`` apart."""
    median = median_ms * 1e-3
    row.update(median_s=median, min_s=median * (1 - spread), max_s=median * (1 + 4 * spread),
               q1_s=median * (1 - spread / 2), q3_s=median * (1 + spread),
               iqr_s=median * 1.5 * spread, runs=20, batch=1, valid=True, max_rel_err=0.0)
    rates(row)


def _row(case: str, variant: Any, dims: dict[str, int], median_ms: float | None,
         index: int = 0) -> dict:
    """One result row as the runner writes it (``runner.empty_row``, then the timing)."""
    row = empty_row(get_case(case), variant, dims,
                    "cuda-events" if variant.device == "gpu" else "perf_counter", MACHINE)
    if "threads" in dims:
        row["params"] = {"hashes_per_key": _hashes_per_key(variant.name, dims["threads"])}
    if median_ms is None:
        row["skipped"] = "does not apply at this size"
    else:
        _timed(row, median_ms, 0.004 if variant.device == "gpu" else 0.03)
        row["phases"] = {phase: ms * 1e-3 for phase, ms in
                         PHASES_MS.get((case, variant.name), [{}] * (index + 1))[index].items()}
    return row


def _break(row: dict[str, Any], crash: bool) -> None:
    """A row whose output was wrong (still timed), or that failed before any time."""
    row.update(valid=False, error="max relative error 0.5 > 1e-05")
    if crash:
        row.update(error="launch failed: out of resources", median_s=None, min_s=None,
                   max_s=None, q1_s=None, q3_s=None, iqr_s=None, runs=0)
        rates(row)


def full_run(failing: tuple[tuple[str, str], ...] = (),
             crashed: tuple[tuple[str, str], ...] = ()) -> dict[str, Any]:
    """Every case on the CPU and the GPU at the default preset. At the first size of each:
    ``failing`` (case, variant) pairs gave a wrong output, still timed; ``crashed`` pairs
    failed before any time."""
    rows = []
    for case in case_names():
        for device in ("cpu", "gpu"):
            variants = get_case(case).variants_on(device)
            for index, dims in enumerate(SIZES[case][device == "gpu"]):
                for variant in variants:
                    median = MEDIAN_MS[case].get(variant.name, [SKIP] * (index + 1))[index]
                    row = _row(case, variant, dims, median, index)
                    if index == 0 and (case, variant.name) in failing + crashed:
                        _break(row, (case, variant.name) in crashed)
                    rows.append(row)
    references = derive_references(rows, MACHINE)
    add_comparisons(rows, references)
    add_ideals(rows, references)
    machine = MACHINE.to_json()
    machine["cpu"]["numba_threads"] = 16
    return build_document(
        machine=machine, references=references, rows=rows, size="default",
        devices=["cpu", "gpu"],
        cases={name: {"lesson": get_case(name).lesson,
                      "description": get_case(name).description,
                      "limit": get_case(name).limit, "sweep": get_case(name).sweep,
                      "sweep_param": get_case(name).sweep_param,
                      "sweep_rate": get_case(name).sweep_rate,
                      "family": family_of(name)} for name in case_names()})
