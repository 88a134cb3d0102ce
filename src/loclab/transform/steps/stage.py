"""``stage(B, kk)``: the slides' "remap a read-only slice". At the start of every iteration of
``kk``, the slice of ``B`` that the iteration reads is copied into a local buffer, and the
iteration reads the buffer (``B_kk[i - B_lo0, k - B_lo1]``): a small, contiguous block that
stays in cache (on a GPU: shared memory). ``transpose=True`` keeps a 2-D slice column by
column (``B_kk[k - B_lo1, i - B_lo0]``): the lectures' trick for a slice each thread reads down
a column (the register-tiled product's ``A``), whose reads then run along rows.
``using=j`` stages only the reads whose subscripts use loop ``j``: on a CPU, BLIS's packing
of a panel (syrk's ``A[j, k]`` inside ``jj``, while the ``A[i, k]`` beside it, the same in every
iteration of ``jj``, stays on the array; one box for both would span every row between the
two tiles).

Legal when no statement inside ``kk`` writes ``B`` (the buffer would go stale) and every read
has affine subscripts (isl bounds the slice). It comes after the steps that reorder loops:
only ``parallel``, ``stage`` and ``copy`` may follow it.
"""

from __future__ import annotations

from loclab.nest.ir import Variable
from loclab.transform.recipe import LoopRef, Step
from loclab.transform.steps import (Applied, Context, IllegalStep, expect_args, find_loop,
                                    find_loops, require_plain)
from loclab.transform.steps.privatize import find_variable
from loclab.transform.tree import Buffer, LoopNode, Program

NAMES = ("stage",)


def apply(program: Program, step: Step, context: Context) -> Applied:
    expect_args(step, 2, 2, USAGE)
    transposed, using = _options(step)
    new = program.clone()
    variable, node = buffered_array(new, step)
    reads = _reads_using(new, step, variable, node, using) if using else frozenset()
    rank = next(len(a.subscripts) for u in node.units() for s in u.statements
                for a in s.accesses if a.variable is variable)
    if transposed and rank != 2:
        raise step.error(f"{variable.name} has {rank} subscripts: transpose=True keeps a "
                         "2-D slice column by column")
    writes = [s for u in node.units() for s in u.statements
              for a in s.accesses if a.variable is variable and a.write]
    if writes:
        raise IllegalStep(f"{step} is illegal: {variable.name} is written inside "
                          f"{node.name} (line {writes[0].line}): a copy would go stale")
    name = new.fresh_name(f"{variable.name}_{node.name}")
    new.buffers.append(Buffer("stage", variable, node, name, transposed, reads))
    kept = ", kept transposed (a column of the slice is a row of the buffer)" \
        if transposed else ""
    which = f"{', '.join(sorted(reads))} reads" if reads else "reads"
    return Applied(new, f"{variable.name} is only read inside {node.name}: each iteration "
                        f"{which} its slice from {name}{kept}")


USAGE = "stage(array, loop[, transpose=True][, using=loop])"


def _options(step: Step) -> tuple[bool, LoopRef | None]:
    """``transpose=True/False`` and ``using=LOOP``, each at most once (the parser refuses a
    name given twice)."""
    transposed, using = False, None
    for key, value in step.keywords:
        if str(key) == "transpose" and isinstance(value, bool):
            transposed = value
        elif str(key) == "using" and isinstance(value, LoopRef):
            using = value
        else:
            raise step.error(f"unknown option {key}={value} ({step.name} takes transpose=True "
                             "or False, and using=LOOP)")
    return transposed, using


def _reads_using(program: Program, step: Step, variable: Variable, node: LoopNode,
                 using: LoopRef) -> frozenset[str]:
    """The reads of ``variable`` inside ``node`` whose subscripts move with the loop
    ``using`` names (a loop inside ``node``): those ``using=`` stages."""
    inner = find_loops(program, using, step)
    if not any(loop is not node and loop in list(node.loops()) for loop in inner):
        raise step.error(f"{using} is not a loop inside {node.label}")
    var = inner[0].origin.var
    reads = frozenset(a.text for u in node.units() for s in u.statements for a in s.accesses
                      if a.variable is variable and not a.write
                      and any(sub is None or var in sub.symbols()
                              for sub in a.subscripts))
    if not reads:
        raise step.error(f"no read of {variable.name} inside {node.label} moves with {using}")
    return reads


def buffered_array(program: Program, step: Step) -> tuple:
    """The array and the loop a ``stage`` or ``copy`` step names, checked for what both
    need: an array read inside the loop, through affine subscripts."""
    ref = step.args[0]
    if not isinstance(ref, LoopRef) or ref.line is not None:
        raise step.error(f"{ref} is not an array name")
    variable = find_variable(program, ref.var, step)
    if not variable.is_array:
        raise step.error(f"{variable.name} is a scalar: {step.name} copies arrays")
    node: LoopNode = find_loop(program, step.args[1], step)
    require_plain(program, list(node.loops()), step)
    reads = [(s, a) for u in node.units() for s in u.statements for a in s.accesses
             if a.variable is variable and not a.write]
    if not reads:
        raise step.error(f"nothing inside {node.label} reads {variable.name}")
    for statement, access in reads:
        if not access.affine:
            raise step.error(f"{access.text} (line {statement.line}) has a subscript isl "
                             "cannot bound: the slice to copy is unknown")
    if len({len(a.subscripts) for _, a in reads}) != 1:
        raise step.error(f"{variable.name} is read with different numbers of subscripts")
    if any(b.variable is variable and b.loop is node for b in program.buffers):
        raise step.error(f"{variable.name} is already copied for {node.label}")
    return variable, node
