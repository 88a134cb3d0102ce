"""The GPU glue that needs no GPU: quoted includes inlined for NVRTC, multi-kernel runs in
order, and CUB's rows skipped with a reason where nvcc is missing."""

import shutil

from loclab.gpu.kernels import in_order, kernel_text


def test_quoted_includes_are_inlined_for_nvrtc(tmp_path):
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "h.cuh").write_text('#include "h.cuh"\nint from_header;\n')
    (tmp_path / "case").mkdir()
    kernel = tmp_path / "case" / "k.cu"
    kernel.write_text('#include "../shared/h.cuh"\n#include <cub/cub.cuh>\nint mine;\n')
    text = kernel_text(kernel)
    assert "int from_header;" in text and "int mine;" in text
    assert '#include "' not in text and "#include <cub/cub.cuh>" in text  # system ones stay


def test_cub_rows_say_why_without_nvcc(monkeypatch):
    from loclab.gpu import cub

    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert "nvcc not found" in cub.skip_rule({}, None)


def test_in_order_runs_before_then_each_launch_and_returns_the_last_result():
    calls = []

    def launch(name):
        return lambda: calls.append(name) or f"result of {name}"

    run = in_order(launch("first"), launch("second"), before=lambda: calls.append("clear"))
    assert run() == "result of second"
    assert calls == ["clear", "first", "second"]
    assert in_order(launch("only"))() == "result of only"
