"""The lectures' loop nests in examples/, analyzed: each test asserts one slide's answer.

The analysis is exact and memory-based (scratch/analyze_api.md). Where it must differ from an
answer the slides derive by hand, the test asserts the exact answer and says why. Statements
(an ``if`` condition is one too) are numbered S1, S2, ... in source order, the same in a Python
example and its C twin; a test that holds in both languages runs on both.

Python scalars are one location for the whole function, while a C scalar declared in a loop body
is a fresh location per iteration: the Python twin of a C nest has the same dependences plus
the ones on such scalars, which privatization removes.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import loclab

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
BOTH = pytest.mark.parametrize("lang", ["py", "c"])


@functools.cache
def analyzed(file: str, function: str, assume_distinct: bool = True):
    """The slides reason about distinct arrays: their verdicts are those with the arguments
    assumed apart (what overlap would change: test_overlap_only_makes_verdicts_conditional)."""
    path = EXAMPLES / file
    return loclab.analyze(path.read_text(), function=function, filename=str(path),
                          language="c" if path.suffix == ".c" else None,
                          assume_distinct=assume_distinct)


def deps(a, *names):
    """The dependences (on the given arrays or scalars, else all) as (source, sink, kind, name,
    direction) tuples: the slides' notation."""
    return {(d.source, d.sink, d.kind, d.array, tuple(d.direction))
            for d in a.dependences if not names or d.array in names}


def vectors(a, *names):
    """Like deps, with every "*" expanded: independent of how the analysis merges vectors."""
    return {(d.source, d.sink, d.kind, d.array, tuple(v))
            for d in a.dependences if not names or d.array in names for v in d.vectors()}


def loop(a, var, occurrence=1):
    """The occurrence-th loop (in source order) whose variable is var."""
    return [lp for lp in a.loops if lp.var == var][occurrence - 1]


def stmt(a, start):
    """The id of the one statement whose source starts with `start`, compared without spaces
    and with C's A[i][j] written A[i,j]."""
    key = start.replace(" ", "")
    [found] = [s.id for s in a.statements
               if s.source.replace(" ", "").replace("][", ",").startswith(key)]
    return found


def offers(lp, remedy, var):
    """Whether one of the loop's parallel_after remedies contains remedy and names var."""
    return any(remedy in r and re.search(rf"\b{re.escape(var)}\b", r) for r in lp.parallel_after)


def only_scan_remedies(lp):
    """No privatization, reduction or atomics removes a scan's RAW: at most a rewrite as a
    parallel scan (which the slides say compilers cannot find, and an analysis may)."""
    return all("scan" in r for r in lp.parallel_after)


def carried_names(a, lp):
    """The arrays and scalars of the dependences that loop lp carries."""
    return {d.array for d in a.dependences if d.carried_by == lp.id}


def interchange(a, order):
    """The legality the analysis gives the band order `order` (which must be listed)."""
    [legal] = [entry["legal"] for entry in a.interchanges if list(entry["order"]) == order]
    return legal


# --- Three loop examples (Loop Parallelism I; OpenCL day 2) --------------------------------------

@BOTH
def test_three_loops_1_only_a_loop_independent_war_so_both_loops_parallel(lang):
    a = analyzed(f"loops.{lang}", "three_loops_1")
    assert deps(a) == {("S1", "S1", "WAR", "A", ("=", "="))}
    assert [d.distance for d in a.dependences] == [(0, 0)]
    assert [lp.parallel for lp in a.loops] == [True, True]
    assert interchange(a, ["j", "i"]) is True


@BOTH
def test_three_loops_2_neither_loop_parallel_and_interchange_legal(lang):
    a = analyzed(f"loops.{lang}", "three_loops_2")
    assert deps(a) == {("S1", "S1", "RAW", "A", ("<", "<")), ("S2", "S2", "RAW", "B", ("=", "<"))}
    assert {(d.array, d.distance) for d in a.dependences} == {("A", (1, 1)), ("B", (0, 1))}
    assert [lp.parallel for lp in a.loops] == [False, False]
    assert interchange(a, ["j", "i"]) is True


