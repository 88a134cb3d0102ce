"""Autotuning: search a variant's parameter space, keep the fastest valid configuration.

``space`` numbers configurations and finds neighbours, ``search`` evaluates them (restriction
check, build, validation, timing: the same steps as ``loclab run``) under a strategy and a
budget, ``cache`` stores the best per device and size for ``loclab run``, ``session`` is
``loclab tune`` (every tunable variant and size of a case) and ``console`` its table.
Importing this package imports none of them.
"""

# The search strategies (``search.STRATEGIES``), named here for the command line's choices.
STRATEGY_NAMES = ("exhaustive", "random", "local")
