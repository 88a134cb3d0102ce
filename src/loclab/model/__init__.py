"""Predictions from a kernel's own description, to put beside what was measured: occupancy
from a compiled kernel's resources, sectors and bank conflicts from an access expression,
cache misses and data reuse from a loop nest's access trace, and a time from the traffic and
the work. One module per model; each imports only what it needs (no CuPy, no numba at import)."""
