"""A set-associative LRU cache hierarchy, simulated over an exact access trace.

Why simulate rather than count reuse distances: the lectures' tiling rules (``3 T^2 <= S``)
assume a fully associative cache; real caches map a line to one set of a few ways, and a tile
whose rows are a multiple of the set stride apart lands in few sets and thrashes. Running the
trace through sets and ways shows both effects and gives the traffic each level asks of the
one below, which the time model and the reuse factors need.

Policy (one line per access, the line that holds its first byte): LRU per set,
write-allocate, write-back. Each level sees the misses of the level above as reads (the line
fetched) and its dirty evictions as writes (non-inclusive: nothing is invalidated above); a
level's fetch goes down before its victim's write-back. A write-back that misses below is
allocated there like any write. The last level's traffic is the memory traffic; lines still
dirty at the end are not flushed.

:func:`simulate` runs a Numba kernel (compiled on first use, cached on disk);
:func:`simulate_reference` is the plain per-access version the tests hold it to.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from loclab.errors import UsageError
from loclab.model.limits import MAX_CACHE_BYTES
from loclab.model.text import MAX_LINE, wrap
from loclab.model.trace import ElemBytes, Trace, trace_nest
from loclab.nest.ir import Nest

if TYPE_CHECKING:
    import numpy as np

SYSFS_CACHE = Path("/sys/devices/system/cpu/cpu0/cache")
ASSUMED_WAYS = {1: 8}  # L1 where sysfs does not say; deeper levels assume 16
ASSUMED_DEEP_WAYS = 16

_STATS = ("accesses", "hits", "misses", "writebacks")


def _power_of_two(value: int) -> bool:
    return value > 0 and value & (value - 1) == 0


@dataclass(frozen=True)
class CacheLevel:
    """One cache: ``size_bytes`` in ``line_bytes`` lines, ``ways`` lines per set (the
    number of sets need not be a power of two: a line's set is its number modulo it)."""

    name: str
    size_bytes: int
    line_bytes: int = 64
    ways: int = 8

    def __post_init__(self) -> None:
        for key, what in (("size_bytes", "size"), ("line_bytes", "line"), ("ways", "ways")):
            value = getattr(self, key)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise UsageError(f"cache {self.name}: its {what} must be a positive integer, "
                                 f"not {value!r}")
        if not _power_of_two(self.line_bytes):
            raise UsageError(f"cache {self.name}: line size {self.line_bytes} B is not a "
                             "power of two")
        if self.size_bytes % (self.line_bytes * self.ways):
            raise UsageError(f"cache {self.name}: size {self.size_bytes} B is not a multiple "
                             f"of line x ways = {self.line_bytes} x {self.ways} B")

    @property
    def sets(self) -> int:
        return self.size_bytes // (self.line_bytes * self.ways)

    def check_simulated(self) -> "CacheLevel":
        """This level, if the simulator can hold its lines (see ``MAX_CACHE_BYTES``)."""
        if self.size_bytes > MAX_CACHE_BYTES:
            raise UsageError(f"cache {self.name} of {format_bytes(self.size_bytes)}: loclab "
                             f"simulates caches of at most {format_bytes(MAX_CACHE_BYTES)}")
        return self

    def describe(self) -> str:
        return (f"{self.name} {format_bytes(self.size_bytes)}, {self.ways}-way, "
                f"{self.line_bytes} B lines")


@dataclass(frozen=True)
class LevelStats:
    """What one level saw: ``bytes_from_below`` is misses x line, ``bytes_to_below``
    write-backs x line (at the last level: the memory traffic)."""

    level: CacheLevel
    accesses: int
    hits: int
    misses: int
    writebacks: int
    write_misses: int = 0  # misses of writes: a line allocated (fetched) to be written
    dirty_at_end: int = 0  # lines written and not yet written back when the trace ends

    @property
    def bytes_from_below(self) -> int:
        return self.misses * self.level.line_bytes

    @property
    def bytes_to_below(self) -> int:
        return self.writebacks * self.level.line_bytes

    @property
    def miss_rate(self) -> float:
        return self.misses / self.accesses if self.accesses else 0.0

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self.level), "sets": self.level.sets, "accesses": self.accesses,
                "hits": self.hits, "misses": self.misses, "writebacks": self.writebacks,
                "miss_rate": self.miss_rate, "bytes_from_below": self.bytes_from_below,
                "bytes_to_below": self.bytes_to_below}

    def line(self) -> str:
        return (f"{self.level.name:>4} {format_bytes(self.level.size_bytes):>8} "
                f"{self.accesses:>13,} {self.misses:>12,} {self.miss_rate:>6.1%} "
                f"{format_bytes(self.bytes_from_below):>10} "
                f"{format_bytes(self.bytes_to_below):>10}")


