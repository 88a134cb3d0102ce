"""The textbook corpus (``benchmarks/kernels/``, read by ``benchmarks/textbook.py``) at tiny
sizes, without Numba or ``optimize`` (a few seconds in all): each file keeps the contract
``scripts/corpus-bench --corpus textbook`` relies on, its peer (the vectorized version the
benchmark times loclab against) computes what its loops compute from the same arguments, and
loclab reads its kernel. A peer that computed something else would make the benchmark's
ratios meaningless; a kernel loclab cannot read would measure nothing."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import scipy.linalg

import loclab
from benchmarks import textbook

NAMES = textbook.names()


def test_the_corpus_has_at_least_twenty_kernels():
    assert len(NAMES) >= 20, NAMES


@pytest.mark.parametrize("name", NAMES)
def test_the_file_keeps_the_contract(name):
    kernel = textbook.load(name)
    assert kernel.function.__name__ == name and kernel.function.__doc__
    sizes = [p for p in kernel.parameters if p in kernel.sizes]
    assert set(kernel.sizes) == set(kernel.small) == set(sizes), "SIZES and SMALL: its sizes"
    assert all(isinstance(v, int) and v >= 1 for v in [*kernel.sizes.values(),
                                                        *kernel.small.values()])
    assert kernel.outputs and set(kernel.outputs) <= set(kernel.parameters) - set(sizes)
    assert kernel.peer.__doc__ and (kernel.inputs is None or kernel.inputs.__doc__)


@pytest.mark.parametrize("name", NAMES)
def test_the_peer_computes_what_the_loops_compute(name):
    kernel = textbook.load(name)
    given = textbook.arguments(kernel, kernel.small)
    looped, vectorized = copy.deepcopy(given), copy.deepcopy(given)
    kernel.function(**looped)
    kernel.peer(np, scipy.linalg, **vectorized)()
    for output in kernel.outputs:
        assert np.isfinite(looped[output]).any(), f"{output}: nothing computed"
        np.testing.assert_allclose(vectorized[output], looped[output], rtol=1e-7, atol=1e-9,
                                   equal_nan=True, err_msg=f"{name}: {output}")


@pytest.mark.parametrize("name", NAMES)
def test_loclab_reads_the_kernel(name):
    kernel = textbook.load(name)
    analysis = loclab.analyze(kernel.path.read_text(), name, filename=str(kernel.path))
    assert analysis.to_json()["loops"]
