"""The transformations a recipe applies, one module each, behind one small interface.

Each module has ``NAMES`` (the steps it implements) and ``apply(program, step, context) ->
Applied``: a new :class:`~loclab.transform.tree.Program` (the old one is left as it was) and
why the step is legal. A step that would break a dependence raises :class:`IllegalStep`
(exit 1); a malformed one (an unknown loop, a tile of 0) a ``UsageError`` (exit 2).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType

from loclab.deps.dependences import Dependence
from loclab.deps.remedies import Remedies
from loclab.errors import LoclabError, UsageError
from loclab.transform.legality import Carried, Checker, Dependences, Violation
from loclab.transform.recipe import Arg, LoopRef, Step, Unparsed
from loclab.transform.tree import LoopNode, Node, Program, Reduction, Unit


# The largest tile or strip, a C int: the emitted code adds it to a loop variable, where a
# constant past 2^63 does not fit at all (nor compile) and one near it wraps.
MAX_SIZE = 2**31 - 1


class IllegalStep(LoclabError):
    """A step that would change what the function computes (exit 1); ``violation`` names the
    dependence a reordering would break, ``carried`` the one a loop made parallel would
    carry (the program, the loop, the dependence, sizes at which it does)."""

    exit_code = 1

    def __init__(self, message: str, violation: Violation | None = None,
                 carried: tuple[Program, LoopNode, Dependence, dict[str, int]] | None = None
                 ) -> None:
        super().__init__(message)
        self.violation = violation
        self.carried = carried


@dataclass(frozen=True)
class Applied:
    program: Program
    reason: str  # why the step is legal, in the slides' terms


@dataclass(eq=False)
class Context:
    """What every step may ask: the original dependences and the analysis' remedies."""

    dependences: Dependences
    remedies: Remedies

    def checker(self, program: Program) -> Checker:
        return Checker(program, self.dependences)

    def require_order(self, program: Program, step: Step,
                      changed: Sequence[LoopNode] = ()) -> None:
        """Refuse the step when the new tree breaks a dependence: of the top-level nests
        that hold the statements of the ``changed`` loops (of the new tree or the one
        before the step) where given, else of the whole function."""
        moved = {id(s) for node in changed for unit in node.units() for s in unit.statements}
        tops = [top for top in program.body if isinstance(top, LoopNode) and any(
            id(s) in moved for unit in top.units() for s in unit.statements)]
        violation = self.checker(program).violation(tops)
        if violation is not None:
            raise IllegalStep(f"{step} is illegal: {violation}{self.hint(violation)}",
                              violation)

    def hint(self, violation: Violation) -> str:
        """What would remove the broken dependence, when privatizing would."""
        dependence = violation.dependence
        if dependence is None or not dependence.on_scalar:
            return ""
        loops = dependence.source_statement.loops
        common = [l for l in loops if l in dependence.sink_statement.loops]
        for loop in reversed(common):
            if self.remedies.privatizable(loop, dependence.variable):
                return f" (privatize({dependence.array}) first)"
        return ""


def registry() -> dict[str, ModuleType]:
    from loclab.transform.steps import (copy, distribute, fastmath, fuse, gpu, hold,
                                        interchange, parallel, privatize, skew, stage,
                                        stripmine, tile, unroll, vectorize)

    modules = (stripmine, interchange, tile, distribute, fuse, skew, privatize, unroll,
               parallel, stage, copy, vectorize, hold, fastmath, gpu)
    return {name: module for module in modules for name in module.NAMES}


# -- helpers the steps share ---------------------------------------------------------------
def reductions_of(carried: list[Carried]) -> tuple[Reduction, ...]:
    """What a loop that may reorder its iterations combines: each variable it carries a
    reduction on (``parallel`` across threads, ``vectorize`` across lanes)."""
    return tuple(Reduction(c.key, c.name, c.reduction or "+", c.scalar) for c in carried)


def witness(program: Program, node: LoopNode, carried: Carried
            ) -> tuple[Program, LoopNode, Dependence, dict[str, int]] | None:
    """The refused loop's carried dependence for ``IllegalStep.carried`` (what the oracle
    checks a refusal against), where the checker found one."""
    if not carried.dependences:
        return None
    return program, node, carried.dependences[0], carried.sizes