@BOTH
def test_three_loops_2_variant_direction_matrix(lang):
    a = analyzed(f"loops.{lang}", "three_loops_2_variant")
    assert deps(a) == {("S1", "S1", "RAW", "A", ("=", "<")), ("S2", "S2", "RAW", "B", ("<", "<"))}
    assert loop(a, "i").carries and loop(a, "j").carries
    assert interchange(a, ["j", "i"]) is True


@pytest.mark.parametrize("function", ["three_loops_2", "three_loops_2_variant"])
def test_three_loops_2_after_interchange_the_inner_loop_is_parallel(function):
    # [=,<] -> [<,=] and [<,<] -> [<,<]: the new outer loop j carries every dependence and the
    # inner loop, i, is parallel. The slide says "loop j" becomes parallel; exactly, it is i.
    a = analyzed("loops.py", function)
    assert all(v[1] == "<" for d in a.dependences for v in d.vectors())
    [after] = [entry for entry in a.interchanges if entry["order"] == ["j", "i"]]
    assert after["legal"] and after["parallel"] == ["i"]


@BOTH
def test_three_loops_3_only_j_parallel_and_interchange_illegal(lang):
    a = analyzed(f"loops.{lang}", "three_loops_3")
    assert deps(a) == {("S1", "S1", "RAW", "A", ("<", ">"))}
    assert [d.distance for d in a.dependences] == [(1, -1)]
    assert not loop(a, "i").parallel and loop(a, "j").parallel
    assert interchange(a, ["j", "i"]) is False


# --- Important disambiguations ---------------------------------------------------------------

@BOTH
def test_disambiguation_the_wrong_raw_greater_less_is_a_war_less_greater(lang):
    a = analyzed(f"loops.{lang}", "disambiguation")
    assert deps(a) == {("S1", "S1", "WAR", "A", ("<", ">"))}
    assert [d.distance for d in a.dependences] == [(1, -1)]
    assert not loop(a, "i").parallel and loop(a, "j").parallel


@BOTH
def test_disambiguation_tmp_war_goes_from_the_load_to_the_store(lang):
    # Here the load is S1 and the store S2 (source order); the slide labels them S2 and S1.
    a = analyzed(f"loops.{lang}", "disambiguation_tmp")
    assert deps(a, "A") == {("S1", "S2", "WAR", "A", ("<", ">"))}
    assert not loop(a, "i").parallel


def test_disambiguation_tmp_python_tmp_is_shared_until_privatized():
    a = analyzed("loops.py", "disambiguation_tmp")
    across_j = {("=", "<"), ("<", "<"), ("<", "="), ("<", ">")}
    assert vectors(a, "tmp") == (
        {("S1", "S1", "WAW", "tmp", v) for v in across_j}
        | {("S1", "S2", "RAW", "tmp", v) for v in across_j | {("=", "=")}}
        | {("S2", "S1", "WAR", "tmp", v) for v in across_j})
    assert not loop(a, "j").parallel and offers(loop(a, "j"), "privatize", "tmp")


def test_disambiguation_tmp_c_tmp_declared_in_the_body_is_private():
    a = analyzed("loops.c", "disambiguation_tmp")
    assert deps(a, "tmp") == {("S1", "S2", "RAW", "tmp", ("=", "="))}
    assert loop(a, "j").parallel


# --- Dependency graph and loop distribution --------------------------------------------------

@BOTH
def test_vectorization_directions_and_distribution_order(lang):
    a = analyzed(f"loops.{lang}", "vectorization")
    assert deps(a) == {("S2", "S1", "RAW", "B", ("<",)), ("S2", "S2", "RAW", "B", ("<",))}
    assert {(d.source, d.sink, d.distance) for d in a.dependences} == {
        ("S2", "S1", (2,)), ("S2", "S2", (1,))}
    assert not a.loops[0].parallel
    # S2 is a cycle: its loop stays sequential and runs first, S1's loop is a parallel one after.
    groups = a.to_json()["distribution"]
    assert [g["statements"] for g in groups] == [["S2"], ["S1"]]
    assert groups[0]["parallel_loops"] == [] and groups[1]["parallel_loops"] == ["i"]
    assert [g["expand"] for g in groups] == [[], []]


