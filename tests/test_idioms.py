"""Idioms recognized in loops (``loclab.deps.idioms``): conditional reductions,
arg-reductions and compactions, judged by execution. Generated loops, the idioms and their
look-alikes (another value than the one compared, a variable read elsewhere, an else
branch, a counter read as a value or advanced by the iteration), are analyzed; every loop
recognized is run in chunks, each from the idiom's identity, combined by the idiom's rule
and compared with the loop run in order on inputs full of ties (the oracle); every loop
built as the idiom must be recognized."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from loclab.deps import analyze
from loclab.deps.explain import explain
from loclab.deps.idioms import KEEPS

N = 23
CASES = Path(__file__).parent.parent / "src" / "loclab" / "cases"
# the comparison that keeps (extremum, ties), for the chunks' combine
COMPARE = {keeps: op for op, keeps in KEEPS.items()}
CHECK = {"<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
         ">=": lambda a, b: a >= b}


def idioms_of(source: str, function: str):
    return analyze(source, function).idioms


def compiled(source: str, name: str):
    namespace: dict = {}
    exec(source, namespace)  # noqa: S102 - the test's own generated code
    return namespace[name]


# --- conditional reductions and arg-reductions ---------------------------------------------

COMPARED = ["d[j]", "t", "d[j] + e[j]", "-d[j]"]
ARGUMENTS = ["arg = j", "arg = j * 2", "arg = e[j]", "arg = best", "arg = arg + 1",
             "other = j", "arg = t"]


@st.composite
def reductions(draw) -> tuple[list[str], bool]:
    """(the loop body's lines, whether it is the idiom by construction)."""
    compared = draw(st.sampled_from(COMPARED))
    op = draw(st.sampled_from(["<", "<=", ">", ">="]))
    flipped = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}[op]
    condition = draw(st.sampled_from([f"{compared} {op} best", f"best {flipped} {compared}"]))
    value = draw(st.sampled_from([compared, compared, "d[j] * 2", "best + 1", "e[j]"]))
    arguments = draw(st.lists(st.sampled_from(ARGUMENTS), max_size=2, unique=True))
    branch = draw(st.sampled_from(["", "", "else: other += 1", "else: best = best"]))
    after = draw(st.sampled_from(["", "", "other += best", "other += 1", "best = best"]))
    filtered = draw(st.booleans())
    body = ["t = d[j] - e[j]"]
    inner = [f"if {condition}:", f"    best = {value}", *(f"    {a}" for a in arguments)]
    if branch:
        inner += ["else:", f"    {branch.split(': ', 1)[1]}"]
    body += ([f"if e[j] != 1:", *(f"    {line}" for line in inner)] if filtered else inner)
    if after:
        body.append(after)
    names = [a.split(" = ")[0] for a in arguments]
    idiom = value == compared and not branch and after not in {"other += best",
                                                                "best = best"} \
        and not any("best" in a.split(" = ")[1] or "arg" in a.split(" = ")[1]
                    for a in arguments) \
        and len(set(names)) == len(names) and not ("other = j" in arguments and after)
    return body, idiom


def sources(body: list[str], inputs: str, state: list[str], var: str,
            returned: str, first: int = 0) -> tuple[str, str]:
    """(the function analyzed: ``state`` set to 0 before its loop over ``range(first, N)``;
    the function run: the loop over ``range(lo, hi)`` from given values of ``state``)."""
    lines = textwrap.indent("\n".join(body), " " * 8)
    start = "".join(f"    {name} = 0\n" for name in state)
    analyzed = (f"def f({inputs}, N):\n{start}    for {var} in range({first}, N):\n"
                f"{lines}\n    return {returned}\n")
    run = (f"def run({inputs}, lo, hi, {', '.join(state)}):\n"
           f"    for {var} in range(lo, hi):\n{lines}\n    return {returned}\n")
    return analyzed, run


def chunks(data: st.DataObject, first: int = 0) -> list[tuple[int, int]]:
    """The loop's range ``first .. N`` cut into up to four chunks, in order."""
    cuts = sorted(data.draw(st.lists(st.integers(first + 1, N - 1), max_size=3)))
    return list(zip([first, *cuts], [*cuts, N]))


