"""The configurations of a tuning space that its restriction accepts, for tests that build
every one (or a sample) of them."""

from loclab.measure.space import every


def allowed(space, machine, dims=None):
    """Every configuration of ``space``, in the tuner's order, that its restriction accepts at
    ``dims`` (no size: the restrictions that depend on the machine only)."""
    return [config for config in every(space)
            if space.restriction(config, dims or {}, machine) is None]
