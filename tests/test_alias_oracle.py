"""``loclab.analyze`` on aliased calls, against the brute-force oracle of :mod:`tests.nestgen`.

The generated functions ``f(A, B, C, N, M)`` take three arrays that Python lets a caller
pass as one array twice, or as overlapping views. The oracle's trace is replayed with two of
them laid over one buffer: each array flattened row-major with a wide stride (so that its
own elements stay apart), the second shifted by an offset. Then:

* SOUND: a loop the analyzer calls ``parallel`` (whatever the arguments are) carries no
  dependence in any aliased run;
* WITNESSED: a loop it calls parallel only "if a and b do not overlap" carries one in some
  aliased run of the pair it names (the offset found from the trace);
* the same array passed twice (offset 0, equal ranks) carries exactly in the loops the
  distinct dependences and the pair's ``O`` dependences say, at fixed sizes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

import loclab
from tests.nestgen import Access, dependences, nests, trace
from tests.test_deps_oracle import PROPERTY, SIZE, report, sizes, used

STRIDE = 1000  # wider than any subscript the generator writes at sizes up to 7


def address(index: tuple[int, ...]) -> int:
    return sum(value * STRIDE ** (len(index) - 1 - k) for k, value in enumerate(index))


def overlaid(accesses: Iterable[Access], first: str, second: str, offset: int) -> list[Access]:
    """The trace with ``second`` laid over ``first``'s buffer, ``offset`` elements on."""
    out = []
    for access in accesses:
        name, index = access.location
        if name in (first, second):
            shift = offset if name == second else 0
            access = replace(access, location=(first, (address(index) + shift,)))
        out.append(access)
    return out


def carried(accesses: list[Access]) -> frozenset[int]:
    return dependences(accesses)[1]


def ranks(source: str) -> dict[str, int]:
    found: dict[str, int] = {}
    for access in trace(source, sizes(3, 3)):
        name, index = access.location
        found.setdefault(name, len(index))
    return found


def offsets(accesses: list[Access], first: str, second: str) -> set[int]:
    """Offsets that make an access of ``first`` and one of ``second`` (one a write) touch
    one element: every collision an overlap can cause is one of these."""
    by_name: dict[str, list[Access]] = {first: [], second: []}
    for access in accesses:
        if access.location[0] in by_name:
            by_name[access.location[0]].append(access)
    found = set()
    for a in by_name[first]:
        for b in by_name[second]:
            if a.write or b.write:
                found.add(address(a.location[1]) - address(b.location[1]))
    return found


def check_aliased(source: str, n: int, m: int) -> None:
    params = sizes(n, m)
    analysis = loclab.analyze(source, params=used(source, params))
    run = trace(source, params)
    line = {loop.id: loop.line for loop in analysis.loops}
    names = {v.name for v in analysis.nest.variables if v.is_array}
    pairs = [(x, y) for x in sorted(names) for y in sorted(names) if x < y]
    assert {tuple(sorted(o.names)) for o in analysis.overlaps} <= set(pairs)
    # SOUND: parallel whatever the arguments are means no aliased run carries
    unconditional = {loop.line for loop in analysis.loops if loop.parallel}
    for first, second in pairs:
        for offset in sorted(offsets(run, first, second))[:40]:
            bad = unconditional & carried(overlaid(run, first, second, offset))
            assert not bad, report(source, params, [
                f"{first}/{second} at offset {offset}: loops {sorted(bad)} carry"], analysis)
    # WITNESSED: each conditional verdict has an aliased run that carries
    for loop in analysis.loops:
        if loop.parallel or not loop.parallel_if_distinct:
            continue
        witnessed = any(loop.line in carried(overlaid(run, *sorted(o.names), offset))
                        for o in loop.overlaps
                        for offset in sorted(offsets(run, *sorted(o.names))))
        assert witnessed, report(source, params, [
            f"loop {loop.id}: parallel if {[o.names for o in loop.overlaps]} do not overlap, "
            "but no overlap makes it carry"], analysis)
    # the same array twice: the distinct verdicts plus the pair's O dependences, exactly
    rank = ranks(source)
    for overlap in analysis.overlaps:
        first, second = sorted(overlap.names)
        if rank.get(first) != rank.get(second):
            continue
        expected = {line[d.carried_by] for d in analysis.dependences + overlap.same_array
                    if d.carried_by}
        truth = carried(overlaid(run, first, second, 0))
        assert truth == expected, report(source, params, [
            f"{second} is {first}: oracle carries {sorted(truth)}, analyzer "
            f"{sorted(expected)}"], analysis)


@settings(PROPERTY, max_examples=120)
@given(source=nests(), size=st.tuples(st.integers(1, 5), st.integers(1, 5)))
def test_aliased_calls_match_the_verdicts(source: str, size: tuple[int, int]) -> None:
    check_aliased(source, *size)


HAND_WRITTEN = {
    "shifted copy": """\
def f(A, B, N, M):
    for i in range(1, N):
        A[i] = B[i - 1] + 1
""",
    "same row": """\
def f(A, B, N, M):
    for i in range(N):
        for j in range(M):
            A[i][j] = B[i][j] * 2
""",
    "read only pair": """\
def f(A, B, C, N, M):
    for i in range(N):
        C[i] = A[i] + B[i]
""",
}


@given(size=st.tuples(st.integers(2, 5), st.integers(2, 5)))
@settings(PROPERTY, max_examples=10)
def test_hand_written_aliasing(size: tuple[int, int]) -> None:
    for source in HAND_WRITTEN.values():
        check_aliased(source, *size)


def test_the_textbook_case_is_conditional_in_both_languages() -> None:
    python = loclab.analyze(HAND_WRITTEN["shifted copy"])
    c = loclab.analyze("void f(float *A, float *B, int N) {\n"
                       "  for (int i = 1; i < N; i++)\n    A[i] = B[i-1] + 1;\n}\n",
                       language="c")
    for analysis in (python, c):
        (loop,) = analysis.loops
        assert not loop.parallel and loop.parallel_if_distinct
        (overlap,) = analysis.overlaps
        (same,) = overlap.same_array
        assert (same.kind, same.direction, same.distance) == ("RAW", ("<",), (1,))
    restrict = loclab.analyze("void f(float *restrict A, float *B, int N) {\n"
                              "  for (int i = 1; i < N; i++)\n    A[i] = B[i-1] + 1;\n}\n",
                              language="c")
    assert restrict.loops[0].parallel and not restrict.overlaps
    distinct = loclab.analyze(HAND_WRITTEN["shifted copy"], assume_distinct=True)
    assert distinct.loops[0].parallel and distinct.to_json()["aliasing"]["assume_distinct"]


def test_c_overlap_follows_the_element_types() -> None:
    source = ("float G[100];\n"
              "void f(float *a, int *b, char *c, double (*d)[8], float *e, int n) {\n"
              "  for (int i = 0; i < n; i++) {\n"
              "    a[i] = b[i] + c[i] + d[i][0] + G[i] + e[i];\n  }\n}\n")
    analysis = loclab.analyze(source, language="c")
    pairs = {tuple(sorted(o.names)) for o in analysis.overlaps}
    # a is written: it may share memory with c (char), e and G (float); not b (int), d
    assert pairs == {("a", "c"), ("G", "a"), ("a", "e")}
