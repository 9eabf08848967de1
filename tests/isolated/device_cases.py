"""Tests for batchlab.device: runs without any accelerator.

The NPU path is exercised with a fake ``torch_npu`` module plus a fake ``torch.npu``
namespace, so the selection, timing and memory logic run for real on CPU-only machines.
"""
from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import os
import stat
import sys
import time
import types
from pathlib import Path

import pytest
import torch

from batchlab import device as dev

FIXTURES = Path(__file__).parent.parent / "fixtures"


# ---------------------------------------------------------------------------
# Fakes
# ---------------------------------------------------------------------------


class _FakeEvent:
    def __init__(self, enable_timing: bool = False) -> None:
        assert enable_timing, "timed_region must ask for timing events"
        self.t: float | None = None

    def record(self) -> None:
        self.t = time.perf_counter()

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, other: "_FakeEvent") -> float:
        return (other.t - self.t) * 1000.0  # milliseconds, like torch.cuda.Event


class _FakeNpu:
    """Stands in for the ``torch.npu`` namespace that torch_npu installs."""

    def __init__(self, available: bool = True, count: int = 8) -> None:
        self.available = available
        self.count = count
        self.current = 0
        self.synced: list[int] = []
        self.peak_resets: list[int] = []
        self.Event = _FakeEvent

    def is_available(self) -> bool:
        return self.available

    def device_count(self) -> int:
        return self.count

    def current_device(self) -> int:
        return self.current

    def set_device(self, index: int) -> None:
        self.current = index

    def synchronize(self, index: int | None = None) -> None:
        self.synced.append(index)

    def get_device_name(self, index: int | None = None) -> str:
        return "Ascend910B3"

    def memory_allocated(self, index: int | None = None) -> int:
        return 1_000 + (index or 0)

    def max_memory_allocated(self, index: int | None = None) -> int:
        return 5_000

    def reset_peak_memory_stats(self, index: int | None = None) -> None:
        self.peak_resets.append(index)

    def mem_get_info(self, index: int | None = None) -> tuple[int, int]:
        return (61 * 2**30, 64 * 2**30)


@pytest.fixture
def no_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


@pytest.fixture
def fake_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)


@pytest.fixture
def no_npu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "torch_npu", raising=False)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch_npu" else _real_find_spec(name, *a))
    monkeypatch.delenv(dev.ENV_VAR, raising=False)


_real_find_spec = importlib.util.find_spec


def _install_fake_npu(monkeypatch: pytest.MonkeyPatch, npu: _FakeNpu) -> types.ModuleType:
    # Like the real torch_npu: rename PrivateUse1 to 'npu' (idempotent for the same
    # name, and nothing else in the test run uses PrivateUse1).
    torch.utils.rename_privateuse1_backend("npu")
    module = types.ModuleType("torch_npu")
    module.__spec__ = importlib.machinery.ModuleSpec("torch_npu", None)
    module.__version__ = "2.1.0.post99"
    monkeypatch.setitem(sys.modules, "torch_npu", module)
    monkeypatch.setattr(torch, "npu", npu, raising=False)
    monkeypatch.delenv(dev.ENV_VAR, raising=False)
    return module


@pytest.fixture
def fake_npu(monkeypatch: pytest.MonkeyPatch) -> _FakeNpu:
    npu = _FakeNpu()
    _install_fake_npu(monkeypatch, npu)
    return npu


# ---------------------------------------------------------------------------
# npu-smi parsing
# ---------------------------------------------------------------------------


def test_parse_compact_8_cards() -> None:
    cards = dev.parse_npu_smi((FIXTURES / "npu-smi-23.0-8cards.txt").read_text())
    assert [c.npu_id for c in cards] == list(range(8))
    assert [c.hbm_used_mb for c in cards] == [3161, 59356, 60112, 3407, 12288, 3161, 41920, 3298]
    assert {c.hbm_total_mb for c in cards} == {65536}
    assert [c.power_w for c in cards] == [93.6, 351.2, 348.9, 97.0, 102.5, 90.1, 288.7, 95.3]
    assert [c.temp_c for c in cards] == [36, 52, 51, 38, 39, 35, 47, 37]
    assert [c.aicore_percent for c in cards] == [0, 87, 91, 0, 3, 0, 64, 0]
    assert [c.bus_id for c in cards] == [
        "0000:C1:00.0", "0000:C2:00.0", "0000:81:00.0", "0000:82:00.0",
        "0000:01:00.0", "0000:02:00.0", "0000:41:00.0", "0000:42:00.0",
    ]
    assert [c.health for c in cards].count("Warning") == 1 and cards[3].health == "Warning"
    assert {c.name for c in cards} == {"910B3"} and {c.chip for c in cards} == {0}
    assert cards[1].hbm_fraction == pytest.approx(59356 / 65536)


