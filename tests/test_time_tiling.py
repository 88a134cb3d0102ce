"""Time tiling: ``fuse`` and ``skew`` judged by brute force, and the planner's time-tiled plan
(``loclab.optimize.timetile``): the shifts and skew it finds for the kernels it was made
for, its recipe on drawn stencils accepted and computing what the original does, shifts and
skews one short of it refused with a dependence the oracle finds reversed."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loclab.errors import UsageError
from loclab.optimize import plan
from loclab.optimize.build import choose
from loclab.optimize.planner import label
from loclab.optimize.timetile import TimeTiling, time_tiling
from loclab.transform import transform
from loclab.transform.steps import IllegalStep
from tests.nestgen import stencil_nests
from tests.test_transform_oracle import SIZES, check
from tests.transform_replay import judge

KERNELS = Path(__file__).parent / "data" / "kernels"
JACOBI_1D = """def f(A, B, M, N):
    for t in range(M):
        for i in range(1, N - 1):
            B[i] = (A[i - 1] + A[i] + A[i + 1]) / 3.0
        for i in range(1, N - 1):
            A[i] = B[i]
"""


def _tiling(source: str, function: str = "f", **sizes: int) -> TimeTiling | None:
    found = plan(source, function, params=sizes, threads=2)
    return time_tiling(found.context, found.plans[0][0].top)


def _recipe(tiling: TimeTiling, tile: int = 2, shifts: tuple[int, ...] | None = None,
            factor: int | None = None) -> str:
    first, top = label(tiling.nests[0]), label(tiling.time)
    steps = [f"fuse({first}, {label(nest)}, {shift})" for nest, shift
             in zip(tiling.nests[1:], (shifts or tiling.shifts)[1:])]
    steps += [f"skew({first}, {top}, {tiling.factor if factor is None else factor})",
              f"tile({top}={tile}, {first}={tile})"]
    tt, ii = (f"{loop.var * 2}@{loop.line}" for loop in (tiling.time, tiling.nests[0]))
    steps += [f"skew({ii}, {tt})", f"interchange({tt}, {ii})", f"parallel({tt})"]
    return "; ".join(steps)


@pytest.mark.parametrize("kernel, function, shifts, factor", [
    ("jacobi_1d", "jacobi_1d", (0, 8), 9), ("jacobi_2d", "jacobi_2d", (0, 1), 2),
    ("heat_3d", "heat_3d", (0, 1), 2), ("seidel_2d", "seidel_2d", (0,), 1)])
def test_the_stencils_get_the_shifts_and_skews_pluto_gives_them(kernel, function, shifts,
                                                                factor) -> None:
    """Jacobi's and heat's second sweep reads the first's rows ``i - 1 .. i + 1``: one row
    behind; a step reads the previous step's rows up to two ahead: skewed by 2. Seidel's one
    sweep reads the previous step's row ``i + 1``: skewed by 1. Jacobi-1d's sweeps are the
    innermost loop: 8 behind, so that the fused loop still vectorizes, and skewed by 9."""
    source = (KERNELS / f"{kernel}.py").read_text()
    tiling = _tiling(source, function)
    assert tiling is not None
    assert (tiling.shifts, tiling.factor) == (shifts, factor)


def test_planes_too_large_for_any_tile_get_no_time_tiling_and_a_note(
        l2_of_2_mib: None) -> None:
    """heat-3d at 500 x 120^3: a tile of 8 steps over 8 planes touches 5 MiB, past half the
    L2: the sweeps stay, and the note gives the number."""
    found = plan((KERNELS / "heat_3d.py").read_text(), "heat_3d",
                 params={"N": 120, "TSTEPS": 500}, threads=2)
    assert all(p.level != "time-tiled" for p in found.plans[0])
    (note,) = found.notes
    assert note.startswith("time tiling of t@3 not tried: a tile of 8 steps over 8 rows "
                           "touches 5.") and note.endswith("past half the 2 MiB L2")


def test_short_rows_get_tiles_far_longer_than_they_are_deep() -> None:
    """heat-1d's rows are one element: the tile's rows are many times its steps (a wave of
    8 x 8 tiles would be too little work to share), as many as fit half the L2, and the
    wavefront's skew is that ratio; the tiles of a wave still give each thread one."""
    found = plan(JACOBI_1D, "f", params={"N": 1_000_000, "M": 1200}, threads=16)
    tiled = found.plans[0][0]
    assert tiled.level == "time-tiled"
    tile, ratio = tiled.band.choice.tile, tiled.band.ratios[1]
    assert 1200 // tile >= 16 and ratio >= 16
    assert tiled.band.choice.footprint_bytes <= found.context.l2_bytes // 2
    steps = [str(s) for s in choose(found.code, [[tiled]])[0][0].steps]
    assert f"tile(t@2={tile}, i@3={tile * ratio})" in steps
    assert f"skew(ii@3, tt@2, {ratio})" in steps
    result = choose(found.code, [[tiled]], {tiled.band.key: 2})[1]
    for sizes in ({"M": 9, "N": 70}, {"M": 3, "N": 5}):
        assert result.verify(**sizes).ok, sizes


