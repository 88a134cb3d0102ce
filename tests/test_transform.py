"""``loclab transform``: steps, verdicts, emitted code, verification, the command line."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import numpy as np
import pytest

from loclab.cli import main
from loclab.errors import UsageError
from loclab.transform import transform
from loclab.transform.recipe import LoopRef, make_step, parse_recipe
from loclab.transform.steps import IllegalStep

TRANSPOSE = '''
def transpose(A, B, N, M):
    for i in range(N):
        for j in range(M):
            B[j, i] = A[i, j]
'''

MATMUL = '''
def matmul(A, B, C, M, N, U):
    for i in range(M):
        for j in range(N):
            tmp = 0.0
            for k in range(U):
                tmp += A[i, k] * B[k, j]
            C[i, j] = tmp
'''

THREE_LOOPS_3 = '''
def three_loops_3(A, N):
    for i in range(2, N + 1):
        for j in range(1, N + 1):
            A[i, j] = A[i - 1, j + 1] + 1
'''


def body(result) -> str:
    """The emitted function without the header line and the imports."""
    lines = result.source.split("\n")
    start = next(k for k, line in enumerate(lines) if line.startswith("def "))
    return "\n".join(lines[start:])


# -- recipes --------------------------------------------------------------------------------
def test_a_recipe_reads_steps_loops_sizes_and_options() -> None:
    steps = parse_recipe("tile(i@12=32, j=8);\n unroll(i, 4, jam=True) ; parallel(ii)")
    assert [s.text for s in steps] == ["tile(i@12=32, j=8)", "unroll(i, 4, jam=True)",
                                       "parallel(ii)"]
    assert steps[0].keywords == ((LoopRef("i", 12), 32), (LoopRef("j"), 8))
    assert steps[1].args == (LoopRef("i"), 4) and steps[1].keywords == ((LoopRef("jam"), True),)


def test_steps_built_in_code_are_the_steps_a_recipe_reads() -> None:
    """The typed API: a step made in code prints as its recipe text and reads back equal,
    and a function transformed with the steps themselves is the one the text gives."""
    made = [make_step("tile", keywords=[("i@12", 32), (LoopRef("j"), 8)]),
            make_step("unroll", "i", 4, keywords=[("jam", True)]), make_step("parallel", "ii")]
    assert parse_recipe("; ".join(map(str, made))) == made
    steps = [make_step("permute", "j", "i"), make_step("parallel", "j")]
    assert transform(TRANSPOSE, steps).source == transform(TRANSPOSE,
                                                             "permute(j, i); parallel(j)").source
    assert transform(TRANSPOSE, []).steps == []  # no steps: the function as written
    with pytest.raises(ValueError, match="not a loop"):
        make_step("parallel", "i j")


@pytest.mark.parametrize("recipe, message", [
    ("tile(i=32", "tile(i=32: a step is name(args), e.g. tile(i=32, j=32)"),
    ("", "the recipe has no steps"),
    ("tile(i=0, j=32)", "tile(i=0, j=32): tile size 0 must be a positive integer"),
    ("stripmine(i, -4)", "stripmine(i, -4): tile size -4 must be a positive integer"),
    ("tile(q=3)", "tile(q=3): no loop q (loops: i@3, j@4)"),
    ("spin(i)", "spin(i): unknown step 'spin'"),
    ("unroll(j, 2, jam=3)", "unroll(j, 2, jam=3): unknown option jam=3"),
    ("interchange(i)", "interchange(i): usage interchange(loop, loop)"),
    ("stripmine(i, 4, j)", "stripmine(i, 4, j): j is already a name in the function"),
])
def test_a_malformed_step_is_a_one_line_usage_error(recipe: str, message: str) -> None:
    with pytest.raises(UsageError) as info:
        transform(TRANSPOSE, recipe)
    assert str(info.value).startswith(message) and "\n" not in str(info.value)
    assert info.value.exit_code == 2


def test_a_step_on_an_imperfect_band_names_the_loop_to_distribute() -> None:
    with pytest.raises(UsageError, match=r"^interchange\(i, k\): i@3, k@6 must be a perfect "
                                         r"nest, but the body of j@4 holds 3 statements or "
                                         r"loops: distribute\(j\) first$"):
        transform(MATMUL, "interchange(i, k)")


# -- legality -------------------------------------------------------------------------------
def test_an_illegal_interchange_names_the_dependence_before_and_after() -> None:
    with pytest.raises(IllegalStep) as info:
        transform(THREE_LOOPS_3, "interchange(i, j)")
    assert str(info.value) == ("interchange(i, j) is illegal: D1 S1->S1 RAW on A [<,>] would "
                               "become [>,<]")
    assert info.value.exit_code == 1
    assert info.value.violation.dependence.id == "D1"


def test_a_parallel_loop_that_carries_a_dependence_is_refused_with_its_remedy() -> None:
    with pytest.raises(IllegalStep, match=r"^parallel\(i\) is illegal: i carries D1 S1->S1 RAW "
                                          r"on A \[<,>\]$"):
        transform(THREE_LOOPS_3, "parallel(i)")
    with pytest.raises(IllegalStep, match=r"i carries D1 S1->S1 WAW on tmp .*: privatize\(tmp\) "
                                          "first$"):
        transform(MATMUL, "parallel(i)")
    war = "def f(A, N):\n    for i in range(N - 1):\n        A[i] = A[i + 1] + 1\n"
    with pytest.raises(IllegalStep, match=r"WAR on A \[<\]: copy\(A, i\) first$"):
        transform(war, "parallel(i)")


def test_every_legal_step_says_why() -> None:
    result = transform(MATMUL, "privatize(tmp); interchange(i, j); parallel(j)")
    assert [(s.step, s.legal) for s in result.steps] == [
        ("privatize(tmp)", True), ("interchange(i, j)", True), ("parallel(j)", True)]
    assert result.steps[2].reason == "j carries no dependence"
    assert "every read of tmp in an iteration of j" in result.steps[0].reason


def test_privatizing_a_value_needed_after_the_loop_is_refused() -> None:
    source = ("def f(A, N):\n    s = 0.0\n    for i in range(N):\n        s = A[i]\n"
              "        A[i] = s * 2\n    A[0] = s\n")
    with pytest.raises(IllegalStep, match=r"privatize\(s\) is illegal: it is read after the "
                                          "loop"):
        transform(source, "privatize(s)")
    carried = "def f(A, N):\n    s = 0.0\n    for i in range(N):\n        s = s + A[i]\n"
    with pytest.raises(IllegalStep, match="may see a value written before it"):
        transform(carried, "privatize(s)")


def test_a_reduction_is_parallel_and_emitted_for_numba() -> None:
    source = ("def total(A, N):\n    s = 0.0\n    for i in range(N):\n        s += A[i]\n"
              "    return s\n")
    result = transform(source, "parallel(i)", emit="numba")
    assert result.steps[0].reason == "i carries only reductions (reduction + on s)"
    assert "for i in prange(N):" in result.source
    check = result.verify(N=1001)
    assert check.ok and check.compared[-1].name == "return value"


# -- code -----------------------------------------------------------------------------------
@pytest.mark.parametrize("loop, recipe", [
    ("range(M - 1, -1, -1)", "parallel(i@2)"), ("range(M - 1, 0, -3)", "parallel(i@2)"),
    ("range(M - 1, 0, -3)", "stripmine(i@2, 2); parallel(i@2)")])
def test_a_parallel_loop_counting_down_runs_each_value_once_under_numba(loop, recipe) -> None:
    """prange steps by one: a loop the user wrote counting down is run as a counter over
    its values (``loclab optimize``'s generated nests found the count taken upwards: two
    iterations too many, past the array)."""
    source = f"def f(A, M):\n    for i in {loop}:\n        A[i] = A[i] + 1.0\n"
    result = transform(source, recipe, emit="numba")
    for size in (1, 2, 7, 10):
        assert result.verify(M=size).ok, (size, result.source)


def test_unsigned_subscripts_are_proved_statement_by_statement() -> None:
    """A subscript that may be negative (``A[i + K - 1]`` at ``K = 0``, ``B[M - 1]`` at ``M = 0``)
    keeps its statement's accesses of that array signed, as Python means them, and no other
    statement's (correlation's ``corr[M - 1, M - 1] = 1.0`` kept its triangular product
    signed: 4.2 times slower on 2 cores)."""
    source = ("def f(A, B, M, K):\n    for i in range(M):\n        B[i] = A[i] * 2.0\n"
              "    for i in range(M):\n        A[i] = A[i + K - 1] + B[i]\n"
              "    B[M - 1] = 0.5\n")
    result = transform(source, "parallel(i@2)", emit="numba", assume_distinct=True)
    assert "B[uintp(i)] = A[uintp(i)] * 2.0" in result.source
    assert "A[i] = A[i + K - 1] + B[uintp(i)]" in result.source
    assert "B[M - 1] = 0.5" in result.source
    for size in (1, 4, 9):
        assert result.verify(M=size, K=2).ok, (size, result.source)
    plain = transform(source, "parallel(i@2)", emit="python", assume_distinct=True)
    assert "uintp" not in plain.source


def test_tiling_emits_the_slides_blocked_loops() -> None:
    result = transform(TRANSPOSE, "tile(i=32, j=32); parallel(ii)", assume_distinct=True)
    assert body(result) == """def transpose(A, B, N, M):
    for ii in range(0, N, 32):  # parallel
        for jj in range(0, M, 32):
            for i in range(ii, min(N, ii + 32)):
                for j in range(jj, min(M, jj + 32)):
                    B[j, i] = A[i, j]
