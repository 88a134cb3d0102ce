"""One run of a case's variant, checked against golden as the generic tests check every variant
at every test size (tests/test_cases.py on the CPU, tests/test_gpu.py on a GPU), for the case
tests that check more: on their own inputs, with setup keywords, run after run."""

import numpy as np

from loclab.bench.backend import CpuBackend, GpuBackend, Staging, output_problem
from loclab.measure.validate import compare, poison


def read_only(inputs):
    """``inputs`` as a run stages them on the CPU: read-only views (a variant that wrote an
    input would fail, rather than change what golden is computed from)."""
    backend = CpuBackend()
    return {name: backend.stage(array) for name, array in inputs.items()}


def run_variant(case, variant, dims, machine, seed=0, inputs=None):
    """Run the CPU ``variant`` of ``case`` once at ``dims`` into a poisoned output, on its
    inputs staged read-only as a run stages them (a sort in place of its input fails): the
    Check of ``compare`` against golden (the output must be an array of its own). The inputs
    are drawn with ``seed`` unless given."""
    if inputs is None:
        inputs = case.make_inputs(dims, np.random.default_rng(seed))
    staged = read_only(inputs)
    shape, dtype = case.output(dims)
    out = np.empty(shape, dtype)
    poison(out)
    result = variant.setup(staged, out, machine).run()
    assert output_problem(result, staged) is None
    return compare(result, case.golden(inputs), case.tolerance_for(inputs))


def run_on_gpu(case, variant, dims, machine, seed=0, inputs=None, runs=1, **config):
    """Run the GPU ``variant`` of ``case`` at ``dims`` into a poisoned output, ``runs`` times
    (poisoned again before each further run: what a run leaves must not make the next pass):
    (the Check of ``compare`` against golden of the last run, or of the first that failed;
    the Bound). The inputs are drawn with ``seed`` unless given; ``config`` goes to the
    variant's setup."""
    backend = GpuBackend()
    if inputs is None:
        inputs = case.make_inputs(dims, np.random.default_rng(seed))
    staging = Staging(backend, inputs)
    staged = staging.inputs_for(variant)  # in device memory, or in host memory (placement)
    shape, dtype = case.output(dims)
    out = staging.output_for(variant, shape, dtype)
    poison(out)
    bound = variant.setup(staged, out, machine, **config)
    for again in range(runs):
        if again:
            poison(out)
        result = bound.run()
        backend.synchronize()
        assert output_problem(result, staged) is None
        check = compare(backend.to_host(result), case.golden(inputs), case.tolerance_for(inputs))
        if not check.valid:
            break
    return check, bound
