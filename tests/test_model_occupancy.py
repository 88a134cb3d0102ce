"""``loclab.model.occupancy`` against NVIDIA's occupancy calculator and the lectures' numbers.

The calculator's answers (``tests/data/occupancy_calculator.json``) come from
``cuda_occupancy.h`` itself (``scripts/occupancy-table`` compiles it), for a sweep of threads,
registers and shared memory on every compute capability loclab knows; on a GPU,
``tests/test_gpu.py`` compares every case's kernels with the driver's own answer.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loclab.errors import UsageError
from loclab.model.occupancy import known_gpus, limits_for, occupancy

CALCULATOR = Path(__file__).with_name("data") / "occupancy_calculator.json"


def calculator_rows() -> list[tuple[str, int, int, int, int]]:
    table = json.loads(CALCULATOR.read_text())
    return [(cc, *row) for cc, rows in table.items() if not cc.startswith("_") for row in rows]


def test_the_calculator_table_covers_every_capability() -> None:
    capabilities = {row[0] for row in calculator_rows()}
    assert capabilities == {"7.0", "7.5", "8.0", "8.6", "8.9", "9.0"}
    assert len(calculator_rows()) > 10_000


def test_blocks_per_sm_equal_the_calculators_for_every_configuration() -> None:
    wrong = [(cc, threads, registers, shared, blocks,
              occupancy(cc, threads, registers, dynamic_shared=shared).blocks_per_sm)
             for cc, threads, registers, shared, blocks in calculator_rows()
             if occupancy(cc, threads, registers, dynamic_shared=shared).blocks_per_sm
             != max(blocks, 0)]
    assert wrong == []


@pytest.mark.parametrize("threads, blocks, occupied", [
    (512, 4, 1.0),   # 2048 threads / 512
    (128, 16, 1.0),
    (32, 32, 0.5),   # block slots maxed out: 32 x 32 = 1024 of 2048 threads
])
def test_the_slides_v100_block_size_examples(threads: int, blocks: int,
                                             occupied: float) -> None:
    result = occupancy("v100", threads, registers=16)
    assert (result.blocks_per_sm, result.occupancy) == (blocks, occupied)
    assert result.limited_by == ("blocks" if threads == 32 else "warps")


def test_the_slides_register_example_and_where_the_hardware_differs() -> None:
    full = occupancy("v100", 256, 32)  # 8192 registers a block x 8 blocks = 64 K: full
    assert (full.blocks_per_sm, full.occupancy) == (8, 1.0)
    assert full.slides == []
    more = occupancy("v100", 256, 34)
    # The slides: 34 x 256 x 7 = 60 K registers, 7 blocks, 0.875. The hardware allocates
    # 1280 registers a warp (units of 256) from four files of 16 K: 12 warps each, 6 blocks.
    assert (more.blocks_per_sm, more.occupancy, more.limited_by) == (6, 0.75, "registers")
    assert more.registers_per_warp == 1280
    assert "7 blocks" in more.slides[0] and "units of 256" in more.slides[0]
    assert more.next_step == {"registers": 32, "blocks": 8}


def test_the_next_step_is_the_least_given_up_for_more_blocks() -> None:
    for gpu, threads, registers, shared in [("a100", 256, 72, 0), ("h100", 128, 0, 50_000),
                                            ("sm_86", 256, 40, 16_384), ("t4", 64, 90, 0)]:
        now = occupancy(gpu, threads, registers, dynamic_shared=shared)
        step = now.next_step
        assert step is not None, (gpu, now.advice)
        if "registers" in step:
            better = occupancy(gpu, threads, step["registers"], dynamic_shared=shared)
            almost = occupancy(gpu, threads, step["registers"] + 1, dynamic_shared=shared)
        else:
            better = occupancy(gpu, threads, registers, dynamic_shared=step["shared_bytes"])
            almost = occupancy(gpu, threads, registers,
                               dynamic_shared=step["shared_bytes"] + 1)
        assert better.blocks_per_sm == step["blocks"] > now.blocks_per_sm
        assert almost.blocks_per_sm == now.blocks_per_sm


def test_shared_memory_counts_the_allocation_unit_and_the_per_block_reserve() -> None:
    result = occupancy("sm_86", 256, 40, dynamic_shared=16_384)
    # 16 KiB + 1 KiB reserve = 17 KiB a block: 100 KiB / 17 KiB = 5 blocks, not 6.
    assert result.shared_per_block == 17_408 and result.blocks_per_sm == 5
    assert "reserves" in result.slides[0]
    volta = occupancy("v100", 256, 16, dynamic_shared=4_000)  # units of 256 B, no reserve
    assert volta.shared_per_block == 4_096


def test_a_smaller_carveout_limits_blocks() -> None:
    default = occupancy("a100", 256, 32, dynamic_shared=8_000)
    assert default.shared_per_sm == 167_936
    small = occupancy("a100", 256, 32, dynamic_shared=8_000, carveout_percent=25)
    assert small.shared_per_sm == 64 * 1024  # 25% of 164 KiB, up to the 64 KiB carve-out
    assert small.blocks_per_sm == 64 * 1024 // 9_088


def test_a_kernel_that_cannot_launch_has_no_blocks() -> None:
    result = occupancy("v100", 1024, 65)
    assert result.blocks_per_sm == 0 and result.limited_by == "registers"
    assert result.advice[0].startswith("cannot launch")


def test_json_has_the_contract_keys() -> None:
    document = occupancy("h100", 256, 34, dynamic_shared=4096).to_json()
    assert {"blocks_per_sm", "warps_per_sm", "occupancy", "limited_by"} <= set(document)
    assert 0 <= document["occupancy"] <= 1
    assert document["limited_by"] in ("warps", "blocks", "registers", "shared_memory")
    json.dumps(document)


def test_gpu_names_and_capabilities() -> None:
    assert limits_for("V100").capability == "7.0"
    assert limits_for("NVIDIA H100").capability == "9.0"
    assert limits_for("sm_89").capability == limits_for("8.9").capability == "8.9"
    assert "a100" in known_gpus() and "sm_90" in known_gpus()


@pytest.mark.parametrize("call, message", [
    (lambda: occupancy("p100", 256, 32), "unknown GPU 'p100'"),
    (lambda: occupancy("h100", 2048, 32), "--threads 2048"),
    (lambda: occupancy("h100", 256, 300), "--regs 300"),
    (lambda: occupancy("h100", 256, 32, carveout_percent=120), "--carveout 120"),
])
def test_bad_input_is_one_line(call, message: str) -> None:
    with pytest.raises(UsageError, match=message.replace("(", r"\(")) as error:
        call()
    assert "\n" not in str(error.value)


def test_lines_fit_80_columns() -> None:
    for args in [("v100", 256, 34), ("sm_86", 256, 40), ("h100", 768, 32)]:
        assert all(len(line) <= 80 for line in occupancy(*args).lines())
