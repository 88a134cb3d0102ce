"""Check tools run as ``python -m``: every kernel compiled by nvcc (``nvcc_check``, in CI) and
the access models held against Nsight Compute's counters (``ncu_check``, on a GPU machine).
They read the cases and the harness, so they live above them, not in the GPU glue."""
