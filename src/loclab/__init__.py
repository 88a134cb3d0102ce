"""loclab: reason about and measure locality of reference on multi-core CPUs and GPUs.

The API mirrors the command line: ``loclab.run(...)`` returns the document that
``loclab run --json`` writes; ``loclab.devices()`` what ``loclab devices --json`` prints;
``loclab.tune(case, ...)`` what ``loclab tune --json`` writes (storing the best configurations
in the tuning cache); ``loclab.analyze(func_or_source)`` the dependence analysis
``loclab analyze`` explains; ``loclab.compare(base, new)`` what ``loclab compare --json`` writes;
``loclab.transform(func_or_source, "tile(i=32, j=32)")`` what ``loclab transform`` prints.
Heavy modules (numba, CuPy, matplotlib) load only when used; llvmlite's binding loads at
import, to give Numba the CPU's widest vectors before it compiles (``loclab.cpu.vector_width``).
"""

from __future__ import annotations

from typing import Any

from loclab.cpu.vector_width import widen
from loclab.version import __version__

widen()  # before any module of loclab's builds Numba's CPU target: see loclab.cpu.vector_width


def run(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """Run case studies; see :func:`loclab.bench.runner.run`."""
    from loclab.bench.runner import run as _run

    return _run(*args, **kwargs)


def tune(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """Autotune a case's variants; see :func:`loclab.bench.tune.tune`."""
    from loclab.bench.tune import tune as _tune

    return _tune(*args, **kwargs)


def devices(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """Detect the machine and measure copy bandwidth; see :func:`loclab.bench.devices.devices`."""
    from loclab.bench.devices import devices as _devices

    return _devices(*args, **kwargs)


def compare(base: Any, new: Any, **kwargs: Any) -> dict[str, Any]:
    """Compare two runs (results documents, or paths of results files); see
    :func:`loclab.bench.compare.compare`."""
    from pathlib import Path

    from loclab.bench.compare import compare as _compare
    from loclab.bench.results import check_results, load_json

    def document(run: Any, name: str) -> dict[str, Any]:
        return (load_json(Path(run)) if isinstance(run, (str, Path))
                else check_results(run, f"the {name} document"))

    return _compare(document(base, "BASE"), document(new, "NEW"), **kwargs)


def analyze(*args: Any, **kwargs: Any) -> Any:
    """Dependence analysis of one loop nest; see :func:`loclab.deps.analyze`."""
    from loclab.deps import analyze as _analyze

    return _analyze(*args, **kwargs)


def analyze_file(*args: Any, **kwargs: Any) -> Any:
    """Dependence analysis of every function in a file; see :func:`loclab.deps.analyze_file`."""
    from loclab.deps import analyze_file as _analyze_file

    return _analyze_file(*args, **kwargs)


# ``loclab.transform`` is a package that can be called: ``loclab.transform(f, "tile(i=32)")``
from loclab import transform  # noqa: E402  (light: its heavy parts load when called)

__all__ = ["__version__", "analyze", "analyze_file", "compare", "devices", "run", "transform",
           "tune"]
