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
from loclab.gpu.kernels import KernelAccesses, KernelSource, Launch, blocks, zeroed
from loclab.hw import Machine
from loclab.model.access import DeclaredAccess

ITEMS = 2  # groups of 4 keys each thread loads before inserting any: 16-byte loads in flight
FINISH_BLOCKS_PER_SM = 4  # the deferred keys are few: a grid-stride loop over a small grid
BUILD = {shared: f"partition_build<{'true' if shared else 'false'},{ITEMS},{GPU_BLOCK}>"
         for shared in (False, True)}


class BuildAccesses(KernelAccesses):
    """The accesses of partition_build, whose texts name ``parts`` (k_i), which SHARED
    tells: the thread count with it (input partitioning), 1 without (output partitioning).
    gpu-both, SHARED too, has threads / k_o parts: k_o lanes read each group, which the texts
    do not model."""

    def parameters(self, name: str, dims: dict[str, int]) -> dict[str, int]:
        params = super().parameters(name, dims)
        return {**params, "parts": params["threads"] if params["SHARED"] else 1}


# partition_build at its first batch (j = 0): lane `task` reads group task % parts, so the
# lanes of a warp read neighbouring groups (16-byte loads) with SHARED, all the same one
# without. Table slots are hashed: a sector per key, as stride 8 gives (without SHARED only
# the key's owner lane inserts it: requests of one lane, still a sector each); a key's further
# probe steps and the keys it displaces are data-dependent and not counted.
# partition_finish is not declared: it resumes the keys whose probe crossed an owner's range
# end, a data-dependent number (none under input partitioning) that no dimension gives.
ACCESSES = (
    BuildAccesses("partition_build", ("SHARED", "ITEMS", "BLOCK"), (
        DeclaredAccess("keys4[(blockIdx.x*BLOCK + threadIdx.x) % parts + j*parts]", "global",
                       16, note="read 4 keys (uint4): neighbouring groups with SHARED, one "
                       "broadcast group per warp without", count="threads/parts*((keys + 3)/4)"),
        DeclaredAccess("table[threadIdx.x*8]", "global", 4, note="read a key's hashed home "
                       "slot: a sector each (modelled as stride 8); once per key",
                       count="keys"),
        DeclaredAccess("table[threadIdx.x*8]", "global", 4, note="insert into it (atomicCAS "
                       "with SHARED): a sector each; once per key", write=True,
                       count="keys")),
        at=(("j", 0),), block=("BLOCK",)),
)
KERNELS = KernelSource(Path(__file__).with_name("kernels.cu"),
                       (BUILD[False], BUILD[True], "partition_finish"), ACCESSES)
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
        zeroed(out, deferred)  # EMPTY is 0
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