@BOTH
def test_array_expansion_tmp_raises_waw_on_every_iteration(lang):
    a = analyzed(f"loops.{lang}", "array_expansion")
    assert deps(a, "B") == {("S3", "S1", "RAW", "B", ("<",)), ("S3", "S3", "RAW", "B", ("<",))}
    assert vectors(a, "tmp") == {
        ("S1", "S1", "WAW", "tmp", ("<",)),
        ("S1", "S2", "RAW", "tmp", ("=",)), ("S1", "S2", "RAW", "tmp", ("<",)),
        ("S1", "S3", "RAW", "tmp", ("=",)), ("S1", "S3", "RAW", "tmp", ("<",)),
        ("S2", "S1", "WAR", "tmp", ("<",)), ("S3", "S1", "WAR", "tmp", ("<",))}
    assert not a.loops[0].parallel


@BOTH
def test_array_expansion_distribution_keeps_s1_s3_together_and_expands_tmp(lang):
    a = analyzed(f"loops.{lang}", "array_expansion")
    groups = a.to_json()["distribution"]
    # {S1, S3} is a cycle through B and stays sequential; S2 follows as a parallel loop.
    assert [sorted(g["statements"]) for g in groups] == [["S1", "S3"], ["S2"]]
    assert groups[0]["parallel_loops"] == [] and groups[1]["parallel_loops"] == ["i"]
    # tmp is written in the first new loop and read in the second: one tmp per iteration.
    assert [g["expand"] for g in groups] == [["tmp"], ["tmp"]]


# --- False dependencies: WAR by copying, WAW by privatization --------------------------------

@BOTH
def test_eliminating_war_the_loop_carries_only_a_war(lang):
    a = analyzed(f"privatization.{lang}", "eliminating_war")
    # S1: tmp = A[1] (before the loop), S2: A[i] = A[i+1] (the slide's S1), S3: A[N-1] = tmp.
    # Exact analysis adds S1->S3 WAR on A: for N = 2, A[N-1] is the A[1] that S1 read.
    assert deps(a) == {
        ("S1", "S2", "WAR", "A", ()), ("S1", "S3", "WAR", "A", ()),
        ("S1", "S3", "RAW", "tmp", ()),
        ("S2", "S2", "WAR", "A", ("<",)), ("S2", "S3", "WAR", "A", ())}
    [lp] = a.loops
    assert not lp.parallel
    assert {d.kind for d in a.dependences if d.carried_by == lp.id} == {"WAR"}
    assert offers(lp, "copy", "A")


@BOTH
def test_eliminating_war_by_copy_both_loops_parallel(lang):
    a = analyzed(f"privatization.{lang}", "eliminating_war_by_copy")
    assert [lp.parallel for lp in a.loops] == [True, True]
    assert all(d.carried_by is None for d in a.dependences)


@BOTH
def test_eliminating_waw_a_shared_by_all_i_is_privatizable(lang):
    a = analyzed(f"privatization.{lang}", "eliminating_waw")
    write, use = stmt(a, "A[j] ="), stmt(a, "X[i,k] =")
    i, j, k = loop(a, "i"), loop(a, "j"), loop(a, "k")
    assert (write, write, "WAW", "A", ("<", "=")) in deps(a, "A")
    assert not i.parallel and carried_names(a, i) == {"A"}
    assert offers(i, "privatize", "A")
    assert j.parallel
    assert deps(a, "X") == {(use, use, "RAW", "X", ("=", "<"))} and not k.parallel


@BOTH
def test_eliminating_waw_privatized_loop_i_parallel(lang):
    a = analyzed(f"privatization.{lang}", "eliminating_waw_privatized")
    assert loop(a, "i").parallel
    assert all(v[0] == "=" for d in a.dependences for v in d.vectors())


# --- Reductions and scans --------------------------------------------------------------------

@BOTH
def test_reduction_both_loops_are_a_plus_reduction_on_x(lang):
    a = analyzed(f"reductions.{lang}", "reduction")
    assert {d.array for d in a.dependences} == {"x"}
    for lp in a.loops:
        assert not lp.parallel and offers(lp, "reduction", "x")


@BOTH
def test_scan_sum_carries_a_raw_that_only_a_scan_removes(lang):
    a = analyzed(f"reductions.{lang}", "scan_sum")
    assert deps(a) == {("S1", "S2", "RAW", "A", ()), ("S2", "S2", "RAW", "A", ("<",))}
    [lp] = a.loops
    assert not lp.parallel and only_scan_remedies(lp)