"""
    numba = transform(TRANSPOSE, "tile(i=32, j=32); parallel(ii)", emit="numba",
                      assume_distinct=True)
    assert "@njit(parallel=True)" in numba.source
    assert "for ii_index in prange((N + 31) // 32):\n        ii = 32 * ii_index" in numba.source


def test_stripmine_names_the_tile_loop_as_the_slides_or_as_told() -> None:
    assert "for ii in range(0, N, 8):" in transform(TRANSPOSE, "stripmine(i, 8)").source
    twice = transform(TRANSPOSE, "stripmine(i, 64); stripmine(i, 8)").source
    assert "for ii in range(0, N, 64):" in twice and "for iii in range(ii, " in twice
    named = transform(TRANSPOSE, "stripmine(j, 4, jt)").source
    assert "for jt in range(0, M, 4):\n            for j in range(jt, min(M, jt + 4)):" in named


def test_unrolling_leaves_a_remainder_loop() -> None:
    result = transform(TRANSPOSE, "unroll(j, 4)", assume_distinct=True)
    assert body(result) == """def transpose(A, B, N, M):
    if M >= 1:
        for i in range(N):
            for j in range(0, M - 3, 4):
                B[j, i] = A[i, j]
                B[j + 1, i] = A[i, j + 1]
                B[j + 2, i] = A[i, j + 2]
                B[j + 3, i] = A[i, j + 3]
            for j in range(M - (M % 4), M):
                B[j, i] = A[i, j]
