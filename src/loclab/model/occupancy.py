"""Occupancy: how many blocks and warps of a kernel an SM holds at once, which resource stops
it there, and what to give up for the next step up.

The lectures' arithmetic divides the SM's registers and shared memory by a block's needs. The
hardware allocates in coarser units, and the answer here follows it (the rules of NVIDIA's
occupancy calculator, ``cuda_occupancy.h``), so that it equals what
``cudaOccupancyMaxActiveBlocksPerMultiprocessor`` returns:

- registers are allocated per warp, in units of 256 (34 a thread is 1088 a warp, allocated
  1280), from each of the SM's four register files (one per warp scheduler, 16384 registers
  each): a warp never straddles two of them;
- shared memory is allocated per block in units of 256 bytes (compute capability 7.x) or
  128 (8.0 on), and from 8.0 on the driver reserves 1 KiB more for every block;
- the SM's shared memory is one of a few carve-outs of its unified L1; unless the kernel asks
  for less (``--carveout``), the largest.

Where the slides' simpler division gives another answer, the result says so and why.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from loclab.errors import UsageError
from loclab.model.text import wrap

WARP = 32
DATA_FILE = Path(__file__).with_name("gpus.json")
# Order in which a tie names the limiting resource: the SM's own slots first (a kernel that
# fills them is as occupied as it can be), then what the kernel could give up.
RESOURCES = ("warps", "blocks", "registers", "shared_memory")


@dataclass(frozen=True)
class SmLimits:
    """One compute capability's per-SM and per-block limits (bytes; carve-outs in KiB)."""

    capability: str
    architecture: str
    max_warps_per_sm: int
    max_blocks_per_sm: int
    max_threads_per_block: int
    registers_per_sm: int
    registers_per_block: int
    max_registers_per_thread: int
    register_allocation_unit: int
    register_sub_partitions: int
    shared_per_sm: int
    shared_per_block: int
    shared_per_block_optin: int
    shared_allocation_unit: int
    shared_reserved_per_block: int
    shared_carveouts_kib: tuple[int, ...]


@functools.cache
def _table() -> dict[str, Any]:
    return json.loads(DATA_FILE.read_text())


def known_gpus() -> list[str]:
    """The names ``--gpu`` takes, then the compute capabilities."""
    table = _table()
    return sorted(table["gpus"]) + [f"sm_{c.replace('.', '')}" for c in table["capabilities"]]


def known_capabilities() -> list[str]:
    return list(_table()["capabilities"])


def limits_for(gpu: str) -> SmLimits:
    """``v100``, ``H100``, ``sm_90``, ``9.0`` or ``compute_90``: that GPU's limits."""
    table = _table()
    text = gpu.strip().lower().replace(" ", "")
    capability = table["gpus"].get(text.removeprefix("nvidia"))
    match = re.fullmatch(r"(?:sm_?|compute_?|cc)?(\d+)\.?(\d)", text)
    if capability is None and match:
        capability = f"{match.group(1)}.{match.group(2)}"
    if capability not in table["capabilities"]:
        raise UsageError(_unknown_gpu(gpu, capability))
    entry = dict(table["capabilities"][capability])
    entry["shared_carveouts_kib"] = tuple(entry["shared_carveouts_kib"])
    return SmLimits(capability=capability, **entry)


def _unknown_gpu(gpu: str, capability: str | None) -> str:
    """The refusal of ``--gpu``: the known compute capabilities first (a capability that is
    not in the table is the likelier mistake for a GPU too new or too old), then the names."""
    written = "" if gpu.strip() == capability else f" ({gpu.strip()})"
    what = f"compute capability {capability}{written}" if capability else f"GPU {gpu!r}"
    return (f"unknown {what}: the known compute capabilities are "
            f"{', '.join(known_capabilities())} (written 9.0 or sm_90), the known GPUs "
            f"{', '.join(sorted(_table()['gpus']))}")


def shared_block_limit(gpu: str | None) -> tuple[int, str]:
    """The most shared memory one block can have (a kernel that opts in), in bytes, on
    ``gpu``; without one, the most on any GPU known (no shared array a real kernel could
    declare is refused then). Also the words that say whose limit it is."""
    if gpu is not None:
        sm = limits_for(gpu)
        return sm.shared_per_block_optin, f"on {gpu} (compute capability {sm.capability})"
    most = max(known_capabilities(), key=lambda c: limits_for(c).shared_per_block_optin)
    return (limits_for(most).shared_per_block_optin,
            f"on any GPU loclab knows (compute capability {most}; --gpu names one)")