@BOTH
def test_scan_xor_acc_is_neither_private_nor_a_reduction(lang):
    a = analyzed(f"reductions.{lang}", "scan_xor")
    assert deps(a) == {
        ("S1", "S2", "RAW", "acc", ()), ("S1", "S2", "WAW", "acc", ()),
        ("S1", "S3", "RAW", "acc", ()),
        ("S2", "S2", "RAW", "acc", ("<",)), ("S2", "S2", "WAW", "acc", ("<",)),
        ("S2", "S2", "WAR", "acc", ("=",)), ("S2", "S2", "WAR", "acc", ("<",)),
        ("S2", "S3", "RAW", "acc", ("=",)), ("S2", "S3", "RAW", "acc", ("<",)),
        ("S3", "S2", "WAR", "acc", ("<",))}
    [lp] = a.loops
    assert not lp.parallel and only_scan_remedies(lp)


@BOTH
def test_scan_rows_i_sequential_j_parallel(lang):
    a = analyzed(f"reductions.{lang}", "scan_rows")
    assert deps(a) == {("S1", "S2", "RAW", "A", ()), ("S2", "S2", "RAW", "A", ("<", "="))}
    assert loop(a, "j", 1).parallel
    assert not loop(a, "i").parallel and only_scan_remedies(loop(a, "i"))
    assert loop(a, "j", 2).parallel


# --- Brute-force nearest neighbour -----------------------------------------------------------

NN_SCALARS = ["query", "nn_dist", "nn_ind", "ref_pt", "dist"]


def test_nearest_neighbor_c_queries_parallel_as_written():
    a = analyzed("case_studies.c", "nearest_neighbor")
    assert loop(a, "i").parallel
    assert not loop(a, "j").parallel and "nn_dist" in carried_names(a, loop(a, "j"))
    assert {d.array for d in a.dependences} <= set(NN_SCALARS)


def test_nearest_neighbor_python_queries_parallel_after_privatizing_the_scalars():
    # Python scalars are function-wide: the query loop carries WAW/WAR on all five of them.
    a = analyzed("case_studies.py", "nearest_neighbor")
    i = loop(a, "i")
    assert not i.parallel and carried_names(a, i) == set(NN_SCALARS)
    assert all(offers(i, "privatize", name) for name in NN_SCALARS)
    assert not loop(a, "j").parallel


# --- Matrix multiplication, loop distribution, transposition ---------------------------------

MATMULS = pytest.mark.parametrize("function, acc", [("matmul", "tmp"), ("mmm_golden", "c")])


@MATMULS
def test_matmul_c_i_j_parallel_k_reduction(function, acc):
    a = analyzed("case_studies.c", function)
    assert loop(a, "i").parallel and loop(a, "j").parallel
    assert interchange(a, ["j", "i"]) is True  # i is parallel, so it may move inwards
    k = loop(a, "k")
    assert not k.parallel and offers(k, "reduction", acc)
    # No dependence on the matrices: with c private, only c's own dependences remain. For the
    # flat C[i * widthB + j] this needs 0 <= j < widthB (the write is injective).
    assert {d.array for d in a.dependences} == {acc}


@MATMULS
def test_matmul_python_i_j_parallel_after_privatizing_the_accumulator(function, acc):
    a = analyzed("case_studies.py", function)
    for var in ("i", "j"):
        lp = loop(a, var)
        assert not lp.parallel and carried_names(a, lp) == {acc}
        assert offers(lp, "privatize", acc)
    assert offers(loop(a, "k"), "reduction", acc)


