"""Idioms that no dependence test parallelizes, recognized in a loop's statements: a
conditional reduction and an arg-reduction (``if d < best: best = d; arg = j``), a
compaction (``if keep[i]: out[n] = x[i]; n += 1``), a first-order linear recurrence
(``y[i] = a[i] * y[i - 1] + b[i]``) and a segmented scan (a sum restarted where a flag is
set).

Why: the dependences these loops carry on ``best``, ``n`` or ``y`` are real (each iteration
reads what the one before wrote), so the analysis calls the loop sequential. Yet each has a
parallel form the lectures teach: the pairs (value, argument) of chunks of the loop combine
by the same comparison, in the loop's order (an arg-min is nearest neighbour's reduction);
a compaction is a prefix sum of the kept counts, each chunk writing from its offset; a
linear recurrence is a scan of the maps ``x -> a x + b`` (composition is associative), a
segmented scan one of (restart, value) pairs.

Recognition is syntactic and sound (a look-alike is never reported; ``tests/
test_idioms.py`` runs generated look-alikes chunked and combined against the loop):

- a **conditional reduction** of scalar ``x``: ``x = e`` under ``if e OP x`` (or
  ``x OP e``), ``OP`` one of ``< <= > >=``, ``e`` the compared expression itself; inside the
  loop ``x`` is touched by that test and that assignment alone, and nothing else runs under
  the test, in either branch, but **arguments**: scalars each assigned once under the same
  test, from expressions that read neither ``x`` nor another argument, and touched nowhere
  else in the loop (an arg-reduction). Strict comparisons keep the first of equal values,
  ``<=`` and ``>=`` the last; outer conditions around the test that read neither filter the
  iterations.
- a **compaction**: counter ``n``, a scalar updated once in the loop, ``n += v`` (``v``
  reads neither ``n`` nor the outputs: ``1`` under a condition, or the lectures' branch-free
  ``flags[i] != 0``), read only as a whole subscript of writes (``out[n] = e``,
  ``out[n, k] = e``), whose arrays the loop touches nowhere else and whose values read
  neither. Every write lands where the loop's would: at the prefix sum of the steps before
  it, an element written again until the count moves on (chunks combined in order).
- a **linear recurrence**: ``x = a * x' + b`` (the product either way round, ``+`` or
  ``-``), run once by every iteration, ``x'`` the value carried from the iteration before:
  a scalar ``x`` no other statement writes (others may read it), or ``y[i - 1]`` for
  ``y[i]`` (one iteration back, every subscript affine) and no other access to ``y`` in
  the loop; ``a`` and ``b`` without ``x'``.
- a **segmented scan**: ``x = r`` under a condition and ``x = x' op e`` (``+``, ``*``;
  ``x op= e`` for a scalar) under its opposite, both directly in the loop, or the one
  statement ``x = r if c else x' op e``; the condition, ``r`` and ``e`` without ``x``.

Their statements read, besides the idiom's own variables, only each iteration's own values
(arrays the loop does not write, scalars private to an iteration), so that every chunk
computes the same values as the loop would. Only Python loop nests are read (the
statements' text must parse as Python); a C nest gets no idioms.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass

from loclab.nest.expr import Poly
from loclab.nest.ir import Loop, Nest, Statement

SCAN_OPERATORS = {ast.Add: "+", ast.Mult: "*"}  # a segmented scan's operators
# A comparison ``e OP x``: which extremum it keeps, and which of equal values.
KEEPS = {"<": ("min", "first"), "<=": ("min", "last"), ">": ("max", "first"),
         ">=": ("max", "last")}
FLIPPED = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}
COMPARISONS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}


@dataclass(frozen=True)
class Idiom:
    """One idiom in ``loop``: ``kind`` ("conditional reduction", "arg-reduction",
    "compaction"), the variables it carries (the reduced value or the counter first, then
    the arguments or the output arrays), its operator (min, max, or + for a count), which
    of equal values it keeps, and the statements it is made of."""

    kind: str
    loop: Loop
    variables: tuple[str, ...]
    op: str
    ties: str
    statements: tuple[Statement, ...]

    def text(self) -> str:
        places = sorted({s.line for s in self.statements})
        lines = ("line " if len(places) == 1 else "lines ") + ", ".join(map(str, places))
        name = self.variables[0]
        if self.kind == "compaction":
            outputs = ", ".join(self.variables[1:])
            return (f"compaction: {name} counts the iterations kept, {outputs} written at "
                    f"the count ({lines}): parallel as a prefix sum of the chunks' "
                    "counts, each chunk writing from its offset")
        if self.kind == "linear recurrence":
            return (f"linear recurrence: {name} = a * {name}' + b ({lines}): parallel "
                    "as a scan of the maps x -> a x + b (composed in another order: floats "
                    "round differently)")
        if self.kind == "segmented scan":
            return (f"segmented scan {self.op} on {name}, restarting where the condition "
                    f"holds ({lines}): parallel as a scan of (restart, value) pairs")
        keeps = f"{self.op} of {name}, the {self.ties} of equal values kept"
        if self.kind == "arg-reduction":
            keeps += f", with {', '.join(self.variables[1:])}"
        return (f"{self.kind}: {keeps} ({lines}): parallel as a reduction, chunks "
                "combined in the loop's order by the same comparison")

    def to_json(self) -> dict[str, object]:
        return {"loop": self.loop.id, "kind": self.kind, "variables": list(self.variables),
                "op": self.op, "ties": self.ties or None,
                "statements": [s.id for s in self.statements]}


def find_idioms(nest: Nest, private: Callable[[Loop, str], bool]) -> list[Idiom]:
    """Every idiom of every loop of a Python nest (outermost loops first). ``private(loop,
    key)``: whether every read of scalar ``key`` in an iteration of ``loop`` gets its value
    in that iteration (the analysis's privatization); the idiom's statements may read a
    scalar the loop writes only where it is, and no array the loop writes: their values
    are then each iteration's own, whatever order the chunks run in."""
    if nest.language != "python":
        return []
    found: list[Idiom] = []
    for loop in nest.loops:
        inside = loop.statements()
        headers = [inner.header.strip() + " pass" for inner in nest.loops
                   if loop in inner.enclosing and inner is not loop]
        bounds = set().union(*(_names(ast.parse(h)) for h in headers if _parses(h)))
        for statement in inside:
            for recognize in (_reduction, _compaction, _linear, _segmented):
                idiom = recognize(loop, inside, statement)
                # a loop inside whose bounds read a carried variable runs by its values
                if idiom is not None and not bounds & set(idiom.variables) \
                        and _own_values(idiom, inside, private):
                    found.append(idiom)
    return found


def _own_values(idiom: Idiom, inside: list[Statement],
                private: Callable[[Loop, str], bool]) -> bool:
    """Whether the idiom's statements and the conditions around them in the loop read,
    besides its own variables, only values of the iteration itself: arrays the loop does
    not write, scalars it does not write or that are private to an iteration."""
    written = {a.variable.key: a.variable.is_array for s in inside for a in s.writes}
    own = {a.variable.key for s in idiom.statements for a in s.writes}
    tests = [g.test for s in idiom.statements for g in s.guards
             if g.test is not None and any(g.test is t for t in inside)]
    for access in (a for s in [*idiom.statements, *tests] for a in s.reads):
        key = access.variable.key
        if key in own or key not in written:
            continue
        if written[key] or not private(idiom.loop, key):
            return False
    return True


def _reduction(loop: Loop, inside: list[Statement], assign: Statement) -> Idiom | None:
    """The conditional reduction (or arg-reduction) whose assignment ``x = e`` is
    ``assign``, where it is one (see module)."""
    target, value = _plain_assignment(assign)
    if target is None or not assign.guards or assign.guards[-1].negated:
        return None
    guard = assign.guards[-1]
    test, key = guard.test, _scalar_key(assign, target)
    compared = _comparison(guard.text, target)
    if test is None or key is None or compared is None or test not in inside:
        return None
    op, expression = compared
    if ast.dump(expression) != ast.dump(value) or target in _names(value) \
            or assign.guards[:-1] != test.guards or assign.loops != test.loops \
            or {id(s) for s in _touching(inside, key)} != {id(test), id(assign)} \
            or sum(a.variable.key == key for a in test.accesses) != 1:
        return None
    arguments = []
    for other in _under(inside, test):
        if other is assign:
            continue
        name, expression = _plain_assignment(other)
        other_key = _scalar_key(other, name) if name is not None else None
        if other_key is None or other.guards != assign.guards or other.loops != assign.loops \
                or [id(s) for s in _touching(inside, other_key)] != [id(other)]:
            return None
        arguments.append((other, name, expression))
    names = {target} | {name for _, name, _ in arguments}
    if any(_names(expression) & names for _, _, expression in arguments):
        return None
    extremum, ties = KEEPS[op]
    kind = "arg-reduction" if arguments else "conditional reduction"
    return Idiom(kind, loop, (target, *(name for _, name, _ in arguments)), extremum, ties,
                 (test, assign, *(other for other, _, _ in arguments)))


def _compaction(loop: Loop, inside: list[Statement], update: Statement) -> Idiom | None:
    """The compaction whose counter's update ``n += v`` is ``update``, where it is one."""
    counter = _counter_update(update)
    key = _scalar_key(update, counter) if counter is not None else None
    if key is None:
        return None
    writes, outputs = [], []
    for statement in _touching(inside, key):
        if statement is update:
            continue
        array = _write_at(statement, counter)
        if array is None:
            return None
        writes.append(statement)
        outputs.append(array)
    if not writes:
        return None
    keys = {a.variable.key for s in writes for a in s.writes}
    touching = {id(s) for k in keys for s in _touching(inside, k)}
    if touching != {id(s) for s in writes} or any(
            a.variable.key in keys for s in (update, *writes) for a in s.reads):
        return None
    return Idiom("compaction", loop, (counter, *dict.fromkeys(outputs)), "+", "",
                 tuple(sorted((update, *writes), key=lambda s: s.ordinal)))


def _linear(loop: Loop, inside: list[Statement], statement: Statement) -> Idiom | None:
    """The first-order linear recurrence ``x = a * x' + b`` that ``statement`` is, where it
    is one: ``x'`` the carried value (a scalar ``x`` itself, or ``y[i - 1]`` for ``y[i]``),
    ``a`` and ``b`` reading neither, the statement run by every iteration."""
    node = _statement_ast(statement)
    carried = _carried(loop, inside, statement, [statement])
    if carried is None or not _every_iteration(loop, statement) \
            or not _affine(node.value, carried[1]):  # type: ignore[union-attr]
        return None
    return Idiom("linear recurrence", loop, (carried[0],), "affine", "", (statement,))


def _segmented(loop: Loop, inside: list[Statement], statement: Statement) -> Idiom | None:
    """The segmented scan whose restart ``x = r`` is ``statement``, where it is one: under
    a condition ``x = r``, under its opposite ``x = x' op e`` (``+`` or ``*``; ``x op= e``
    for a scalar), both directly in the loop, ``r``, ``e`` and the condition not reading
    ``x``; or the one statement ``x = r if c else x' op e`` (either way round)."""
    node = _statement_ast(statement)
    if isinstance(node, ast.Assign) and isinstance(node.value, ast.IfExp):
        carried = _carried(loop, inside, statement, [statement])
        if carried is None or not _every_iteration(loop, statement) \
                or _occurrences(node.value.test, carried[1]):
            return None
        sides = [node.value.body, node.value.orelse]
        ops = [op for side in sides if (op := _scan_step(side, carried[1])) is not None]
        restarts = [side for side in sides if not _occurrences(side, carried[1])]
        if len(ops) != 1 or len(restarts) != 1:
            return None
        return Idiom("segmented scan", loop, (carried[0],), ops[0], "", (statement,))
    if not isinstance(node, ast.Assign) or not statement.guards \
            or statement.guards[:-1] != loop.guards or statement.loops[-1] is not loop:
        return None
    branch = statement.guards[-1]
    others = [s for s in inside if s is not statement and s.loops[-1] is loop
              and s.guards[:-1] == loop.guards and s.guards
              and s.guards[-1].test is branch.test and s.guards[-1].negated != branch.negated]
    if branch.test is None or len(others) != 1:
        return None
    update = others[0]
    carried = _carried(loop, inside, statement, [statement, update])
    if carried is None or _occurrences(node.value, carried[1]) \
            or any(a.variable.name == carried[0] for a in branch.test.accesses):
        return None
    op = _update_step(_statement_ast(update), node.targets[0], carried[1])
    if op is None:
        return None
    return Idiom("segmented scan", loop, (carried[0],), op, "", (branch.test, statement, update))


def _every_iteration(loop: Loop, statement: Statement) -> bool:
    """Whether ``statement`` runs once in every iteration of ``loop``: in its body itself
    (no loop between), under no condition inside it."""
    return statement.loops[-1] is loop and statement.guards == loop.guards


def _carried(loop: Loop, inside: list[Statement], statement: Statement,
             writers: list[Statement]) -> tuple[str, ast.expr] | None:
    """(the name, the syntax of the previous value) of the variable that ``statement``
    assigns, where the loop carries it from one iteration to the next through ``writers``
    alone: a scalar ``x`` no other statement writes (others may read it; its previous value
    is ``x``), or an array element ``y[w]`` whose only other access in the loop is one
    read of ``y[w']`` by the writers, ``w'`` being ``w`` one iteration back."""
    node = _statement_ast(statement)
    if len(statement.writes) != 1 or not isinstance(node, ast.Assign) \
            or len(node.targets) != 1:
        return None
    write = statement.writes[0]
    key = write.variable.key
    accesses = [(s, a) for s in _touching(inside, key) for a in s.accesses
                if a.variable.key == key]
    if not write.variable.is_array:
        if any(a.write and all(s is not w for w in writers) for s, a in accesses) \
                or not isinstance(node.targets[0], ast.Name):
            return None
        return write.variable.name, ast.parse(write.variable.name, mode="eval").body
    reads = [a for _, a in accesses if not a.write]
    if any(all(s is not w for w in writers) for s, _ in accesses) or len(reads) != 1 \
            or any(a.subscripts != write.subscripts for _, a in accesses if a.write) \
            or not _one_back(loop, write.subscripts, reads[0].subscripts) \
            or not _parses(reads[0].text):
        return None
    return write.variable.name, ast.parse(reads[0].text, mode="eval").body


def _one_back(loop: Loop, written: tuple[Poly | None, ...],
              read: tuple[Poly | None, ...]) -> bool:
    """Whether the element ``read`` is the one written one iteration of ``loop`` earlier
    (every subscript affine, and the loop's variable in some)."""
    if len(written) != len(read) or any(w is None or r is None for w, r in zip(written, read)):
        return False
    back = {loop.var: Poly.symbol(loop.var) - Poly.const(loop.step)}
    return any(loop.var in w.symbols() for w in written if w is not None) and all(
        (w.substitute(back) - r).constant_value() == 0  # type: ignore[union-attr,operator]
        for w, r in zip(written, read))


def _occurrences(node: ast.expr, previous: ast.expr) -> int:
    """How many times the carried value ``previous`` occurs in ``node``."""
    text = ast.dump(previous)
    return sum(ast.dump(n) == text for n in ast.walk(node))


def _scan_step(node: ast.expr, previous: ast.expr) -> str | None:
    """``op`` of ``x' op e`` or ``e op x'`` (``+``, ``*``), ``e`` without ``x'``."""
    if not (isinstance(node, ast.BinOp) and type(node.op) in SCAN_OPERATORS) \
            or _occurrences(node, previous) != 1:
        return None
    mine = ast.dump(previous)
    if ast.dump(node.left) != mine and ast.dump(node.right) != mine:
        return None
    return SCAN_OPERATORS[type(node.op)]


def _update_step(node: ast.stmt | None, target: ast.expr, previous: ast.expr) -> str | None:
    """``op`` of the update ``x = x' op e`` (or, for a scalar, ``x op= e``) of ``target``."""
    if isinstance(node, ast.AugAssign) and type(node.op) in SCAN_OPERATORS \
            and isinstance(target, ast.Name) and ast.dump(node.target) == ast.dump(target) \
            and not _occurrences(node.value, previous):
        return SCAN_OPERATORS[type(node.op)]
    if isinstance(node, ast.Assign) and len(node.targets) == 1 \
            and ast.dump(node.targets[0]) == ast.dump(target):
        return _scan_step(node.value, previous)
    return None


def _affine(node: ast.expr, previous: ast.expr) -> bool:
    """Whether ``node`` is ``a * x' + b`` (``x' * a``, either side of ``+`` or ``-``), ``a``
    and ``b`` without ``x'``."""
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub))) \
            or _occurrences(node, previous) != 1:
        return False
    mine = ast.dump(previous)
    product = next((side for side in (node.left, node.right) if _occurrences(side, previous)),
                   None)
    return isinstance(product, ast.BinOp) and isinstance(product.op, ast.Mult) \
        and mine in (ast.dump(product.left), ast.dump(product.right))