"""
    assert result.verify(N=5, M=11).ok


def test_unroll_and_jam_gives_each_copy_its_private_scalar() -> None:
    result = transform(MATMUL, "privatize(tmp); unroll(j, 2, jam=True)")
    lines = [line.strip() for line in result.source.split("\n")]
    start = lines.index("tmp_0 = 0.0")
    assert lines[start:start + 6] == ["tmp_0 = 0.0", "tmp_1 = 0.0", "for k in range(U):",
                                      "tmp_0 += A[i, k] * B[k, j]",
                                      "tmp_1 += A[i, k] * B[k, j + 1]", "C[i, j] = tmp_0"]
    assert result.verify(M=3, N=7, U=5).ok


def test_jamming_without_privatizing_is_refused_and_says_so() -> None:
    with pytest.raises(IllegalStep, match=r"\(privatize\(tmp\) first\)$"):
        transform(MATMUL, "unroll(j, 2, jam=True)")


def test_register_tiling_unrolls_each_copy_of_a_loop_an_earlier_unroll_made() -> None:
    source = ("def f(A, B, C, M, N, U):\n    for i in range(M):\n        for k in range(U):\n"
              "            for j in range(N):\n                C[i, j] += A[i, k] * B[k, j]\n")
    result = transform(source, "unroll(i, 2, jam=True); unroll(k, 2, jam=True)", emit="numba")
    lines = [line.strip() for line in result.source.split("\n")]
    start = next(n for n, line in enumerate(lines) if line.startswith("C[uintp(i), uintp(j)]"))
    # the copies that update one element of C are adjacent (jammed last): LLVM keeps it in
    # a register between them
    assert [line.split(" +=")[0] for line in lines[start:start + 4]] == [
        "C[uintp(i), uintp(j)]", "C[uintp(i), uintp(j)]", "C[uintp(i + 1), uintp(j)]",
        "C[uintp(i + 1), uintp(j)]"]
    assert sum("range(" in line and ", 2)" in line for line in lines) >= 3  # k in both copies
    assert result.verify(M=5, N=3, U=7).ok


def test_vectorize_lets_a_sum_run_in_lanes() -> None:
    result = transform(MATMUL, "privatize(tmp); parallel(i); vectorize(k)", emit="numba")
    assert '@njit(parallel=True, fastmath={"reassoc"})' in result.source
    assert "carries only reductions (+ on tmp)" in result.steps[-1].reason
    verification = result.verify(M=5, N=6, U=37)
    assert verification.ok and verification.compared[-1].tolerance > 0  # a reordered sum
    assert "fastmath" not in transform(MATMUL, "privatize(tmp)", emit="numba").source


def test_fastmath_lets_the_compiler_fuse_and_reorder_the_whole_function() -> None:
    result = transform(MATMUL, "privatize(tmp); parallel(i); fastmath()", emit="numba")
    assert '@njit(parallel=True, fastmath={"contract", "reassoc"})' in result.source
    assert result.program.fast_math and "fuse multiplies and adds" in result.steps[-1].reason
    verification = result.verify(M=5, N=6, U=37)
    assert verification.ok and all(c.tolerance > 0 for c in verification.compared
                                   if c.name == "C")  # within a reordered sum's bound
    # the loops are the recipe's without it
    plain = transform(MATMUL, "privatize(tmp); parallel(i)", emit="numba").source
    assert [line for line in result.source.splitlines()[1:] if "@njit(" not in line] == \
        [line for line in plain.splitlines()[1:] if "@njit(" not in line]


def test_fastmaths_tolerance_is_the_longest_chain_of_updates_as_written() -> None:
    """Not the tiled code's depth: a product's element takes K updates of four accesses
    however it is tiled; a scalar's, every loop around it."""
    from loclab.transform.verify import update_chain

    product = ("def f(C, A, B, N, M, K):\n    for i in range(N):\n        for j in range(M):"
               "\n            for k in range(K):\n                C[i, j] += A[i, k] * B[k, j]"
               "\n")
    tiled = transform(product, "tile(i=4, j=4, k=4); fastmath()", emit="numba")
    assert update_chain(tiled.program.nest, {"N": 7, "M": 9, "K": 11}) == 4 * 11
    total = "def f(A, N):\n    s = 0.0\n    for i in range(N):\n        s += A[i]\n    return s\n"
    assert update_chain(transform(total, "fastmath()", emit="numba").program.nest,
                        {"N": 50}) == 3 * 50 + 1  # s, s, A[i] per update; s = 0.0 once