@MATMULS
def test_matmul_python_orders_the_c_twin_takes_are_legal_after_privatizing(function, acc):
    # One accumulator for the whole Python function: exactly, its WAW [<,*] forbids (j, i);
    # with a copy per (i, j), as the C twin declares it, (j, i) is legal and both loops
    # parallel. `legal` stays memory-based; `legal_after` says what makes the order legal.
    c, py = analyzed("case_studies.c", function), analyzed("case_studies.py", function)
    [ji] = [entry for entry in py.interchanges if entry["order"] == ["j", "i"]]
    assert ji["legal"] is False and ji["legal_after"] == [f"privatize {acc}"]
    assert ji["parallel_after_privatizing"] == ["j", "i"]
    [ij] = [entry for entry in py.interchanges if entry["order"] == ["i", "j"]]
    assert ij["legal"] is True and ij["parallel"] == [] and ij["legal_after"] == []
    assert ij["privatizing"] == [f"privatize {acc}"]
    assert ij["parallel_after_privatizing"] == ["i", "j"]
    for entry_c, entry_py in zip(c.interchanges, py.interchanges, strict=True):
        assert entry_c["order"] == entry_py["order"]
        if entry_c["legal"]:
            assert entry_py["legal"] or entry_py["legal_after"] == [f"privatize {acc}"]
            assert entry_py["parallel_after_privatizing"] == entry_c["parallel"]


@MATMULS
def test_matmul_python_text_says_legal_after_privatize_and_summarizes_the_scalar(function, acc):
    text = analyzed("case_studies.py", function).explain()
    assert f"(j i)  legal after privatize {acc}   parallel loops: j, i" in text
    assert f"(i j)  legal    parallel loops: none; after privatize {acc}: i, j" in text
    # the accumulator's dependences are one summary, not 32 lines and 32 matrix rows
    assert "Dependences on scalars" in text and f"{acc}: 32 dependences (D1-D32)" in text
    assert "none on arrays" in text and "Direction matrix" not in text
    assert all(len(line) <= 80 for line in text.splitlines())


@BOTH
def test_loop_distribution_expands_the_body_local_acc(lang):
    # Think like a compiler: distributing a parallel loop is safe once the variables local to
    # its body get one element per iteration.
    a = analyzed(f"case_studies.{lang}", "loop_distribution")
    groups = a.to_json()["distribution"]
    assert [g["statements"] for g in groups] == [["S1"], ["S2"]]
    assert [g["parallel_loops"] for g in groups] == [["i"], ["i"]]
    assert [g["expand"] for g in groups] == [["acc"], ["acc"]]


def test_loop_distribution_acc_private_in_c_shared_in_python():
    assert analyzed("case_studies.c", "loop_distribution").loops[0].parallel
    [lp] = analyzed("case_studies.py", "loop_distribution").loops
    assert not lp.parallel and offers(lp, "privatize", "acc")


@BOTH
def test_transposition_no_dependences_both_loops_parallel(lang):
    a = analyzed(f"case_studies.{lang}", "transposition")
    assert a.dependences == []
    assert [lp.parallel for lp in a.loops] == [True, True]
    assert interchange(a, ["j", "i"]) is True


# --- Coalescing: the contrived row program ---------------------------------------------------

ROW_PROGRAMS = pytest.mark.parametrize("function, elem", [("contrived_program", "a_el"),
                                                          ("coalescing_motivation", "tmpA")])


@ROW_PROGRAMS
def test_row_program_c_rows_parallel_row_loop_sequential_on_accum(function, elem):
    a = analyzed("case_studies.c", function)
    i, j = loop(a, "i"), loop(a, "j")
    update = stmt(a, "accum =")
    assert i.parallel
    assert not j.parallel and carried_names(a, j) == {"accum"}
    assert (update, update, "RAW", "accum", ("=", "<")) in deps(a, "accum")
    # accum = f(accum) + e is no reduction, and its value is read before it is written.
    assert not offers(j, "reduction", "accum") and not offers(j, "privatize", "accum")


@ROW_PROGRAMS
def test_row_program_python_rows_parallel_after_privatizing(function, elem):
    a = analyzed("case_studies.py", function)
    i = loop(a, "i")
    assert not i.parallel and carried_names(a, i) == {"accum", elem}
    assert offers(i, "privatize", "accum") and offers(i, "privatize", elem)
    j = loop(a, "j")
    assert not offers(j, "reduction", "accum") and not offers(j, "privatize", "accum")


# --- Batch MMM under a mask ------------------------------------------------------------------

def test_batch_mmm_c_three_parallel_loops_and_a_reduction():
    a = analyzed("case_studies.c", "batch_mmm")
    assert [lp.parallel for lp in a.loops] == [True, True, True, False]
    assert offers(loop(a, "q"), "reduction", "acc")
    # The recipe moves the (strip-mined) i inwards: a parallel loop always may.
    assert interchange(a, ["j1", "j2", "i"]) is True


