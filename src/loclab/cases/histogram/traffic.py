"""The histogram's memory traffic by a cache model of random updates: the input streams
through once per pass (an index and a value, 8 bytes an element); an update lands on a
uniformly random bin, whose line is in the cache with probability (the cache's share) /
(the histogram's bytes) where the histogram is larger, and otherwise costs a line fetched and
later written back; every histogram (each pass's chunk, each private copy) is also moved once.
The same model as the lectures' argument for multi-pass: a chunk that fits the LLC turns
every update into a hit, at the price of reading the input once per chunk."""

from __future__ import annotations

from typing import Any

from loclab.hw import Machine
from loclab.model.time import Traffic

LINE = 64
ELEMENT_BYTES = 8  # a uint32 index and a float32 value
BIN_BYTES = 4


def _updates(n: int, table_bytes: int, cache_bytes: int) -> float:
    """Bytes moved by n random updates of a table of ``table_bytes`` (a fetch and a
    write-back per miss)."""
    miss = max(0.0, 1.0 - cache_bytes / table_bytes) if table_bytes else 0.0
    return n * miss * 2 * LINE


def _passes(dims: dict[str, int], machine: Machine, chunk_bins: int) -> Traffic:
    bins, n = dims["bins"], dims["n"]
    passes = -(-bins // chunk_bins)
    cache = machine.cpu.llc_share_bytes
    total = 0.0
    for start in range(0, bins, chunk_bins):
        chunk = min(chunk_bins, bins - start) * BIN_BYTES
        # An element updates this chunk with probability chunk / histogram.
        total += _updates(round(n * chunk / (bins * BIN_BYTES)), chunk, cache)
    streamed = passes * n * ELEMENT_BYTES
    return Traffic(streamed + total + 2 * bins * BIN_BYTES,
                   f"random-update cache model: {passes} pass{'es' if passes > 1 else ''} "
                   f"over the input, {bins * BIN_BYTES / cache:.2g}x the LLC share of "
                   "histogram")


def single_pass(dims: dict[str, int], machine: Machine, params: dict[str, Any]) -> Traffic:
    return _passes(dims, machine, dims["bins"])


def multipass(dims: dict[str, int], machine: Machine, params: dict[str, Any]) -> Traffic:
    return _passes(dims, machine, params["chunk_bins"])


def privatized(dims: dict[str, int], machine: Machine, params: dict[str, Any]) -> Traffic:
    bins, n = dims["bins"], dims["n"]
    copies = params["sub_histograms"]
    private = copies * bins * BIN_BYTES
    updates = _updates(n, private, machine.cpu.llc_share_bytes)
    merge = private + 2 * bins * BIN_BYTES  # every private copy read, the result written
    return Traffic(n * ELEMENT_BYTES + updates + private + merge,
                   f"random-update cache model: {copies} private histograms, "
                   f"{private / machine.cpu.llc_share_bytes:.2g}x the LLC share, then merged")