def test_parse_wide_2_cards_with_process_table() -> None:
    cards = dev.parse_npu_smi((FIXTURES / "npu-smi-24.1-2cards.txt").read_text())
    assert cards == [
        dev.NpuCard(npu_id=0, chip=0, name="910B4", health="OK", power_w=312.8, temp_c=49.0,
                    aicore_percent=76.0, hbm_used_mb=58620, hbm_total_mb=65536, bus_id="0000:9D:00.0"),
        dev.NpuCard(npu_id=1, chip=0, name="910B4", health="OK", power_w=88.4, temp_c=34.0,
                    aicore_percent=0.0, hbm_used_mb=2950, hbm_total_mb=65536, bus_id="0000:9F:00.0"),
    ]
    assert cards[1].hbm_fraction == pytest.approx(2950 / 65536)


def test_parse_rejects_text_without_card_table() -> None:
    with pytest.raises(ValueError, match="no npu-smi card table"):
        dev.parse_npu_smi("command not found: npu-smi\n")


def test_read_npu_smi(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert dev.read_npu_smi() is None  # not on PATH
    if os.name == "nt":
        pytest.skip("shell script stand-in needs a POSIX shell")
    script = tmp_path / "npu-smi"
    script.write_text(f"#!/bin/sh\ncat '{FIXTURES / 'npu-smi-24.1-2cards.txt'}'\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}/bin{os.pathsep}/usr/bin")
    cards = dev.read_npu_smi()
    assert cards is not None and [c.hbm_used_mb for c in cards] == [58620, 2950]


# ---------------------------------------------------------------------------
# Selection
# ---------------------------------------------------------------------------


def test_auto_without_accelerators_is_cpu(no_npu: None, no_cuda: None) -> None:
    assert dev.select_device() == torch.device("cpu")
    assert dev.select_device("auto") == torch.device("cpu")
    assert "torch_npu" not in sys.modules  # absence is no error and nothing was imported


def test_auto_prefers_cuda_over_cpu(no_npu: None, fake_cuda: None) -> None:
    assert dev.select_device() == torch.device("cuda")


def test_auto_prefers_npu_over_cuda(fake_npu: _FakeNpu, fake_cuda: None) -> None:
    chosen = dev.select_device()
    assert chosen.type == "npu" and str(chosen) == "npu"


def test_auto_skips_unavailable_npu(monkeypatch: pytest.MonkeyPatch, fake_cuda: None) -> None:
    _install_fake_npu(monkeypatch, _FakeNpu(available=False))
    assert dev.select_device() == torch.device("cuda")


def test_auto_survives_broken_torch_npu(monkeypatch: pytest.MonkeyPatch, no_cuda: None) -> None:
    monkeypatch.setitem(sys.modules, "torch_npu", None)  # makes 'import torch_npu' raise ImportError
    monkeypatch.delenv(dev.ENV_VAR, raising=False)
    assert dev.select_device() == torch.device("cpu")
    with pytest.raises(RuntimeError, match="set_env.sh"):
        dev.select_device("npu")


def test_explicit_npu_with_index(fake_npu: _FakeNpu) -> None:
    assert dev.select_device("NPU:3") == torch.device("npu", 3)
    with pytest.raises(RuntimeError, match="npu:8"):
        dev.select_device("npu:8")  # only 8 cards: 0..7


def test_explicit_npu_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    _install_fake_npu(monkeypatch, _FakeNpu(available=False))
    with pytest.raises(RuntimeError, match="is_available"):
        dev.select_device("npu")


def test_explicit_cuda(fake_cuda: None) -> None:
    assert dev.select_device("cuda:1") == torch.device("cuda", 1)
    with pytest.raises(RuntimeError, match="cuda:5"):
        dev.select_device("cuda:5")


def test_explicit_cuda_unavailable(no_cuda: None) -> None:
    with pytest.raises(RuntimeError, match="nvidia-smi"):
        dev.select_device("cuda")


def test_env_var_overrides_auto(monkeypatch: pytest.MonkeyPatch, fake_npu: _FakeNpu, fake_cuda: None) -> None:
    monkeypatch.setenv(dev.ENV_VAR, "cpu")
    assert dev.select_device() == torch.device("cpu")
    monkeypatch.setenv(dev.ENV_VAR, "cuda:1")
    assert dev.select_device() == torch.device("cuda", 1)


def test_argument_overrides_env_var(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(dev.ENV_VAR, "bogus")
    assert dev.select_device("cpu") == torch.device("cpu")
    with pytest.raises(ValueError, match=dev.ENV_VAR):
        dev.select_device()


@pytest.mark.parametrize("name", ["gpu", "tpu", "cuda:x", "cpu:1", "auto:0", "npu0"])
def test_unknown_names_raise(name: str) -> None:
    with pytest.raises(ValueError) as info:
        dev.select_device(name)
    message = str(info.value)
    assert repr(name) in message
    assert "auto, cpu, cuda, cuda:N, npu, npu:N" in message


# ---------------------------------------------------------------------------
# Timing and memory
# ---------------------------------------------------------------------------


def test_timed_region_cpu_measures_sleep() -> None:
    with dev.timed_region("cpu") as timing:
        assert timing.seconds is None
        time.sleep(0.02)
    assert timing.seconds is not None
    assert 0.015 <= timing.seconds < 2.0


def test_timed_region_npu_uses_events(fake_npu: _FakeNpu) -> None:
    with dev.timed_region(torch.device("npu", 2)) as timing:
        assert fake_npu.current == 2  # events are recorded on the requested card
        time.sleep(0.02)
    assert 0.015 <= timing.seconds < 2.0
    assert fake_npu.current == 0  # the previous card is current again


def test_memory_info_cpu() -> None:
    info = dev.memory_info("cpu")
    assert 0 < info.allocated <= info.total
    assert info.allocated <= info.peak
    assert 0 <= info.free <= info.total
    assert "psutil" in info.source


def test_reset_peak_memory_cpu() -> None:
    block = bytearray(b"\x01") * (128 * 2**20)  # written, so the pages are resident
    assert dev.memory_info("cpu").peak >= 128 * 2**20
    del block
    if not dev.reset_peak_memory("cpu"):
        pytest.skip("peak RSS cannot be reset on this platform")
    after = dev.memory_info("cpu")
    assert after.peak < after.allocated + 64 * 2**20  # the 128 MiB spike is gone from the peak


def test_memory_and_names_on_fake_npu(fake_npu: _FakeNpu) -> None:
    npu0 = torch.device("npu", 0)
    info = dev.memory_info(npu0)
    assert info == dev.MemoryInfo(allocated=1000, peak=5000, free=61 * 2**30, total=64 * 2**30, source="torch.npu")
    assert dev.device_name(npu0) == "Ascend910B3"
    dev.synchronize(torch.device("npu", 1))
    assert fake_npu.synced == [1]
    assert dev.reset_peak_memory("npu:4") is True
    assert fake_npu.peak_resets == [4]


def test_describe_cpu_is_json_able(no_npu: None) -> None:
    summary = dev.describe("cpu")
    assert summary["device"] == "cpu" and summary["kind"] == "cpu"
    assert summary["torch"] == torch.__version__
    assert summary["torch_npu"] is None
    assert isinstance(summary["name"], str) and summary["name"]
    assert set(summary["memory"]) == {"allocated", "peak", "free", "total", "source"}
    assert json.loads(json.dumps(summary)) == summary


def test_describe_default_follows_selection(fake_npu: _FakeNpu) -> None:
    summary = dev.describe()
    assert summary["kind"] == "npu"
    assert summary["torch_npu"] == "2.1.0.post99"
    assert summary["name"] == "Ascend910B3"
    assert summary["memory"]["total"] == 64 * 2**30
