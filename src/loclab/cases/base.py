"""What a case study declares (ARCHITECTURE.md, "Case study"), and what a variant returns.

A case knows its sizes, inputs, golden reference, the golden algorithm's work and its
variants; the harness (``loclab.bench``) does everything else the same way for every case.
"""

from __future__ import annotations

import importlib
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from loclab.errors import UsageError

if TYPE_CHECKING:
    import numpy as np

    from loclab.hw import Machine
    from loclab.measure.space import Space

Device = Literal["cpu", "gpu"]
Role = Literal["golden", "naive", "optimized", "library"]
# What bounds a case's best variant, and so the rate reports show first (loclab.report.metric):
# the golden bytes against the copy roof, the flops against the fp32 peak, ``Case.unit``, or
# the link between host and device (bytes that start or end in host memory, against the ideal
# time of moving them over the measured link while the device computes).
Limit = Literal["memory", "compute", "unit", "interconnect"]
# Where a GPU variant's inputs and output live: device memory, or host memory that is
# page-locked (pinned: the copy engines read it directly, asynchronously) or ordinary
# (pageable: the driver copies it through a pinned staging buffer of its own).
Memory = Literal["device", "pinned", "pageable"]
HOST_MEMORY = ("pinned", "pageable")
SIZE_PRESETS = ("small", "default", "large")
DEVICE_CHOICES = ("cpu", "gpu", "all")
Dims = Mapping[str, int]
# A size preset for one device: fixed dimensions, or a rule that reads the machine (``large``
# must be at least four times the last-level cache of the machine it runs on). A preset may
# name several sizes (a sweep over histogram sizes, matrix shapes): each is run in turn.
SizeRule = Dims | Sequence[Dims] | Callable[["Machine"], Dims | Sequence[Dims]]
# Why a variant does not apply at a size on a machine (sub-histograms that do not fit), or None.
SkipRule = Callable[[Dims, "Machine"], str | None]
# The kernels index one dimension with a 32-bit int (their offsets are 64-bit).
MAX_DIMENSION = 2**31 - 1


@dataclass(frozen=True)
class Work:
    """Bytes and flops of the golden algorithm: every rate is computed from these.

    ``items`` counts what a case names in ``Case.unit`` where flops do not measure its work
    (query-point pairs, keys inserted); rows then report items per second too.
    """

    bytes: int
    flops: int
    items: int = 0
    # For a case whose data starts and ends in host memory: the bytes of its inputs and of
    # its output, which a GPU variant must move to the device and back where its placement
    # puts them on the host (``loclab.bench.interconnect``).
    to_device: int = 0
    to_host: int = 0


@dataclass(frozen=True)
class UnitRoof:
    """The most ``Case.unit`` per second a device can do, and what bounds it (for
    nearest-neighbour on a GPU: the instruction issue rate over the instructions a pair
    takes). Rows report their fraction of it."""

    per_s: float
    what: str


# The phases a run made of steps names (any name may be used; these three are what the
# transfers family's rows show and what the ideal time reads its compute from).
COPY_IN, COMPUTE, COPY_OUT = "copy in", "compute", "copy out"


@dataclass(frozen=True)
class Step:
    """One part of a run done in sequence with the others, named by its ``phase`` ("copy in",
    "compute", "copy out"): a row then shows where its time goes."""

    phase: str
    run: Callable[[], Any]


@dataclass(frozen=True)
class Bound:
    """A variant ready to run on staged inputs.

    ``run()`` executes the variant once and returns its output array (the preallocated,
    poisoned buffer it wrote, or a fresh array for a library call that allocates). A run made
    of ``steps`` in sequence (``stepped``) is also timed step by step, each phase apart.
    """

    run: Callable[[], Any]
    params: dict[str, Any] = field(default_factory=dict)
    steps: tuple[Step, ...] = ()