@pytest.mark.parametrize("emit", ["python", "cuda"])
def test_fastmath_is_numbas_only(emit: str) -> None:
    with pytest.raises(UsageError, match=r"fastmath\(\): only Numba's emitter writes it"):
        transform(MATMUL, "fastmath()", emit=emit)


@pytest.mark.parametrize(("source", "recipe", "message"), [
    (MATMUL, "privatize(tmp); vectorize(j)", r"j@\d+ holds loops"),
    ("def f(A, B, N):\n    for i in range(1, N):\n        A[i] = A[i - 1] + B[i]\n",
     "vectorize(i)", r"a dependence that is not a reduction on A"),
    ("def f(H, K, N):\n    for i in range(N):\n        H[K[i]] += 1\n", "vectorize(i)",
     r"a generalized reduction on H"),
])
def test_vectorize_refuses_what_lanes_would_break(source: str, recipe: str,
                                                  message: str) -> None:
    with pytest.raises((IllegalStep, UsageError), match=message):
        transform(source, recipe)


def test_distribution_expands_what_two_loops_share() -> None:
    source = ("def f(A, B, N):\n    for i in range(2, N):\n        tmp = 2 * B[i - 2]\n"
              "        A[i] = tmp\n        B[i] = tmp + B[i - 1]\n")
    result = transform(source, "distribute(i); parallel(i)", assume_distinct=True)
    assert body(result) == """def f(A, B, N):
    tmp = np.empty((max(0, N - 2),), dtype=np.float64)
    for i in range(2, N):
        tmp[i - 2] = 2 * B[i - 2]
        B[i] = tmp[i - 2] + B[i - 1]
    for i in range(2, N):  # parallel
        A[i] = tmp[i - 2]
"""
    assert "stay sequential: i carries D1 S3->S1 RAW on B [<]" in result.steps[1].reason
    assert result.verify().ok


def test_distributing_a_loop_expands_a_private_scalar_its_pieces_share() -> None:
    result = transform(MATMUL, "privatize(tmp); distribute(j)")
    assert "tmp = np.empty((max(0, N),), dtype=np.float64)" in result.source
    assert "tmp[j] += A[i, k] * B[k, j]" in result.source
    assert result.verify(M=4, N=5, U=6).ok