def find_loop(program: Program, ref: Arg, step: Step) -> LoopNode:
    """The loop of the current tree that a step names (``i`` or ``i@12``)."""
    matches = find_loops(program, ref, step)
    if len(matches) == 1:
        return matches[0]
    raise step.error(f"{ref} names {len(matches)} loops made from one (by distribute or "
                     f"unroll): name one as {matches[0].name}@LINE with the line of a "
                     "statement inside it")


def find_loops(program: Program, ref: Arg, step: Step) -> list[LoopNode]:
    """The loops a step names: one, or the copies of one that unrolling made (its main and
    remainder loops, which share a name and line)."""
    if not isinstance(ref, LoopRef):
        hint = ref.hint if isinstance(ref, Unparsed) else ""
        raise step.error(f"{ref!r} is not a loop (a name, or name@line){hint}")
    loops = program.loops()
    matches = [n for n in loops if n.name == ref.var and ref.line in (None, n.line)]
    if ref.line is not None and len(matches) != 1:
        holding = [n for n in loops if n.name == ref.var and any(
            s.line == ref.line for u in n.units() for s in u.statements)]
        if holding:  # var@line of a statement: the loop of that name holding it
            matches = holding
    if matches and len({n.label for n in matches}) == 1:
        return matches
    if not matches:
        known = ", ".join(dict.fromkeys(n.label for n in loops)) or "none"
        hidden = [l for u in program.units() if u.opaque for l in _inner_loops(u)
                  if l.var == ref.var and ref.line in (None, l.line)]
        if hidden:
            loop = hidden[0]
            raise step.error(f"the loop {loop.var}@{loop.line} is kept as written "
                             f"({_opaque_reason(program, loop)}): steps cannot move it")
        raise step.error(f"no loop {ref} (loops: {known})")
    labels = ", ".join(dict.fromkeys(n.label for n in matches))
    raise step.error(f"{ref} names {len(matches)} loops ({labels}): write name@line")


def _inner_loops(unit: Unit) -> list:
    return list(dict.fromkeys(l for s in unit.statements for l in s.loops
                              if l not in unit.loops))


def _opaque_reason(program: Program, loop: object) -> str:
    for unit in program.units():
        if unit.opaque and loop in _inner_loops(unit):
            return unit.opaque
    return "inside a block loclab cannot express"


def require_plain(program: Program, nodes: Sequence[LoopNode], step: Step) -> None:
    """Refuse a step that does not handle loops made by ``fuse`` or ``skew`` (their value is
    no longer one original loop's variable), nor a loop another one is skewed by (the step
    would replace it): tile, interchange and parallel them instead."""
    skewed_by = skew_bases(program)
    for node in nodes:
        if not node.plain or id(node) in skewed_by:
            what = "fused or skewed" if not node.plain else "a loop skewed by"
            raise step.error(f"{node.label} is {what}: {step.name} takes no such loop "
                             "(tile, stripmine, interchange or parallel it)")


def skew_bases(program: Program) -> set[int]:
    """The loops (by id) some loop of the program is skewed by."""
    return {id(other) for loop in program.loops() for other, _ in loop.skew}


def _whole_number(value: Arg, step: Step, what: str, example: int) -> int:
    """``value`` where it is a whole number, else an error that names it as the step's
    ``what`` (not as a loop)."""
    if isinstance(value, bool) or not isinstance(value, int):
        hint = value.hint if isinstance(value, Unparsed) else ""
        raise step.error(f"bad {what} {str(value)!r}: a whole number, e.g. {example}{hint}")
    return value


def signed_argument(value: Arg, step: Step, what: str) -> int:
    """A whole number, negative or not, as the step's ``what``."""
    number = _whole_number(value, step, what, 1)
    if abs(number) > MAX_SIZE:
        raise step.error(f"bad {what} {number}: loclab takes at most {MAX_SIZE:,}")
    return number


def loop_pair(program: Program, step: Step, usage: str, what: str, default: int
              ) -> tuple[Program, LoopNode, LoopNode, int]:
    """``fuse(i@3, i@7[, 1])``, ``skew(j, t[, 2])``: a copy of the program, the two loops
    the step names (apart) in it, and its whole number (``default`` where not given)."""
    expect_args(step, 2, 3, usage)
    no_keywords(step)
    new = program.clone()
    first, second = (find_loop(new, ref, step) for ref in step.args[:2])
    require_distinct([first, second], step)
    number = signed_argument(step.args[2], step, what) if len(step.args) == 3 else default
    return new, first, second, number


