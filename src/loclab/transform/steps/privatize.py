"""``privatize(x[, loop])`` and ``expand(x[, loop, ...])``: storage of its own per iteration.

Privatizing gives every iteration of the loop (by default the innermost loop around all uses
of ``x``) its own ``x``, as declaring it inside the loop body would: legal when every read of
``x`` in an iteration reads a value written earlier in that same iteration (value-based, with
isl's dataflow analysis) and no value written in the loop is needed after it. The
dependences between iterations on ``x`` are then gone. Expanding instead turns ``x`` into an
array with an element per iteration of the given loops (``tmp[i]``), the slides' array
expansion, which distribution needs when ``x`` ends up in two loops.
"""

from __future__ import annotations

from dataclasses import replace

from loclab.nest.ir import Variable, loops_around_all
from loclab.transform.recipe import LoopRef, Step
from loclab.transform.steps import (Applied, Context, IllegalStep, find_loop, no_keywords,
                                    require_distinct, require_plain)
from loclab.transform.storage import single
from loclab.transform.tree import Private, Program

NAMES = ("privatize", "expand")


def apply(program: Program, step: Step, context: Context) -> Applied:
    no_keywords(step)
    if not step.args or not isinstance(step.args[0], LoopRef) or step.args[0].line is not None:
        raise step.error(f"usage {step.name}(variable[, loop ...])")
    new = program.clone()
    variable = find_variable(new, step.args[0].var, step)
    uses = [s for s in new.nest.statements if any(a.variable is variable for a in s.accesses)]
    around = loops_around_all([s for s in uses if s.loops])
    nodes = [find_loop(new, ref, step) for ref in step.args[1:]]
    require_distinct(nodes, step)
    require_plain(new, nodes, step)
    loops = [node.origin for node in nodes]
    if not around and not loops:
        raise step.error(f"no loop is around every use of {variable.name} in a loop (lines "
                         f"{', '.join(str(s.line) for s in uses)}): name the loop")
    for loop in loops:
        # a privatized loop may hold some of the uses only (a scalar each of two nests
        # reuses): _check proves that no value crosses its bounds, either way
        if loop not in around and (step.name == "expand" or not any(
                loop in s.loops for s in uses)):
            raise step.error(f"{loop.var}@{loop.line} is not around every use of "
                             f"{variable.name}")
    if step.name == "privatize":
        if len(loops) > 1:
            raise step.error("usage privatize(variable[, loop])")
        loop = loops[0] if loops else around[-1]
        private = Private(variable, loop, "privatize")
    else:
        if variable.is_array:
            raise step.error(f"{variable.name} is an array: privatize it instead")
        by = tuple(sorted(loops, key=lambda l: l.depth)) if loops else (around[-1],)
        loop = by[-1]
        private = Private(variable, loop, "expand", by,
                          new.expansion_name(variable, by[0]))
    private = _check(new, private, context, step)
    new.with_private(private)
    context.require_order(new, step)
    if step.name == "privatize" and private.last:
        return Applied(new, f"every read of {variable.name} in an iteration of {loop.var} "
                            "reads a value written in that iteration, and the last iteration "
                            "writes every element any iteration writes: its copy is the "
                            "value the caller sees")
    if step.name == "privatize":
        return Applied(new, f"every read of {variable.name} in an iteration of {loop.var} "
                            "reads a value written in that iteration, and none is needed "
                            "after the loop")
    index = ", ".join(l.var for l in private.expand_by)
    return Applied(new, f"{variable.name}[{index}]: every read sees a value written in its "
                        "own iteration, none is needed after the loop")


def find_variable(program: Program, name: str, step: Step) -> Variable:
    found = [v for v in program.nest.variables if v.name == name
             and any(a.variable is v for s in program.nest.statements for a in s.accesses)]
    if not found:
        known = ", ".join(dict.fromkeys(v.name for v in program.nest.variables)) or "none"
        raise step.error(f"no variable {name} in {program.nest.name} (variables: {known})")
    if len(found) > 1:
        raise step.error(f"{name} names {len(found)} variables declared in different blocks")
    return found[0]


def _check(program: Program, private: Private, context: Context, step: Step) -> Private:
    """``private`` where it is legal (with the last iteration's values to copy back, for an
    array whose final values are needed); else IllegalStep naming why."""
    remedies = context.remedies
    variable, loop = private.variable, private.loop
    if variable.scope and private.kind == "privatize":
        raise step.error(f"{variable.name} is declared inside the loop at line "
                         f"{variable.scope[-1].line}: it is private already")
    if not remedies.privatizable(loop, variable.key):
        raise IllegalStep(f"{step} is illegal: a read of {variable.name} in an iteration of "
                          f"{loop.var}@{loop.line} may see a value written before it or in "
                          "another iteration")
    if not remedies.live_out(loop, variable.key):
        return private
    where = "the caller sees it" if variable.is_argument else "it is read after the loop"
    if not variable.is_array or private.kind != "privatize":
        raise IllegalStep(f"{step} is illegal: {where}, and the loop's last value would be "
                          f"lost")
    last = _last_iteration(program, private, step, where)
    return replace(private, last=last,
                   name=program.fresh_name(f"{variable.name}_own"))


def _last_iteration(program: Program, private: Private, step: Step, where: str
                    ) -> tuple[str, ...]:
    """The values of ``private.loop`` and the loops around it at their last iteration, as
    isl functions of the sizes, where that iteration writes every element of the array any
    iteration writes (doitgen's scratch row ``total``, filled anew for each ``r, q``): its
    copy then holds the values the original leaves, the rest keeping the caller's. Else
    IllegalStep: the array used outside the loop too (a read there needs the values of its
    own time), a loop counting down, a write isl cannot place, or an earlier iteration
    writing an element the last one does not."""
    import islpy as isl

    model = program.model
    variable, loop = private.variable, private.loop
    name = f"{loop.var}@{loop.line}"
    uses = model.accesses.get(variable.key, [])
    inside = {id(s) for s in loop.statements()}
    if any(id(s) not in inside for s, _ in uses):
        raise IllegalStep(f"{step} is illegal: {where}, and {variable.name} is used outside "
                          f"{name} too, where a private copy's values would be missed")
    if any(outer.step <= 0 for outer in loop.enclosing):
        raise IllegalStep(f"{step} is illegal: {where}, and a loop around counts down: "
                          "loclab copies the last iteration's values back only for loops "
                          "counting up")
    writes = [(s, a) for s, a in uses if a.write]
    if not all(model.exact(s, a) for s, a in writes):
        raise IllegalStep(f"{step} is illegal: {where}, and isl cannot place every write of "
                          f"{variable.name}: which iteration writes last is unknown")
    depth = loop.depth + 1
    written: isl.Map | None = None
    for statement, access in writes:
        relation = model.access_map(statement, access)
        relation = relation.project_out(isl.dim_type.in_, depth,
                                        relation.dim(isl.dim_type.in_) - depth)
        relation = relation.set_tuple_name(isl.dim_type.in_, "E")
        written = relation if written is None else written.union(relation)
    assert written is not None  # (privatizable: some write inside)
    last = written.domain().lexmax()
    if not written.range().is_subset(written.intersect_domain(last).range()):
        raise IllegalStep(f"{step} is illegal: {where}, and an earlier iteration of {name} "
                          f"writes elements of {variable.name} its last iteration does not: "
                          "no one copy holds the values the original leaves")
    point = written.domain().lexmax_pw_multi_aff()
    return tuple(str(single(point.get_pw_aff(k), model.header)) for k in range(depth))