@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(reductions(), st.data())
def test_a_recognized_reduction_is_one_and_every_built_one_is_recognized(built, data):
    body, idiom = built
    analyzed, runnable = sources(body, "d, e", ["best", "arg", "other", "t"], "j",
                                 "best, arg, other")
    found = [i for i in idioms_of(analyzed, "f") if i.kind != "compaction"]
    assert bool(found) == idiom, (analyzed, found)
    if not found:
        return
    (recognized,) = found
    run = compiled(runnable, "run")
    values = ["best", "arg", "other"]
    carried = [values.index(v) for v in recognized.variables]
    compare = CHECK[COMPARE[(recognized.op, recognized.ties)]]
    identity = math.inf if recognized.op == "min" else -math.inf
    rng = np.random.default_rng(data.draw(st.integers(0, 10**6)))
    for _ in range(3):
        d, e = (list(rng.integers(0, 3, N)) for _ in range(2))
        start = (1, -1, 0)
        sequential = run(d, e, 0, N, *start, 0)
        state = list(start)
        for lo, hi in chunks(data):
            chunk = run(d, e, lo, hi, identity, -1, 0, 0)
            if chunk[0] != identity and compare(chunk[0], state[0]):
                for index in carried:
                    state[index] = chunk[index]
        assert [state[i] for i in carried] == [sequential[i] for i in carried], \
            (analyzed, d, e)


def test_the_lectures_nearest_neighbour_is_an_arg_min_keeping_the_first():
    source = """
import numpy as np


def nearest(points, query, N, D):
    best = np.inf
    best_j = -1
    for j in range(N):
        dist = 0.0
        for k in range(D):
            diff = points[j, k] - query[k]
            dist += diff * diff
        if dist < best:
            best = dist
            best_j = j
    return best, best_j
"""
    analysis = analyze(source, "nearest")
    (idiom,) = analysis.idioms
    assert (idiom.kind, idiom.variables, idiom.op, idiom.ties) == (
        "arg-reduction", ("best", "best_j"), "min", "first")
    assert idiom.loop.var == "j"
    # what the loop's verdict and the JSON say of it
    text = " ".join(explain(analysis).split())
    assert "(all of them an idiom's: arg-reduction of best, parallel in its own form; see " \
        "Idioms)" in text
    assert "L1 j: arg-reduction: min of best, the first of equal values kept, with best_j" in text
    assert analysis.to_json()["idioms"] == [{
        "loop": "L1", "kind": "arg-reduction", "variables": ["best", "best_j"], "op": "min",
        "ties": "first", "statements": [s.id for s in idiom.statements]}]


def test_a_value_read_from_a_carried_scalar_or_a_written_array_is_not_the_idiom():
    carried = """
def f(d, N):
    best = 0
    run = 0
    for j in range(N):
        run += d[j]
        if run > best:
            best = run
    return best
"""
    written = """
def f(d, N):
    best = 0
    for j in range(1, N):
        d[j] = d[j - 1] + d[j]
        if d[j] > best:
            best = d[j]
    return best
"""
    # a condition around the idiom that reads what the loop writes: carried, too
    filtered = """
def f(d, e, N):
    best = 0
    arg = 0
    for j in range(N - 1):
        e[j + 1] = e[j] + d[j]
        if e[j] > 2:
            if d[j] < best:
                best = d[j]
                arg = j
    return best, arg
"""
    assert idioms_of(carried, "f") == idioms_of(written, "f") == idioms_of(filtered, "f") == []


# --- compaction ------------------------------------------------------------------------------

UPDATES = ["n += 1", "n += 1", "n += 2", "n = n + 1", "n += keep[i] != 0", "n += i",
           "n -= 1", "n *= 2", "n += n", "n += out[i]"]
WRITES = ["out[n] = x[i]", "out[n + 1] = x[i]", "out2[i] = n", "out[n] = n", "out[n] = out[i]"]
OUTSIDE = ["", "", "", "m += n", "out[i] = 0", "n += 1", "m += 1", "out[n] = x[i]"]


