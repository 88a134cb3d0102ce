"""Which array accesses Numba may index with unsigned subscripts.

Numba gives a signed subscript Python's meaning: a negative one counts from the end, which
costs a test per access and keeps LLVM from vectorizing the loop around it (a tiled matrix
product ran at 6 GFlop/s instead of 34 on 2 cores). An unsigned subscript skips the test. The
emitted Numba code casts an access's subscripts to ``uintp`` where isl proves that none of
them ever takes a negative value, at any size (sizes are never negative): there the cast
changes nothing but the speed.

The proof is per statement: correlation's ``corr[M - 1, M - 1] = 1.0`` after its loops is
``corr[-1, -1]`` where ``M`` is 0, which keeps that statement's subscripts signed, not those
of the triangular product that sums into ``corr[i, j]`` (4.2 times faster unsigned on 2
cores). The CUDA emitter, which indexes an array through one wrap function or none, asks per
array.
"""

from __future__ import annotations

from collections.abc import Mapping

from loclab.nest.ir import Statement
from loclab.transform.tree import Program


def unsigned_by_statement(program: Program) -> dict[int, frozenset[str]]:
    """For each statement (by ``id``), the arrays whose every subscript in it is provably
    non-negative."""
    import islpy as isl

    model = program.model
    sizes = " and ".join(f"{p} >= 0" for p in model.isl_parameters) or "true"
    proved: dict[int, frozenset[str]] = {}
    for statement in program.nest.statements:
        safe: dict[str, bool] = {}
        coords = ", ".join(f"x{k}" for k in range(len(statement.loops)))
        for access in statement.accesses:
            variable = access.variable
            if not variable.is_array or safe.get(variable.name) is False:
                continue
            fine = all(subscript is not None and subscript.is_affine()
                       for subscript in access.subscripts)
            for subscript in access.subscripts if fine else ():
                text = model.render(subscript, statement, "x")
                negative = isl.Set(f"{model.header}{{ [{coords}] : "
                                   f"{model.domain(statement, 'x')} and {sizes} and "
                                   f"{text} < 0 }}")
                fine = fine and negative.is_empty()
            safe[variable.name] = fine
        proved[id(statement)] = frozenset(name for name, fine in safe.items() if fine)
    return proved


def unsigned_arrays(program: Program,
                    by_statement: Mapping[int, frozenset[str]] | None = None) -> set[str]:
    """Names of the arrays whose every subscript, in every statement, is provably
    non-negative."""
    by_statement = unsigned_by_statement(program) if by_statement is None else by_statement
    arrays = {a.variable.name for s in program.nest.statements for a in s.accesses
              if a.variable.is_array}
    return {name for name in arrays if all(
        name in by_statement[id(s)] for s in program.nest.statements
        if any(a.variable.name == name for a in s.accesses))}


def unsigned_in(statements: tuple[Statement, ...], opaque: bool,
                by_statement: Mapping[int, frozenset[str]], everywhere: set[str]
                ) -> frozenset[str]:
    """The arrays a unit of ``statements`` may index unsigned: those proved in each of them;
    in a block kept as written (``opaque``), whose code may hold more than its statements
    say, only the arrays proved everywhere."""
    if opaque or not statements:
        return frozenset(everywhere)
    return frozenset.intersection(*(by_statement[id(s)] for s in statements))