def stepped(steps: Sequence[Step], result: Any, params: dict[str, Any] | None = None) -> Bound:
    """A Bound whose run is ``steps`` in order, returning ``result``."""
    steps = tuple(steps)

    def run() -> Any:
        for step in steps:
            step.run()
        return result

    return Bound(run, params or {}, steps)


@dataclass(frozen=True)
class Placement:
    """Where a GPU variant's inputs are staged and its output allocated. Device memory unless
    the variant's lesson is the link between host and device: then its data starts or ends in
    host memory, and the bytes crossing the link are counted (``loclab.bench.interconnect``)."""

    inputs: Memory = "device"
    output: Memory = "device"


ON_DEVICE = Placement()
# Data that starts and ends on the host: as NumPy allocates it, or page-locked.
PAGEABLE_HOST = Placement(inputs="pageable", output="pageable")
PINNED_HOST = Placement(inputs="pinned", output="pinned")


# setup(staged inputs, preallocated output, machine, **tuned parameters) -> Bound
Setup = Callable[..., Bound]
@dataclass(frozen=True)
class Variant:
    name: str
    device: Device
    role: Role
    description: str
    setup: Setup
    skip: SkipRule | None = None
    # The parameters ``loclab tune`` may search, for this machine (usually through lazy()).
    space: Callable[["Machine"], Space] | None = None
    # The bytes one run moves by a model of its accesses (dims, machine, the row's params)
    # -> loclab.model.time.Traffic, for the time model; GPU kernels declare their accesses
    # instead (KernelAccesses), so this is for the CPU loops.
    traffic: Callable[..., Any] | None = None
    # Where a GPU variant's inputs and output live (CPU variants: host memory, always).
    placement: Placement = ON_DEVICE
    # The variant its speedup is measured against, where that is not the case's naive one
    # (host-device: each pinned copy against the pageable copy of its own direction).
    baseline: str | None = None
    # Why a GPU variant that is not the library's launches no kernel of loclab's, so that its
    # row's empty ``kernels`` is no kernel missed: the copy engines move its bytes
    # (host-device), or a library computes (gemm-chain's cuBLAS). Every other GPU variant
    # launches its kernels through ``loclab.gpu.kernels`` (``Launch``), which records them.
    no_kernel: str | None = None

    def skip_reason(self, dims: Dims, machine: Machine) -> str | None:
        """Why this variant does not run at ``dims`` (the row says so), or None."""
        return self.skip(dims, machine) if self.skip else None