def test_copying_removes_a_war_and_staging_reads_a_slice() -> None:
    war = "def f(A, N):\n    for i in range(N - 1):\n        A[i] = A[i + 1] + 1\n"
    copied = transform(war, "copy(A, i); parallel(i)")
    assert "A_copy = A[A_copy_lo0:N].copy()" in copied.source
    assert "A[i] = A_copy[i + 1 - A_copy_lo0] + 1" in copied.source
    assert copied.verify().ok
    staged = transform(MATMUL, "privatize(tmp); tile(i=8, j=8); stage(B, jj)")
    assert "B_jj_lo1 = jj" in staged.source and "B_jj[k - B_jj_lo0, j - B_jj_lo1]" in \
        staged.source
    assert staged.verify(M=11, N=19, U=7).ok
    transposed = transform(MATMUL, "privatize(tmp); tile(i=8, j=8); stripmine(k, 4, kk); "
                                   "stage(A, kk, transpose=True)")
    assert "A_kk = A[A_kk_lo0:" in transposed.source and "].T.copy()" in transposed.source
    assert "A_kk[k - A_kk_lo1, i - A_kk_lo0]" in transposed.source
    assert transposed.steps[-1].reason.endswith("kept transposed (a column of the slice is a "
                                                "row of the buffer)")
    assert transposed.verify(M=11, N=19, U=7).ok
    for recipe, message in [("stage(A, i, transpose=True)", "A has 1 subscripts: "
                                                             "transpose=True keeps a 2-D slice"),
                            ("stage(A, i, layout=True)", "unknown option layout=True")]:
        with pytest.raises(UsageError, match=re.escape(message)):
            transform("def f(A, B, N):\n    for i in range(N):\n        B[i] = A[i]\n", recipe)
    scaled = "def f(A, N):\n    for i in range(N):\n        for j in range(N):\n" \
             "            A[i, j] = A[i, j] * 2\n"
    with pytest.raises(IllegalStep, match=r"^stage\(A, i\) is illegal: A is written inside "
                                          r"i \(line 4\): a copy would go stale$"):
        transform(scaled, "stage(A, i)")
    with pytest.raises(UsageError, match="loops cannot move once stage"):
        transform(MATMUL, "privatize(tmp); stage(B, j); interchange(i, j)")


SYRK = '''
def syrk(A, C, alpha, M, N):
    for i in range(N):
        for k in range(M):
            for j in range(i + 1):
                C[i, j] += alpha * A[i, k] * A[j, k]
'''


@pytest.mark.parametrize("emit", ["python", "numba"])
def test_staging_using_a_loop_packs_only_the_reads_that_move_with_it(emit: str) -> None:
    """BLIS's packing as a step: ``A[j, k]`` (down a column as ``j`` runs) is copied panel by
    panel, transposed; ``A[i, k]``, the same in every iteration of ``jj``, stays on ``A``
    (one box for both would span every row between the two tiles). Under Numba the buffer
    is allocated once per iteration of the parallel loop, at the tile's shape, and filled by
    loops."""
    recipe = ("tile(i=8, k=8, j=8); unroll(k, 4, jam=True); "
              "stage(A, jj, transpose=True, using=j); parallel(ii)")
    result = transform(SYRK, recipe, emit=emit, assume_distinct=True)
    kept, packed = (("A[uintp(i), uintp(k)]", "A[uintp(j), uintp(k)]") if emit == "numba"
                    else ("A[i, k]", "A[j, k]"))
    assert kept in result.source and packed not in result.source
    assert result.steps[2].reason.startswith("A is only read inside jj: each iteration "
                                             "A[j, k] reads its slice from A_jj, kept "
                                             "transposed")
    if emit == "numba":
        assert "A_jj = np.empty((8, 8,), dtype=A.dtype)" in result.source
        assert result.source.index("A_jj = np.empty") > result.source.index("prange")
        assert "A_jj[uintp(A_jj_i1 - A_jj_lo1), uintp(A_jj_i0 - A_jj_lo0)] = " \
               "A[A_jj_i0, A_jj_i1]" in result.source
    else:
        assert "].T.copy()" in result.source
    for sizes in ({"M": 13, "N": 21}, {"M": 3, "N": 5}, {"M": 8, "N": 16}):
        assert result.verify(**sizes).ok, sizes