# -- the statements' syntax ---------------------------------------------------------------

def _parses(text: str) -> bool:
    try:
        ast.parse(text)
    except SyntaxError:
        return False
    return True


def _statement_ast(statement: Statement) -> ast.stmt | None:
    text = statement.source.strip()
    if not _parses(text):
        return None
    body = ast.parse(text).body
    return body[0] if len(body) == 1 else None


def _plain_assignment(statement: Statement) -> tuple[str | None, ast.expr]:
    """(x, e) of a statement ``x = e`` with a plain name ``x``; (None, _) otherwise."""
    node = _statement_ast(statement)
    if isinstance(node, ast.Assign) and len(node.targets) == 1 \
            and isinstance(node.targets[0], ast.Name):
        return node.targets[0].id, node.value
    return None, ast.Constant(None)


def _counter_update(statement: Statement) -> str | None:
    """``n`` of ``n += v`` or ``n = n + v`` (or ``v + n``), ``v`` not reading ``n``."""
    node = _statement_ast(statement)
    if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add) \
            and isinstance(node.target, ast.Name) \
            and node.target.id not in _names(node.value):
        return node.target.id
    if isinstance(node, ast.Assign) and len(node.targets) == 1 \
            and isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.BinOp) \
            and isinstance(node.value.op, ast.Add):
        name, left, right = node.targets[0].id, node.value.left, node.value.right
        for mine, step in ((left, right), (right, left)):
            if isinstance(mine, ast.Name) and mine.id == name and name not in _names(step):
                return name
    return None