@dataclass(frozen=True)
class Case:
    name: str
    lesson: str
    description: str
    sizes: Mapping[str, Mapping[Device, SizeRule]]
    make_inputs: Callable[[Dims, np.random.Generator], dict[str, np.ndarray]]
    golden: Callable[[dict[str, np.ndarray]], np.ndarray]
    output: Callable[[Dims], tuple[tuple[int, ...], Any]]
    work: Callable[[Dims], Work]
    # Largest accepted normwise relative error: a number, or a rule reading the inputs (a sum
    # of n float32 terms in any order is within n * 2**-24 of the exact sum); or a rule giving
    # each output element's own bound on its absolute error, an array shaped like the output
    # (spmv: a row's bound follows from its own terms).
    tolerance: float | Callable[[dict[str, np.ndarray]], float | np.ndarray]
    variants: tuple[Variant, ...]
    # Small awkward sizes (edges of tiles, vector widths, one row) every variant is tested at.
    test_dims: tuple[Dims, ...] = ()
    # The dimension a report plots time against when a preset sweeps it (histogram: bins),
    # and a parameter of the rows plotted against it too (its params key, its label).
    sweep: str | None = None
    sweep_param: tuple[str, str] | None = None
    # The sweep is of the problem's size (scan's n): plot the case's rate (GB/s), which stays
    # level where time only grows with the size, so launch overhead and caches show.
    sweep_rate: bool = False
    # What ``Work.items`` counts, plural ("pairs", "keys"), for cases whose work is not flops,
    # and the roof of that rate on a device of a machine, where one is known.
    unit: str | None = None
    unit_roof: Callable[[Device, "Machine"], UnitRoof | None] | None = None
    limit: Limit = "memory"
    # The names of a size's dimensions, in the order sizes are written (a user's --dims must
    # give each), and a rule refusing, with a UsageError naming the size, what no variant can
    # run beyond whole numbers from 1 to MAX_DIMENSION (partitioning: more slots than keys).
    dimensions: tuple[str, ...] = ()
    check: Callable[[Dims], None] | None = None
    # Dimensions that are not extents, with the whole numbers they take (a switch such as
    # scan's ``exclusive``: (0, 1); the kind of input, the percentage of elements kept);
    # every other dimension runs from 1 to MAX_DIMENSION.
    ranges: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    # The one size a roof case runs at when another case needs its roof but it was not asked
    # for itself (host-device: 256 MiB, where the link's bandwidth has levelled off).
    roof_dims: Dims | None = None

    def dims(self, preset: str, device: Device, machine: Machine) -> list[dict[str, int]]:
        """Every size the preset names on this device and machine, in run order (none on a
        device the case has no variants for)."""
        rule = self.sizes[preset].get(device)
        if rule is None:
            return []
        sizes = rule(machine) if callable(rule) else rule
        return [dict(sizes)] if isinstance(sizes, Mapping) else [dict(s) for s in sizes]

    def checked_dims(self, dims: Mapping[str, Any]) -> dict[str, int]:
        """A size a user asked for, in the case's order of dimensions, or a UsageError saying
        in one line which dimension is missing, unknown or refused."""
        known = ", ".join(self.dimensions)
        unknown = [name for name in dims if name not in self.dimensions]
        if unknown:
            raise UsageError(f"{self.name}: unknown dimension {', '.join(unknown)} "
                             f"(its dimensions: {known})")
        missing = [name for name in self.dimensions if name not in dims]
        if missing:
            raise UsageError(f"{self.name}: missing dimension {', '.join(missing)} "
                             f"(give each of {known})")
        ordered = {name: _whole(dims[name]) for name in self.dimensions}
        for name, value in ordered.items():
            low, high = self.ranges.get(name, (1, MAX_DIMENSION))
            if value is None or not low <= value <= high:
                raise UsageError(f"{self.name}: {name}={dims[name]}: must be a whole number "
                                 f"from {low:,} to {high:,}")
        if self.check:
            self.check(ordered)
        return ordered

    def tolerance_for(self, inputs: dict[str, np.ndarray]) -> float | np.ndarray:
        return self.tolerance(inputs) if callable(self.tolerance) else self.tolerance

    def variants_on(self, device: Device) -> tuple[Variant, ...]:
        return tuple(v for v in self.variants if v.device == device)

    def roof_of_unit(self, device: Device, machine: Machine) -> UnitRoof | None:
        """The roof rows of this case on ``device`` are rated against, if the case knows one."""
        return self.unit_roof(device, machine) if self.unit_roof else None


def _whole(value: Any) -> int | None:
    """An integer (Python's or NumPy's) as an int; None for anything else, bools included."""
    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


MATRIX_DIMS = ("rows", "cols")
PRODUCT_DIMS = ("m", "n", "k")  # C (m x n) = A (m x k) . B (k x n)


def dims_text(dims: Dims) -> str:
    """A size as tables and messages show it: '16384x16384' for a matrix (rows x cols),
    '4096x4096x4096' for a product (m x n x k), 'bins=1000 n=100003' otherwise."""
    if tuple(dims) in (MATRIX_DIMS, PRODUCT_DIMS):
        return "x".join(str(v) for v in dims.values())
    return " ".join(f"{name}={value}" for name, value in dims.items())


