"""``loclab transform`` judged by brute force: random nests, random recipes.

For nests of :mod:`tests.nestgen` and random sequences of steps, every recipe the checker
accepts must replay, at concrete sizes, to the very same value flow as the original (every
read sees the same write, every visible location ends with the same one), run every instance
once, and leave no two iterations of a parallel loop touching one location
(:mod:`tests.transform_replay`). Every refused schedule step must name a dependence that the
order it refused really reverses: the step is applied without its check, and some pair of
instances of that dependence in the oracle's run must run the other way round (where the
dependence is exact: through a subscript like ``X[i]`` it is assumed, conservatively); a
refused ``parallel`` must name a dependence whose instances the oracle finds in two
iterations of the loop.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from loclab.errors import UsageError
from loclab.transform import transform
from loclab.transform.prefixes import PREFIXES
from loclab.transform.steps import Context, IllegalStep
from loclab.transform.verify import OriginalFailed
from loclab.transform.storage import StorageError
from tests.nestgen import nests, war_nests
from tests.reorder import privatizing_nests, scratch_nests
from tests.transform_replay import carried_pairs, judge, reversed_pairs, run_backwards

SIZES = ({"N": 5, "M": 4}, {"N": 7, "M": 6})
# a refused step's dependence may need larger sizes (a stride of 3, a triangle) to show
REFUSAL_SIZES = SIZES + ({"N": 12, "M": 20}, {"N": 20, "M": 11})


@st.composite
def recipes(draw, source: str) -> str:
    """1-3 steps on the nest's loops (named var@line) and scalars; fusions of adjacent
    loops and skews by a loop around."""
    import loclab

    nest = loclab.analyze(source).nest
    loops = [f"{l.var}@{l.line}" for l in nest.loops]
    scalars = sorted({v.name for v in nest.variables if not v.is_array})
    # fuse takes a loop and the loop right after it; skew a loop and one around it
    adjacent = [(f"{a.var}@{a.line}", f"{b.var}@{b.line}")
                for body in [nest.body] + [l.body for l in nest.loops]
                for a, b in zip(body, body[1:]) if hasattr(a, "var") and hasattr(b, "var")]
    nested = [(f"{l.var}@{l.line}", f"{o.var}@{o.line}") for l in nest.loops
              for o in l.enclosing if o is not l]
    steps = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(("stripmine", "interchange", "permute", "tile",
                                     "distribute", "privatize", "expand", "unroll", "unroll",
                                     "parallel", "parallel", "vectorize", "fuse", "skew")))
        loop = draw(st.sampled_from(loops))
        if kind == "fuse" and adjacent:
            first, second = draw(st.sampled_from(adjacent))
            steps.append(f"fuse({first}, {second}, {draw(st.integers(-1, 2))})")
        elif kind == "skew" and nested:
            inner, outer = draw(st.sampled_from(nested))
            steps.append(f"skew({inner}, {outer}, {draw(st.sampled_from([-1, 1, 2]))})")
        elif kind in ("fuse", "skew"):
            steps.append(f"parallel({loop})")
        elif kind == "stripmine":
            steps.append(f"stripmine({loop}, {draw(st.integers(1, 4))})")
        elif kind in ("interchange", "permute", "tile") and len(loops) >= 2:
            chosen = draw(st.permutations(loops))[:draw(st.integers(2, min(3, len(loops))))]
            if kind == "interchange":
                steps.append(f"interchange({chosen[0]}, {chosen[1]})")
            elif kind == "permute":
                steps.append(f"permute({', '.join(chosen)})")
            else:
                steps.append("tile(" + ", ".join(f"{l}={draw(st.integers(1, 3))}"
                                                  for l in chosen) + ")")
        elif kind == "distribute":
            steps.append(f"distribute({loop})")
        elif kind in ("privatize", "expand") and scalars:
            # privatize at a named loop too: one that holds some of the uses only (two
            # sibling loops that both assign the scalar) is the step's own proof to check
            at = f", {loop}" if kind == "privatize" and draw(st.booleans()) else ""
            steps.append(f"{kind}({draw(st.sampled_from(scalars))}{at})")
        elif kind == "unroll":
            jam = ", jam=True" if draw(st.booleans()) else ""
            steps.append(f"unroll({loop}, {draw(st.integers(2, 3))}{jam})")
        elif kind == "vectorize":
            steps.append(f"vectorize({loop})")
        else:
            steps.append(f"parallel({loop})")
    return "; ".join(steps)


def check(source: str, recipe: str) -> None:
    try:
        result = transform(source, recipe)
    except (UsageError, StorageError):
        return  # not applicable to this nest (an imperfect band, ...) or refused storage
    except IllegalStep as refusal:
        check_refusal(source, recipe, refusal)
        return
    for sizes in SIZES:
        verdict = judge(source, result.program, sizes)
        assert verdict, (f"{recipe} accepted but wrong at {sizes}:\n{source}\n"
                         f"{result.source}\n" + "\n".join(verdict.problems))


def _complete(sizes: dict[str, int]) -> dict[str, int]:
    """Sizes at which the checker found a broken pair (sizes the nest does not use: 1)."""
    return {"N": 1, "M": 1, **sizes}


def check_refusal(source: str, recipe: str, refusal: IllegalStep) -> None:
    """A refused reordering must name a dependence whose instances the refused order really
    runs the other way round (privatize and parallel refusals are judged elsewhere)."""
    if refusal.carried is not None:
        check_carried(source, recipe, refusal)
        return
    violation = refusal.violation
    if violation is None or violation.dependence is None or not violation.dependence.exact:
        return  # a dependence through a subscript isl cannot read is assumed, not found
    dependence = violation.dependence
    steps = recipe.split("; ")
    refused = next(k for k, step in enumerate(steps) if str(refusal).startswith(step))
    original = Context.require_order
    try:
        Context.require_order = (  # type: ignore[assignment]
            lambda self, program, step, changed=(): None)
        unchecked = transform(source, "; ".join(steps[:refused + 1]))
    except (UsageError, StorageError, IllegalStep):
        return
    finally:
        Context.require_order = original  # type: ignore[assignment]
        PREFIXES.clear()  # the unchecked states must not serve a checked run
    found = [reversed_pairs(source, unchecked.program, sizes, dependence.source_statement.line,
                            dependence.sink_statement.line, dependence.kind,
                            dependence.array)
             for sizes in REFUSAL_SIZES + (_complete(violation.sizes),)]
    assert any(found), f"{recipe} refused ({refusal}) but the oracle finds no pair of " \
                       f"{dependence.id} reversed:\n{source}"


def check_carried(source: str, recipe: str, refusal: IllegalStep) -> None:
    """A refused parallel loop must carry the dependence it names: some pair of its
    instances in the oracle's run, in different iterations of the loop, shares storage."""
    program, node, dependence, witness = refusal.carried
    if not dependence.exact:
        return
    found = [carried_pairs(source, program, node, sizes, dependence.source_statement.line,
                           dependence.sink_statement.line, dependence.kind, dependence.array)
             for sizes in REFUSAL_SIZES + (_complete(witness),)]
    assert any(found), f"{recipe} refused ({refusal}) but the oracle finds no pair of " \
                       f"{dependence.id} carried by {node.name}:\n{source}"


