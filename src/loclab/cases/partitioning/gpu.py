"""GPU plans of the hash-table build: CUDA C in kernels.cu (atomicCAS), launched through CuPy.

One kernel serves the three plans, as on the CPU: T = k_i x k_o threads (the sweep's
``threads``, in whole blocks), thread (part, owner) hashes input part ``part`` and inserts
the keys whose home lies in slot range ``owner``. The table is cleared with a memset; keys
whose probe ran off their owner's range are inserted by a second kernel.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from loclab.cases.base import Bound
from loclab.cases.partitioning import GPU_BLOCK, both_grid, check_inputs, plan_params, threads_of
from loclab.gpu.kernels import KernelSource, Launch, blocks
from loclab.hw import Machine

ITEMS = 2  # groups of 4 keys each thread loads before inserting any: 16-byte loads in flight
FINISH_BLOCKS_PER_SM = 4  # the deferred keys are few: a grid-stride loop over a small grid
BUILD = {shared: f"partition_build<{'true' if shared else 'false'},{ITEMS},{GPU_BLOCK}>"
         for shared in (False, True)}
KERNELS = KernelSource(Path(__file__).with_name("kernels.cu"),
                       (BUILD[False], BUILD[True], "partition_finish"))
KEY_ALIGNMENT = 16  # the build reads keys as uint4


def _plan(inputs: dict, out: Any, machine: Machine, parts: int, owners: int) -> Bound:
    """Clear, build with parts x owners threads, insert the deferred keys. A key is deferred
    at most once and only where slot ranges have owners: the buffer holds N keys then."""
    import cupy

    keys = inputs["keys"]
    check_inputs(inputs, out.size)
    if keys.data.ptr % KEY_ALIGNMENT:
        raise ValueError(f"the keys must be {KEY_ALIGNMENT}-byte aligned for uint4 loads")
    n, slots, threads = keys.size, out.size, parts * owners
    room = n if owners > 1 else 0
    deferred_keys = cupy.empty(room, cupy.uint32)
    deferred_at = cupy.empty(room, cupy.int64)
    deferred = cupy.zeros(1, cupy.uint64)
    sizes = (np.int64(slots), np.int32(parts), np.int32(owners))
    build = Launch(KERNELS, BUILD[parts > 1], grid=(blocks(threads, GPU_BLOCK),),
                   block=(GPU_BLOCK,),
                   args=(keys, np.int64(n), out, *sizes, deferred_keys, deferred_at, deferred),
                   result=out)
    finish = Launch(KERNELS, "partition_finish",
                    grid=(machine.gpu.sms * FINISH_BLOCKS_PER_SM,), block=(GPU_BLOCK,),
                    args=(out, np.int64(slots), deferred_keys, deferred_at, deferred),
                    result=out)

    def run() -> Any:
        out.data.memset_async(0, out.nbytes)  # EMPTY is 0
        deferred.data.memset_async(0, deferred.nbytes)
        build()
        return finish()

    return Bound(run, {"threads": threads, "block": [GPU_BLOCK], "grid": list(build.grid),
                       "items": ITEMS, **plan_params(parts, owners)})


def input_partitioned(inputs: dict, out: Any, machine: Machine) -> Bound:
    """T threads split the keys: k_i = T, k_o = 1."""
    return _plan(inputs, out, machine, threads_of(inputs), 1)


def output_partitioned(inputs: dict, out: Any, machine: Machine) -> Bound:
    """T threads split the slots: k_i = 1, k_o = T."""
    return _plan(inputs, out, machine, 1, threads_of(inputs))


def both(inputs: dict, out: Any, machine: Machine, owners: int | None = None) -> Bound:
    """A k_i x k_o grid (``both_grid``: k_o = ``owners``, a divisor of T)."""
    return _plan(inputs, out, machine, *both_grid(threads_of(inputs), owners))
