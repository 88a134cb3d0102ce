"""The GPU verification's rounding tolerance follows a value's chain of operations through
the variables it is computed from (``verify.dataflow_chain``), not the nest's whole
iteration space: checked against the brute-force tracer, which follows every value of a
small run from the statement instances that computed it."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loclab.nest import load_source
from loclab.transform.verify import dataflow_chain, variable_chains
from tests.nestgen import contraction_nests, nests, recurrence_nests, trace

ROWS = """
def f(a, out, rows, cols):
    for i in range(rows):
        acc = 0.0
        for j in range(cols):
            acc = acc * 0.5 + a[i, j] * a[i, j]
            out[i, j] = acc
"""
TWO_PRODUCTS = """
def f(A, B, C, tmp, D, NI, NJ, NK, NL):
    for i in range(NI):
        for j in range(NJ):
            tmp[i, j] = 0.0
            for k in range(NK):
                tmp[i, j] += A[i, k] * B[k, j]
    for i in range(NI):
        for l in range(NL):
            D[i, l] *= 0.5
            for j in range(NJ):
                D[i, l] += tmp[i, j] * C[j, l]
"""
PREFIX = """
def f(S, x, N):
    for i in range(1, N):
        S[i] = S[i - 1] + x[i]
"""
RESET_UNDER_A_CONDITION = """
def f(a, out, M, N):
    acc = 0.0
    for i in range(M):
        if i > 2:
            acc = 0.0
        for j in range(N):
            acc = acc + a[i, j]
        out[i] = acc
"""
STEPS = """
def f(A, B, T, N):
    for t in range(T):
        for i in range(1, N - 1):
            B[i] = A[i - 1] + A[i + 1]
        for i in range(1, N - 1):
            A[i] = B[i]
"""


def chain(source: str, sizes: dict[str, int]) -> int | None:
    (nest,) = load_source(source, function="f")
    return dataflow_chain(nest, sizes)


def longest_paths(source: str, sizes: dict[str, int], counted: set[str]) -> dict[str, int]:
    """For each variable, the longest path of values ending in one of its elements in a run,
    counted in accesses of the variables ``counted`` (the IR's: not a scalar argument):
    each statement instance adds its own to the longest path among the values it reads."""
    path: dict[object, int] = {}
    longest: dict[str, int] = {}
    accesses = trace(source, sizes)
    start = 0
    while start < len(accesses):  # one statement instance: its reads, then its writes
        first = accesses[start]
        end = start
        while end < len(accesses) and (accesses[end].line, accesses[end].iteration) == (
                first.line, first.iteration):
            end += 1
        instance = accesses[start:end]
        read = max((path.get(a.location, 0) for a in instance if not a.write), default=0)
        length = sum(a.location[0] in counted for a in instance) + read
        for access in instance:
            if access.write:
                path[access.location] = length
                name = access.location[0]
                longest[name] = max(longest.get(name, 0), length)
        start = end
    return longest


def test_a_row_walk_chains_one_rows_columns_not_the_matrix():
    assert chain(ROWS, {"rows": 1000, "cols": 64}) == chain(ROWS, {"rows": 10, "cols": 64})
    assert chain(ROWS, {"rows": 1000, "cols": 64}) == 4 * 64 + 1 + 2  # acc's updates, reset, store


def test_chains_add_up_through_the_variables_a_value_is_computed_from():
    sizes = {"NI": 5, "NJ": 7, "NK": 11, "NL": 13}
    assert chain(TWO_PRODUCTS, sizes) == (1 + 4 * 11) + (2 + 4 * 7)  # tmp's, then D's


def test_a_recurrence_through_other_elements_chains_every_iteration():
    assert chain(PREFIX, {"N": 100}) >= 99
    assert chain(RESET_UNDER_A_CONDITION, {"M": 10, "N": 20}) >= 10 * 20


def test_values_around_a_cycle_of_variables_have_no_chain():
    assert chain(STEPS, {"T": 5, "N": 10}) is None


@st.composite
def chain_nests(draw: st.DrawFn) -> str:
    """A row walk whose scalar is reset per row, under a condition, or never, beside an
    array updated in place, from another element, or stored from the scalar."""
    lines = ["def f(A, B, out, M, N):", "    acc = 0.0", "    for i in range(1, M):"]
    reset = draw(st.sampled_from(["row", "condition", "never"]))
    if reset == "row":
        lines.append("        acc = 0.0")
    elif reset == "condition":
        lines += ["        if i % 2 == 1:", "            acc = 0.0"]
    lines.append("        for j in range(1, N):")
    lines.append(f"            acc = acc * 0.5 + {draw(st.sampled_from(['A[i, j]', 'B[i, j]']))}")
    source = draw(st.sampled_from(["A[i, j] * 0.5", "A[i, j - 1]", "A[i - 1, j]",
                                   "A[i - 1, j - 1]", "acc"]))
    lines.append(f"            A[i, j] = {source} + B[i, j]")
    if draw(st.booleans()):
        lines.append("            out[i, j] = acc")
    return "\n".join(lines) + "\n"


@settings(max_examples=150, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(st.one_of(chain_nests(), nests(), recurrence_nests(), contraction_nests()),
       st.sampled_from([3, 5]))
def test_no_run_has_a_longer_path_of_values_than_the_chain(source: str, size: int) -> None:
    (nest,) = load_source(source)
    sizes = {name: size for name in nest.parameters}
    chains = variable_chains(nest, sizes)
    if chains is not None:
        counted = {a.variable.name for s in nest.statements for a in s.accesses}
        for name, length in longest_paths(source, sizes, counted).items():
            assert length <= chains[name], (name, source)