@dataclass(frozen=True)
class Kernel:
    """What a launch asks of an SM: threads a block, registers a thread, shared memory a
    block (the compiled kernel's static arrays plus the launch's dynamic bytes)."""

    threads: int
    registers: int
    static_shared: int = 0
    dynamic_shared: int = 0

    @property
    def shared(self) -> int:
        return self.static_shared + self.dynamic_shared

    @property
    def warps(self) -> int:
        return -(-self.threads // WARP)


@dataclass(frozen=True)
class Occupancy:
    """The answer, with every resource's own limit on blocks (``limits``) and advice."""

    gpu: str
    limits_of: SmLimits
    kernel: Kernel
    carveout_percent: int | None
    blocks_per_sm: int
    limits: dict[str, int]
    limited_by: str
    registers_per_warp: int
    shared_per_block: int
    shared_per_sm: int
    advice: list[str] = field(default_factory=list)
    next_step: dict[str, int] | None = None  # {resource: at most this much, "blocks": gives}
    slides: list[str] = field(default_factory=list)

    @property
    def warps_per_sm(self) -> int:
        return self.blocks_per_sm * self.kernel.warps

    @property
    def occupancy(self) -> float:
        return self.warps_per_sm / self.limits_of.max_warps_per_sm

    def to_json(self) -> dict[str, Any]:
        return {"gpu": self.gpu, "compute_capability": self.limits_of.capability,
                **asdict(self.kernel), "carveout_percent": self.carveout_percent,
                "blocks_per_sm": self.blocks_per_sm, "warps_per_sm": self.warps_per_sm,
                "max_warps_per_sm": self.limits_of.max_warps_per_sm,
                "occupancy": self.occupancy, "limited_by": self.limited_by,
                "limits": {r: (None if n >= UNLIMITED else n) for r, n in self.limits.items()},
                "registers_allocated_per_warp": self.registers_per_warp,
                "shared_allocated_per_block": self.shared_per_block,
                "shared_per_sm": self.shared_per_sm, "advice": self.advice,
                "next_step": self.next_step,
                "slides": self.slides}

    def lines(self) -> list[str]:
        k, sm = self.kernel, self.limits_of
        shared = f"{k.shared} B shared" + (f" ({k.static_shared} static + {k.dynamic_shared} "
                                          f"dynamic)" if k.static_shared and k.dynamic_shared
                                          else "")
        out = [f"{self.gpu}: compute capability {sm.capability} ({sm.architecture})",
               f"  a block of {k.threads} threads, {k.registers} registers a thread, {shared}",
               f"  {self.blocks_per_sm} blocks = {self.warps_per_sm} of "
               f"{sm.max_warps_per_sm} warps an SM: occupancy {self.occupancy:.3g}, "
               f"limited by {self.limited_by.replace('_', ' ')}"]
        names = {"warps": "warp slots", "blocks": "block slots", "registers": "registers",
                 "shared_memory": "shared memory"}
        out += [f"    {names[r]:<14} {_blocks(self.limits[r])}" for r in RESOURCES]
        return out + [line for note in self.advice + self.slides for line in wrap(f"  {note}")]


def _blocks(limit: int) -> str:
    return "no limit" if limit >= UNLIMITED else f"{limit} blocks"


UNLIMITED = 1 << 30
MAX_LAUNCH_SHARED = 2**32 - 1  # cuLaunchKernel's sharedMemBytes is an unsigned int


def _round_up(value: int, unit: int) -> int:
    return -(-value // unit) * unit


def register_limit(sm: SmLimits, kernel: Kernel) -> tuple[int, int]:
    """(blocks the registers allow, registers allocated a warp)."""
    per_warp = _round_up(kernel.registers * WARP, sm.register_allocation_unit)
    if per_warp == 0:
        return UNLIMITED, 0
    # The hardware places a block's warps evenly over the sub-partitions: it must fit that way.
    if per_warp * _round_up(kernel.warps, sm.register_sub_partitions) > sm.registers_per_block:
        return 0, per_warp
    per_partition = sm.registers_per_sm // sm.register_sub_partitions // per_warp
    return per_partition * sm.register_sub_partitions // kernel.warps, per_warp


def shared_allocation(sm: SmLimits, shared_bytes: int) -> int:
    return _round_up(shared_bytes + sm.shared_reserved_per_block, sm.shared_allocation_unit)


def shared_per_sm(sm: SmLimits, per_block: int, carveout_percent: int | None) -> int:
    """The SM's shared memory in the carve-out the driver picks: the largest, or the smallest
    configuration at least the preferred percentage (and at least one block's need)."""
    if carveout_percent is None:
        return sm.shared_per_sm
    wanted = max(carveout_percent * sm.shared_per_sm // 100, per_block)
    return next(kib * 1024 for kib in sm.shared_carveouts_kib if kib * 1024 >= wanted)


def shared_limit(sm: SmLimits, kernel: Kernel, carveout_percent: int | None
                 ) -> tuple[int, int, int]:
    """(blocks the shared memory allows, bytes allocated a block, bytes the SM has)."""
    per_block = shared_allocation(sm, kernel.shared)
    per_block_limit = (sm.shared_per_block_optin if kernel.dynamic_shared else
                       sm.shared_per_block) + sm.shared_reserved_per_block
    if per_block > per_block_limit:
        return 0, per_block, sm.shared_per_sm
    on_sm = shared_per_sm(sm, per_block, carveout_percent)
    return (on_sm // per_block if per_block else UNLIMITED), per_block, on_sm


def occupancy(gpu: str, threads: int, registers: int, static_shared: int = 0,
              dynamic_shared: int = 0, carveout_percent: int | None = None) -> Occupancy:
    """The occupancy of a kernel on ``gpu`` (a name or compute capability)."""
    sm = limits_for(gpu)
    kernel = Kernel(threads, registers, static_shared, dynamic_shared)
    _check(sm, kernel, carveout_percent)
    return _occupancy(gpu, sm, kernel, carveout_percent)


def _check(sm: SmLimits, kernel: Kernel, carveout_percent: int | None) -> None:
    if not 1 <= kernel.threads <= sm.max_threads_per_block:
        raise UsageError(f"--threads {kernel.threads}: a block has 1 to "
                         f"{sm.max_threads_per_block} threads")
    if not 0 <= kernel.registers <= sm.max_registers_per_thread:
        raise UsageError(f"--regs {kernel.registers}: a thread has 0 to "
                         f"{sm.max_registers_per_thread} registers")
    if kernel.static_shared < 0 or kernel.dynamic_shared < 0:
        raise UsageError("--smem: shared memory cannot be negative")
    if kernel.shared > MAX_LAUNCH_SHARED:
        raise UsageError(f"--smem {kernel.shared}: more than a launch can ask for (CUDA takes "
                         f"a block's shared memory as an unsigned int: at most "
                         f"{MAX_LAUNCH_SHARED} B)")
    if kernel.static_shared > sm.shared_per_block:
        raise UsageError(f"{kernel.static_shared} B of static shared memory: a kernel's "
                         f"static arrays have at most {sm.shared_per_block} B")
    if carveout_percent is not None and not 0 <= carveout_percent <= 100:
        raise UsageError(f"--carveout {carveout_percent}: a percentage, 0 to 100")


def _occupancy(gpu: str, sm: SmLimits, kernel: Kernel, carveout: int | None) -> Occupancy:
    registers, per_warp = register_limit(sm, kernel)
    shared, per_block, on_sm = shared_limit(sm, kernel, carveout)
    limits = {"warps": sm.max_warps_per_sm // kernel.warps, "blocks": sm.max_blocks_per_sm,
              "registers": registers, "shared_memory": shared}
    blocks = min(limits.values())
    limited_by = next(r for r in RESOURCES if limits[r] == blocks)
    result = Occupancy(gpu, sm, kernel, carveout, blocks, limits, limited_by, per_warp,
                       per_block, on_sm)
    advice, step = _advice(result)
    return replace(result, advice=[advice], next_step=step, slides=_slides(result))


Step = tuple[str, "dict[str, int] | None"]


def _advice(result: Occupancy) -> Step:
    """What to give up (or change) for the next step up, as the slides ask, and that step
    (the resource's new most and the blocks it gives) where giving up one resource does it."""
    sm, kernel, blocks = result.limits_of, result.kernel, result.blocks_per_sm
    if blocks == 0:
        return _cannot_launch(result), None
    if result.occupancy == 1:
        return "the SM's warp slots are full: nothing to gain", None
    if result.limited_by == "warps":
        return (f"a block of {kernel.warps} warps leaves "
                f"{sm.max_warps_per_sm - result.warps_per_sm} of {sm.max_warps_per_sm} warp "
                f"slots empty: a block whose warps divide {sm.max_warps_per_sm} fills them",
                None)
    others = {r: n for r, n in result.limits.items() if r != result.limited_by}
    if min(others.values()) == blocks:
        tied = [r.replace("_", " ") for r in RESOURCES if others.get(r) == blocks]
        return (f"{result.limited_by.replace('_', ' ')} and {' and '.join(tied)} allow "
                f"{blocks} blocks alike: giving up one alone gains nothing", None)
    if result.limited_by == "registers":
        return _fewer_registers(result, min(others.values()))
    if result.limited_by == "shared_memory":
        return _less_shared(result, min(others.values()))
    least = -(-sm.max_warps_per_sm // sm.max_blocks_per_sm) * WARP
    return (f"{sm.max_blocks_per_sm} blocks of {kernel.threads} threads fill only "
            f"{result.warps_per_sm} warp slots: blocks of at least {least} threads fill all",
            None)


def _fewer_registers(result: Occupancy, ceiling: int) -> Step:
    sm, kernel = result.limits_of, result.kernel
    target = result.blocks_per_sm + 1
    for registers in range(kernel.registers - 1, -1, -1):
        fewer = Kernel(kernel.threads, registers, kernel.static_shared, kernel.dynamic_shared)
        allowed = register_limit(sm, fewer)[0]
        if allowed >= target:
            blocks = min(allowed, ceiling)
            return (f"{kernel.registers - registers} fewer registers a thread ({registers}, "
                    f"e.g. __launch_bounds__({kernel.threads}, {blocks})) gives {blocks} "
                    f"blocks: occupancy {blocks * kernel.warps / sm.max_warps_per_sm:.3g}",
                    {"registers": registers, "blocks": blocks})
    raise AssertionError("zero registers never limit")


def _less_shared(result: Occupancy, ceiling: int) -> Step:
    sm, kernel = result.limits_of, result.kernel
    target = result.blocks_per_sm + 1
    allocation = result.shared_per_sm // target // sm.shared_allocation_unit * \
        sm.shared_allocation_unit
    most = allocation - sm.shared_reserved_per_block
    if most < kernel.static_shared:
        return (f"{target} blocks need at most {max(most, 0)} B of shared memory a block, "
                f"less than the kernel's {kernel.static_shared} B of static arrays", None)
    blocks = min(result.shared_per_sm // allocation, ceiling)
    return (f"{kernel.shared - most} B less shared memory a block (at most {most} B) gives "
            f"{blocks} blocks: occupancy {blocks * kernel.warps / sm.max_warps_per_sm:.3g}",
            {"shared_bytes": most, "blocks": blocks})


def _cannot_launch(result: Occupancy) -> str:
    sm, kernel = result.limits_of, result.kernel
    if result.limits["registers"] == 0:
        return (f"cannot launch: {kernel.warps} warps x {result.registers_per_warp} registers "
                f"exceed the {sm.registers_per_block} a block may have")
    return (f"cannot launch: {result.shared_per_block} B of shared memory a block "
            f"(with the allocation unit and reserve) exceed what a block may have")


def _slides(result: Occupancy) -> list[str]:
    """The slides' division, where it disagrees with the hardware's allocation, and why."""
    sm, kernel = result.limits_of, result.kernel
    notes = []
    if kernel.registers:
        per_block = kernel.registers * kernel.threads
        naive = min(sm.registers_per_sm // per_block, result.limits["warps"])
        if naive != min(result.limits["registers"], result.limits["warps"]):
            notes.append(
                f"the slides' arithmetic, {kernel.registers} x {kernel.threads} = {per_block} "
                f"registers a block, {sm.registers_per_sm} / {per_block} = "
                f"{sm.registers_per_sm // per_block} blocks, is not the hardware's: it "
                f"allocates a warp's registers in units of {sm.register_allocation_unit} "
                f"({kernel.registers} x {WARP} = {kernel.registers * WARP} -> "
                f"{result.registers_per_warp}) from each of {sm.register_sub_partitions} "
                f"register files of {sm.registers_per_sm // sm.register_sub_partitions} "
                f"(one a scheduler): {result.limits['registers']} blocks")
    if kernel.shared:
        naive = result.shared_per_sm // kernel.shared
        if naive != result.limits["shared_memory"]:
            reserve = (f" plus the {sm.shared_reserved_per_block} B the driver reserves for "
                       f"each block" if sm.shared_reserved_per_block else "")
            notes.append(
                f"{result.shared_per_sm} / {kernel.shared} B = {naive} blocks by the slides' "
                f"division; the SM allocates {result.shared_per_block} B a block (units of "
                f"{sm.shared_allocation_unit} B{reserve}): "
                f"{result.limits['shared_memory']} blocks")
    return notes