def test_staging_using_a_loop_is_refused_where_it_names_no_read() -> None:
    for recipe, message in [
            ("tile(i=8, k=8, j=8); stage(A, jj, using=ii)", "ii is not a loop inside jj@"),
            ("tile(i=8, k=8, j=8); stage(C, kk, using=k)", "no read of C inside kk@4 "
                                                            "moves with k"),
            ("tile(i=8, k=8, j=8); stage(C, kk, using=j)", "C is written inside kk"),
            ("tile(i=8, k=8, j=8); stage(A, ii, using=q)", "q"),
            ("tile(i=8, k=8, j=8); stage(A, jj, using=True)", "unknown option using=True")]:
        with pytest.raises((UsageError, IllegalStep), match=re.escape(message)):
            transform(SYRK, recipe)
    only_i = "def f(A, B, N):\n    for i in range(N):\n        for j in range(N):\n" \
             "            B[i, j] = A[i, 0] * 2\n"
    with pytest.raises(UsageError, match=re.escape("no read of A inside i@2 moves with j")):
        transform(only_i, "stage(A, i, using=j)")


def test_a_block_loclab_cannot_express_is_kept_as_written_and_said() -> None:
    source = ("def f(A, X, N):\n    for i in range(N):\n        if X[i] > 0:\n"
              "            A[i] = A[i] + 1\n")
    result = transform(source, "stripmine(i, 4); parallel(ii)", assume_distinct=True)
    assert "if X[i] > 0:\n                A[i] = A[i] + 1" in result.source
    assert result.notes == ["line 3: kept as written (the condition at line 3 reads memory "
                            "(X))"]
    scalar = ("def f(A, N):\n    for i in range(N):\n        s = A[i] * 2\n"
              "        if s > 0:\n            A[i] = s\n")
    result = transform(scalar, "stripmine(i, 4)")
    assert result.notes == ["line 4: kept as written (the condition at line 4 reads s, "
                            "computed at run time)"]


def test_the_emitted_code_can_be_analyzed_again() -> None:
    result = transform(MATMUL, "privatize(tmp); tile(i=8, j=8); unroll(j, 2, jam=True)")
    again = result.analyze()
    assert [l.var for l in again.nest.loops][:4] == ["ii", "jj", "i", "j"]
    assert "privatize tmp_0" in again.loop("ii").parallel_after


# -- verification and compiling ---------------------------------------------------------------
def test_compile_gives_a_drop_in_replacement() -> None:
    fast = transform(TRANSPOSE, "tile(i=4, j=4)").compile()
    a = np.arange(35.0).reshape(5, 7)
    b = np.full((7, 5), np.nan)
    fast(a, b, 5, 7)
    assert np.array_equal(b, a.T)


def test_verify_reports_what_it_compared_and_catches_a_wrong_result(
        monkeypatch: pytest.MonkeyPatch) -> None:
    result = transform(TRANSPOSE, "tile(i=4, j=4)")
    report = result.verify(N=9, M=10)
    assert str(report) == "verified at N=9, M=10: A (9 x 10): equal; B (10 x 9): equal"
    broken = result.source.replace("B[j, i] = A[i, j]", "B[j, i] = A[i, j] + 1e-9")
    monkeypatch.setattr(result, "source", broken)
    assert not result.verify(N=9, M=10).ok


def test_verify_refuses_sizes_that_read_before_the_array() -> None:
    source = "def f(A, N):\n    for i in range(N):\n        A[i] = A[i - 1]\n"
    with pytest.raises(UsageError, match=r"A\[i - 1\] at line 3 reads index -1"):
        transform(source, "stripmine(i, 2)").verify(N=5)
    with pytest.raises(UsageError, match=r"--param Q: f has no size Q"):
        transform(source, "stripmine(i, 2)").verify(Q=5)


# -- the command line -------------------------------------------------------------------------
@pytest.fixture()
def kernel(tmp_path: Path) -> Path:
    path = tmp_path / "kernel.py"
    path.write_text("import numpy as np\n" + MATMUL)
    return path