def require_distinct(nodes: list[LoopNode], step: Step) -> None:
    """Refuse a step that names one loop twice (``tile(i=8, i@3=8)``), naming it."""
    seen: set[int] = set()
    for node in nodes:
        if id(node) in seen:
            raise step.error(f"names the loop {node.label} twice")
        seen.add(id(node))


def size_argument(value: Arg, step: Step, what: str = "tile size",
                  limit: int = MAX_SIZE) -> int:
    """A whole number from 1 to ``limit``, as the step's ``what``; anything else is an
    error that says what it is (a bad size, not a loop)."""
    number = _whole_number(value, step, what, 8)
    if number < 1:
        raise step.error(f"{what} {number} must be a positive integer")
    if number > limit:
        raise step.error(f"bad {what} {number}: loclab takes at most {limit:,}")
    return number


def replace_node(program: Program, old: Node, new: list[Node]) -> None:
    """Put ``new`` where ``old`` is in the tree."""
    body = program.parent_body(old)
    index = next(k for k, child in enumerate(body) if child is old)
    body[index:index + 1] = new


def band_of(program: Program, nodes: list[LoopNode], step: Step) -> list[LoopNode]:
    """The perfect band (each loop's body exactly the next loop) from the outermost to the
    innermost of ``nodes``; a step that needs one and finds an imperfect nest is refused."""
    paths = {id(n): program.path(n) for n in nodes}
    outer = min(nodes, key=lambda n: len(paths[id(n)]))
    for node in nodes:
        if node is not outer and outer not in paths[id(node)]:
            raise step.error(f"{node.label} is not inside {outer.label}")
    chain = [outer]
    while not all(n in chain for n in nodes):
        current = chain[-1]
        if len(current.body) != 1 or not isinstance(current.body[0], LoopNode):
            labels = ", ".join(n.label for n in nodes)
            raise step.error(f"{labels} must be a perfect nest, but the body of "
                             f"{current.label} holds {len(current.body)} statements or loops: "
                             f"distribute({current.name}) first")
        chain.append(current.body[0])
    return chain


def rebuild_band(program: Program, band: list[LoopNode], order: list[LoopNode]) -> None:
    """Put the loops of a perfect band in a new order (outermost first)."""
    inner_body = band[-1].body
    replace_node(program, band[0], [order[0]])
    for outer, inner in zip(order, order[1:]):
        outer.body = [inner]
    order[-1].body = inner_body


def tile_name(program: Program, var: str) -> str:
    """``ii`` for ``i`` (``iii`` if taken), ``row_tile`` for a longer name."""
    if len(var) == 1:
        for count in range(2, 6):
            candidate = var * count
            if candidate not in program.names:
                program.names.add(candidate)
                return candidate
    return program.fresh_name(f"{var}_tile")


def require_new_name(program: Program, ref: Arg, step: Step) -> str:
    if not isinstance(ref, LoopRef) or ref.line is not None:
        raise step.error(f"{ref} is not a name for the new loop")
    if ref.var in program.names:
        raise step.error(f"{ref.var} is already a name in the function")
    program.names.add(ref.var)
    return ref.var


def switch(step: Step, name: str) -> bool:
    """The step's one True/False option ``name`` (``jam=True``), False where not given."""
    return switches(step, (name,))[name]


def switches(step: Step, names: tuple[str, ...], valued: tuple[str, ...] = ()
             ) -> dict[str, bool]:
    """The step's True/False options among ``names``, each False where not given; options
    named in ``valued`` (``cyclic=N``) are the caller's to read."""
    values = dict.fromkeys(names, False)
    for key, option in step.keywords:
        if str(key) in valued:
            continue
        if str(key) not in values or not isinstance(option, bool):
            taken = " or ".join(f"{name}=True/False" for name in names)
            raise step.error(f"unknown option {key}={option} ({step.name} takes {taken})")
        values[str(key)] = option
    return values


def no_keywords(step: Step) -> None:
    if step.keywords:
        raise step.error("takes no name=value arguments")


def expect_args(step: Step, low: int, high: int, usage: str) -> None:
    if not low <= len(step.args) <= high:
        for arg in step.args:  # a comma left out joins two arguments: say so
            if isinstance(arg, Unparsed) and arg.hint:
                raise step.error(f"{arg!r} is not one argument{arg.hint}; usage {usage}")
        raise UsageError(f"{step}: usage {usage}")
