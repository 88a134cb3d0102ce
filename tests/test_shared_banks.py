"""The warp model of shared-memory bank conflicts that chooses a staged tile's padding."""

import ast

import pytest

from loclab.transform.shared_banks import ThreadLoop, best_padding, passes


def subscripts(text: str) -> list[ast.expr]:
    node = ast.parse(text, mode="eval").body
    return list(node.elts) if isinstance(node, ast.Tuple) else [node]


# a 32 x 8 block: x along i, y along j
TRANSPOSITION = [ThreadLoop("i", 0, 1), ThreadLoop("j", 1, 1)]


@pytest.mark.parametrize("pad, expected", [(0, 32), (1, 1)])
def test_a_warp_reading_a_column_of_a_32_wide_tile_hits_one_bank_unless_padded(pad, expected):
    read = subscripts("i - lo0, j - lo1")  # thread x walks down the rows
    assert passes(read, [32, 32], pad, 4, TRANSPOSITION, [32, 8, 1]) == expected
    assert best_padding([read], [32, 32], 4, TRANSPOSITION, [32, 8, 1]) == 1


def test_a_warp_reading_along_a_row_needs_no_padding():
    read = subscripts("j - lo1, i - lo0")
    assert passes(read, [32, 32], 0, 4, TRANSPOSITION, [32, 8, 1]) == 1
    assert best_padding([read], [32, 32], 4, TRANSPOSITION, [32, 8, 1]) == 0


def test_a_register_tile_reading_rows_its_threads_step_over_is_padded():
    """16 x 16 threads, each a 4 x 4 block: a warp's two rows of threads read rows 4 apart
    of a 16-wide tile, 64 words apart: one bank twice, unless rows are 17 wide."""
    loops = [ThreadLoop("jt", 0, 4), ThreadLoop("it", 1, 4)]
    read = subscripts("it + 1 - lo0, k - lo1")
    assert passes(read, [64, 16], 0, 4, loops, [16, 16, 1]) == 2
    assert passes(read, [64, 16], 1, 4, loops, [16, 16, 1]) == 1


def test_eight_byte_elements_count_the_words_they_cover():
    loops = [ThreadLoop("i", 0, 1)]
    read = subscripts("0, i")  # 32 doubles in a row: 64 words, each bank twice
    assert passes(read, [2, 32], 0, 8, loops, [32, 1, 1]) == 2


def test_a_subscript_the_model_cannot_evaluate_gives_no_opinion():
    read = subscripts("f(i), j")
    assert passes(read, [32, 32], 0, 4, TRANSPOSITION, [32, 8, 1]) is None
    assert best_padding([read], [32, 32], 4, TRANSPOSITION, [32, 8, 1]) is None
