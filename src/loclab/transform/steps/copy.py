"""``copy(A, i)``: WAR elimination by copying. Before the loop, what the loop reads of ``A``
is copied, and the loop reads the copy: its anti-dependences (a read, then a later
iteration's write) are gone, so that the slides' ``A[i] = A[i + 1]`` becomes parallel.

Legal when every read of ``A`` inside the loop reads a value from before the loop: no
statement inside it writes an element that a later instance in the same execution of the
loop reads (no RAW dependence within the loop). Only ``parallel``, ``stage`` and ``copy`` may
follow it.
"""

from __future__ import annotations

from loclab.transform.recipe import Step
from loclab.transform.steps import Applied, Context, IllegalStep, expect_args, no_keywords
from loclab.transform.steps.stage import buffered_array
from loclab.transform.tree import Buffer, Program

NAMES = ("copy",)


def apply(program: Program, step: Step, context: Context) -> Applied:
    expect_args(step, 2, 2, "copy(array, loop)")
    no_keywords(step)
    new = program.clone()
    variable, node = buffered_array(new, step)
    checker = context.checker(new)
    inside = checker.within(node)
    for first, second, copies in checker.relations:
        if first[1].variable is not variable or not first[1].write or second[1].write:
            continue
        flow = checker.same_execution(copies.intersect_domain(inside).intersect_range(inside),
                                      node)
        if not flow.is_empty():
            found = checker.dependences_of(first, second)
            named = f"{found[0].id} {found[0].source}->{found[0].sink} RAW on " \
                    f"{variable.name}" if found else f"a RAW dependence on {variable.name}"
            raise IllegalStep(f"{step} is illegal: {named}: a read inside {node.name} sees "
                              "a value written inside it, not the one from before")
    name = new.fresh_name(f"{variable.name}_copy")
    new.buffers.append(Buffer("copy", variable, node, name))
    return Applied(new, f"every read of {variable.name} inside {node.name} sees the value "
                        f"from before the loop: it reads {name}")