@settings(max_examples=45, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(st.data())
def test_accepted_recipes_compute_the_same(data: st.DataObject) -> None:
    source = data.draw(nests())
    check(source, data.draw(recipes(source)))


@settings(max_examples=50, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(st.data())
def test_recipes_on_nests_with_privatizable_scalars(data: st.DataObject) -> None:
    source = data.draw(privatizing_nests())
    check(source, data.draw(recipes(source)))


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(st.data())
def test_recipes_on_nonaffine_nests(data: st.DataObject) -> None:
    source = data.draw(nests(nonaffine=True))
    check(source, data.draw(recipes(source)))


def check_copy(source: str, array: str, loop: str) -> bool:
    """``copy(array, loop)``, where accepted, computes what the original does (a copy that
    serves a read of a value the loop wrote reads a stale one); with ``parallel(loop)``
    after it, where accepted, so it does with the parallel loops' iterations run
    backwards (a read left on the array that should have read the copy sees another value
    then). True where the parallel recipe was accepted."""
    accepted = 0
    for recipe in (f"copy({array}, {loop})", f"copy({array}, {loop}); parallel({loop})"):
        try:
            result = transform(source, recipe)
        except (UsageError, StorageError, IllegalStep):
            continue
        accepted += 1
        backwards = run_backwards(result) if "# parallel" in result.source else result
        for sizes in SIZES:
            try:
                verdict = backwards.verify(**{name: value for name, value in sizes.items()
                                              if name in result.program.nest.parameters})
            except OriginalFailed:
                return False  # the original indexes past its arrays: nothing to compare
            assert verdict.ok, f"{recipe} accepted but wrong at {sizes}:\n{source}\n" \
                               f"{backwards.source}\n{verdict}"
    return accepted == 2


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(st.data())
def test_copies_that_make_a_loop_parallel_compute_the_same(data: st.DataObject) -> None:
    source = data.draw(war_nests())
    check_copy(source, "A", data.draw(st.sampled_from(("i", "j") if "j" in source else "i")))


def test_a_copy_serves_only_the_reads_that_see_values_from_before() -> None:
    """trmm: ``B[k, j]`` reads rows later iterations write (the copy serves it), the
    accumulator ``B[i, j]`` reads what its own iteration wrote (it stays on B)."""
    trmm = ("def f(A, B, N, M):\n    for i in range(M):\n        for j in range(N):\n"
            "            for k in range(i + 1, M):\n"
            "                B[i, j] += A[k, i] * B[k, j]\n"
            "            B[i, j] = 2.0 * B[i, j]\n")
    assert check_copy(trmm, "B", "i@2")
    result = transform(trmm, "copy(B, i); parallel(i)")
    assert "B[i, j] += A[k, i] * B_copy[k - B_copy_lo0, j - B_copy_lo1]" in result.source
    assert "B[i, j] = 2.0 * B[i, j]" in result.source
    assert "B[k, j] inside i see the values from before the loop" in result.steps[0].reason
    shifted = "def f(A, N):\n    for i in range(1, N):\n        A[i] = A[i - 1] + A[i]\n"
    with pytest.raises(IllegalStep, match=r"copy\(A, i\) is illegal: A\[i - 1\] inside i: D\d S1->S1 "
                                         r"RAW on A: it sees a value written inside the loop"):
        transform(shifted, "copy(A, i)")


def test_an_update_may_read_other_elements_of_its_array_the_loop_never_meets() -> None:
    """``x[i] -= L[i, j] * x[j]`` over ``j < i`` is a reduction on ``x[i]`` (no iteration
    reads or writes it through ``x[j]``); over every ``j`` it is not (``x[j]`` meets
    ``x[i]`` at ``j = i``: later iterations would read a partial sum)."""
    solve = ("def f(L, x, b, N):\n    for i in range(N):\n        x[i] = b[i]\n"
             "        for j in range(i):\n            x[i] -= L[i, j] * x[j]\n")
    result = transform(solve, "parallel(j)")
    assert "j carries only reductions" in result.steps[0].reason
    for sizes in ({"N": 5}, {"N": 8}):
        verdict = judge(solve, result.program, sizes)
        assert verdict, "\n".join(verdict.problems)
    with pytest.raises(IllegalStep, match=r"parallel\(j\) is illegal: j carries D\d+ "):
        transform(solve.replace("range(i)", "range(N)"), "parallel(j)")


# a scalar each of two sibling loops assigns before reading it, the second loop carrying it
TWO_LOOPS_ONE_SCALAR = """
def f(A, B, N):
    for i in range(N):
        t = A[i] * 2.0
        B[i] = t
    t = 0.0
    for j in range(N):
        t = t + A[j]
        B[j] = t
"""


def test_a_scalar_private_to_one_loop_keeps_its_dependences_in_another() -> None:
    """Privatized at the first loop, the scalar still carries the second loop's running
    sum: that loop stays sequential (the two loops' uses no longer meet, their own do)."""
    privatized = transform(TWO_LOOPS_ONE_SCALAR, "privatize(t, i@3); parallel(i@3)")
    for sizes in SIZES:
        assert judge(TWO_LOOPS_ONE_SCALAR, privatized.program, sizes)
    with pytest.raises(IllegalStep, match="carries"):
        transform(TWO_LOOPS_ONE_SCALAR, "privatize(t, i@3); parallel(j@7)")
    with pytest.raises(IllegalStep, match="may see a value written before it"):
        transform(TWO_LOOPS_ONE_SCALAR, "privatize(t, i@3); privatize(t, j@7)")


SHRINKING_SCRATCH = ("def f(A, B, t, N, M):\n    for i in range(N):\n"
                     "        for p in range(0, M - i):\n            t[p] = A[i, p] * 2.0\n"
                     "        for p in range(0, M - i):\n            B[i, p] = t[p] + 1.0\n")


@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(scratch_nests(), st.booleans())
@example(SHRINKING_SCRATCH, False)
def test_scratch_rows_privatized_and_copied_back_compute_the_same(source: str,
                                                                  inner: bool) -> None:
    """A scratch argument privatized per iteration, the loop then parallel: accepted only
    where the replay (the last writing iteration's copy taken as the caller's, found by
    running) agrees with the original."""
    loop = "j@3" if inner and "for j" in source else "i@2"
    check(source, f"privatize(t, {loop}); parallel(i@2)")


def test_a_scratch_row_the_last_iteration_leaves_partly_unwritten_is_no_private_copy() -> None:
    source = ("def f(A, B, t, N, M):\n    for i in range(N):\n        for p in range(i):\n"
              "            t[p] = A[i, p]\n        for p in range(i):\n"
              "            B[i, p] = t[p]\n")
    accepted = transform(source, "privatize(t, i@2); parallel(i@2)")  # the last row: all
    assert "t[...] = t_own" in accepted.source
    with pytest.raises(IllegalStep, match="writes elements of t its last iteration does not"):
        transform(source.replace("range(i)", "range(i, M)"), "privatize(t, i@2)")
    with pytest.raises(IllegalStep, match="used outside i@2 too"):
        transform(source + "    B[0, 0] = t[0]\n", "privatize(t, i@2)")