@st.composite
def compactions(draw) -> tuple[list[str], bool]:
    update = draw(st.sampled_from(UPDATES))
    writes = draw(st.one_of(st.just(["out[n] = x[i]"]), st.lists(
        st.sampled_from(WRITES), min_size=1, max_size=2, unique=True)))
    before = draw(st.booleans())
    outside = draw(st.sampled_from(OUTSIDE))
    condition = draw(st.sampled_from(["keep[i] > 0", "x[i] != 1", "keep[i] > n"]))
    guarded = [update, *writes] if not before else [*writes, update]
    body = [f"if {condition}:", *(f"    {line}" for line in guarded)]
    if outside:
        body.append(outside)
    idiom = update in {"n += 1", "n += 2", "n = n + 1", "n += keep[i] != 0", "n += i"} \
        and all(w == "out[n] = x[i]" for w in writes) \
        and outside in {"", "m += 1", "out[n] = x[i]"} and condition != "keep[i] > n"
    return body, idiom


@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(compactions(), st.data())
def test_a_recognized_compaction_is_one_and_every_built_one_is_recognized(built, data):
    body, idiom = built
    analyzed, runnable = sources(body, "keep, x, out, out2", ["n", "m"], "i", "n")
    found = [i for i in idioms_of(analyzed, "f") if i.kind == "compaction"]
    assert bool(found) == idiom, (analyzed, found)
    if not found:
        return
    run = compiled(runnable, "run")
    rng = np.random.default_rng(data.draw(st.integers(0, 10**6)))
    size = N * N + 8  # counts advanced by i reach N^2 / 2
    for _ in range(3):
        keep, x = list(rng.integers(0, 3, N)), list(rng.integers(0, 9, N))
        out, out2 = [-1] * size, [-1] * size
        sequential = run(keep, x, out, out2, 0, N, 3, 0)
        combined, count = [-1] * size, 3
        for lo, hi in chunks(data):
            mine = [-1] * size
            added = run(keep, x, mine, [-1] * size, lo, hi, 0, 0)
            for place, value in enumerate(mine):
                if value != -1:
                    combined[count + place] = value
            count += added
        assert (count, combined) == (sequential, out), (analyzed, keep, x)


def test_the_lectures_compactions_are_recognized():
    branching = """
def compact(flags, values, out, N):
    count = 0
    for i in range(N):
        if flags[i] != 0:
            out[count] = values[i]
            count += 1
    return count
"""
    (idiom,) = idioms_of(branching, "compact")
    assert (idiom.kind, idiom.variables) == ("compaction", ("count", "out"))
    # the case study's golden: every value written at the count, the count advanced by
    # the flag (a value written is overwritten until a kept one moves the count on)
    golden = CASES / "compaction" / "cpu.py"
    (idiom,) = idioms_of(golden.read_text(), "compact_sequential")
    assert (idiom.kind, idiom.variables) == ("compaction", ("kept", "out"))


# --- linear recurrences and segmented scans --------------------------------------------------

A_FACTORS = ["a[i]", "2", "(a[i] - 1)"]
B_TERMS = ["b[i]", "1", "b[i] * a[i]"]