def test_cli_prints_the_code_and_the_steps(kernel: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["transform", f"{kernel}::matmul", "--apply",
                 "privatize(tmp); tile(i=8, j=8); parallel(ii)", "--verify",
                 "--param", "M=9", "--param", "N=10", "--param", "U=3"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("# loclab transform: kernel.py::matmul with privatize(tmp); "
                          "tile(i=8, j=8); parallel(ii)\n")
    assert "loclab transform: parallel(ii): legal (ii carries no dependence)" in err
    assert "loclab transform: verified at M=9, N=10, U=3: A (9 x 3): equal" in err


def test_cli_exit_codes_are_one_line(kernel: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["transform", str(kernel), "--apply", "interchange(i, j)"]) == 1
    assert capsys.readouterr().err.count("\n") == 1
    assert main(["transform", str(kernel), "--apply", "tile(i=0)"]) == 2
    assert main(["transform", str(kernel), "--apply", "parallel(j)", "--emit", "c"]) == 2
    assert "a python function is emitted as python or numba" in capsys.readouterr().err
    assert main(["transform", str(kernel.parent), "--apply", "parallel(j)"]) == 2


def test_cli_json(kernel: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["transform", str(kernel), "--apply", "privatize(tmp); parallel(i)",
                 "--json", "--verify"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["function"] == "matmul" and document["emit"] == "python"
    assert [s["step"] for s in document["steps"]] == ["privatize(tmp)", "parallel(i)"]
    assert document["verification"]["ok"] is True
    assert "for i in range(M):  # parallel" in document["source"]


def test_cli_output_never_replaces_a_users_file(kernel: Path, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["transform", str(kernel), "--apply", "parallel(j)", "-o", str(kernel)]) == 2
    assert "is the input file" in capsys.readouterr().err
    mine = tmp_path / "mine.py"
    mine.write_text("print('mine')\n")
    assert main(["transform", str(kernel), "--apply", "privatize(tmp); parallel(j)",
                 "-o", str(mine)]) == 2
    assert mine.read_text() == "print('mine')\n"
    out = tmp_path / "out.py"
    for _ in range(2):  # a file loclab wrote may be written again
        assert main(["transform", str(kernel), "--apply", "privatize(tmp); parallel(j)",
                     "-o", str(out)]) == 0
    assert out.read_text().startswith("# loclab transform:")


def test_the_readme_transform_commands_run(capsys: pytest.CaptureFixture[str],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    readme = (Path(__file__).parent.parent / "README.md").read_text()
    section = readme.split("## Thinking like a compiler, then acting")[1].split("\n## ")[0]
    block = section.split("```sh\n")[1].split("```")[0].replace("\\\n", " ")
    commands = [shlex.split(line.split("  #")[0]) for line in block.splitlines() if line.strip()]
    monkeypatch.chdir(Path(__file__).parent.parent)
    codes = [main(command[1:]) for command in commands]
    assert codes == [0, 0, 0, 1]
    assert "interchange(i, j) is illegal: D1 S1->S1 RAW on A [<,>] would become [>,<]" in \
        capsys.readouterr().err


# Gram-Schmidt with more columns than rows: the columns of Q past the rank are rounding
# noise, which any reordering of the norm's sum changes completely
GRAM_SCHMIDT = (Path(__file__).parent / "data" / "kernels" / "gramschmidt.py").read_text()


def _reordered(norm_text: str) -> object:
    """The kernel with its norm summed backwards (a reordered reduction) and ``norm_text``
    written where its Q column is set."""
    source = GRAM_SCHMIDT.replace("for i in range(M):\n            nrm",
                                  "for i in range(M - 1, -1, -1):\n            nrm")
    namespace: dict = {}
    exec(source.replace("Q[i, k] = A[i, k] / R[k, k]", norm_text), namespace)
    return namespace["gramschmidt"]


def test_outputs_that_amplify_rounding_are_checked_within_the_originals_own_moves() -> None:
    from loclab.transform.inputs import make_inputs
    from loclab.transform.verify import compare_runs

    sizes = {"M": 12, "N": 16}
    program = transform(GRAM_SCHMIDT, "parallel(j@14)").program
    inputs = make_inputs(program, sizes)
    namespace: dict = {}
    exec(GRAM_SCHMIDT, namespace)
    original = namespace["gramschmidt"]
    reordered = compare_runs(original, _reordered("Q[i, k] = A[i, k] / R[k, k]"), program,
                             inputs, sizes, length=12)
    assert reordered.ok and "it amplifies rounding" in str(reordered)
    wrong = compare_runs(original, _reordered("Q[i, k] = A[i, k] / R[k, k] * (1 + 1e-9)"),
                         program, inputs, sizes, length=12)
    assert not wrong.ok and "Q (12 x 16): DIFFERS" in str(wrong)


# The Levinson-Durbin recursion on random coefficients: each step divides by a beta that
# shrinks, so the last coefficients lose about eight digits at N = 30 (the moves of the
# original on inputs a unit away reach 1e-7), far past the tolerance of a reordered sum
LEVINSON = """
def levinson(r, y, N):
    y[0] = -r[0]
    beta = 1.0
    alpha = -r[0]
    for k in range(1, N):
        beta = (1 - alpha * alpha) * beta
        total = 0.0
        for i in range(ORDER):
            total += r[k - i - 1] * y[i]
        alpha = -(r[k] + total) / beta
        y[k] = alpha * SCALE
"""


def test_a_recurrence_that_loses_eight_digits_is_checked_within_the_originals_own_moves(
) -> None:
    from loclab.transform.inputs import make_inputs
    from loclab.transform.verify import compare_runs

    def compiled(order: str, scale: str) -> object:
        namespace: dict = {}
        exec(LEVINSON.replace("ORDER", order).replace("SCALE", scale), namespace)
        return namespace["levinson"]

    sizes = {"N": 30}
    program = transform(LEVINSON.replace("ORDER", "k").replace("SCALE", "1"), []).program
    inputs = make_inputs(program, sizes)
    original = compiled("k", "1")
    reordered = compare_runs(original, compiled("k - 1, -1, -1", "1"), program, inputs, sizes,
                             length=30)
    assert reordered.ok and "it amplifies rounding" in str(reordered)
    wrong = compare_runs(original, compiled("k - 1, -1, -1", "(1 + 1e-6)"), program, inputs,
                         sizes, length=30)
    assert not wrong.ok and "y (30): DIFFERS" in str(wrong)


def test_a_loop_a_scratch_row_keeps_sequential_names_the_copy_back_remedy() -> None:
    doitgen = Path(__file__).parent / "data" / "kernels" / "doitgen.py"
    with pytest.raises(IllegalStep, match=r"privatize\(total, r\) first, where its last "
                                          "iteration writes all that any iteration writes"):
        transform(doitgen.read_text(), "parallel(r@3)")
    assert transform(doitgen.read_text(), "privatize(total, r); parallel(r)").steps[0].legal


CSR_ROWS = """
def csr(indptr, indices, data, x, y, N):
    for i in range(N):
        total = 0.0
        for k in range(indptr[i], indptr[i + 1]):
            total += data[k] * x[indices[k]]
        y[i] = total
"""


def test_a_sparse_row_loop_is_parallel_once_its_sum_is_privatized() -> None:
    """The row's loop runs between data-dependent bounds, kept as written as one block:
    its iterations keep their order inside the block's time (they once shared one, and the
    sum's own dependences looked broken: privatize(total) was refused)."""
    result = transform(CSR_ROWS, "privatize(total); parallel(i)")
    assert result.steps[1].reason == "i carries no dependence"
    rng = np.random.default_rng(3)
    indptr = np.concatenate([[0], np.cumsum(rng.integers(0, 5, 40))])
    indices = rng.integers(0, 40, int(indptr[-1]))
    data, x = rng.random(int(indptr[-1])), rng.random(40)
    namespace: dict = {}
    exec(CSR_ROWS, namespace)
    expected, actual = np.full(40, np.nan), np.full(40, np.nan)
    namespace["csr"](indptr, indices, data, x, expected, 40)
    result.compile()(indptr, indices, data, x, actual, 40)
    assert np.array_equal(expected, actual)
    with pytest.raises(IllegalStep, match=r"parallel\(i\) is illegal: i carries D1 S1->S1 WAW "
                                          "on total"):
        transform(CSR_ROWS, "parallel(i)")


TRIANGLE = '''
def upper(C, A, M, N):
    for i in range(M - 1):
        for k in range(N):
            for j in range(i + 1, M):
                C[i, j] += A[k, i] * A[k, j]
'''


def test_a_triangles_tiles_line_up_and_its_jammed_rows_need_no_guard_in_the_vector_loop():
    """``j`` starts at ``i + 1``: its tiles are counted from 0, so that every row of an ``i``
    tile meets the same ``j`` tiles (from ``i + 1`` they would be cut anew for each row, and
    isl folds the rows into the tile loop), and the copies of a jammed ``i`` each start the
    innermost ``j`` at their own row: codegen separates that range, so that no copy is
    guarded inside the loop that runs in vector lanes."""
    result = transform(TRIANGLE, "tile(i=8, k=4, j=16); unroll(i, 4, jam=True); "
                                 "unroll(k, 2, jam=True); parallel(ii)", emit="numba")
    code = body(result)
    assert "for j in range(max(jj, i + 4), min(M, jj + 16)):" in code
    lines = code.split("\n")
    for at, line in enumerate(lines):
        if line.strip().startswith("for j in"):
            depth = len(line) - len(line.lstrip())
            inside = [l for l in lines[at + 1:] if l.strip()]
            block = [l for l in inside[:next((n for n, l in enumerate(inside) if len(l) - len(
                l.lstrip()) <= depth), len(inside))]]
            assert not any(l.strip().startswith("if ") for l in block), "\n".join(block)
    for sizes in ({"M": 37, "N": 11}, {"M": 5, "N": 3}, {"M": 1, "N": 1}, {"M": 20, "N": 1}):
        assert result.verify(**sizes).ok, sizes