def test_a_nest_before_the_time_loop_changes_nothing_inside_it() -> None:
    """Jacobi with its arrays filled by a nest first: that nest's dependences on the sweeps
    are no step's business."""
    filled = JACOBI_1D.replace("    for t", "    for i in range(N):\n        A[i] = B[i]\n"
                                            "    for t")
    found = plan(filled, "f", threads=2)
    tiling = time_tiling(found.context, found.plans[1][0].top)
    assert tiling is not None and (tiling.shifts, tiling.factor) == ((0, 8), 9)


def test_time_loops_it_cannot_straighten_get_no_tiling() -> None:
    """fdtd-2d's first nest runs over columns, the others over rows: no shift lines them up.
    A scalar summed across steps reaches every instance; a statement between the sweeps is
    not a sweep; nor is a loop whose rows move with the outer loop."""
    assert _tiling((KERNELS / "fdtd_2d.py").read_text(), "fdtd_2d") is None
    summed = JACOBI_1D.replace("    for t", "    s = 0.0\n    for t").replace(
        "            A[i] = B[i]", "            A[i] = B[i]\n            s += B[i]")
    assert _tiling(summed + "    return s\n") is None
    between = JACOBI_1D.replace("        for i in range(1, N - 1):\n            A",
                                "        A[0] = B[1]\n        for i in range(1, N - 1):\n"
                                "            A")
    assert _tiling(between) is None
    moving = JACOBI_1D.replace("for i in range(1, N - 1):\n            A",
                               "for i in range(t, N - 1):\n            A")
    assert moving != JACOBI_1D and _tiling(moving) is None  # LU's shrinking rows: no sweep


def test_jacobi_time_tiled_computes_what_the_original_does() -> None:
    """The recipe, its tiles cutting the sizes in the middle, replayed by the oracle; and
    with the sweep one row less behind, refused (the copy-back would overwrite a row the
    sweep still reads)."""
    tiling = _tiling(JACOBI_1D)
    result = transform(JACOBI_1D, _recipe(tiling, 3))
    for sizes in ({"M": 7, "N": 11}, {"M": 2, "N": 4}, {"M": 9, "N": 5}):
        verdict = judge(JACOBI_1D, result.program, sizes)
        assert verdict, verdict.problems
    with pytest.raises(IllegalStep, match="WAR on A"):
        transform(JACOBI_1D, _recipe(tiling, 3, shifts=(0, 0)))
    with pytest.raises(IllegalStep, match="RAW on A"):
        transform(JACOBI_1D, _recipe(tiling, 3, factor=8))