@st.composite
def recurrences(draw) -> tuple[list[str], bool, bool]:
    """(the loop body's lines, whether it is the idiom by construction, whether the carried
    value is ``y[i - 1]``: else the scalar ``s``, recorded in ``y[i]``)."""
    factor, term = draw(st.sampled_from(A_FACTORS)), draw(st.sampled_from(B_TERMS))
    on_array = draw(st.booleans())
    back = draw(st.sampled_from(["y[i - 1]", "y[i - 1]", "y[i - 2]"])) if on_array else "s"
    linear = {f"{factor} * {back} + {term}": True, f"{back} * {factor} + {term}": True,
              f"{term} - {back} * {factor}": True, f"{factor} * {back} - {term}": True,
              f"{back} * {back} + {term}": False, f"{factor} * {back} + {back}": False,
              f"{factor} * ({back} + {term})": False, f"{back} / {factor} + {term}": False}
    restart = draw(st.sampled_from([term, term, f"{back} - 1"]))
    step = draw(st.sampled_from([f"{back} + {term}", f"{term} * {back}", f"{back} - {term}",
                                 f"{back} + {back}"]))
    test = draw(st.sampled_from(["flag[i] > 0", "flag[i] > 0", f"{back} > 2"]))
    target = "y[i]" if on_array else "s"
    kind = draw(st.sampled_from(["linear", "segmented", "one line", "guarded"]))
    if kind == "linear" or kind == "guarded":
        value = draw(st.sampled_from(sorted(linear)))
        body = [f"{target} = {value}"]
        idiom = linear[value] and kind == "linear"
        if kind == "guarded":
            body = ["if flag[i] > 0:", f"    {target} = {value}"]
    else:
        swapped = draw(st.booleans())
        plain = {f"{back} + {term}", f"{term} * {back}"}
        idiom = restart == term and step in plain and test == "flag[i] > 0"
        if kind == "segmented":
            branches = [f"    {target} = {restart}", f"    {target} = {step}"]
            if swapped:
                branches.reverse()
            body = [f"if {test if not swapped else 'not (' + test + ')'}:", branches[0],
                    "else:", branches[1]]
        else:
            sides = [restart, step][::-1] if swapped else [restart, step]
            condition = test if not swapped else f"not ({test})"
            body = [f"{target} = {sides[0]} if {condition} else {sides[1]}"]
    if on_array:
        idiom = idiom and back == "y[i - 1]"
    else:
        recorded = draw(st.sampled_from(["y[i] = s", "y[i] = s * 2", "s += 1"]))
        idiom = idiom and recorded != "s += 1"
        body = [*body, recorded] if draw(st.booleans()) else [recorded, *body]
    return body, idiom, on_array


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(recurrences(), st.data())
def test_a_recognized_recurrence_is_one_and_every_built_one_is_recognized(built, data):
    body, idiom, on_array = built
    first = 2 if on_array else 0
    analyzed, runnable = sources(body, "a, b, flag, y", ["s"], "i", "s", first)
    found = [i for i in idioms_of(analyzed, "f")
             if i.kind in {"linear recurrence", "segmented scan"}]
    assert bool(found) == idiom, (analyzed, found)
    if not found:
        return
    run = compiled(runnable, "run")
    rng = np.random.default_rng(data.draw(st.integers(0, 10**6)))
    for _ in range(3):
        a, b, flag = (list(rng.integers(-1, 3, N)) for _ in range(3))
        y = list(rng.integers(0, 5, N))
        carry = 3 if not on_array else y[first - 1]
        sequential_y = list(y)
        sequential = run(a, b, flag, sequential_y, first, N, carry)
        combined = list(y)
        for lo, hi in chunks(data, first):
            # the chunk from carries 0 and 1: its results are affine in the carry
            ends, outputs = [], []
            for start in (0, 1):
                mine = list(combined)
                if on_array:
                    mine[lo - 1] = start
                ends.append(run(a, b, flag, mine, lo, hi, start))
                outputs.append(mine)
            for i in range(lo, hi):
                combined[i] = outputs[0][i] + carry * (outputs[1][i] - outputs[0][i])
            carry = combined[hi - 1] if on_array else ends[0] + carry * (ends[1] - ends[0])
        assert combined == sequential_y and (on_array or carry == sequential), \
            (analyzed, a, b, flag)


RECURRENCE_LOOK_ALIKES = [
    "if s > 2:\n    s = b[i]\nelse:\n    s = s + b[i]",  # the condition reads the sum
    "if flag[i] > 0:\n    s = s - 1\nelse:\n    s = s + b[i]",  # the restart reads it
    "if flag[i] > 0:\n    s = a[i] * s + b[i]",  # not every iteration
    "s = a[i] * s + b[i]\ns = s + 1",  # written twice
    "s = a[i] * s * s + b[i]",  # not affine
]


def test_recurrence_look_alikes_are_not_recognized_and_the_lectures_forms_are():
    for body in RECURRENCE_LOOK_ALIKES:
        analyzed, _ = sources([*body.split("\n"), "y[i] = s"], "a, b, flag, y", ["s"], "i",
                              "s")
        assert idioms_of(analyzed, "f") == [], analyzed
    segmented = """
def f(x, flags, y, N):
    for i in range(1, N):
        if flags[i] != 0:
            y[i] = x[i]
        else:
            y[i] = y[i - 1] + x[i]
"""
    (idiom,) = idioms_of(segmented, "f")
    assert (idiom.kind, idiom.variables, idiom.op) == ("segmented scan", ("y",), "+")
    linear = ("def f(a, b, y, N):\n    for i in range(1, N):\n"
              "        y[i] = a[i] * y[i - 1] + b[i]\n")
    (idiom,) = idioms_of(linear, "f")
    assert (idiom.kind, idiom.variables) == ("linear recurrence", ("y",))