def _write_at(statement: Statement, counter: str) -> str | None:
    """The array of a statement ``out[..] = e`` that reads ``counter`` only as one whole
    subscript of ``out`` (``out[n]``, ``out[n, k]``), and ``e`` not at all."""
    node = _statement_ast(statement)
    if not (isinstance(node, ast.Assign) and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Subscript)
            and isinstance(node.targets[0].value, ast.Name)):
        return None
    index = node.targets[0].slice
    indices = index.elts if isinstance(index, ast.Tuple) else [index]
    whole = [i for i in indices if isinstance(i, ast.Name) and i.id == counter]
    if len(whole) != 1 or any(counter in _names(i) for i in indices if i is not whole[0]) \
            or counter in _names(node.value):
        return None
    return node.targets[0].value.id


def _comparison(text: str, target: str) -> tuple[str, ast.expr] | None:
    """(OP, e) of a condition ``e OP target`` or ``target OP e`` (then flipped)."""
    if not _parses(text):
        return None
    node = ast.parse(text, mode="eval").body
    if not (isinstance(node, ast.Compare) and len(node.ops) == 1
            and type(node.ops[0]) in COMPARISONS):
        return None
    op = COMPARISONS[type(node.ops[0])]
    left, right = node.left, node.comparators[0]
    if isinstance(right, ast.Name) and right.id == target:
        return op, left
    if isinstance(left, ast.Name) and left.id == target:
        return FLIPPED[op], right
    return None


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


# -- the statements' accesses -------------------------------------------------------------

def _scalar_key(statement: Statement, name: str | None) -> str | None:
    """The key of the scalar ``name`` the statement writes."""
    return next((a.variable.key for a in statement.writes
                 if a.variable.name == name and not a.variable.is_array), None)


def _touching(inside: list[Statement], key: str) -> list[Statement]:
    """The statements of the loop that access the variable ``key``."""
    return [s for s in inside if any(a.variable.key == key for a in s.accesses)]


def _under(inside: list[Statement], test: Statement) -> list[Statement]:
    """The statements of the loop that run under a condition ``test`` evaluates, in
    either branch."""
    return [s for s in inside if any(g.test is test for g in s.guards)]
