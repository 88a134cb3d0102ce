"""Data reuse of matrix multiplication: the lectures' formulas beside the cache model's count.

The "data reuse factor" of the slides is flops per element moved between memory and a cache
of S elements: 2N^3/(4N^2) = O(N) with an infinite cache, 2N^3/(2N^2 + N^3) = O(1) for the
naive three loops (a column of B fetched per element of C), 2N^3/(2N^3/T + N^2) = O(T) =
O(sqrt S) for blocks of T x T with 3 T^2 <= S. A register tile of R x R adds reuse one level
up: each element loaded from the cache serves R multiply-adds (2R^2 flops per 2R loads).

The formulas assume a fully associative cache and whole blocks; the simulated values run the
trace of the very loop nests (their Python source is below, built at the tile sizes asked
for) through a set-associative LRU cache, so line granularity, partial tiles and conflicts
between a tile's rows show. Large sizes are simulated on a corner of the matrices (m x m x m
with the leading dimension of the full n x n ones), which keeps the row stride, and so the
conflicts, of the real problem. One corner serves the whole report (the tile search and the
table of variants), the largest whose every trace fits the budget of accesses: the work and
the memory of a report are bounded whatever the sizes asked for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from loclab.errors import UsageError
from loclab.model.access import check_elem_bytes
from loclab.model.cache import CacheLevel, LevelStats, format_bytes, simulate
from loclab.model.limits import DEFAULT_REUSE_ACCESSES, INDEX_LIMIT, MAX_TRACE_ACCESSES
from loclab.model.magnitude import limit_text
from loclab.model.text import MAX_LINE, wrap
from loclab.model.trace import trace_nest

KERNELS = ("mmm",)
VARIANTS = ("naive", "blocked", "register")

NAIVE = """\
def mmm_naive(A, B, C, N, L):
    for i in range(N):
        for j in range(N):
            c = 0.0
            for k in range(N):
                c += A[i * L + k] * B[k * L + j]
            C[i * L + j] = c
"""

BLOCKED = """\
def mmm_blocked(A, B, C, N, L):
    for ii in range(0, N, {T}):
        for jj in range(0, N, {T}):
            for kk in range(0, N, {T}):
                for i in range(ii, min(ii + {T}, N)):
                    for j in range(jj, min(jj + {T}, N)):
                        c = C[i * L + j]
                        for k in range(kk, min(kk + {T}, N)):
                            c += A[i * L + k] * B[k * L + j]
                        C[i * L + j] = c
"""

REGISTER = """\
def mmm_register(A, B, C, N, L):
    for ii in range(0, N, {T}):
        for jj in range(0, N, {T}):
            for kk in range(0, N, {T}):
                for i in range(ii, min(ii + {T}, N), {R}):
                    for j in range(jj, min(jj + {T}, N), {R}):
{load}
                        for k in range(kk, min(kk + {T}, N)):
{body}
{store}
"""


def mmm_source(variant: str, tile: int = 32, register: int = 4) -> str:
    """Python source of the naive, blocked (i, j, k tiled by ``tile``) or register-tiled
    (plus an ``register`` x ``register`` tile of C in scalars) MMM on flat row-major arrays
    with leading dimension ``L``."""
    if variant == "naive":
        return NAIVE
    if variant == "blocked":
        return BLOCKED.format(T=tile)
    r = range(register)
    pad, inner = " " * 24, " " * 28
    load = "\n".join(f"{pad}c_{a}_{b} = C[(i + {a}) * L + j + {b}]" for a in r for b in r)
    body = "\n".join([f"{inner}a_{a} = A[(i + {a}) * L + k]" for a in r]
                     + [f"{inner}b_{b} = B[k * L + j + {b}]" for b in r]
                     + [f"{inner}c_{a}_{b} += a_{a} * b_{b}" for a in r for b in r])
    store = "\n".join(f"{pad}C[(i + {a}) * L + j + {b}] = c_{a}_{b}" for a in r for b in r)
    return REGISTER.format(T=tile, R=register, load=load, body=body, store=store)


def mmm_accesses(variant: str, m: int, tile: int, register: int) -> int:
    """Trace length of a variant at m x m x m (m a multiple of ``register``; the last tile
    may be partial): per k two loads (A and B, or R of each per R x R register tile), and
    per i, j and tile of k the load and the store of C."""
    if variant == "naive":
        return 2 * m**3 + m**2
    tiles_of_k = -(-m // tile)
    if variant == "blocked":
        return 2 * m**3 + 2 * m**2 * tiles_of_k
    return 2 * m**3 // register + 2 * m**2 * tiles_of_k


# --------------------------------------------------------------------------- formulas


def formula_reuse(variant: str, n: int, tile: int) -> float:
    """The slides' data reuse factor between memory and cache, in flops per element moved."""
    flops = 2 * n**3
    transfers = {"infinite": 4 * n**2, "naive": 2 * n**2 + n**3,
                 "blocked": 2 * n**3 / tile + n**2, "register": 2 * n**3 / tile + n**2}
    return flops / transfers[variant]


