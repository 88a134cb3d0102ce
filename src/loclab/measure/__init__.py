"""The measuring layer: what ``loclab run``, ``loclab tune`` and ``loclab optimize`` share to
time, check and search, knowing nothing of case studies or loop nests.

``timing`` (repeated runs to a budget, the CPU's and the GPU's clocks), ``stats`` (median and
spread), ``validate`` (poisoned outputs, comparison against golden), ``clock`` (the CPU's real
clock), ``attempt`` (what one build-check-time gave), ``space`` (a tunable variant's
parameters, numbered and with neighbours), ``search`` (strategies under a budget, every
configuration validated before it is timed), ``cache`` (the best configuration per device,
name and size). Importing this package imports none of them.
"""

# The search strategies (``search.STRATEGIES``), named here, where importing costs nothing, for
# the command line's choices.
STRATEGY_NAMES = ("exhaustive", "random", "local")