def test_batch_mmm_python_parallel_after_privatizing_the_scalars():
    a = analyzed("case_studies.py", "batch_mmm")
    for var in ("i", "j1", "j2"):
        lp = loop(a, var)
        assert not lp.parallel
        assert all(offers(lp, "privatize", name) for name in ("acc", "a", "b", "v"))
    q = loop(a, "q")
    assert offers(q, "reduction", "acc")
    assert all(offers(q, "privatize", name) for name in ("a", "b", "v"))


# --- Histogram: a generalized reduction ------------------------------------------------------

@BOTH
def test_histogram_not_parallel_but_a_generalized_reduction(lang):
    a = analyzed(f"case_studies.{lang}", "histogram")
    [lp] = a.loops
    assert not lp.parallel and offers(lp, "atomic", "hist")
    on_hist = [d for d in a.dependences if d.array == "hist"]
    assert on_hist and not any(d.exact for d in on_hist)  # hist[ind]: a data-dependent subscript
    update = stmt(a, "hist[ind] +=")
    assert (update, update, "RAW", "hist", ("<",)) in deps(a, "hist")


def test_histogram_c_carries_only_hist():
    a = analyzed("case_studies.c", "histogram")
    assert carried_names(a, a.loops[0]) == {"hist"}


def test_histogram_python_also_privatizes_ind_and_val():
    a = analyzed("case_studies.py", "histogram")
    [lp] = a.loops
    assert carried_names(a, lp) == {"hist", "ind", "val"}
    assert offers(lp, "privatize", "ind") and offers(lp, "privatize", "val")


# --- Putting everything together -------------------------------------------------------------

@BOTH
def test_putting_everything_together(lang):
    # The exercise asks whether the code suits a GPU. As written only loop i (M = 128 iterations)
    # could run in parallel, and only once A, overwritten by every i, is private: too little
    # parallelism. The convergence band (t, j, k) has a parallel j that may move outermost, so
    # privatizing (expanding) A, distributing i and interchanging j out gives M * N parallel
    # iterations around the sequential t and k.
    a = analyzed(f"case_studies.{lang}", "putting_everything_together")
    i = loop(a, "i")
    assert not i.parallel and offers(i, "privatize", "A")
    assert "X" not in carried_names(a, i)  # every i updates its own X[i]
    assert not loop(a, "t").parallel
    assert loop(a, "j", 2).parallel
    assert not loop(a, "k", 2).parallel
    assert interchange(a, ["j", "t", "k"]) is True
    assert interchange(a, ["k", "t", "j"]) is False  # WAR A[k-1][j] [<,=,>] would turn [>,<,=]
    # Distributing i over its two nests (S1, S2: initialize A; S3, S4: converge) with A expanded
    # gives two parallel loops; in the second, j is parallel too.
    top = [g for g in a.to_json()["distribution"] if g["loop"] == i.id]
    assert [g["statements"] for g in top] == [["S1", "S2"], ["S3", "S4"]]
    assert all(g["parallel"] and "A" in g["expand"] for g in top)
    assert {"i", "j"} <= set(top[1]["parallel_loops"])


def test_putting_everything_together_init_nest_c_parallel_python_after_privatizing_x():
    c = analyzed("case_studies.c", "putting_everything_together")
    assert loop(c, "k", 1).parallel and loop(c, "j", 1).parallel
    assert interchange(c, ["j", "k"]) is True
    py = analyzed("case_studies.py", "putting_everything_together")
    for var in ("k", "j"):
        lp = loop(py, var, 1)
        assert not lp.parallel and carried_names(py, lp) == {"x"} and offers(lp, "privatize", "x")
    # One x for all (k, j) in Python: written at (k, j) and again at (k+1, j-1), a WAW [<,>],
    # so exactly as written this interchange is illegal there.
    assert interchange(py, ["j", "k"]) is False


# --- The C twins agree with the Python examples ----------------------------------------------

