"""The tuning cache: where it lives, its keys, atomic merging writes, corrupt files."""

from __future__ import annotations

import json
import os

import pytest

from loclab.errors import LoclabError, UsageError
from loclab.measure import cache

DIMS = {"m": 64, "n": 32, "k": 16}


def entry(dims=DIMS, **params):
    return cache.make_entry(dims, params or {"T": 16}, 1e-3, "local", 7)


def test_default_path_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("LOCLAB_TUNING_CACHE", str(tmp_path / "mine.json"))
    assert cache.default_path() == tmp_path / "mine.json"
    monkeypatch.delenv("LOCLAB_TUNING_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.default_path() == tmp_path / "xdg" / "loclab" / "tuning.json"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache.default_path() == tmp_path / "home" / ".cache" / "loclab" / "tuning.json"


def test_device_names_the_gpu_or_the_cpu_and_its_threads(machine):
    from dataclasses import replace
    from types import SimpleNamespace

    assert cache.device_name("cpu", machine, 3) == f"{machine.cpu.model} (3 threads)"
    with_gpu = replace(machine, gpu=SimpleNamespace(name="NVIDIA H200"))
    assert cache.device_name("gpu", with_gpu, None) == "NVIDIA H200"


def test_an_entry_is_found_by_device_variant_and_exact_size(tmp_path):
    path = tmp_path / "sub" / "tuning.json"
    cache.store(path, "GPU X", "mmm", "gpu-tiled", entry())
    found = cache.load(path)
    assert found.lookup("GPU X", "mmm", "gpu-tiled", {"k": 16, "n": 32, "m": 64})["params"] == {
        "T": 16}
    for miss in (("GPU Y", "mmm", "gpu-tiled", DIMS), ("GPU X", "mmm", "gpu-other", DIMS),
                 ("GPU X", "mmm", "gpu-tiled", {**DIMS, "k": 17})):
        assert found.lookup(*miss) is None
    stored = json.loads(path.read_text())["entries"]["GPU X"]["mmm/gpu-tiled"]["k=16 m=64 n=32"]
    assert {"dims", "params", "median_s", "strategy", "evaluated", "date", "loclab"} <= set(
        stored)


def test_stores_merge_with_what_is_there(tmp_path):
    path = tmp_path / "tuning.json"
    cache.store(path, "GPU X", "mmm", "a", entry(T=8))
    cache.store(path, "GPU X", "mmm", "b", entry(T=16))
    cache.store(path, "CPU Y (2 threads)", "mmm", "a", entry(T=32))
    cache.store(path, "GPU X", "mmm", "a", entry({**DIMS, "m": 1}, T=64))
    cache.store(path, "GPU X", "mmm", "a", entry(T=4))  # replaces the first
    found = cache.load(path)
    assert [found.lookup(device, "mmm", variant, dims)["params"]["T"] for device, variant, dims
            in (("GPU X", "a", DIMS), ("GPU X", "b", DIMS), ("CPU Y (2 threads)", "a", DIMS),
                ("GPU X", "a", {**DIMS, "m": 1}))] == [4, 16, 32, 64]
    assert os.listdir(tmp_path) == ["tuning.json"]  # no temporary file left behind


def test_a_failed_write_leaves_the_cache_as_it_was(tmp_path, monkeypatch):
    path = tmp_path / "tuning.json"
    cache.store(path, "GPU X", "mmm", "a", entry(T=8))
    before = path.read_text()

    def disk_full(source, target):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", disk_full)
    with pytest.raises(LoclabError, match="cannot write the tuning cache: No space left"):
        cache.store(path, "GPU X", "mmm", "b", entry(T=16))
    assert path.read_text() == before and os.listdir(tmp_path) == ["tuning.json"]


@pytest.mark.parametrize("text, fragment", [
    ("{not json", "corrupt tuning cache"),
    ("[]", "not a loclab tuning cache"),
    ('{"format": 1, "entries": {"GPU": {"mmm/a": {"n=1": {"params": {"T": "big"}}}}}}',
     "GPU mmm/a n=1: no whole-number params"),
    ('{"format": 1, "entries": {"GPU": 3}}', "GPU: not an object"),
])
def test_a_corrupt_cache_warns_a_run_in_one_line_and_is_never_replaced(tmp_path, capsys,
                                                                       text, fragment):
    path = tmp_path / "tuning.json"
    path.write_text(text)
    assert cache.load(path).entries == {}
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and fragment in err and err.startswith("loclab: warning: ")
    with pytest.raises(UsageError, match=fragment):
        cache.check_is_cache(path)
    with pytest.raises(UsageError, match=fragment):
        cache.store(path, "GPU X", "mmm", "a", entry())
    assert path.read_text() == text  # the user's file, as it was


def test_an_unreadable_cache_warns_and_a_missing_one_is_silent(tmp_path, capsys):
    assert cache.load(tmp_path / "missing.json").entries == {}
    assert capsys.readouterr().err == ""
    assert cache.load(tmp_path).entries == {}  # a directory
    assert "cannot read the tuning cache" in capsys.readouterr().err