LEVEL_HEADER = (f"{'':>4} {'size':>8} {'accesses':>13} {'misses':>12} {'rate':>6} "
                f"{'read below':>10} {'written':>10}")


def format_bytes(value: float) -> str:
    """1536 -> '1.5 KiB': binary units, as cache sizes are given."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" or value == int(value) else \
                f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


# --------------------------------------------------------------------------- reference


def simulate_reference(trace: Trace, levels: Sequence[CacheLevel]) -> list[LevelStats]:
    """The same model, one access at a time in plain Python (an OrderedDict per set, least
    recently used first): slow and obviously right, the yardstick for :func:`simulate`."""
    _check_levels(levels)
    sets = [[OrderedDict[int, bool]() for _ in range(level.sets)] for level in levels]
    counts = [[0, 0, 0, 0, 0] for _ in levels]

    def access(depth: int, address: int, write: bool) -> None:
        level, count = levels[depth], counts[depth]
        line = address // level.line_bytes
        lines = sets[depth][line % level.sets]
        count[0] += 1
        if line in lines:
            count[1] += 1
            lines.move_to_end(line)
            lines[line] = lines[line] or write
            return
        count[2] += 1
        count[4] += write
        victim = lines.popitem(last=False) if len(lines) == level.ways else None
        lines[line] = write
        if depth + 1 < len(levels):
            access(depth + 1, line * level.line_bytes, False)
        if victim is not None and victim[1]:
            count[3] += 1
            if depth + 1 < len(levels):
                access(depth + 1, victim[0] * level.line_bytes, True)

    for address, write in zip(trace.addresses.tolist(), trace.writes.tolist()):
        access(0, address, write)
    dirty = [sum(flag for lines in level_sets for flag in lines.values()) for level_sets in sets]
    return [LevelStats(level, *count, dirty_at_end=left)
            for level, count, left in zip(levels, counts, dirty)]


# --------------------------------------------------------------------------- numba


def _run(addresses: Any, writes: Any, line_bytes: Any, n_sets: Any, ways: Any, offsets: Any,
         starts: Any, tags: Any, stamps: Any, dirty: Any, counts: Any, by_region: Any) -> None:
    """Every access through every level (compiled by :func:`_kernel`; state arrays come in
    ready-made, so that this module needs no NumPy at import). A request's consequences
    below (fetch, then write-back) go on a stack so that they run depth-first, as the
    reference's recursion does. ``by_region`` counts misses and write-backs per address
    range (``starts`` sorted, the first one below every address)."""
    depth = line_bytes.shape[0]

    def region(address: int) -> int:
        low, high = 0, starts.shape[0]
        while high - low > 1:
            middle = (low + high) // 2
            if starts[middle] <= address:
                low = middle
            else:
                high = middle
        return low

    stack = [(0, 0, False)]
    clock = 0
    for n in range(addresses.shape[0]):
        stack.append((0, addresses[n], writes[n]))
        while len(stack) > 1:
            lv, address, write = stack.pop()
            clock += 1
            line = address // line_bytes[lv]
            first = offsets[lv] + (line % n_sets[lv]) * ways[lv]
            counts[lv, 0] += 1
            slot = -1
            victim = first
            for way in range(first, first + ways[lv]):
                if tags[way] == line:
                    slot = way
                    break
                if tags[victim] != -1 and (tags[way] == -1 or stamps[way] < stamps[victim]):
                    victim = way
            if slot >= 0:
                counts[lv, 1] += 1
                stamps[slot] = clock
                dirty[slot] = dirty[slot] or write
                continue
            counts[lv, 2] += 1
            if write:
                counts[lv, 4] += 1
            by_region[lv, region(address), 0] += 1
            evicted, was_dirty = tags[victim], dirty[victim]
            tags[victim], stamps[victim], dirty[victim] = line, clock, write
            if was_dirty and evicted != -1:
                counts[lv, 3] += 1
                old = evicted * line_bytes[lv]
                by_region[lv, region(old), 1] += 1
                if lv + 1 < depth:
                    stack.append((lv + 1, old, True))
            if lv + 1 < depth:
                stack.append((lv + 1, line * line_bytes[lv], False))


@lru_cache(maxsize=1)
def _kernel() -> Callable[..., None]:
    """:func:`_run` compiled (numba is imported here, on first use, not with the module)."""
    from numba import njit

    return njit(cache=True)(_run)


def _check_levels(levels: Sequence[CacheLevel]) -> None:
    if not levels:
        raise UsageError("give at least one cache level")


def _simulate(trace: Trace, levels: Sequence[CacheLevel], starts: Sequence[int]
              ) -> tuple[list[LevelStats], "np.ndarray"]:
    """Stats per level, and per level, region (address range from each start) and kind
    (0 misses, 1 write-backs) the counts that fall in it."""
    import numpy as np

    _check_levels(levels)
    ways = np.array([lv.ways for lv in levels], dtype=np.int64)
    n_sets = np.array([lv.sets for lv in levels], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(n_sets * ways)]).astype(np.int64)
    bounds = np.array([-(2**62), *starts], dtype=np.int64)
    counts = np.zeros((len(levels), 5), dtype=np.int64)
    by_region = np.zeros((len(levels), bounds.size, 2), dtype=np.int64)
    slots = int(offsets[-1])
    tags, dirty = np.full(slots, -1, dtype=np.int64), np.zeros(slots, dtype=np.bool_)
    _kernel()(np.ascontiguousarray(trace.addresses, dtype=np.int64),
              np.ascontiguousarray(trace.writes, dtype=np.bool_),
              np.array([lv.line_bytes for lv in levels], dtype=np.int64), n_sets, ways,
              offsets, bounds, tags, np.zeros(slots, dtype=np.int64), dirty, counts,
              by_region)
    left = [int(np.count_nonzero(dirty[start:end] & (tags[start:end] != -1)))
            for start, end in zip(offsets[:-1], offsets[1:])]
    stats = [LevelStats(level, *map(int, row), dirty_at_end=dirty_lines)
             for level, row, dirty_lines in zip(levels, counts, left)]
    return stats, by_region[:, 1:]


def simulate(trace: Trace, levels: Sequence[CacheLevel]) -> list[LevelStats]:
    """Per level the accesses, hits, misses and write-backs of ``trace`` (compiled:
    tens of millions of accesses a second per level hit)."""
    return _simulate(trace, levels, ())[0]


# --------------------------------------------------------------------------- levels


def parse_cache_list(text: str, line_bytes: int = 64) -> list[CacheLevel]:
    """``"32KiB,1MiB:16"`` -> L1 32 KiB (8 ways), L2 1 MiB (16 ways): sizes as 32KiB, 48K,
    1M, 1MiB, 512 (bytes; K, KB and KiB are all 1024); ``:ways`` is optional (8 for L1,
    16 below, assumed). Levels are nearest first, each larger than the one above it: a
    list in another order is refused rather than read (or sorted) as something else."""
    from loclab.hw.cpu import parse_size

    levels = []
    items = [item.strip() for item in text.split(",")]
    for depth, item in enumerate(items, 1):
        match = re.fullmatch(r"([^:]+?)\s*(?::\s*(\d+))?", item)
        try:
            if not match:
                raise ValueError
            size = parse_size(match.group(1))
        except ValueError:
            raise UsageError(f"bad cache size {item!r}: write e.g. 32KiB, 1MiB, 48K or "
                             "32KiB:8 (size:ways)") from None
        ways = int(match.group(2)) if match.group(2) else _assumed_ways(depth)
        try:
            levels.append(CacheLevel(f"L{depth}", size, line_bytes, ways).check_simulated())
        except UsageError as err:
            raise UsageError(f"bad cache {item!r}: {str(err).split(': ', 1)[1]}") from None
    for above, below in zip(levels, levels[1:]):
        if below.size_bytes <= above.size_bytes:
            raise UsageError(f"bad cache list {text!r}: {below.name} "
                             f"({format_bytes(below.size_bytes)}) is not larger than "
                             f"{above.name} ({format_bytes(above.size_bytes)}): list the "
                             "levels nearest first, each larger than the one above")
    return levels


def _assumed_ways(depth: int) -> int:
    return ASSUMED_WAYS.get(depth, ASSUMED_DEEP_WAYS)


def read_sysfs_ways(cache_dir: Path = SYSFS_CACHE) -> dict[int, tuple[int, int]]:
    """Per data cache level (1, 2, 3), its ways and line size from sysfs (empty if absent);
    hw.cpu reads the sizes but not these."""
    found: dict[int, tuple[int, int]] = {}
    for index in sorted(cache_dir.glob("index*")):
        try:
            if (index / "type").read_text().strip() == "Instruction":
                continue
            level = int((index / "level").read_text())
            found[level] = (int((index / "ways_of_associativity").read_text()),
                            int((index / "coherency_line_size").read_text()))
        except (OSError, ValueError):
            continue
    return found


def detect_hierarchy(cache_dir: Path = SYSFS_CACHE) -> tuple[list[CacheLevel], list[str]]:
    """The default hierarchy of this CPU (loclab.hw sizes, sysfs ways) and notes saying what
    was assumed. The last level is the share of it these cores can count on (see
    ``CpuInfo.llc_share_bytes``), rounded down to whole sets."""
    from loclab.hw.cpu import detect_cpu

    cpu = detect_cpu()
    sizes = {1: cpu.l1d_bytes, 2: cpu.l2_bytes}
    if cpu.llc_bytes > cpu.l2_bytes:
        sizes[3] = cpu.llc_share_bytes
    geometry = read_sysfs_ways(cache_dir)
    notes = [f"cache sizes from {cpu.cache_source}"]
    if cpu.llc_share_bytes < cpu.llc_bytes:
        notes.append(f"L3 counted as {format_bytes(cpu.llc_share_bytes)}, this machine's "
                     f"share of {format_bytes(cpu.llc_bytes)}")
    levels = []
    for depth, size in sizes.items():
        ways, line = geometry.get(depth, (0, 64))
        if ways <= 0:
            ways = _assumed_ways(depth)
            notes.append(f"L{depth} ways not in sysfs: {ways} assumed")
        line = line if _power_of_two(line) else 64
        unit = line * ways
        levels.append(CacheLevel(f"L{depth}", max(unit, size // unit * unit), line, ways))
    return levels, notes


# --------------------------------------------------------------------------- report


@dataclass
class CacheReport:
    """A nest's trace through a hierarchy: per level the counts, per array its misses and
    write-backs at the last level (which array the memory traffic is for)."""

    function: str
    params: dict[str, int]
    accesses: int
    levels: list[LevelStats]
    arrays: dict[str, dict[str, int]]
    note: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"function": self.function, "params": dict(self.params),
                "accesses": self.accesses, "levels": [s.to_json() for s in self.levels],
                "arrays": {k: dict(v) for k, v in self.arrays.items()},
                "note": list(self.note)}

    def lines(self) -> list[str]:
        sizes = ", ".join(f"{k}={v}" for k, v in self.params.items())
        out = wrap(f"cache model of {self.function} at {sizes or 'no parameters'}: "
                    f"{self.accesses:,} accesses")
        out += [LEVEL_HEADER] + [s.line() for s in self.levels]
        last = self.levels[-1].level.name
        out.append(f"misses at {last} (memory traffic) per array:")
        for name, row in self.arrays.items():
            out.append(f"  {name:<12} {row['misses']:>12,} misses {row['writebacks']:>12,} "
                       "write-backs")
        for note in self.note:
            out += wrap(f"  note: {note}")
        return [line[:MAX_LINE] for line in out]


def cache_report(nest: Nest, params: Mapping[str, int], levels: Sequence[CacheLevel],
                 elem_bytes: ElemBytes = 8) -> CacheReport:
    """``nest`` at ``params`` traced and run through ``levels`` (see :func:`simulate`)."""
    trace = trace_nest(nest, params, elem_bytes)
    layout = list(trace.layout.values())
    stats, by_region = _simulate(trace, levels, [a.base for a in layout])
    arrays = {a.name: {"misses": int(by_region[-1, n, 0]),
                       "writebacks": int(by_region[-1, n, 1]), "size_bytes": a.size_bytes}
              for n, a in enumerate(layout)}
    note = list(trace.notes) + [
        "LRU, write-allocate, write-back, non-inclusive; each access touches the line of "
        "its first byte; lines still dirty at the end are not written back"]
    return CacheReport(nest.name, dict(params), len(trace), stats, arrays, note)
