"""Numba glue for CPU variants: what numba lacks and several cases need (atomics, tile
rules)."""
