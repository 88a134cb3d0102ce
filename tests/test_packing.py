"""Packing (``loclab.optimize.packing``): a read down a column in a tiled band's innermost
loop, staged tile by tile into a transposed buffer (``stage(A, jj, transpose=True,
using=j)``): where the planner offers it, where not, and that whatever it offers computes
what the original does."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from loclab.errors import UsageError
from loclab.optimize import plan
from loclab.optimize.build import choose, plan_steps
from tests.nestgen import contraction_nests

KERNELS = Path(__file__).parent / "data" / "kernels"


def _plans(source: str, function: str, **params: int) -> list:
    return plan(source, function, params=params, threads=2).plans


def test_syrk_packs_the_column_it_reads_in_the_l2_sized_tile_jammed_in_k_alone() -> None:
    """syrk's ``A[j, k]`` runs down a column as ``j`` advances: packed at ``jj``; ``A[i, k]``
    stays on ``A``; the tile from the L2; the register tile jams ``k`` alone: the unpacked
    plan also jams ``i``, which bounds the innermost ``j`` (codegen separates ``j``'s range
    per copy of ``i``), but beside packed panels that gains nothing and compiles far
    longer."""
    found = plan((KERNELS / "syrk.py").read_text(), "syrk", params={"M": 1000, "N": 1200},
                 threads=2)
    held, packed, *_ = (p for p in found.plans[0] if p.packs)
    # first the packed plan with its block held in lanes (``optimize.lanes``): the rows of
    # the triangle jammed, ``hold`` after the ``stage`` it reads through
    held_steps = [str(s) for s in plan_steps(found.code, [], held, {})]
    assert held_steps.index("hold(k@8)") > held_steps.index(
        "stage(A, jj@7, transpose=True, using=j@8)")
    assert any(s.startswith("unroll(i@8, ") for s in held_steps)
    assert [(pack.array, pack.loop.var) for pack in packed.packs] == [("A", "j")]
    assert packed.band.choice.cache == "L2"
    assert "packing: A[j, k] strided in the innermost loop j" in packed.packs[0].reason
    steps = [str(s) for s in plan_steps(found.code, [], packed, {})]
    assert "stage(A, jj@7, transpose=True, using=j@8)" in steps
    assert [s for s in steps if s.startswith("unroll")] == ["unroll(k@8, 4, jam=True)"]
    # after it the unpacked plan, held in lanes first
    unpacked = found.plans[0].index(packed) + 2
    unpacked_steps = [str(s) for s in plan_steps(found.code, [], found.plans[0][unpacked], {})]
    assert [s for s in unpacked_steps if s.startswith("unroll")] == [
        "unroll(i@8, 4, jam=True)", "unroll(k@8, 4, jam=True)"]
    assert found.plans[0][unpacked].packs == () and found.plans[0][unpacked].band is not None
    chosen, result = choose(found.code, [[packed]], {packed.band.key: 8})
    for sizes in ({"M": 19, "N": 23}, {"M": 4, "N": 9}, {"M": 1, "N": 1}):
        assert result.verify(**sizes).ok, sizes


def test_unit_stride_reads_and_reads_without_reuse_are_not_packed() -> None:
    """gemm in its best order (i, k, j) reads ``B[k, j]`` unit-stride in ``j``: nothing to
    pack. Its order as written (i, j, k) would read ``B[k, j]`` down a column, but ``k`` sums
    into ``C[i, j]``, a chain of adds no vector runs: that order is not planned beside the
    best one (``planner._distributed_orders``), packed or not. A transposition's ``A[j, i]``
    is strided but each element is read once: a copy would cost what it saves."""
    (gemm,) = _plans((KERNELS / "gemm.py").read_text(), "gemm", NI=200, NJ=220, NK=240)
    assert gemm[0].band is not None and not gemm[0].packs
    assert [v.var for v in gemm[0].band.loops] == ["i", "k", "j"]
    assert not any(p.band is not None and [v.var for v in p.band.loops] == ["i", "j", "k"]
                   for p in gemm)
    assert not any(p.packs for p in gemm)
    transposition = ("def f(A, B, N):\n    for i in range(N):\n        for j in range(N):\n"
                     "            B[i, j] = A[j, i]\n")
    assert not any(p.packs for ps in _plans(transposition, "f", N=500) for p in ps)


def test_an_array_written_in_the_nest_is_not_packed() -> None:
    """syrk with its scaling loop scaling ``A``'s row as well: the nest still distributes
    and tiles, but a copy of ``A`` could go stale, so nothing is packed."""
    syrk = (KERNELS / "syrk.py").read_text()
    written = syrk.replace("C[i, j] *= beta", "C[i, j] *= beta\n            A[i, j] *= 1.5")
    assert written != syrk
    (plans,) = _plans(written, "syrk", M=300, N=400)
    assert any(p.band is not None for p in plans) and not any(p.packs for p in plans)


@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          phases=(Phase.explicit, Phase.generate), suppress_health_check=list(HealthCheck))
@given(st.data())
def test_drawn_contractions_packed_or_not_compute_what_the_original_does(data) -> None:
    """The first plan the planner offers with packs, and the first whose parallel tile loop
    leads the others (an outer loop that carries a dependence), applied at small tiles (so
    that the sizes cut tiles in the middle) and emitted for Numba, agree with the
    original."""
    source = data.draw(contraction_nests())
    try:
        found = plan(source, "f", params={"N": 40}, threads=2)
    except UsageError:
        return
    for nest, plans in enumerate(found.plans):
        led = [p for p in plans if p.band is not None and p.band.lead is not None]
        for packed in [p for p in plans if p.packs][:1] + led[:1]:
            others = [ps[-1:] for ps in found.plans]
            others[nest] = [packed]
            try:
                _, result = choose(found.code, others, {packed.band.key: 4})
            except UsageError:
                continue
            for sizes in ({"N": 11}, {"N": 2}):
                verdict = result.verify(**sizes)
                assert verdict.ok, f"{source}\n{result.source}\n{verdict}"
