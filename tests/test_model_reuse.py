"""``loclab.model.reuse``: the slides' formulas, the loop nests they are simulated on, and
the report and tile choice built from them."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from loclab.errors import UsageError
from loclab.model.reuse import best_tile, formula_reuse, mmm_accesses, mmm_source, reuse_report
from loclab.model.trace import trace_nest
from loclab.nest import load_source


def test_formulas_are_the_slides() -> None:
    n = 1024
    assert formula_reuse("infinite", n, 1) == 2 * n**3 / (4 * n**2)
    assert formula_reuse("naive", n, 1) == 2 * n**3 / (2 * n**2 + n**3)
    assert formula_reuse("blocked", n, 32) == 2 * n**3 / (2 * n**3 / 32 + n**2)
    assert 1 < formula_reuse("naive", n, 1) < 2 < formula_reuse("blocked", n, 32) < 32


@pytest.mark.parametrize("variant, tile, register", [("naive", 4, 1), ("blocked", 4, 1),
                                                     ("register", 4, 2), ("register", 8, 4)])
def test_the_nests_multiply_matrices(variant: str, tile: int, register: int) -> None:
    """Each source, run as Python on flat arrays (a corner of leading dimension 10), computes
    A @ B; its trace has the length the report assumes."""
    m, ld = 8, 10
    rng = np.random.default_rng(0)
    a, b = rng.random(ld * ld), rng.random(ld * ld)
    c = np.zeros(ld * ld)
    namespace: dict[str, Any] = {}
    exec(compile(mmm_source(variant, tile, register), "<mmm>", "exec"), namespace)  # noqa: S102
    namespace[f"mmm_{variant}"](a, b, c, m, ld)
    want = a.reshape(ld, ld)[:m, :m] @ b.reshape(ld, ld)[:m, :m]
    np.testing.assert_allclose(c.reshape(ld, ld)[:m, :m], want)
    trace = trace_nest(load_source(mmm_source(variant, tile, register))[0], {"N": m, "L": ld})
    assert len(trace) == mmm_accesses(variant, m, tile, register)


def test_report_simulates_and_orders_the_variants() -> None:
    report = reuse_report(n=48, cache_bytes=1024, elem_bytes=4, ways=2, tile=8, register=4)
    naive, blocked, register = report.variants
    assert report.simulated_n == 48 and report.notes == []
    assert naive.simulated_reuse < blocked.simulated_reuse
    assert register.register_reuse == pytest.approx(2 * 48**3 / (2 * 48**3 / 4 + 2 * 48**3 / 8))
    assert naive.register_reuse < 1.01
    data = report.to_json()
    assert [v["variant"] for v in data["variants"]] == ["naive", "blocked", "register"]
    assert all(len(line) <= 80 for line in report.lines())


def test_large_n_is_simulated_on_a_corner() -> None:
    report = reuse_report(n=512, cache_bytes=1024, tile=8, register=4, max_accesses=300_000)
    assert report.simulated_n < 512 and report.simulated_n % 8 == 0
    assert "corner" in report.notes[0] and "leading dimension 512" in report.notes[0]
    assert report.variants[0].formula_reuse == formula_reuse("naive", 512, 8)


def test_best_tile_shows_set_conflicts() -> None:
    """A power-of-two leading dimension (rows a multiple of the set stride apart) puts a
    tile's rows in few sets: the reasons say so, and the choice is the best simulated."""
    choice = best_tile(256, 2048, elem_bytes=4, line_bytes=64, ways=2,
                       max_accesses=200_000)
    assert choice.rule_tile == 13
    assert choice.candidates[choice.tile] == max(choice.candidates.values())
    text = " ".join(choice.reasons)
    assert "rule 3 T^2 x 4 B <= 2 KiB gives T = 13" in text
    assert "(a multiple of the 1024 B set stride)" in text
    assert all(len(line) <= 80 for line in choice.lines())


def test_errors() -> None:
    with pytest.raises(UsageError, match=r"unknown kernel 'fft' \(known: mmm\)"):
        reuse_report("fft")
    with pytest.raises(UsageError, match="tile 6 is not a multiple of the register tile 4"):
        reuse_report(n=16, cache_bytes=1024, tile=6)