@settings(max_examples=20, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(st.data())
def test_drawn_stencils_time_tiled_compute_what_the_original_does(data) -> None:
    """On drawn time loops of sweeps: where the planner finds shifts and a skew, its recipe
    is accepted and replays to the original's value flow; the same with one shift or the
    skew one short is accepted only where the oracle agrees, refused only with a dependence
    it finds reversed."""
    source = data.draw(stencil_nests())
    tiling = _tiling(source)
    if tiling is None:
        return
    tile = data.draw(st.integers(1, 3))
    result = transform(source, _recipe(tiling, tile))
    for sizes in SIZES:
        verdict = judge(source, result.program, sizes)
        assert verdict, (source, verdict.problems)
    shifted = [k for k, shift in enumerate(tiling.shifts) if shift]
    short = data.draw(st.sampled_from([None] * bool(tiling.factor) + shifted)) \
        if tiling.factor or shifted else "none"
    if short is None:
        check(source, _recipe(tiling, tile, factor=tiling.factor - 1))
    elif short != "none":
        shifts = list(tiling.shifts)
        shifts[short] -= 1
        check(source, _recipe(tiling, tile, shifts=tuple(shifts)))


def test_fuse_and_skew_refuse_what_they_cannot_do() -> None:
    """fuse takes two adjacent loops over variables, skew a loop by one around it; the other
    steps refuse the loops they make, naming them."""
    with pytest.raises(UsageError, match="must come right after"):
        transform(JACOBI_1D, "fuse(i@5, t@2)")
    with pytest.raises(UsageError, match="is not around"):
        transform(JACOBI_1D, "skew(t, i@3)")
    with pytest.raises(UsageError, match="fused or skewed"):
        transform(JACOBI_1D, "fuse(i@3, i@5, 1); unroll(i@3, 2)")
    with pytest.raises(UsageError, match="skewed by"):
        transform(JACOBI_1D, "skew(i@3, t); distribute(t)")
    with pytest.raises(UsageError, match="before tiling"):
        transform(JACOBI_1D, "stripmine(i@3, 4); fuse(i@3, i@5)")


@pytest.fixture
def l2_of_2_mib(monkeypatch: pytest.MonkeyPatch) -> None:
    """The 16-core host's L2 a core, whatever this machine's: the plans depend on it."""
    import loclab.hw

    detect = loclab.hw.detect_cpu
    monkeypatch.setattr(loclab.hw, "detect_cpu",
                        lambda: replace(detect(), l2_bytes=2 * 1024 * 1024))


def test_optimize_time_tiles_a_stencil_past_the_l2_and_sweeps_one_within_it(
        l2_of_2_mib: None) -> None:
    """jacobi-2d at 2,000 x 2,000 (64 MB: past any L2) gets the time-tiled plan first, its
    steps proved and explained; at 30 x 30 its arrays fit the L2 and it gets none. The
    plan, at a tile that cuts the sizes, computes what the original does; at the small
    sizes a note says why no time tiling was tried."""
    source = (KERNELS / "jacobi_2d.py").read_text()
    found = plan(source, "jacobi_2d", params={"N": 2000, "TSTEPS": 500}, threads=2)
    tiled = found.plans[0][0]
    assert tiled.level == "time-tiled"
    assert [str(d.step) for d in tiled.before] == ["fuse(i@4, i@8, 1)", "skew(i@4, t@3, 2)"]
    assert "1 row behind" in tiled.before[0].reason
    chosen, result = choose(found.code, [[tiled]], {tiled.band.key: 8})
    ratio = tiled.band.ratios[1]
    assert [str(s) for s in chosen[0].steps][2:] == [
        f"tile(t@3=8, i@4={8 * ratio})", f"skew(ii@4, tt@3, {ratio})",
        "interchange(tt@3, ii@4)", "parallel(tt@3)"]
    for sizes in ({"TSTEPS": 11, "N": 19}, {"TSTEPS": 3, "N": 30}):
        assert result.verify(**sizes).ok, sizes
    small = plan(source, "jacobi_2d", params={"N": 30, "TSTEPS": 10}, threads=2)
    assert all(p.level != "time-tiled" for p in small.plans[0])
    assert small.notes == ("time tiling of t@3 not tried: its steps sweep 12.2 KiB, within "
                           "the 2 MiB L2",)
    assert found.notes == ()


def test_a_colour_loop_between_the_steps_and_the_rows_is_too_short_to_tile(
        l2_of_2_mib: None) -> None:
    """Red-black sweeps: the loop inside the steps is the colour's, 2 iterations; the note
    says that, not the footprint of a tile those 2 iterations cannot fill."""
    source = ("def redblack(u, f, N, T):\n    for t in range(T):\n"
              "        for color in range(2):\n            for i in range(1, N - 1):\n"
              "                for j in range(1 + (i + color) % 2, N - 1, 2):\n"
              "                    u[i, j] = 0.25 * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1]"
              " + u[i, j + 1] - f[i, j])\n")
    found = plan(source, "redblack", params={"N": 1024, "T": 20}, threads=2)
    assert all(p.level != "time-tiled" for p in found.plans[0])
    assert ("time tiling of t@2 not tried: the loop it would tile with, color@3, runs 2 "
            "iterations a step, fewer than the smallest tile's 8") in found.notes