FORMULAS = {"infinite": "2N^3 / 4N^2", "naive": "2N^3 / (2N^2 + N^3)",
            "blocked": "2N^3 / (2N^3/T + N^2)", "register": "2N^3 / (2N^3/T + N^2)"}


@dataclass
class VariantReuse:
    """One variant: the formula's reuse at n, and what the simulator counted at ``m``."""

    variant: str
    formula: str
    formula_reuse: float
    flops: int = 0  # at the simulated size
    accesses: int = 0  # loads and stores the registers ask of the cache
    misses: int = 0
    bytes_from_below: int = 0
    bytes_to_below: int = 0
    elem_bytes: int = 4

    @property
    def simulated_reuse(self) -> float | None:
        """Flops per element moved between memory and the cache (both ways)."""
        moved = (self.bytes_from_below + self.bytes_to_below) / self.elem_bytes
        return self.flops / moved if moved else None

    @property
    def register_reuse(self) -> float | None:
        """Flops per element the registers load from (or store to) the cache."""
        return self.flops / self.accesses if self.accesses else None

    def to_json(self) -> dict[str, Any]:
        return {"variant": self.variant, "formula": self.formula,
                "formula_reuse": self.formula_reuse, "flops": self.flops,
                "accesses": self.accesses, "misses": self.misses,
                "bytes_from_below": self.bytes_from_below,
                "bytes_to_below": self.bytes_to_below,
                "simulated_reuse": self.simulated_reuse, "register_reuse": self.register_reuse}


# --------------------------------------------------------------------------- simulation


def simulate_mmm(variant: str, m: int, leading: int, level: CacheLevel, elem_bytes: int,
                 tile: int = 32, register: int = 4) -> LevelStats:
    """One variant's trace at m x m x m (leading dimension ``leading``) through ``level``."""
    from loclab.nest import load_source

    nest = load_source(mmm_source(variant, tile, register))[0]
    trace = trace_nest(nest, {"N": m, "L": leading}, elem_bytes)
    return simulate(trace, [level])[0]


def _measured(variant: str, n: int, m: int, level: CacheLevel, elem_bytes: int, tile: int,
              register: int) -> VariantReuse:
    stats = simulate_mmm(variant, m, n, level, elem_bytes, tile, register)
    return VariantReuse(variant, FORMULAS[variant], formula_reuse(variant, n, tile),
                        2 * m**3, stats.accesses, stats.misses, stats.bytes_from_below,
                        stats.bytes_to_below, elem_bytes)


def simulated_size(n: int, step: int, budget: int, tiles: list[int], register: int) -> int:
    """The largest multiple of ``step`` up to n whose longest trace (of every variant at
    every tile in ``tiles``) fits ``budget`` accesses; 0 if not even ``step`` does. A binary
    search over the multiples: the traces grow with the size, and n may be huge."""
    def fits(m: int) -> bool:
        return max(mmm_accesses(v, m, t, register) for v in VARIANTS for t in tiles) <= budget

    low, high = 0, n // step
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if fits(middle * step) else (low, middle - 1)
    return low * step


