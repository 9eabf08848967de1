"""Tests for batchlab.measure.device and batchlab.measure.device_memory: runs without any accelerator.

The NPU path is exercised with a fake ``torch_npu`` module plus a fake ``torch.npu``
namespace, so the selection, timing and memory logic run for real on CPU-only machines.
The fakes patch only shared objects (``torch.npu``, ``torch.cuda``, ``sys.modules``,
``importlib.util.find_spec``), never module internals, so both modules see them.
Parsing ``npu-smi`` needs no fake: it is tested in ``tests/test_npu_smi.py``.
"""
from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import sys
import time
import types

import pytest
import torch

from batchlab.measure import device as dev
from batchlab.measure import device_memory as mem

MiB = 2**20


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
    # Within what happened, on any machine: at least the sleep, at most the wall time around the region.
    outer = time.perf_counter()
    with dev.timed_region("cpu") as timing:
        assert timing.seconds is None
        time.sleep(0.02)
    outer = time.perf_counter() - outer
    assert timing.seconds is not None
    assert 0.015 <= timing.seconds <= outer


def test_timed_region_npu_uses_events(fake_npu: _FakeNpu) -> None:
    outer = time.perf_counter()
    with dev.timed_region(torch.device("npu", 2)) as timing:
        assert fake_npu.current == 2  # events are recorded on the requested card
        time.sleep(0.02)
    outer = time.perf_counter() - outer
    assert 0.015 <= timing.seconds <= outer
    assert fake_npu.current == 0  # the previous card is current again


def test_memory_info_cpu_tracks_process_rss() -> None:
    before = mem.memory_info("cpu")
    assert before.measures == "process_rss" and "psutil" in before.source
    block = torch.ones(64 * MiB, dtype=torch.float32)  # 256 MiB, every page written: resident
    during = mem.memory_info("cpu")
    assert during.allocated - before.allocated >= 200 * MiB
    assert during.peak >= during.allocated
    assert 0 <= during.free <= during.total
    del block  # a block this large goes back to the OS at once (mmap'ed, not cached)
    after = mem.memory_info("cpu")
    assert after.allocated <= during.allocated - 200 * MiB  # 'allocated' is current RSS ...
    # ... while 'peak' remembers the spike (compared with slack: the kernel's VmHWM can sit
    # some KiB below an RSS that was read earlier, its counters are approximate).
    assert after.peak - before.allocated >= 200 * MiB


def test_reset_peak_memory_cpu_drops_the_spike() -> None:
    block = bytearray(b"\x01") * (128 * MiB)  # written, so the pages are resident
    assert mem.memory_info("cpu").peak >= 128 * MiB
    del block
    if not mem.reset_peak_memory("cpu"):
        pytest.skip("peak RSS cannot be reset here: /proc/self/clear_refs is missing or not writable")
    after = mem.memory_info("cpu")
    assert after.peak < after.allocated + 64 * MiB  # the 128 MiB spike is gone from the peak


def test_memory_and_names_on_fake_npu(fake_npu: _FakeNpu) -> None:
    info = mem.memory_info(torch.device("npu", 3))
    # The fake's exact numbers pass through, read for card 3 (memory_allocated is 1000 + index).
    assert info == mem.MemoryInfo(allocated=1003, peak=5000, free=61 * 2**30, total=64 * 2**30,
                                  measures="allocator", source="torch.npu")
    fake_npu.current = 5
    assert mem.memory_info("npu").allocated == 1005  # index-less: the current card
    assert dev.device_name(torch.device("npu", 0)) == "Ascend910B3"
    dev.synchronize(torch.device("npu", 1))
    assert fake_npu.synced == [1]
    assert mem.reset_peak_memory("npu:4") is True
    assert fake_npu.peak_resets == [4]


def test_describe_cpu_is_json_able(no_npu: None) -> None:
    report = mem.describe("cpu")
    assert report.device == "cpu" and report.kind == "cpu"
    assert report.torch == torch.__version__
    assert report.torch_npu is None
    assert isinstance(report.name, str) and report.name
    assert report.memory.measures == "process_rss"
    summary = report.as_record()
    assert set(summary["memory"]) == {"allocated", "peak", "free", "total", "measures", "source"}
    assert json.loads(json.dumps(summary)) == summary


def test_describe_default_follows_selection(fake_npu: _FakeNpu) -> None:
    report = mem.describe()
    assert report.kind == "npu"
    assert report.torch_npu == "2.1.0.post99"
    assert report.name == "Ascend910B3"
    assert report.memory.total == 64 * 2**30
    assert report.memory.measures == "allocator"
