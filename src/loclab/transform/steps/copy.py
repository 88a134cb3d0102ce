"""``copy(A, i)``: WAR elimination by copying. Before the loop, what the loop reads of ``A``
is copied, and the loop reads the copy: its anti-dependences (a read, then a later
iteration's write) are gone, so that the slides' ``A[i] = A[i + 1]`` becomes parallel.

The reads that go to the copy are those that read only values from before the loop: no
statement inside it writes an element that such a read sees later in the same execution of
the loop (no RAW dependence within the loop into it). Reads that do see the loop's writes
stay on ``A`` (trmm's accumulator ``B[i, j] += A[k, i] * B[k, j]``: ``B[k, j]``, rows later
iterations overwrite, reads the copy; ``B[i, j]`` stays), and so does a read written like a
write of the loop (the implicit read of ``x[i] +=``: an emitter redirects reads by how they
are written, and cannot tell that one from the write). Illegal when no read qualifies. Only
``parallel``, ``stage`` and ``copy`` may follow it.
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
    accesses = [a for u in node.units() for s in u.statements for a in s.accesses
                if a.variable is variable]
    written = {a.text for a in accesses if a.write}
    kept: dict[str, str] = {text: "written like a write of the loop (an update's own read)"
                            for text in written}
    for first, second, copies in checker.relations:
        if first[1].variable is not variable or not first[1].write or second[1].write \
                or second[1].text in kept:
            continue
        flow = checker.same_execution(copies.intersect_domain(inside).intersect_range(inside),
                                      node)
        if not flow.is_empty():
            found = checker.dependences_of(first, second)
            named = f"{found[0].id} {found[0].source}->{found[0].sink} RAW" if found \
                else "a RAW dependence"
            kept[second[1].text] = f"{named} on {variable.name}: it sees a value written " \
                                   "inside the loop"
    reads = sorted({a.text for a in accesses if not a.write})
    copied = [text for text in reads if text not in kept]
    if not copied:
        text, why = next((t, kept[t]) for t in reads if t in kept)
        raise IllegalStep(f"{step} is illegal: {text} inside {node.name}: {why}, not the "
                          "value from before")
    name = new.fresh_name(f"{variable.name}_copy")
    partial = len(copied) < len(reads)
    new.buffers.append(Buffer("copy", variable, node, name,
                              reads=frozenset(copied) if partial else frozenset()))
    if not partial:
        return Applied(new, f"every read of {variable.name} inside {node.name} sees the "
                            f"value from before the loop: it reads {name}")
    stay = ", ".join(f"{t} ({kept[t]})" for t in reads if t in kept)
    return Applied(new, f"{', '.join(copied)} inside {node.name} see the values from before "
                        f"the loop: they read {name}; {stay} stay on {variable.name}")