# The scalars each C function declares inside a loop body (private there, function-wide in Python).
PRIVATE_IN_C = {
    "disambiguation_tmp": {"tmp"},
    "nearest_neighbor": set(NN_SCALARS),
    "matmul": {"tmp"},
    "mmm_golden": {"c"},
    "loop_distribution": {"acc"},
    "contrived_program": {"accum", "a_el"},
    "coalescing_motivation": {"accum", "tmpA"},
    "batch_mmm": {"acc", "a", "b", "v"},
    "histogram": {"ind", "val"},
    "putting_everything_together": {"x"},
}


def functions_in(path: Path) -> list[str]:
    """The functions a Python or C example file defines, in order."""
    if path.suffix == ".py":
        return [n.name for n in ast.parse(path.read_text()).body if isinstance(n, ast.FunctionDef)]
    return re.findall(r"^\w[\w\s*]*?\b(\w+)\(", path.read_text(), re.MULTILINE)


TWINS = [(p.stem, name) for p in sorted(EXAMPLES.glob("*.c")) for name in functions_in(p)]


@pytest.mark.parametrize("file, function", TWINS)
def test_c_twin_has_the_python_dependences_less_those_on_private_scalars(file, function):
    c = analyzed(f"{file}.c", function)
    py = analyzed(f"{file}.py", function)
    assert [s.loops for s in c.statements] == [s.loops for s in py.statements]
    private = PRIVATE_IN_C.get(function, set())
    c_deps, py_deps = vectors(c), vectors(py)
    assert {d for d in c_deps if d[3] not in private} == {d for d in py_deps if d[3] not in private}
    # A fresh location per iteration can only remove dependences.
    assert c_deps <= py_deps


@pytest.mark.parametrize("file, function", TWINS)
def test_python_twin_takes_the_c_orders_after_privatizing_what_c_declares_in_the_body(file,
                                                                                      function):
    c, py = analyzed(f"{file}.c", function), analyzed(f"{file}.py", function)
    private = PRIVATE_IN_C.get(function, set())
    for entry_c, entry_py in zip(c.interchanges, py.interchanges, strict=True):
        assert entry_c["order"] == entry_py["order"]
        if entry_c["legal"] and not entry_py["legal"]:
            assert {label.split()[1] for label in entry_py["legal_after"]} <= private
            assert entry_py["legal_after"], entry_py
        if entry_py["legal"]:
            assert entry_py["legal_after"] == []
        # a copy per iteration can only remove dependences: never fewer parallel loops
        if entry_c["legal"]:
            assert set(entry_c["parallel"]) <= set(entry_py["parallel_after_privatizing"])


# --- The examples themselves -----------------------------------------------------------------

@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.[pc]*")), ids=lambda p: p.name)
def test_analyze_file_reports_every_function(path):
    reports = loclab.analyze_file(path)
    assert [r.name for r in reports] == functions_in(path)
    for report in reports:
        assert {"function", "loops", "statements", "dependences", "interchanges",
                "distribution"} <= report.to_json().keys()
        assert report.explain()


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.[pc]*")), ids=lambda p: p.name)
def test_overlap_only_makes_verdicts_conditional(path):
    """Without the assumption every verdict for distinct arrays stands as
    parallel_if_distinct, and a loop loses ``parallel`` only by an overlap it names."""
    for name in functions_in(path):
        apart = analyzed(path.name, name)
        maybe = analyzed(path.name, name, assume_distinct=False)
        for sure, loop in zip(apart.loops, maybe.loops):
            assert loop.parallel_if_distinct == sure.parallel
            assert loop.parallel == (sure.parallel and not loop.overlaps)
        assert [d.id for d in maybe.dependences] == [d.id for d in apart.dependences]