def lazy(module: str, name: str) -> Callable[..., Any]:
    """``module.name``, imported on first call, so that listing cases imports no numba/CuPy
    (a variant's setup, or its skip rule)."""

    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(importlib.import_module(module), name)(*args, **kwargs)

    call.__qualname__ = f"lazy({module}.{name})"
    call.target = (module, name)  # type: ignore[attr-defined]
    return call


def flop_limit(work: Callable[[Dims], Work], limit: int, what: str) -> SkipRule:
    """A skip rule for a slow variant (an untiled loop nest): not run at sizes whose golden
    work exceeds ``limit`` flops, where one run of ``what`` would take minutes."""

    def rule(dims: Dims, machine: Machine) -> str | None:
        flops = work(dims).flops
        if flops > limit:
            return (f"{flops / 1e9:,.0f} GFlop: {what} would take minutes per run "
                    f"(limit {limit / 1e9:,.0f} GFlop)")
        return None

    return rule


def uniform_nonzero(rng: np.random.Generator, shape: int | tuple[int, ...]) -> np.ndarray:
    """float32 uniform in (0, 1]: 1 - U[0, 1), in place (no second copy of a large input).
    Never zero, so an output that misses a term cannot match golden by luck."""
    values = rng.random(shape, dtype="float32")
    values *= -1  # exact, so -u + 1 is 1 - u rounded once
    values += 1
    return values


FLOAT32_UNIT_ROUNDOFF = 2.0 ** -24


def summation_tolerance(terms: Any) -> Any:
    """Normwise tolerance for float32 sums of up to ``terms`` non-negative terms (each maybe a
    rounded product), against a float64 golden rounded to float32; for an array of term
    counts, an array of tolerances.

    Summing n terms in any order (atomics, trees, split sums) errs by at most (n - 1) u times
    the sum, a rounded product adds u per term and the golden's final rounding u: (n + 1) u
    to first order; the 5% covers the second-order terms while n u stays below 5%.
    """
    import numpy as np

    return 1.05 * (np.maximum(terms, 1) + 1) * FLOAT32_UNIT_ROUNDOFF


DYADIC_STEPS = 64  # values are multiples of 1/64


def dyadic_nonzero(rng: np.random.Generator, n: int) -> np.ndarray:
    """float32 in [-1, 1] \\ {0}, multiples of 1/64, for sums whose order must not matter.

    A float32 prefix sum of n uniform (0, 1] values is dominated by rounding (adding 0.5 to
    2**24 changes nothing), so any bound that holds for every summation order is too loose to
    catch a dropped element. Multiples of 2**-6 are exact in float32 while a sum stays below
    2**18 in magnitude, and a zero-mean random walk of 2**31 such steps stays far below that
    (its spread is 2**15.5 / sqrt(3)): every partial sum of a contiguous range, in whatever
    order a scan forms it, is then exact, and variants can be checked exactly
    (``exact_sums_tolerance``).
    """
    import numpy as np

    steps = rng.integers(1, DYADIC_STEPS + 1, size=n, dtype=np.int32)
    steps *= rng.choice(np.array([-1, 1], np.int32), size=n)
    return steps.astype(np.float32) / np.float32(DYADIC_STEPS)


def exact_sums_tolerance(prefix_sums: np.ndarray, terms: int) -> float:
    """Tolerance for float32 scans of ``dyadic_nonzero`` values, given the golden prefix sums
    (of each segment, for a segmented scan) and the most terms any of them adds.

    Any contiguous range's sum is a difference of two prefix sums, so while twice the largest
    prefix magnitude stays within float32's exact range for multiples of 1/64 (2**18), every
    summation order is exact: tolerance 0. Beyond, the bound for any order of positive and
    negative terms, ``summation_tolerance`` scaled by the terms' magnitudes (1 each) over the
    largest prefix."""
    import numpy as np

    largest = float(np.max(np.abs(prefix_sums), initial=0.0))
    if 2 * largest < 2.0**24 / DYADIC_STEPS:
        return 0.0
    return summation_tolerance(terms) * terms / largest
