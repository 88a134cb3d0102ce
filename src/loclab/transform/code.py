"""What every emitter does to the code tree before printing it."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from loclab.nest.expr import Atom, Poly, substitute_condition
from loclab.transform.codegen import Call, Code, For, If, Mark, Select, Value


def uses(item: Code, key: str) -> bool:
    """Whether some statement inside the code touches the variable."""
    if isinstance(item, Call):
        return any(a.variable.key == key for s in item.placed.unit.statements
                   for a in s.accesses)
    if isinstance(item, For):
        return any(uses(c, key) for c in item.body)
    if isinstance(item, If):
        return any(uses(c, key) for c in item.then + item.orelse)
    return False


def counting_down(item: For) -> For:
    """A loop over a variable that counts down runs over its negated values (isl's times
    grow): emitted as the loop the user wrote, from ``-start`` down to ``-stop``."""
    if item.node.origin.step > 0:
        return item
    name = item.var
    flipped = {name: -Poly.symbol(name)}
    body = [substitute(code, flipped) for code in item.body]
    start = negate(item.start)
    stop = negate(item.stop)
    return For(item.node, name, start, stop, -item.step, body, item.single)


def upward(item: Code) -> Code:
    """The code tree with every loop counting down written as one (:func:`counting_down`)."""
    if isinstance(item, For):
        item = counting_down(item)
        return For(item.node, item.var, item.start, item.stop, item.step,
                   [upward(c) for c in item.body], item.single)
    if isinstance(item, If):
        return If(item.condition, [upward(c) for c in item.then],
                  [upward(c) for c in item.orelse])
    return item


def negate(v: Value) -> Value:
    if isinstance(v, Select):
        return Select(v.condition, negate(v.then), negate(v.otherwise))
    return -v


def substitute_value(v: Value, values: dict[str, Poly]) -> Value:
    """A bound with symbols replaced by expressions."""
    if isinstance(v, Select):
        return Select(substitute_condition(v.condition, values),
                      substitute_value(v.then, values), substitute_value(v.otherwise, values))
    return v.substitute(values)


def substitute(code: Code, values: dict[str, Poly]) -> Code:
    def sub(v: Value) -> Value:
        return substitute_value(v, values)

    if isinstance(code, For):
        return For(code.node, code.var, sub(code.start), sub(code.stop), code.step,
                   [substitute(c, values) for c in code.body], code.single)
    if isinstance(code, If):
        return If(substitute_condition(code.condition, values),
                  [substitute(c, values) for c in code.then],
                  [substitute(c, values) for c in code.orelse])
    if isinstance(code, Call):
        return Call(code.placed, [sub(a) for a in code.args])
    return Mark(code.marker, {k: sub(v) for k, v in code.values.items()})


def render(p: Poly, atom: Callable[[Atom], str]) -> str:
    """Source text of an index expression, the language's own ``atom`` for symbols, floors,
    remainders, ``min`` and ``max``: ``2 * i + 1``, the constant last (``j - 1``)."""
    if not p.terms:
        return "0"
    parts: list[str] = []
    for monomial, coeff in sorted(p.terms, key=lambda t: t[0] == ()):
        factors = [atom(a) for a in monomial]
        magnitude = abs(coeff)
        if not factors:
            text = str(magnitude)
        elif magnitude == 1:
            text = " * ".join(factors)
        else:
            text = " * ".join([str(magnitude)] + factors)
        if not parts:
            parts.append(f"-{text}" if coeff < 0 else text)
        else:
            parts.append(f" {'-' if coeff < 0 else '+'} {text}")
    return "".join(parts)


def walk(code: list[Code]) -> Iterator[Code]:
    """Every piece of a code tree, outermost first."""
    for item in code:
        yield item
        if isinstance(item, For):
            yield from walk(item.body)
        elif isinstance(item, If):
            yield from walk(item.then + item.orelse)


def fors(code: list[Code]) -> Iterator[For]:
    """Every loop of a code tree, outermost first."""
    return (item for item in walk(code) if isinstance(item, For))


def held_sums(item: For, loops: list[For]) -> list[tuple[str, str, list[Call]]]:
    """The sums into array elements a vectorized loop may hold in scalars for its run
    (``vectorize``'s ``Reduction.held``): each as (array name, scalar, the statements that
    update it, in order). None where the loop runs in parallel, nor for an array a parallel
    loop around sums into (its threads update it atomically or in copies). Each emitter
    holds one only where those statements write the element one way, not through the
    loop's own variable."""
    node = item.node
    if not node.vectorized or node.parallel:
        return []
    return [(reduction.name, reduction.held,
             [c for c in walk(item.body) if isinstance(c, Call) and uses(c, reduction.key)])
            for reduction in node.reductions
            if reduction.held and not any(r.key == reduction.key for around in loops
                                          for r in around.node.reductions)]