def load_python(stem: str):
    spec = importlib.util.spec_from_file_location(f"examples_{stem}", EXAMPLES / f"{stem}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_python_examples_compute_what_the_slides_say_they_compute():
    rng = np.random.default_rng(0)
    priv, red, cs = (load_python(s) for s in ("privatization", "reductions", "case_studies"))

    a = np.arange(6.0)
    priv.eliminating_war(a, 6)
    b = np.arange(6.0)
    priv.eliminating_war_by_copy(b, np.empty(6), 6)
    assert list(a) == list(b) == [1, 2, 3, 4, 5, 1]  # the slide's tmp = A[1]

    x1 = rng.random((6, 6))
    x2 = x1.copy()
    priv.eliminating_waw(x1, 6, 5)
    priv.eliminating_waw_privatized(x2, 6, 5)
    np.testing.assert_array_equal(x1, x2)

    b = rng.random((6, 4))
    a = np.empty((6, 4))
    red.scan_sum(a[:, 0], b[:, 0], 6)
    np.testing.assert_allclose(a[:, 0], np.cumsum(b[:, 0]))
    red.scan_rows(a, b, 6, 4)
    np.testing.assert_allclose(a, np.cumsum(b, axis=0))
    acc = np.empty(9, dtype=np.int64)
    red.scan_xor(acc, 9)
    np.testing.assert_array_equal(acc, np.bitwise_xor.accumulate(np.arange(9)))

    queries, points, nns = rng.random(5), rng.random(7), np.empty(5, dtype=np.int64)
    cs.nearest_neighbor(queries, points, nns, 5, 7)
    np.testing.assert_array_equal(nns, np.abs(queries[:, None] - points).argmin(axis=1))

    a, b = rng.random((3, 4)), rng.random((4, 5))
    c, flat = np.empty((3, 5)), np.empty(15)
    cs.matmul(a, b, c, 3, 5, 4)
    cs.mmm_golden(a.ravel(), b.ravel(), flat, 3, 5, 4)
    np.testing.assert_allclose(c, a @ b)
    np.testing.assert_allclose(flat.reshape(3, 5), a @ b)

    squares = np.empty(6)
    cs.loop_distribution(np.zeros(6), squares, 6)
    np.testing.assert_array_equal(squares, np.arange(6) ** 2)

    tr = np.empty(12)
    cs.transposition(a.ravel(), tr, 3, 4)
    np.testing.assert_array_equal(tr.reshape(4, 3), a.T)

    rows, flat_rows = np.empty((3, 4)), np.empty(12)
    cs.coalescing_motivation(a, rows, 3, 4)
    cs.contrived_program(a.ravel(), flat_rows, 3, 4)
    np.testing.assert_allclose(rows[:, 0], a[:, 0] ** 2)
    np.testing.assert_allclose(flat_rows.reshape(3, 4)[:, 1], np.sqrt(a[:, 0] ** 2) + a[:, 1] ** 2)

    am, bm, mask = rng.random((2, 5)), rng.random((5, 2)), rng.integers(0, 2, (3, 5))
    y = np.empty((3, 2, 2))
    cs.batch_mmm(am, bm, mask, y, 3, 2, 5)
    np.testing.assert_allclose(y, np.einsum("kq,qj,iq->ikj", am, bm, mask))

    inds, vals, hist = rng.integers(0, 10, 50), rng.random(50), np.zeros(8)
    cs.histogram(inds, vals, hist, 50, 8)
    expected = np.zeros(8)
    np.add.at(expected, inds[inds < 8], vals[inds < 8])
    np.testing.assert_allclose(hist, expected)


def test_remaining_python_examples_run():
    rng = np.random.default_rng(1)
    loops, red, cs = (load_python(s) for s in ("loops", "reductions", "case_studies"))
    n = 6  # 1-based Fortran-style nests index up to n + 1
    for f in (loops.three_loops_1, loops.three_loops_3, loops.disambiguation,
              loops.disambiguation_tmp):
        f(rng.random((n + 2, n + 2)), n)
    for f in (loops.three_loops_2, loops.three_loops_2_variant):
        f(rng.random((n + 2, n + 2)), rng.random((n + 2, n + 2)), n)
    for f in (loops.vectorization, loops.array_expansion):
        f(rng.random(n + 2), rng.random(n + 2), n)
    assert np.isfinite(red.reduction(rng.random((n + 1, n + 1)) * 3 - 1, n))
    cs.putting_everything_together(rng.random((2, 4, 4)) + 0.5, rng.random((2, 4, 4)), 2, 4, 3)


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_c_examples_compile():
    files = [str(p) for p in sorted(EXAMPLES.glob("*.c"))]
    done = subprocess.run(["cc", "-std=c99", "-Wall", "-Wno-unknown-pragmas", "-Werror",
                           "-fsyntax-only", *files], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
