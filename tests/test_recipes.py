"""The lectures' recipes (examples/recipes.py): every step legal for the reason the slides
give, and the result verified by execution, in Python and in Numba."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from loclab.transform import transform_file

EXAMPLES = Path(__file__).parent.parent / "examples"
sys.path.insert(0, str(EXAMPLES))
import recipes  # noqa: E402  (the examples folder is not a package)

sys.path.remove(str(EXAMPLES))

FILE = EXAMPLES / "recipes.py"


@pytest.mark.parametrize("emit", ["python", "numba"])
@pytest.mark.parametrize("function, recipe, what", recipes.RECIPES,
                         ids=[f"{f}-{r}" for f, r, _ in recipes.RECIPES])
def test_every_recipe_is_legal_and_verified(function: str, recipe: str, what: str,
                                            emit: str) -> None:
    result = transform_file(FILE, function, recipe, emit=emit)
    assert [s.step for s in result.steps] == [s.strip() for s in recipe.split(";")]
    assert all(s.legal for s in result.steps)
    check = result.verify()
    assert check.ok, str(check)


def step(function: str, recipe: str, index: int = -1) -> str:
    return transform_file(FILE, function, recipe).steps[index].reason


def test_the_verdicts_are_the_slides() -> None:
    assert step("transpose", "tile(i=32, j=32)") == (
        "tiles of 32 x 32: every dependence keeps its source first with the tile loops "
        "(ii, jj) outside")
    assert step("array_expansion", "distribute(i)") == (
        "2 loops (line 53, line 55 | line 54), every dependence forward; expanded tmp")
    assert step("histogram", "privatize(ind); privatize(val); parallel(i)") == (
        "i carries only reductions (atomic updates + on hist)")
    assert step("eliminating_war", "copy(A, i)") == (
        "every read of A inside i sees the value from before the loop: it reads A_copy")
    assert step("putting_everything_together", "privatize(x); privatize(A); parallel(i)") \
        == "i carries no dependence"


def test_the_register_tiled_product_keeps_its_block_in_scalars() -> None:
    recipe = next(r for f, r, _ in recipes.RECIPES if f == "mmm" and "unroll" in r)
    source = transform_file(FILE, "mmm", recipe).source
    assert "c_3_3 += A[i + 3, k] * B[k, j + 3]" in source
    assert "C[i + 3, j + 3] = c_3_3" in source
