"""Replaying a transformed program on an oracle trace: the judge of ``loclab transform``.

:func:`new_order` runs the code tree isl generated for a program (its loops, conditions and
calls, at concrete sizes) and lists the original statement instances in the order the new
code runs them, with the values of the new loops around each. :func:`judge` then replays the
original run (recorded by :func:`tests.nestgen.trace`) in that order, with the storage the
recipe gave its variables (a private copy per iteration, an element per expanded iteration),
and compares what every read sees and what every visible location ends with
(:class:`tests.reorder.Flow`): equal flows mean the same outputs whatever the statements
compute. It also checks that every instance runs exactly once, and that no parallel (or
vectorized) loop has two iterations that touch one location (one writing), reductions apart.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from loclab.nest.expr import BoolOp, Compare, Poly
from loclab.nest.python import canonical
from loclab.transform.codegen import Call, Codegen, For, If, Mark, Select
from loclab.transform.legality import evaluate
from loclab.transform.schedule import Schedule
from tests.reorder import UNDEFINED, Flow, Step, steps
from tests.nestgen import trace

Instance = tuple[int, tuple[int, ...]]


@dataclass(frozen=True)
class Run:
    """One unit instance as the new code runs it."""

    unit: Any
    coords: tuple[int, ...]  # the original loops' values
    loops: tuple[tuple[Any, int], ...]  # (tree loop, its value) around it, outermost first


def new_order(program: Any, sizes: Mapping[str, int]) -> list[Run]:
    code = Codegen(Schedule(program)).run()
    out: list[Run] = []
    _walk(code, dict(sizes), (), out)
    return out


def _walk(code: list, env: dict[str, int], loops: tuple, out: list[Run]) -> None:
    for item in code:
        if isinstance(item, For):
            value = _value(item.start, env)
            stop = _value(item.stop, env)
            while value < stop:
                inner = dict(env)
                inner[item.var] = value
                _walk(item.body, inner, loops + ((item.node, value),), out)
                if item.single:
                    break
                value += item.step
        elif isinstance(item, If):
            _walk(item.then if _holds(item.condition, env) else item.orelse, env, loops, out)
        elif isinstance(item, Call):
            coords = tuple(_value(a, env) for a in item.args)
            out.append(Run(item.placed.unit, coords, loops))
        elif not isinstance(item, Mark):
            raise AssertionError(item)


def _value(value: Any, env: Mapping[str, int]) -> int:
    if isinstance(value, Select):
        return _value(value.then if _holds(value.condition, env) else value.otherwise, env)
    result = value.substitute({k: Poly.const(v) for k, v in env.items()}).constant_value()
    assert result is not None, f"{value} at {env}"
    return result


def _holds(condition: Any, env: Mapping[str, int]) -> bool:
    if isinstance(condition, Compare):
        a, b = _value(condition.left, env), _value(condition.right, env)
        return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b,
                "!=": a != b}[condition.op]
    assert isinstance(condition, BoolOp)
    if condition.op == "not":
        return not _holds(condition.args[0], env)
    parts = [_holds(a, env) for a in condition.args]
    return all(parts) if condition.op == "and" else any(parts)


@dataclass(frozen=True)
class Verdict:
    problems: list[str]

    def __bool__(self) -> bool:
        return not self.problems


def judge(source: str, program: Any, sizes: Mapping[str, int]) -> Verdict:
    """Whether the program computes what the original does at these sizes."""
    original = steps(trace(source, sizes))
    runs = new_order(program, sizes)
    problems: list[str] = []
    by_instance = _instances(original)
    replay: list[tuple[Step, Run]] = []
    for run in runs:
        lines = {s.line for s in run.unit.statements}
        depth = len(run.unit.loops)
        members = by_instance.get((frozenset(lines), run.coords[:depth]), [])
        replay += [(step, run) for step in members]
    counted = Counter(s.position for s, _ in replay)
    missing = [s for s in original if counted[s.position] == 0]
    twice = [s for s in original if counted[s.position] > 1]
    if missing:
        problems.append(f"{len(missing)} instances never run, e.g. line {missing[0].line} "
                        f"{missing[0].iteration}")
    if twice:
        problems.append(f"instances run twice, e.g. line {twice[0].line} {twice[0].iteration}")
    if problems:
        return Verdict(problems)
    place = _placer(program)
    visible = set(_arguments(source))
    expected = _flow([(s, None) for s in original], lambda s, r, l: l, visible)
    copied_back = {p.variable.name for p in program.private.values() if p.last}
    actual = _flow(replay, place, visible, copied_back)
    problems += expected.differences(actual)[:3]
    problems += _parallel_conflicts(replay, program, place)[:3]
    return Verdict(problems)


def _instances(original: Sequence[Step]) -> "_Grouped":
    """Original instances grouped as units run them: by a unit's statement lines and its
    loops' values (a block kept as written runs all of its statements' instances)."""
    return _Grouped(original)


class _Grouped(dict):  # type: ignore[type-arg]
    """Looks up (lines of a unit, its coordinates): the original steps of those lines whose
    iteration starts with the coordinates, in original order."""

    def __init__(self, original: Sequence[Step]) -> None:
        super().__init__()
        self.original = original
        self.by_line: dict[int, list[Step]] = defaultdict(list)
        for step in original:
            self.by_line[step.line].append(step)

    def get(self, key: tuple[frozenset[int], tuple[int, ...]], default: Any = None) -> Any:
        lines, coords = key
        found = [s for line in lines for s in self.by_line.get(line, [])
                 if s.iteration[:len(coords)] == coords]
        return sorted(found, key=lambda s: s.position)


def _placer(program: Any) -> Callable[[Step, Run | None, tuple], tuple]:
    """Where an access goes under the recipe's storage: a private copy per iteration of the
    loop it is private to (and of the loops around), an element per expanded iteration."""
    private: dict[str, list[Any]] = defaultdict(list)  # (a variable private to two loops)
    for p in program.private.values():
        private[p.variable.name].append(p)

    def place(step: Step, run: Run | None, location: tuple) -> tuple:
        found = next((p for p in private.get(location[0], []) if p.loop.line in step.loops),
                     None)
        if found is None:
            return location  # outside its loop a variable is the original one
        if found.kind == "expand":
            depths = [loop.depth for loop in found.expand_by]
            return (*location, "expanded", tuple(step.iteration[d] for d in depths))
        return (*location, "private", step.iteration[:found.loop.depth + 1])

    return place


def _arguments(source: str) -> list[str]:
    from tests.nestgen import parse

    return [a.arg for a in parse(source).args.args]


def _flow(replay: Sequence[tuple[Step, Run | None]], place: Callable[..., tuple],
          visible: set[str], copied_back: Collection[str] = ()) -> Flow:
    """Who wrote what each read reads and what each visible location holds at the end; a
    private array ``copied_back`` ends as its copy of the last iteration that wrote it (the
    latest in the original order, found here by running, not from the recipe)."""
    writer: dict[tuple, object] = {}
    reads: dict[tuple[Instance, tuple], object] = {}
    for step, run in replay:
        for location, write in step.accesses:
            where = place(step, run, location)
            if write:
                writer[where] = step.instance
            else:
                fresh = UNDEFINED if where != location else None
                reads[step.instance, location] = writer.get(where, fresh)
    final = {where: value for where, value in writer.items()
             if len(where) == 2 and where[0] in visible}
    for name in copied_back:
        own = [where for where in writer if where[0] == name and len(where) == 4]
        if own:
            last = max(where[3] for where in own)
            final.update({where[:2]: writer[where] for where in own if where[3] == last})
    return Flow(reads, final)  # type: ignore[arg-type]


def _parallel_conflicts(replay: Sequence[tuple[Step, Run]], program: Any,
                        place: Callable[..., tuple]) -> list[str]:
    """Two iterations of a parallel loop (in one iteration of the loops around it) that touch
    one location, one writing, other than through the loop's reductions (the accesses
    written as an update's target: another read of the array is no part of it) or a read
    of a copy made before the loop or one of its iterations (``copy``, ``stage``)."""
    out: list[str] = []
    for node in program.loops():
        if not (node.parallel or node.vectorized):  # lanes reorder iterations too
            continue
        keys = {r.key for r in node.reductions}
        reductions = {r.name for r in node.reductions}
        targets = {canonical(s.writes[0].text) for unit in node.units() for s in unit.statements
                   if s.writes and s.writes[0].variable.key in keys}
        seen: dict[tuple, dict[int, bool]] = defaultdict(dict)
        for step, run in replay:
            values = [v for n, v in run.loops]
            nodes = [n for n, _ in run.loops]
            if node not in nodes:
                continue
            level = nodes.index(node)
            outer, mine = tuple(values[:level]), values[level]
            texts = step.texts or ("",) * len(step.accesses)
            for (location, write), text in zip(step.accesses, texts):
                if location[0] in reductions and (not text or canonical(text) in targets):
                    continue
                if not write and text and any(
                        b.variable.name == location[0] and b.loop in nodes[:level + 1]
                        and b.serves(text) for b in program.buffers):
                    continue
                key = (place(step, run, location), outer)
                for other, other_write in seen[key].items():
                    if other != mine and (write or other_write):
                        out.append(f"parallel {node.name}: iterations {other} and {mine} "
                                   f"both touch {location}")
                        break
                seen[key][mine] = seen[key].get(mine, False) or write
    return out


def reversed_pairs(source: str, program: Any, sizes: Mapping[str, int], source_line: int,
                   sink_line: int, kind: str, array: str) -> int:
    """How many instance pairs of one dependence (source and sink lines, kind, array) the
    program runs in the opposite order, storage taken into account."""
    original = steps(trace(source, sizes))
    runs = new_order(program, sizes)
    grouped = _instances(original)
    position: dict[int, int] = {}
    run_of: dict[int, Run] = {}
    for run in runs:
        lines = frozenset(s.line for s in run.unit.statements)
        for step in grouped.get((lines, run.coords[:len(run.unit.loops)]), []):
            position.setdefault(step.position, len(position))
            run_of[step.position] = run
    place = _placer(program)
    wants = {"RAW": (True, False), "WAR": (False, True), "WAW": (True, True)}[kind]
    count = 0
    sources = [s for s in original if s.line == source_line]
    sinks = [s for s in original if s.line == sink_line]
    for first in sources:
        for second in sinks:
            if second.position <= first.position or first.position not in position \
                    or second.position not in position:
                continue
            if position[second.position] > position[first.position]:
                continue
            for loc1, w1 in first.accesses:
                for loc2, w2 in second.accesses:
                    if loc1[0] == array and (w1, w2) == wants and place(
                            first, run_of[first.position], loc1) == place(
                            second, run_of[second.position], loc2):
                        count += 1
    return count


def carried_pairs(source: str, program: Any, node: Any, sizes: Mapping[str, int],
                  source_line: int, sink_line: int, kind: str, array: str) -> int:
    """How many instance pairs of one dependence run in different iterations of ``node``
    (within one iteration of the loops around it) and share storage: what makes the loop
    not parallel."""
    original = steps(trace(source, sizes))
    runs = new_order(program, sizes)
    grouped = _instances(original)
    where: dict[int, tuple[Run, Step]] = {}
    for run in runs:
        lines = frozenset(s.line for s in run.unit.statements)
        for step in grouped.get((lines, run.coords[:len(run.unit.loops)]), []):
            where[step.position] = (run, step)
    place = _placer(program)
    wants = {"RAW": (True, False), "WAR": (False, True), "WAW": (True, True)}[kind]

    schedule = Schedule(program)
    params = {k: sizes[name] for k, name in enumerate(program.model.symbolic)}

    def iteration(run: Run) -> tuple[tuple[int, ...], int] | None:
        """The values of the tree's loops around the unit, up to ``node`` (isl may have
        peeled an iteration out of the generated loop: the tree still holds it)."""
        path = program.path(run.unit)
        if node not in path:
            return None
        values = [evaluate(schedule.value(n, run.unit), list(run.coords), params,
                            program.model) for n in path[:path.index(node) + 1]]
        return tuple(values[:-1]), values[-1]

    # Each run's iteration once (isl evaluates it): the pairs below are quadratic in number.
    iterations = {position: iteration(run) for position, (run, _) in where.items()}
    count = 0
    for first in (s for s in original if s.line == source_line and s.position in where):
        for second in (s for s in original if s.line == sink_line and s.position in where
                       and s.position > first.position):
            a, b = iterations[first.position], iterations[second.position]
            if a is None or b is None or a[0] != b[0] or a[1] == b[1]:
                continue
            for loc1, w1 in first.accesses:
                for loc2, w2 in second.accesses:
                    if loc1[0] == array and (w1, w2) == wants and place(
                            first, None, loc1) == place(second, None, loc2):
                        count += 1
    return count


def run_backwards(result: Any) -> Any:
    """``result`` (a transformed Python function) with every loop it runs in parallel
    running its iterations backwards: a read that should see another iteration's value,
    or a write another iteration overwrites, then shows in the outputs."""
    import re
    from dataclasses import replace

    backwards = re.sub(r"for (\w+) in (range\(.*\)):  # parallel", r"for \1 in \2[::-1]:",
                       result.source)
    assert backwards != result.source, "no parallel loop to run backwards"
    return replace(result, source=backwards)
