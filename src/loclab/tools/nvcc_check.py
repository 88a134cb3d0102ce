"""Compile every case's ``kernels.cu`` with nvcc, every instantiation the case launches.

CI runs this when nvcc is on the PATH (no GPU needed), so a kernel that does not compile never
lands; it also prints ptxas's resource report (registers, spills, shared memory) to read
before spending GPU time. Usage: ``python -m loclab.tools.nvcc_check [--arch sm_90]``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from loclab.cases import CASE_MODULES
from loclab.errors import LaunchError
from loclab.gpu import cub
from loclab.gpu.kernels import NVRTC_OPTIONS, KernelSource


def kernel_sources() -> list[KernelSource]:
    """Every KernelSource that a case's ``gpu`` module declares."""
    sources = []
    for module_name in CASE_MODULES.values():
        try:
            module = importlib.import_module(f"{module_name}.gpu")
        except ModuleNotFoundError:
            continue
        sources += [value for value in vars(module).values() if isinstance(value, KernelSource)]
    return sources


def translation_unit(source: KernelSource) -> str:
    """The .cu file plus the address of every listed instantiation, which makes nvcc compile
    them all (a template nobody instantiates is never compiled)."""
    addresses = ",\n    ".join(f"(void*)&{name}" for name in source.name_expressions)
    return (f'#include "{source.path}"\n'
            f"static void* loclab_instantiations[] = {{\n    {addresses}\n}};\n")


def compile_source(source: KernelSource, arch: str, workdir: Path) -> tuple[bool, str]:
    unit = workdir / f"{source.path.parent.name}_{source.path.stem}_check.cu"
    unit.write_text(translation_unit(source))
    command = ["nvcc", f"-arch={arch}", *NVRTC_OPTIONS, "-Xptxas", "-v", "-c", str(unit),
               "-o", str(unit.with_suffix(".o"))]
    done = subprocess.run(command, capture_output=True, text=True)
    return done.returncode == 0, done.stderr


def resource_lines(ptxas_output: str) -> list[str]:
    """One line per kernel: registers, spills, shared memory."""
    lines, kernel, spills = [], None, "0/0"
    for line in ptxas_output.splitlines():
        if match := re.search(r"Compiling entry function '(\w+)'", line):
            kernel = match.group(1)
        elif match := re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line):
            spills = f"{match.group(1)}/{match.group(2)}"
        elif kernel and (match := re.search(r"Used (\d+) registers", line)):
            smem = re.search(r"(\d+) bytes smem", line)
            lines.append(f"  {kernel}: {match.group(1)} registers, spill stores/loads {spills} "
                         f"bytes, {smem.group(1) if smem else 0} bytes shared")
            kernel, spills = None, "0/0"
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="sm_90", help="nvcc -arch (default: sm_90)")
    parser.add_argument("--no-cub", action="store_true",
                        help="leave out the CUB library's wrapper (CI: the tests built it)")
    args = parser.parse_args(argv)
    failed = 0
    with tempfile.TemporaryDirectory() as tmp, \
            ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        # one nvcc a core (each is a process of its own), the report in the sources' order
        sources = kernel_sources()
        wrapper = None if args.no_cub else pool.submit(  # the longest: first
            cub.build, args.arch, Path(tmp) / "libloclab_cub.so")
        compiled = [pool.submit(compile_source, source, args.arch, Path(tmp))
                    for source in sources]
        for source, future in zip(sources, compiled):
            ok, output = future.result()
            print(f"{'ok    ' if ok else 'FAILED'} {source.path} "
                  f"({len(source.name_expressions)} instantiations, {args.arch})")
            print("\n".join(resource_lines(output) if ok else [output.strip()]))
            failed += not ok
        try:
            if wrapper is not None:
                wrapper.result()
                print(f"ok     {cub.SOURCE} (the CUB library rows' wrapper, {args.arch})")
        except LaunchError as err:
            print(f"FAILED {err}")
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
