"""Scalars a whole grid reduces (``NestMapping.sums``: a dot product's ``s``, a count, an
error's ``max``), in a kernel's text.

Each thread keeps a share (``{name}_part``) over all its grid iterations; each pass over
them starts the thread's copies of the scalar from the operator's identity (a sum) or from
the host's value (``{name}_in``: min and max are idempotent, so every thread may take it
again) and combines them into the share (``gathered``). Once the grid loops are done, a
block combines its threads' shares by shuffles and shared memory, and its first thread adds
the block's result into the device copy ``{name}_sum`` atomically (``combined``): one atomic
per block, the launcher capping the grid at about a thousand blocks (``module.SUM_GRID``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from loclab.optimize.cuda.mapping import WARP
from loclab.transform.cuda_syntax import COMBINE, Typing, c_type

# each operator a grid may reduce a scalar with: how two shares combine (``COMBINE``), and
# the atomic that adds a block's result (``loclab_atomic_add``, ``_min``, ``_max``)
GRID_COMBINE = {"+": "add", "-": "add", "min": "min", "max": "max"}
FLAT = "(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z))"

Sums = Sequence[tuple[str, str]]  # (name, operator)


def sum_type(typing: Typing, name: str) -> np.dtype:
    """The NumPy type the kernel holds ``name`` in (its device copy's too)."""
    return np.dtype(typing.scalars.get(name, typing.compute))


def from_identity(sums: Sums) -> set[str]:
    """The scalars whose copies start from the identity (sums; not min and max)."""
    return {name for name, op in sums if GRID_COMBINE[op] == "add"}


def parameters(sums: Sums, typing: Typing) -> list[str]:
    """The kernel's parameters for the device copies."""
    return [f"{c_type(sum_type(typing, name))}* __restrict__ {name}_sum" for name, _ in sums]


def shares(sums: Sums, typing: Typing) -> list[str]:
    """Each thread's share, declared before the grid loops."""
    lines = []
    for name, _ in sums:
        kind = c_type(sum_type(typing, name))
        start = "0" if name in from_identity(sums) else f"{name}_in"
        lines.append(f"  {kind} {name}_part = ({kind}){start};")
    return lines


def gathered(sums: Sums, copies: Sequence[dict[str, str]], pad: str) -> list[str]:
    """After a pass over the thread's grid iterations: its copies (each one's names,
    ``rename``) combined into its share."""
    lines = []
    for name, op in sums:
        total = f"{name}_part"
        for rename in copies:
            total = COMBINE[GRID_COMBINE[op]].format(total, rename.get(name, name))
        lines.append(f"{pad}{name}_part = {total};")
    return lines


def combined(sums: Sums, typing: Typing, threads: int) -> list[str]:
    """Once the grid loops are done (every thread of the block gets here): a warp's shares
    combined by shuffles, the warps' in shared memory by the block's first thread, which adds
    the block's result into the device copy atomically; in a block that is not whole warps,
    each thread adds its own."""
    lines = []
    for name, op in sums:
        combine = GRID_COMBINE[op]
        kind = c_type(sum_type(typing, name))
        if threads % WARP:
            lines.append(f"  loclab_atomic_{combine}({name}_sum, {name}_part);")
            continue
        lines += ["  {",
                  f"    __shared__ {kind} warps[32];",
                  f"    const {kind} part = loclab_lanes_{combine}({name}_part);",
                  f"    if (({FLAT} & 31) == 0) warps[{FLAT} >> 5] = part;",
                  "    __syncthreads();",
                  f"    if ({FLAT} == 0) {{",
                  f"      {kind} block = warps[0];",
                  f"      for (int w = 1; w < {threads // WARP}; ++w) "
                  f"block = {COMBINE[combine].format('block', 'warps[w]')};",
                  f"      loclab_atomic_{combine}({name}_sum, block);",
                  "    }",
                  "  }"]
    return lines
