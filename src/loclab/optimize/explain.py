"""``loclab optimize`` in words: each nest's recipe step by step with its reason, what was
measured to choose (recipes, tiles), and the proof (verification, timing)."""

from __future__ import annotations

from typing import Any

from loclab.model.text import wrap
from loclab.optimize import UNTHREADED
from loclab.transform.inputs import sizes_text


def milliseconds(seconds: float | None) -> str:
    """A time as the explanation shows it."""
    return "-" if seconds is None else f"{seconds * 1e3:.3g} ms"


def _step_lines(step: str, reason: str) -> list[str]:
    return wrap(f"  {step}: {reason}")


def nest_lines(nest: Any) -> list[str]:
    """One nest: its loops, the level kept, each step and why, what stays sequential and
    why, the more ambitious plans the transformer refused."""
    lines = [f"nest at line {nest.line} ({', '.join(nest.loops)}): {nest.level}"]
    for step, reason in nest.steps:
        lines += _step_lines(step, reason)
    if nest.level in UNTHREADED:
        for why in nest.sequential:
            lines += wrap(f"  {why}")
    for level, why in nest.refused:
        lines += wrap(f"  refused ({level}): {why}")
    return lines


def candidate_lines(result: Any) -> list[str]:
    """The acceptable recipes as measured, the kept one marked."""
    if len(result.candidates) < 2:
        return []
    parts = []
    for index, candidate in enumerate(result.candidates):
        name = candidate.recipe or "as written"
        kept = " (kept)" if index == result.kept else ""
        attempt = candidate.attempt
        timing = milliseconds(attempt.summary.median) if attempt.valid else \
            f"failed: {attempt.error or attempt.check.problem}"
        parts.append(f"{name}: {timing}{kept}")
    return wrap("recipes measured (median, the cache model's tiles): " + "; ".join(parts))


def tuning_lines(result: Any) -> list[str]:
    tuned = result.tuning
    if tuned is None:
        return []
    if result.target == "gpu":
        parts = [f"{t.text()}: " + (milliseconds(t.median_s) if t.problem is None else
                                    f"failed ({t.problem})") + (
            " (kept)" if index == tuned.kept else "")
            for index, t in enumerate(tuned.trials)]
        return wrap("launches measured (median): " + "; ".join(parts))
    tiles = ', '.join(f'{k}={v}' for k, v in tuned.tiles.items())
    if tuned.search is None and tuned.unsearched:
        return wrap(f"tiles from the cache model, not searched: {tuned.unsearched}: {tiles}")
    if tuned.search is None:
        return [f"tiles from the tuning cache ({tuned.cached}): {tiles}"]
    shown = sorted((t for t in tuned.search.trials if t.valid), key=lambda t: t.median_s)
    parts = [", ".join(f"{k}={v}" for k, v in t.config.items())
             + f" {milliseconds(t.median_s)}" for t in shown]
    failed = [t for t in tuned.search.trials if not t.valid and t.status != "rejected"]
    rejected = [t for t in tuned.search.trials if t.status == "rejected"]
    text = "tiles measured (median): " + "; ".join(parts)
    if failed:
        text += f"; {len(failed)} failed ({failed[0].reason})"
    if rejected:
        text += f"; {len(rejected)} not tried ({rejected[0].reason})"
    if tuned.search.stopped:
        text += f"; the search stopped {tuned.search.stopped}"
    return wrap(text)


def proof_lines(result: Any) -> list[str]:
    timing = result.timing
    if timing is None:
        return []
    verification = result.verification
    lines = wrap(f"verified against the original {verification.original}: {verification}")
    if timing.original is not None:
        lines += wrap(f"checked at {sizes_text(timing.sizes)} against the original compiled "
                      f"with Numba: {'equal' if result.check.max_rel_err == 0 else 'agrees'}")
    if timing.restored:
        lines += wrap("timed with the arrays the function writes restored before each call, "
                      "the copy included: run again on its own output, it fails")
    if result.target == "gpu":
        gpu = milliseconds(timing.optimized.median)
        if timing.original is None:  # why is the notes' to say, once
            return lines + wrap(f"GPU {gpu} (arrays on the device, CUDA events); the "
                                "original, which Numba refuses, is not timed")
        return lines + wrap(f"original (Numba, as written, CPU) "
                            f"{milliseconds(timing.original.median)}; GPU {gpu} (arrays on "
                            f"the device, CUDA events): {timing.speedup:.3g}x")
    lanes = f", {timing.vector_bits}-bit vectors" if timing.vector_bits else ""
    if timing.original is None:  # why is the notes' to say, once
        lines += wrap(f"optimized {milliseconds(timing.optimized.median)} ({timing.threads} "
                      f"threads{lanes}); the original, which Numba refuses, is not timed")
    elif not result.recipe:
        lines.append(f"original (Numba, as written) {milliseconds(timing.original.median)}; "
                     f"returned as written")
    else:
        threads = f"{timing.threads} threads" if result.parallel else "one thread"
        lines += wrap(f"original (Numba, as written) {milliseconds(timing.original.median)}; "
                      f"optimized {milliseconds(timing.optimized.median)}: "
                      f"{timing.speedup:.3g}x ({threads}{lanes})")
    return lines


def arithmetic_line(fast_math: bool) -> str:
    """How the code rounds, against the original: the user's leave (``--fast-math``) or not."""
    if fast_math:
        return ("arithmetic: fastmath() (--fast-math): the compiler may fuse multiplies and "
                "adds (FMA) and reorder sums throughout; verified within the bound of a "
                "reordered sum")
    return ("arithmetic: no fused multiply-adds; sums reordered only in a function where a "
            "step above vectorizes a sum (the whole function then: Numba has no finer "
            "switch) or splits one among threads (--fast-math lets the compiler fuse "
            "multiply-adds and reorder sums throughout)")


def explain(result: Any) -> str:
    """The whole account, one line per fact, wrapped for a terminal."""
    timing = result.timing
    where = f", tuned at {sizes_text(timing.sizes)}" if timing else ""
    lines = [f"loclab optimize: {result.file}::{result.function} for the "
             f"{result.target.upper()}{where}"]
    for nest in result.nests:
        lines += nest_lines(nest)
    if not result.parallel:
        lines.append("nothing runs in parallel" + (
            "" if result.recipe else ": the function is returned as written"))
    if result.target == "cpu":
        lines += wrap(arithmetic_line(result.fast_math))
    lines += candidate_lines(result) + tuning_lines(result) + proof_lines(result)
    lines += [f"note: {note}" for note in result.notes]
    return "\n".join(lines)
