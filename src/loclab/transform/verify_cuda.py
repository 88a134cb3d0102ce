"""``--verify`` of ``--emit cuda``: the original on the host and the kernels on the GPU, on
the same inputs, every output compared.

Both run on the arrays converted to the element types the kernels are written for
(``ARRAYS`` of the emitted module): the original as Python on NumPy arrays, the kernels on
CuPy copies, copied back into the arrays after the call. The GPU computes in those types
(float32 by default) where Python computes its scalars in float64, so every float operation
may round differently: the tolerance counts the longest chain of them, the largest size to
the depth of the deepest nest.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from loclab.errors import UsageError
from loclab.transform.inputs import (Supplier, check_work, choose_sizes, make_inputs,
                                     supplied_inputs)
from loclab.transform.verify import (MAX_PYTHON_INSTANCES, Verification, compare_runs,
                                     compile_original, compile_transformed)


def verify_cuda(result: Any, sizes: Mapping[str, int], inputs: Supplier | None = None,
                most_instances: int | None = MAX_PYTHON_INSTANCES) -> Verification:
    from loclab.gpu.transfers import on_host_arrays
    from loclab.hw.gpu import gpu_unavailable_reason

    reason = gpu_unavailable_reason()
    if reason is not None:
        raise UsageError(f"--verify of --emit cuda runs the kernels on a GPU: {reason}")
    program = result.program
    chosen = choose_sizes(program, dict(sizes))
    if most_instances:
        check_work(program, chosen, most_instances, "as Python (the original runs as written)")
    arguments = (make_inputs(program, chosen) if inputs is None
                 else supplied_inputs(program, inputs, chosen))
    function = compile_transformed(result)
    kinds = function.__globals__["ARRAYS"]
    typed = {name: value.astype(kinds[name][0]) if name in kinds else value
             for name, value in arguments.items()}
    depth = max((len(unit.loops) for unit in program.units()), default=1)
    length = max(chosen.values(), default=1) ** max(depth, 1)
    return compare_runs(compile_original(result), on_host_arrays(function), program, typed,
                        chosen, length, inputs)
