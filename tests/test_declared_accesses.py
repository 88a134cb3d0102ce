"""The main accesses the cases declare for their GPU kernels (``KernelAccesses``) read
without error at every test size: each names only what it may (template arguments, the case's
dimensions, thread and block indices), fits its arrays, and says how often it runs, so that
``loclab run`` can show its predicted sectors and bank conflicts and the time model its
traffic. Without a GPU: the declarations are data."""

from __future__ import annotations

import importlib

import pytest

from loclab.bench.auto import get_case
from loclab.cases import case_names
from loclab.model.access import evaluate_sides

GPU_CASES = [name for name in case_names() if get_case(name).variants_on("gpu")]

# Kernels with an access that may not run at some test sizes (it must at some other); every
# other declared access runs at every test size.
RUN_AT_SOME_SIZES = dict.fromkeys(("compact_chunks", "compact_lookback"),
                                  "writes the kept elements: none where none is kept")


def kernel_sources(name: str) -> list:
    module = importlib.import_module(f"loclab.cases.{name.replace('-', '_')}.gpu")
    return [value for value in vars(module).values()
            if type(value).__name__ == "KernelSource"]


@pytest.mark.parametrize("name", GPU_CASES)
def test_every_declaration_predicts_at_every_test_size(name: str) -> None:
    case = get_case(name)
    for source in kernel_sources(name):
        for kernel in source.name_expressions:
            declared = source.accesses_of(kernel)
            if declared is None:
                continue
            runs = {access.text: 0 for access in declared.accesses if access.space == "global"}
            for dims in case.test_dims:
                params = declared.parameters(kernel, dict(dims))
                block = evaluate_sides(declared.block, params)
                for access in declared.accesses:
                    access.predict(block, params)  # raises on a name, shape or bound problem
                    if access.space == "global":
                        executions = access.executions(params)
                        assert executions >= 0, (kernel, access.text, dims)
                        assert executions > 0 or kernel.partition("<")[0] in RUN_AT_SOME_SIZES, (
                            kernel, access.text, dims)
                        runs[access.text] += executions
            assert all(runs.values()), (kernel, runs)


# Kernels whose main accesses depend on the data (no affine text describes them).
UNDECLARED = {"partition_finish": "resumes the keys whose probe crossed an owner's range"}


@pytest.mark.parametrize("name", GPU_CASES)
def test_every_kernel_declares_its_accesses(name: str) -> None:
    missing = [kernel for source in kernel_sources(name) for kernel in source.name_expressions
               if source.accesses_of(kernel) is None
               and kernel.partition("<")[0] not in UNDECLARED]
    assert missing == []
