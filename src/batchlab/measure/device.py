"""Pick a device (Ascend NPU, CUDA GPU or CPU), name it, synchronise it and time work on it.

Everything here works on a laptop without accelerators; the NPU and CUDA paths only run
when the hardware is there. ``torch_npu`` is an optional extra: it is imported only when
``npu`` is asked for, or during auto-detection when ``importlib.util.find_spec`` finds it.

The device layer is three modules, one concern each:

* this one: :func:`select_device` (and ``$BATCHLAB_DEVICE``), :func:`device_name`,
  :func:`synchronize`, :func:`timed_region`, and the
  helpers the other modules build on: :func:`as_device`, :func:`accelerator_module`,
  :func:`card_index`;
* :mod:`batchlab.measure.device_memory`: :func:`~batchlab.measure.device_memory.memory_info` and
  :func:`~batchlab.measure.device_memory.reset_peak_memory`, what torch's allocator (cuda/npu) or
  the process (cpu) holds, and :func:`~batchlab.measure.device_memory.describe` (the CLI summary);
* :mod:`batchlab.measure.npu_smi`: parsing ``npu-smi info``, torch-free.

Ascend notes:

* ``torch_npu`` renames torch's PrivateUse1 backend to ``npu`` and adds ``torch.npu``,
  which mirrors ``torch.cuda`` (``is_available``, ``synchronize``, ``Event``,
  ``memory_allocated``, ``mem_get_info``, ...). The device layer therefore treats
  ``torch.cuda`` and ``torch.npu`` the same way (see :func:`accelerator_module`).
* The CANN toolkit must be on the library path before ``torch_npu`` loads:
  ``source /usr/local/Ascend/ascend-toolkit/set_env.sh``. If ``torch_npu`` is installed
  but CANN is not, recent torch versions fail already at ``import torch`` (they autoload
  device backends); ``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` switches that autoload off.
* ``npu-smi info`` shows per-card HBM usage; :func:`batchlab.measure.npu_smi.parse_npu_smi` reads
  it. An idle 910B card already shows about 3 GB of HBM in use (firmware and runtime), so
  compare readings against an idle baseline rather than against zero.
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import platform
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import ModuleType

import torch

__all__ = [
    "ENV_VAR",
    "Timing",
    "accelerator_module",
    "as_device",
    "card_index",
    "device_name",
    "select_device",
    "synchronize",
    "timed_region",
]

ENV_VAR = "BATCHLAB_DEVICE"

_CHOICES = "auto, cpu, cuda, cuda:N, npu, npu:N"
_NAME_RE = re.compile(r"^(auto|cpu|cuda|npu)(?::(\d+))?$")

_NPU_HELP = (
    "请安装与 torch 版本一致的昇腾适配包（pip install torch-npu==<torch 版本>），安装 CANN 工具包，"
    "并在启动 Python 之前运行 'source /usr/local/Ascend/ascend-toolkit/set_env.sh'；用 'npu-smi info' 查看卡。"
)
_CUDA_HELP = (
    "请安装带 CUDA 的 torch（见 https://pytorch.org/get-started/locally/），用 'nvidia-smi' 检查驱动；"
    "没有 GPU 时用设备 'cpu' 或 'auto'。"
)


# ---------------------------------------------------------------------------
# Selection
# ---------------------------------------------------------------------------


def _import_torch_npu() -> ModuleType:
    """Import torch_npu (which registers the ``npu`` device) or raise a helpful error."""
    try:
        return importlib.import_module("torch_npu")
    except ImportError as exc:
        raise RuntimeError(f"设备 'npu' 需要 torch_npu，但导入失败（{exc}）。{_NPU_HELP}") from exc
    except Exception as exc:  # a broken CANN setup surfaces as OSError/RuntimeError, not ImportError
        raise RuntimeError(f"torch_npu 已安装但加载失败（{exc!r}）。{_NPU_HELP}") from exc


def _npu_usable() -> bool:
    """Auto mode: is there a working NPU? Never raises, because absence is normal."""
    if "torch_npu" not in sys.modules and importlib.util.find_spec("torch_npu") is None:
        return False
    try:
        _import_torch_npu()
        npu = getattr(torch, "npu", None)
        return bool(npu is not None and npu.is_available())
    except Exception:
        # A half-installed torch_npu must not stop CPU/CUDA users; the explicit
        # 'npu' request reports the underlying error instead.
        return False


def _check_index(kind: str, index: int | None, count: int) -> None:
    if index is not None and index >= count:
        raise RuntimeError(f"设备 '{kind}:{index}'：只看得到 {count} 个 {kind} 设备")


def select_device(prefer: str | None = None) -> torch.device:
    """Choose the device: ``prefer`` if given, else ``$BATCHLAB_DEVICE``, else auto.

    Auto order is npu (torch_npu present and ``torch.npu.is_available()``), cuda, cpu.
    Accepted names: ``auto``, ``cpu``, ``cuda``, ``cuda:N``, ``npu``, ``npu:N``.

    Raises:
        ValueError: unknown device name.
        RuntimeError: an explicitly requested npu/cuda device is not available.
    """
    source = "argument"
    if prefer is None or not prefer.strip():
        prefer = os.environ.get(ENV_VAR, "")
        source = f"environment variable {ENV_VAR}"
    name = prefer.strip().lower() or "auto"
    match = _NAME_RE.match(name)
    if match is None or (match.group(1) in ("auto", "cpu") and match.group(2) is not None):
        raise ValueError(f"device = {prefer!r}（来自 {source}）：未知设备，可选 {_CHOICES}")
    kind = match.group(1)
    index = int(match.group(2)) if match.group(2) is not None else None

    if kind == "auto":
        if _npu_usable():
            return torch.device("npu")
        if torch.cuda.is_available():
            return torch.device("cuda")
        return torch.device("cpu")
    if kind == "cpu":
        return torch.device("cpu")
    if kind == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError(f"设备 {name!r}：torch.cuda.is_available() 为 False。{_CUDA_HELP}")
        _check_index("cuda", index, torch.cuda.device_count())
        return torch.device("cuda", index) if index is not None else torch.device("cuda")
    # kind == "npu"
    _import_torch_npu()
    npu = getattr(torch, "npu", None)
    if npu is None or not npu.is_available():
        raise RuntimeError(
            f"设备 {name!r}：torch_npu 已导入，但 torch.npu.is_available() 为 False"
            f"（看不到卡，或 CANN 没有加载）。{_NPU_HELP}"
        )
    _check_index("npu", index, npu.device_count())
    return torch.device("npu", index) if index is not None else torch.device("npu")


def as_device(device: torch.device | str | None) -> torch.device:
    """Resolve ``device`` to a :class:`torch.device`; every public function of the device layer
    takes its ``device`` argument through here.

    ``None`` and the names :func:`select_device` accepts (``auto``, ``cpu``, ``cuda:1``,
    ``npu``, ...) go through :func:`select_device`, so ``None``/``auto`` follow
    ``$BATCHLAB_DEVICE`` and auto-detection, and ``npu`` imports torch_npu first (torch does not
    know ``torch.device('npu')`` until then) and checks the card exists. Anything else (a
    :class:`torch.device`, or another string such as ``'meta'``) goes to :class:`torch.device`
    unchecked.
    """
    if device is None or (isinstance(device, str) and _NAME_RE.match(device.strip().lower())):
        return select_device(device)
    return torch.device(device)


def accelerator_module(device: torch.device) -> ModuleType | None:
    """The torch namespace that drives ``device``: ``torch.cuda`` or ``torch.npu``; ``None`` for CPU.

    The two namespaces mirror each other (``synchronize``, ``Event``, ``memory_allocated``,
    ``mem_get_info``, ...), so callers treat them alike and take the CPU branch on ``None``.

    Raises:
        RuntimeError: ``torch.<type>`` does not exist (e.g. ``meta``, or a backend not loaded).
    """
    if device.type == "cpu":
        return None
    module = getattr(torch, device.type, None)
    if module is None:
        raise RuntimeError(f"torch 没有 torch.{device.type} 模块：这个后端装了吗？")
    return module


def card_index(device: torch.device, module: ModuleType) -> int:
    """The card number of an accelerator ``device``: its own index, else ``module``'s current card.

    ``module`` is what :func:`accelerator_module` returned for ``device``. Pass the result to the
    module's calls instead of the device: some (older torch_npu) reject an index-less device.
    """
    return device.index if device.index is not None else int(module.current_device())


# ---------------------------------------------------------------------------
# Names, synchronisation, timing
# ---------------------------------------------------------------------------


def _cpu_name() -> str:
    # /proc/cpuinfo has the marketing name on Linux x86; ARM servers (e.g. Kunpeng hosts
    # of Ascend cards) often lack 'model name', so fall back to platform strings.
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.lower().startswith(("model name", "hardware")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    if sys.platform == "darwin":
        try:
            out = subprocess.run(
                ["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True, text=True, timeout=5
            ).stdout.strip()
            if out:
                return out
        except (OSError, subprocess.SubprocessError):
            pass
    return platform.processor() or platform.machine() or "unknown CPU"


def device_name(device: torch.device | str) -> str:
    """Human-readable name: CPU model, or the GPU/NPU name (e.g. ``Ascend910B3``)."""
    device = as_device(device)
    module = accelerator_module(device)
    if module is None:
        return _cpu_name()
    return str(module.get_device_name(card_index(device, module)))


def synchronize(device: torch.device | str) -> None:
    """Wait for queued kernels on ``device`` (no-op on CPU, where work is synchronous)."""
    device = as_device(device)
    module = accelerator_module(device)
    if module is not None:
        module.synchronize(card_index(device, module))


@dataclass
class Timing:
    """Result of :func:`timed_region`; ``seconds`` stays ``None`` until the region ends."""

    seconds: float | None = None


@contextmanager
def timed_region(device: torch.device | str) -> Iterator[Timing]:
    """Time the ``with`` body on ``device``; read ``.seconds`` after the block.

    On cuda/npu the time comes from device events, so it measures the kernels launched
    in the block, not only how long Python took to enqueue them. On CPU it is wall time
    from ``time.perf_counter``. If the body raises, ``seconds`` stays ``None``.
    """
    device = as_device(device)
    module = accelerator_module(device)
    timing = Timing()
    if module is None:
        synchronize(device)
        start = time.perf_counter()
        yield timing
        synchronize(device)
        timing.seconds = time.perf_counter() - start
        return
    # Events record on the current stream of the *current* device; switch to the
    # requested card (and back afterwards) so 'npu:1' is timed on card 1.
    previous = int(module.current_device())
    wanted = card_index(device, module)
    if wanted != previous:
        module.set_device(wanted)
    try:
        start_event = module.Event(enable_timing=True)
        end_event = module.Event(enable_timing=True)
        start_event.record()
        yield timing
        end_event.record()
        end_event.synchronize()
        timing.seconds = start_event.elapsed_time(end_event) / 1000.0  # events report ms
    finally:
        if wanted != previous:
            module.set_device(previous)
