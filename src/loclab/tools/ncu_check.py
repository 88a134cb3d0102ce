"""The access models against Nsight Compute's counters, on a GPU machine where ``ncu`` reads
them: every GPU variant of the cases that declare their kernels' main accesses runs once under
``ncu``, and each kernel's measured sectors per global load and store request and bank
conflicts per shared load and store request are printed beside what
:mod:`loclab.model.coalescing` and :mod:`loclab.model.banks` predict for its declared accesses
(the mean over the declared loads, or stores: the counters add up every request of the kernel).

    python -m loclab.tools.ncu_check [--ncu ncu]    # a Markdown table on stdout

``scripts/gpu-check`` runs it; where ncu cannot read counters it says so and exits 0.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

CASES = {"transpose": {"rows": 2048, "cols": 2048},
         "coalescing": {"rows": 65536, "cols": 61},
         "mmm": {"m": 512, "n": 512, "k": 512},
         "matvec": {"rows": 65536, "cols": 256},
         "bmmm": {"m": 8192, "k": 8, "n": 512},
         "nearest-neighbour": {"queries": 8192, "points": 8192}}
COUNTERS = {
    "global load": ("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
                    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"),
    "global store": ("l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
                     "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum"),
    "shared load": ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
                    "smsp__inst_executed_op_shared_ld.sum"),
    "shared store": ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
                     "smsp__inst_executed_op_shared_st.sum"),
}


def launch_all(out: Path) -> None:
    """Run each variant once (under ncu) and write every kernel's predicted accesses."""
    import numpy as np

    from loclab.bench.auto import get_case
    from loclab.bench.backend import GpuBackend
    from loclab.bench.kernels import predicted_accesses
    from loclab.gpu.kernels import recording_launches
    from loclab.hw import detect_machine

    machine = detect_machine()
    backend = GpuBackend()
    predictions: dict[str, list[dict[str, Any]]] = {}
    for name, dims in CASES.items():
        case = get_case(name)
        inputs = case.make_inputs(dims, np.random.default_rng(0))
        staged = {key: backend.stage(array) for key, array in inputs.items()}
        for variant in case.variants_on("gpu"):
            shape, dtype = case.output(dims)
            with recording_launches() as launches:
                variant.setup(staged, backend.empty(shape, dtype), machine).run()
                backend.synchronize()
            for launch in launches:
                accesses = predicted_accesses(launch, dims)
                if accesses:
                    predictions[launch.name] = accesses
    out.write_text(json.dumps(predictions))


def predicted(accesses: list[dict[str, Any]], kind: str) -> float | None:
    """The prediction of the declared accesses the counter ``kind`` adds up: their mean per
    request, weighted by how often each runs where they say (a loop's load outweighs one
    before it). A bank conflict is a wavefront beyond those the access needs anyway (an
    8- or 16-byte access is served in 2 or 4 phases), as Nsight Compute counts it."""
    space, op = kind.split()
    chosen = [a for a in accesses if a["space"] == space and a["write"] == (op == "store")
              and not a.get("error")]
    if not chosen:
        return None
    weights = [a.get("executions") or 1 for a in chosen]
    if space == "global":
        values = [a["mean_sectors_per_request"] for a in chosen]
    else:
        values = [a["wavefronts_per_request"] - max(1, a["elem_bytes"] // 4) for a in chosen]
    return sum(w * v for w, v in zip(weights, values)) / sum(weights)


def measured(rows: list[dict[str, str]], kernel: str, kind: str) -> float | None:
    """The counter's ratio for ``kernel`` (summed over its launches)."""
    top, bottom = COUNTERS[kind]
    values = {top: 0.0, bottom: 0.0}
    for row in rows:
        if _base_name(row["Kernel Name"]) == _base_name(kernel) and row["Metric Name"] in values:
            values[row["Metric Name"]] += float(row["Metric Value"].replace(",", ""))
    return values[top] / values[bottom] if values[bottom] else None


def _base_name(name: str) -> str:
    """``void transpose_staged<32, 8, 1>(const float *, ...)`` and ``transpose_staged<32,8,1>``
    alike: the template's name and arguments without spaces (a bool as 1 or 0, however the
    profiler spells it)."""
    name = name.removeprefix("void ")
    depth = 0
    for position, char in enumerate(name):  # the parameter list: the first ( outside <>
        depth += {"<": 1, ">": -1}.get(char, 0)
        if char == "(" and depth == 0:
            name = name[:position]
            break
    name = name.replace(" ", "").replace("(bool)", "")
    return name.replace("true", "1").replace("false", "0")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ncu", default="ncu")
    parser.add_argument("--launch", type=Path, help=argparse.SUPPRESS)  # the profiled child
    args = parser.parse_args()
    if args.launch:
        launch_all(args.launch)
        return 0
    metrics = ",".join(m for pair in COUNTERS.values() for m in pair)
    with tempfile.TemporaryDirectory() as tmp:
        predictions_file = Path(tmp) / "predictions.json"
        command = [args.ncu, "--clock-control", "none", "--csv", "--print-units", "base",
                   "--metrics", metrics, sys.executable, "-m", "loclab.tools.ncu_check",
                   "--launch", str(predictions_file)]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode or not predictions_file.exists():
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            print(f"ncu could not read counters here: {' / '.join(tail)}")
            return 0
        predictions = json.loads(predictions_file.read_text())
    text = done.stdout[done.stdout.find('"ID"'):]
    rows = list(csv.DictReader(io.StringIO(text)))
    print("| kernel | counter | predicted | measured (ncu) |")
    print("|---|---|---:|---:|")
    for kernel, accesses in predictions.items():
        for kind in COUNTERS:
            guess = predicted(accesses, kind)
            if guess is None:
                continue
            got = measured(rows, kernel, kind)
            unit = "sectors/request" if kind.startswith("global") else "conflicts/request"
            shown = "not counted" if got is None else f"{got:.2f}"
            print(f"| `{kernel}` | {kind} {unit} | {guess:.2f} | {shown} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
