"""A grid iteration's split loop shared by several blocks (``Config.chunks``), in a kernel's
and its launcher's text.

Why: a short, wide matvec has 64 rows; a block per row leaves half of an H200's 132 SMs idle
and streams at half the copy's rate. With ``chunks`` blocks per grid iteration (blockIdx.x),
block ``c`` runs the split loop's iterations ``c * threads + lane``, ``+ threads * chunks``,
...; each block combines its lanes as before, and its first thread leaves the block's part in
``loclab_parts{k}[iteration * chunks + c]`` (one array per reduction), then counts itself in
``loclab_arrived[iteration]``. The block that arrives last reads every part in block order
(so the result does not depend on which block finished when), resets the count for the next
launch, and alone runs what follows the loop: the threadFenceReduction pattern of the CUDA
samples, one kernel, no second launch.

Where (``KernelWriter._shareable``): the loop is directly in the iteration's body, once;
what precedes it writes no array (every block runs it); the loop writes nothing but the
elements it reduces in registers (what the last block runs after it reads nothing another
block wrote but the parts); no scalar the whole grid reduces (``sums``) is involved.
"""

from __future__ import annotations

from collections.abc import Sequence

from loclab.transform.cuda_syntax import COMBINE

ARRIVED = "loclab_arrived"
LAST = "loclab_last"  # whether this block arrived last: it runs the rest of the iteration
ITERATION = "loclab_iteration"


def parts(index: int) -> str:
    """The device array of the blocks' parts of reduction ``index``."""
    return f"loclab_parts{index}"


def parameters(kinds: Sequence[str]) -> list[str]:
    """The kernel's parameters: one parts array per reduction (its C type), the counts."""
    return [f"{kind}* __restrict__ {parts(k)}" for k, kind in enumerate(kinds)] + [
        f"int* __restrict__ {ARRIVED}"]


def iteration(counts: Sequence[tuple[str, str]]) -> str:
    """The grid iteration's number from its grid loops' (``t_`` name, count name), row-major
    as the launcher counts them."""
    text = counts[0][0]
    for place, count in counts[1:]:
        text = f"({text}) * {count} + {place}"
    return text


def combined(targets: Sequence[tuple[str, str, str]], pad: str) -> list[str]:
    """After the block's combine (every thread holds the block's part of each target:
    (register, C type, ``COMBINE`` key)): the parts exchanged through memory; every thread of
    the last block to arrive holds the whole, and ``LAST`` says whether this block is it."""
    lines = [f"{pad}{{", f"{pad}  __shared__ bool loclab_done;"]
    lines += [f"{pad}  __shared__ {kind} loclab_whole{k};"
              for k, (_, kind, _) in enumerate(targets)]
    lines.append(f"{pad}  if (threadIdx.x == 0) {{")
    lines += [f"{pad}    {parts(k)}[{ITERATION} * gridDim.x + blockIdx.x] = {target};"
              for k, (target, _, _) in enumerate(targets)]
    lines += [f"{pad}    __threadfence();",
              f"{pad}    loclab_done = "
              f"atomicAdd(&{ARRIVED}[{ITERATION}], 1) == (int)gridDim.x - 1;",
              f"{pad}    if (loclab_done) {{",
              f"{pad}      __threadfence();"]
    for k, (_, kind, combine) in enumerate(targets):
        seen = f"((volatile {kind}*){parts(k)})[{ITERATION} * gridDim.x + loclab_c]"
        lines += [f"{pad}      {kind} loclab_all{k} = ((volatile {kind}*){parts(k)})"
                  f"[{ITERATION} * gridDim.x];",
                  f"{pad}      for (unsigned loclab_c = 1; loclab_c < gridDim.x; ++loclab_c) "
                  f"loclab_all{k} = {COMBINE[combine].format(f'loclab_all{k}', seen)};",
                  f"{pad}      loclab_whole{k} = loclab_all{k};"]
    lines += [f"{pad}      {ARRIVED}[{ITERATION}] = 0;",
              f"{pad}    }}",
              f"{pad}  }}",
              f"{pad}  __syncthreads();",
              f"{pad}  {LAST} = loclab_done;"]
    lines += [f"{pad}  if ({LAST}) {target} = loclab_whole{k};"
              for k, (target, _, _) in enumerate(targets)]
    lines.append(f"{pad}}}")
    return lines


def allocations(dtypes: Sequence[str], counts: Sequence[str], chunks: int,
                pad: str) -> list[str]:
    """The launcher's lines that make the parts (``dtypes``: NumPy names) and the counts
    (zero; the last block of each iteration leaves them zero again) for a launch."""
    total = " * ".join(counts)
    lines = [f"{pad}{parts(k)} = cp.empty({chunks} * {total}, dtype=np.{dtype})"
             for k, dtype in enumerate(dtypes)]
    lines.append(f"{pad}{ARRIVED} = cp.zeros({total}, dtype=np.int32)")
    return lines


def arguments(count: int) -> list[str]:
    """The launcher's arguments for the parameters above."""
    return [parts(k) for k in range(count)] + [ARRIVED]