# --------------------------------------------------------------------------- tile choice


@dataclass
class TileChoice:
    """The chosen tile and why: the rule's T, the candidates tried and their simulated
    reuse (flops per element moved) at ``simulated_n`` with leading dimension ``n``."""

    tile: int
    rule_tile: int
    candidates: dict[int, float]
    misses: dict[int, int]
    simulated_n: int
    reasons: list[str] = field(default_factory=list)
    step: int = 1  # the corner is a multiple of it (lines, register tiles)

    def to_json(self) -> dict[str, Any]:
        return {"tile": self.tile, "rule_tile": self.rule_tile,
                "candidates": [{"tile": t, "simulated_reuse": r, "misses": self.misses[t]}
                               for t, r in self.candidates.items()],
                "simulated_n": self.simulated_n, "reasons": list(self.reasons)}

    def lines(self) -> list[str]:
        out = [f"tile {self.tile} (rule: {self.rule_tile})"]
        out += [f"  T={t:<4} reuse {r:8.2f} flops/elem, {self.misses[t]:,} misses"
                for t, r in self.candidates.items()]
        return out + [line for reason in self.reasons for line in wrap(f"  {reason}")]


def _candidates(rule: int, line_elems: int, n: int, multiple: int) -> list[int]:
    """Around the rule's T: the whole-line multiples on either side of it, powers of two up
    to twice it, and T itself; each rounded down to a ``multiple`` and at most n (a tile is
    at most the matrix). About log2(T) + 3 of them, whatever the cache: the search is
    bounded (the whole-line multiples up to T were 148 for a 64 MiB cache)."""
    below = rule // line_elems * line_elems
    powers = [2**p for p in range(2, max(2, (2 * rule).bit_length())) if 2**p <= 2 * rule]
    rounded = {min(t, n) // multiple * multiple
               for t in [rule, below, below + line_elems, *powers] if 4 <= t}
    return sorted(t for t in rounded if t >= multiple) or [n // multiple * multiple]


def _sets_of_rows(tile: int, n: int, level: CacheLevel, elem_bytes: int) -> int:
    """How many sets the first lines of a tile's ``tile`` rows fall in."""
    stride = n * elem_bytes
    return len({(r * stride // level.line_bytes) % level.sets for r in range(tile)})


def best_tile(n: int, cache_bytes: int, elem_bytes: int = 4, line_bytes: int = 64,
              ways: int = 8, max_accesses: int = DEFAULT_REUSE_ACCESSES,
              multiple: int = 1) -> TileChoice:
    """The tile for blocked MMM at n x n that the simulator finds best among candidates
    around the slides' rule 3 T^2 x elem <= S (multiples of ``multiple``, the register tile
    that the table's variants need), and the reasons as sentences. The candidates run on
    the largest corner (a multiple of a line and of ``multiple``) whose every trace, the
    table's too, has at most ``max_accesses`` accesses."""
    level = CacheLevel("L1", cache_bytes, line_bytes, ways).check_simulated()
    rule = max(1, math.isqrt(cache_bytes // (3 * elem_bytes)))
    line_elems = max(1, line_bytes // elem_bytes)
    candidates = _candidates(rule, line_elems, n, multiple)
    step = math.lcm(line_elems, multiple)
    step = step if step <= n else multiple
    m = simulated_size(n, step, max_accesses, candidates, multiple)
    _check_corner(m, n, step, candidates, multiple, max_accesses, elem_bytes)
    results: dict[int, float] = {}
    misses: dict[int, int] = {}
    for tile in candidates:  # one size for all: their reuse compares (partial tiles too)
        measured = _measured("blocked", n, m, level, elem_bytes, tile, 1)
        results[tile], misses[tile] = measured.simulated_reuse or 0.0, measured.misses
    best = max(results, key=lambda t: (results[t], t))
    reasons = _reasons(rule, best, n, m, level, elem_bytes, results)
    return TileChoice(best, rule, results, misses, m, reasons, step)


def _reasons(rule: int, best: int, n: int, m: int, level: CacheLevel, elem_bytes: int,
             results: dict[int, float]) -> list[str]:
    line_elems = max(1, level.line_bytes // elem_bytes)
    out = [f"The slides' rule 3 T^2 x {elem_bytes} B <= {format_bytes(level.size_bytes)} "
           f"gives T = {rule}: tiles of A, B and C fit the cache together."]
    if rule > n:
        out.append(f"The matrices are smaller (n = {n}): a tile is at most n.")
    elif rule % line_elems:
        out.append(f"A tile row of {rule} x {elem_bytes} B is not a whole number of "
                   f"{level.line_bytes} B lines; {rule // line_elems * line_elems or line_elems}"
                   " is, and wastes no partial line per row.")
    stride = n * elem_bytes
    set_stride = level.sets * level.line_bytes
    for tile in results:
        used = _sets_of_rows(tile, n, level, elem_bytes)
        if used * level.ways < tile:
            kind = "a multiple" if stride % set_stride == 0 else "not a multiple"
            out.append(f"With rows {stride} B apart ({kind} of the {set_stride} B set "
                       f"stride), the {tile} rows of a {tile} x {tile}"
                       f" tile start in only {used} of {level.sets} sets x {level.ways} ways:"
                       " they evict each other.")
            break
    ranked = ", ".join(f"T={t}: {r:.1f}" for t, r in sorted(results.items()))
    out.append(f"Simulated flops per element moved at n={m} (leading dimension {n}, "
               f"{level.describe()}): {ranked}; "
               f"T = {best} moves the least.")
    if max(results) > m:
        out.append(f"A tile of more than {m} is one tile of the simulated corner: such "
                   "tiles cannot differ here (a larger --accesses simulates a larger corner).")
    return out


# --------------------------------------------------------------------------- report


@dataclass
class ReuseReport:
    """Formulas at n, simulations at ``simulated_n`` (leading dimension n), the tile."""

    kernel: str
    n: int
    cache: CacheLevel
    elem_bytes: int
    tile: int
    register: int
    simulated_n: int
    variants: list[VariantReuse]
    infinite_reuse: float
    choice: TileChoice | None = None
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"kernel": self.kernel, "n": self.n, "cache_bytes": self.cache.size_bytes,
                "line_bytes": self.cache.line_bytes, "ways": self.cache.ways,
                "elem_bytes": self.elem_bytes, "tile": self.tile, "register": self.register,
                "simulated_n": self.simulated_n, "infinite_reuse": self.infinite_reuse,
                "variants": [v.to_json() for v in self.variants],
                "tile_choice": self.choice.to_json() if self.choice else None,
                "notes": list(self.notes)}

    def lines(self) -> list[str]:
        out = wrap(f"data reuse of {self.kernel} at n={self.n}, {self.cache.describe()}, "
                    f"{self.elem_bytes} B elements, T={self.tile}, R={self.register}")
        out.append(f"  infinite cache: 2N^3 / 4N^2 = {self.infinite_reuse:.1f} flops/elem")
        out.append(f"  {'variant':<9} {'formula':>9} {'simulated':>10} {'registers':>10} "
                   f"{'misses':>12}   (simulated at n={self.simulated_n})")
        for v in self.variants:
            sim = f"{v.simulated_reuse:10.2f}" if v.simulated_reuse else f"{'-':>10}"
            reg = f"{v.register_reuse:10.2f}" if v.register_reuse else f"{'-':>10}"
            out.append(f"  {v.variant:<9} {v.formula_reuse:9.2f} {sim} {reg} {v.misses:>12,}")
        if self.choice:
            out += self.choice.lines()
        out += [line for note in self.notes for line in wrap(f"  note: {note}")]
        return [line[:MAX_LINE] for line in out]


def reuse_report(kernel: str = "mmm", n: int = 1024, cache_bytes: int = 32 * 1024,
                 elem_bytes: int = 4, line_bytes: int = 64, ways: int = 8,
                 tile: int | None = None, register: int = 4,
                 max_accesses: int = DEFAULT_REUSE_ACCESSES) -> ReuseReport:
    """Reuse factors of naive, blocked and register-tiled MMM: formulas at n, simulated at n
    when every trace has at most ``max_accesses`` accesses (else on an m x m x m corner),
    with the tile :func:`best_tile` picks (on the same corner) unless ``tile`` is given (a
    multiple of ``register``, at most n: then the corner is whole tiles)."""
    _check_request(kernel, n, elem_bytes, line_bytes, tile, register, max_accesses)
    level = CacheLevel("L1", cache_bytes, line_bytes, ways).check_simulated()
    choice = None
    if tile is None:
        choice = best_tile(n, cache_bytes, elem_bytes, line_bytes, ways, max_accesses,
                           register)
        tile, m, step = choice.tile, choice.simulated_n, choice.step
    else:
        step = tile
        m = simulated_size(n, step, max_accesses, [tile], register)
        _check_corner(m, n, step, [tile], register, max_accesses, elem_bytes)
    variants = [_measured(v, n, m, level, elem_bytes, tile, register) for v in VARIANTS]
    notes = []
    if m + step <= n:
        notes.append(f"simulated on the {m} x {m} x {m} corner of the n x n matrices "
                     f"(leading dimension {n}) to keep each trace within {max_accesses:,} "
                     "accesses (--accesses)")
    elif m != n:
        notes.append(f"simulated on the {m} x {m} x {m} corner of the n x n matrices "
                     f"(leading dimension {n}): the largest that is a multiple of {step}")
    if 3 * m * m * elem_bytes <= cache_bytes:
        notes.append(f"at n={m} the three matrices fit the cache by size "
                     f"({format_bytes(3 * m * m * elem_bytes)}): a line misses once, unless "
                     "rows that map to the same sets evict it")
    return ReuseReport(kernel, n, level, elem_bytes, tile, register, m, variants,
                       formula_reuse("infinite", n, tile), choice, notes)


def _check_request(kernel: str, n: int, elem_bytes: int, line_bytes: int, tile: int | None,
                   register: int, max_accesses: int) -> None:
    """Refuse, before any work, what no report can honour (the options' names as the
    command line spells them)."""
    if kernel not in KERNELS:
        raise UsageError(f"unknown kernel {kernel!r} (known: {', '.join(KERNELS)})")
    if register < 1:
        raise UsageError(f"register must be at least 1, not {register}")
    check_elem_bytes(elem_bytes)
    if n < register:
        raise UsageError(f"--n {n}: the register-tiled variant needs n of at least "
                         f"{register} (its {register} x {register} tile of C)")
    if line_bytes < elem_bytes:
        raise UsageError(f"--line {line_bytes}: a line is at least an element "
                         f"({elem_bytes} B)")
    if tile is not None and tile > n:
        raise UsageError(f"--tile {tile} is larger than --n {n}: a tile is at most the matrix")
    if tile is not None and tile % register:
        raise UsageError(f"tile {tile} is not a multiple of the register tile {register}")
    if not 1 <= max_accesses <= MAX_TRACE_ACCESSES:
        raise UsageError(f"--accesses {max_accesses:,}: 1 to {MAX_TRACE_ACCESSES:,} (a "
                         "trace takes about 100 B of memory an access)")


def _check_corner(m: int, n: int, step: int, tiles: list[int], register: int, budget: int,
                  elem_bytes: int) -> None:
    """The corner ``simulated_size`` found must exist (the budget holds the smallest one)
    and its addresses, rows ``n`` elements apart, must stay inside int64."""
    if m == 0:
        least = max(mmm_accesses(v, step, t, register) for v in VARIANTS for t in tiles)
        raise UsageError(f"--accesses {budget:,} is too few: the smallest corner, "
                         f"{step} x {step} x {step}, takes {least:,} accesses a trace "
                         f"(give at least that, or a smaller --tile)")
    if 3 * m * n * elem_bytes >= INDEX_LIMIT:
        raise UsageError(f"--n {n}: too large to simulate: rows {n} elements apart put "
                         f"the corner's addresses beyond the {limit_text()} bytes loclab "
                         "addresses")
