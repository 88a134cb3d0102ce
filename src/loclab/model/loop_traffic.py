"""The memory traffic of a CPU loop nest by the cache model: its exact access trace (from a C
loop nest with declared array extents) run through the last-level cache the machine's cores
can count on, at the row's size: lines read plus lines written back, in bytes (the units the
copy roof counts: a line allocated to be written is not counted as read).

A trace of the whole size would be hundreds of millions of accesses; the traffic of a loop
nest whose outer loop repeats one pattern grows by the same amount every outer iteration. So
the nest is traced for two prefixes of its outer loop, and the difference extends the shorter
one to the full count (the C nests name that prefix ``first``). Lines still dirty when a trace
ends count as written: a longer run writes them back. The prefix must reach the steady state:
a nest that re-reads a line only after more than the prefix has touched the whole cache would
be counted too low (the row's model says how much was traced).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

from loclab.model.cache import CacheLevel
from loclab.model.time import Traffic

SAMPLE_ACCESSES = 2_000_000  # the shorter trace; the longer one is twice as long
LLC_WAYS = 16
LINE = 64


def last_level(llc_share_bytes: int) -> CacheLevel:
    """The share of the last-level cache these cores can count on, in whole sets."""
    unit = LINE * LLC_WAYS
    return CacheLevel("LLC", max(unit, llc_share_bytes // unit * unit), LINE, LLC_WAYS)


@functools.cache
def _nest(source: str):  # noqa: ANN202 (a loclab.nest.ir.Nest)
    from loclab.nest import load_source

    return load_source(source, language="c")[0]


def _memory_bytes(source: str, params: Mapping[str, int], level: CacheLevel,
                  elem_bytes: int) -> float:
    from loclab.model.cache import simulate
    from loclab.model.trace import trace_nest

    trace = trace_nest(_nest(source), params, elem_bytes)
    stats = simulate(trace, [level])[-1]
    # Lines read, and lines written (evicted dirty, or still dirty at the end: a longer run
    # writes them back). A written line's allocation (its fetch before the write) is left
    # out, as the copy roof's bytes leave it out: a copy is rated by bytes read + written.
    lines = stats.misses - stats.write_misses + stats.writebacks + stats.dirty_at_end
    return float(lines * level.line_bytes)


def loop_traffic(source: str, params: Mapping[str, int], outer: int, per_outer: int,
                 llc_share_bytes: int, elem_bytes: int = 4, what: str = "") -> Traffic:
    """The traffic of the C nest ``source`` at ``params`` whose outer loop runs ``outer``
    times (``first`` in the source) with about ``per_outer`` accesses each."""
    level = last_level(llc_share_bytes)
    short = max(1, SAMPLE_ACCESSES // max(per_outer, 1))
    model = (f"cache model: {what} through {level.size_bytes // 2**20 or 1} MiB "
             f"{level.ways}-way LLC")
    if 2 * short >= outer:
        return Traffic(_memory_bytes(source, {**params, "first": outer}, level, elem_bytes),
                       model)
    first = _memory_bytes(source, {**params, "first": short}, level, elem_bytes)
    second = _memory_bytes(source, {**params, "first": 2 * short}, level, elem_bytes)
    steady = (second - first) / short
    return Traffic(first + steady * (outer - short),
                   f"{model}, {2 * short} of {outer} outer iterations traced")
