"""The errors loclab shows to users: one line each, never a traceback.

The command line prints ``str(error)`` and exits with ``error.exit_code``: 2 for bad input
(the user can fix the command), 1 for a failure while running.
"""

from __future__ import annotations


class LoclabError(Exception):
    """Base class: a problem to report in one line."""

    exit_code = 1


class UsageError(LoclabError):
    """Bad input: an unknown case, device or size, an impossible option value."""

    exit_code = 2


class GpuUnavailableError(UsageError):
    """The GPU was asked for, but CuPy or a CUDA device is missing."""


class LaunchError(LoclabError):
    """A CUDA kernel failed to launch or to compile; the message names kernel and shape."""
