"""Pick a device (Ascend NPU, CUDA GPU or CPU), time work on it and read its memory.

Everything here works on a laptop without accelerators; the NPU and CUDA paths only run
when the hardware is there. ``torch_npu`` is an optional extra: it is imported only when
``npu`` is asked for, or during auto-detection when ``importlib.util.find_spec`` finds it.

Ascend notes:

* ``torch_npu`` renames torch's PrivateUse1 backend to ``npu`` and adds ``torch.npu``,
  which mirrors ``torch.cuda`` (``is_available``, ``synchronize``, ``Event``,
  ``memory_allocated``, ``mem_get_info``, ...). This module therefore treats
  ``torch.cuda`` and ``torch.npu`` the same way (see :func:`_backend`).
* The CANN toolkit must be on the library path before ``torch_npu`` loads:
  ``source /usr/local/Ascend/ascend-toolkit/set_env.sh``. If ``torch_npu`` is installed
  but CANN is not, recent torch versions fail already at ``import torch`` (they autoload
  device backends); ``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` switches that autoload off.
* ``npu-smi info`` shows per-card HBM usage; :func:`parse_npu_smi` reads it. An idle
  910B card already shows about 3 GB of HBM in use (firmware and runtime), so compare
  readings against an idle baseline rather than against zero.
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from types import ModuleType
from typing import Any

import torch

__all__ = [
    "ENV_VAR",
    "MemoryInfo",
    "NpuCard",
    "Timing",
    "describe",
    "device_name",
    "memory_info",
    "parse_npu_smi",
    "read_npu_smi",
    "reset_peak_memory",
    "select_device",
    "synchronize",
    "timed_region",
]

ENV_VAR = "BATCHLAB_DEVICE"

_CHOICES = "auto, cpu, cuda, cuda:N, npu, npu:N"
_NAME_RE = re.compile(r"^(auto|cpu|cuda|npu)(?::(\d+))?$")

_NPU_HELP = (
    "Install the Ascend PyTorch adapter matching your torch version "
    "(pip install torch-npu==<torch version>), install the CANN toolkit and load it with "
    "'source /usr/local/Ascend/ascend-toolkit/set_env.sh' before starting Python. "
    "Check the cards with 'npu-smi info'."
)
_CUDA_HELP = (
    "Install a CUDA build of torch (see https://pytorch.org/get-started/locally/) and check "
    "the driver with 'nvidia-smi'. Use device 'cpu' or 'auto' to run without a GPU."
)


# ---------------------------------------------------------------------------
# Selection
# ---------------------------------------------------------------------------


def _import_torch_npu() -> ModuleType:
    """Import torch_npu (which registers the ``npu`` device) or raise a helpful error."""
    try:
        return importlib.import_module("torch_npu")
    except ImportError as exc:
        raise RuntimeError(f"device 'npu' needs torch_npu, which failed to import ({exc}). {_NPU_HELP}") from exc
    except Exception as exc:  # a broken CANN setup surfaces as OSError/RuntimeError, not ImportError
        raise RuntimeError(f"torch_npu is installed but failed to load ({exc!r}). {_NPU_HELP}") from exc


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
        raise RuntimeError(f"device '{kind}:{index}' requested but only {count} {kind} device(s) are visible")


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
        raise ValueError(f"unknown device {prefer!r} (from {source}); choose one of: {_CHOICES}")
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
            raise RuntimeError(f"device {name!r} requested but torch.cuda.is_available() is False. {_CUDA_HELP}")
        _check_index("cuda", index, torch.cuda.device_count())
        return torch.device("cuda", index) if index is not None else torch.device("cuda")
    # kind == "npu"
    _import_torch_npu()
    npu = getattr(torch, "npu", None)
    if npu is None or not npu.is_available():
        raise RuntimeError(
            f"device {name!r} requested and torch_npu imported, but torch.npu.is_available() is False "
            f"(no card visible, or CANN not loaded). {_NPU_HELP}"
        )
    _check_index("npu", index, npu.device_count())
    return torch.device("npu", index) if index is not None else torch.device("npu")


def _as_device(device: torch.device | str | None) -> torch.device:
    if device is None or (isinstance(device, str) and _NAME_RE.match(device.strip().lower())):
        # Route names through select_device so 'npu' imports torch_npu first
        # (torch.device('npu') is unknown to torch until then).
        return select_device(device)
    return torch.device(device)


def _index(device: torch.device, backend: ModuleType) -> int:
    """Explicit card number: some backend calls (older torch_npu) reject an index-less device."""
    return device.index if device.index is not None else int(backend.current_device())


def _backend(device: torch.device) -> ModuleType | None:
    """``torch.cuda`` / ``torch.npu`` for accelerator devices, ``None`` for CPU."""
    if device.type == "cpu":
        return None
    module = getattr(torch, device.type, None)
    if module is None:
        raise RuntimeError(f"torch has no module torch.{device.type}; is its backend installed?")
    return module


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
    device = _as_device(device)
    backend = _backend(device)
    if backend is None:
        return _cpu_name()
    return str(backend.get_device_name(_index(device, backend)))


def synchronize(device: torch.device | str) -> None:
    """Wait for queued kernels on ``device`` (no-op on CPU, where work is synchronous)."""
    device = _as_device(device)
    backend = _backend(device)
    if backend is not None:
        backend.synchronize(_index(device, backend))


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
    device = _as_device(device)
    backend = _backend(device)
    timing = Timing()
    if backend is None:
        synchronize(device)
        start = time.perf_counter()
        yield timing
        synchronize(device)
        timing.seconds = time.perf_counter() - start
        return
    # Events record on the current stream of the *current* device; switch to the
    # requested card (and back afterwards) so 'npu:1' is timed on card 1.
    previous = int(backend.current_device())
    wanted = _index(device, backend)
    if wanted != previous:
        backend.set_device(wanted)
    try:
        start_event = backend.Event(enable_timing=True)
        end_event = backend.Event(enable_timing=True)
        start_event.record()
        yield timing
        end_event.record()
        end_event.synchronize()
        timing.seconds = start_event.elapsed_time(end_event) / 1000.0  # events report ms
    finally:
        if wanted != previous:
            backend.set_device(previous)


# ---------------------------------------------------------------------------
# Memory
# ---------------------------------------------------------------------------


@dataclass
class MemoryInfo:
    """Memory counters in bytes.

    On cuda/npu: ``allocated``/``peak`` are tensors held by torch's caching allocator,
    ``free``/``total`` are the whole card as the driver sees it. On CPU: ``allocated``
    is this process's resident set size, ``peak`` its high-water mark, ``free``/``total``
    the machine's available/total RAM. ``source`` says where the numbers came from.
    """

    allocated: int
    peak: int
    free: int
    total: int
    source: str


def _cpu_peak_rss(rss: int) -> tuple[int, str]:
    # VmHWM can be reset (see reset_peak_memory), ru_maxrss on its own can not.
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return max(rss, int(line.split()[1]) * 1024), "/proc/self/status VmHWM"
    except (OSError, ValueError, IndexError):
        pass
    try:
        import resource

        maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        # Linux reports KiB, macOS (and other BSDs) bytes.
        scale = 1 if sys.platform == "darwin" else 1024
        return max(rss, maxrss * scale), "getrusage ru_maxrss"
    except ImportError:  # Windows: no resource module, psutil has the peak working set
        import psutil

        peak = getattr(psutil.Process().memory_info(), "peak_wset", rss)
        return max(rss, int(peak)), "psutil peak_wset"


def memory_info(device: torch.device | str) -> MemoryInfo:
    """Current, peak, free and total memory of ``device`` in bytes."""
    device = _as_device(device)
    backend = _backend(device)
    if backend is None:
        import psutil  # imported lazily: only the CPU path needs it

        rss = int(psutil.Process().memory_info().rss)
        peak, peak_source = _cpu_peak_rss(rss)
        vm = psutil.virtual_memory()
        return MemoryInfo(
            allocated=rss,
            peak=peak,
            free=int(vm.available),
            total=int(vm.total),
            source=f"psutil (process RSS; peak from {peak_source}; system RAM)",
        )
    index = _index(device, backend)
    free, total = backend.mem_get_info(index)
    return MemoryInfo(
        allocated=int(backend.memory_allocated(index)),
        peak=int(backend.max_memory_allocated(index)),
        free=int(free),
        total=int(total),
        source=f"torch.{device.type}",
    )


def reset_peak_memory(device: torch.device | str) -> bool:
    """Restart the peak counter so the next :func:`memory_info` shows a fresh peak.

    Returns ``False`` where that is impossible: on CPU the peak RSS can only be reset on
    Linux (``/proc/self/clear_refs``); elsewhere it stays the lifetime peak.
    """
    device = _as_device(device)
    backend = _backend(device)
    if backend is not None:
        backend.reset_peak_memory_stats(_index(device, backend))
        return True
    try:
        # Writing "5" resets the process's VmHWM to its current RSS (Linux >= 4.0).
        with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


# ---------------------------------------------------------------------------
# npu-smi
# ---------------------------------------------------------------------------


@dataclass
class NpuCard:
    """One card as reported by ``npu-smi info`` (MB are the tool's MiB-sized units)."""

    npu_id: int
    chip: int
    name: str
    health: str
    power_w: float | None
    temp_c: float | None
    aicore_percent: float | None
    hbm_used_mb: int
    hbm_total_mb: int
    bus_id: str

    @property
    def hbm_fraction(self) -> float:
        """Used share of HBM, 0..1 (0 when the total is unknown)."""
        return self.hbm_used_mb / self.hbm_total_mb if self.hbm_total_mb else 0.0


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _tokens(cell: str) -> list[str]:
    # 'used / total', 'used/ total' and 'used /total' all become one token 'used/total',
    # so a ratio counts as a single field whatever the padding.
    return re.sub(r"\s*/\s*", "/", cell).split()


def _blocks(text: str) -> list[list[list[str]]]:
    """Rows of cells, grouped by the ``+---+`` / ``+===+`` separator lines."""
    blocks: list[list[list[str]]] = []
    current: list[list[str]] = []
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("+"):
            if current:
                blocks.append(current)
            current = []
        elif line.startswith("|"):
            current.append(_cells(line))
    if current:
        blocks.append(current)
    return blocks


def _row_fields(header: list[str], row: list[str]) -> dict[str, str]:
    """Map each header token to its value, cell by cell, so column widths do not matter."""
    fields: dict[str, str] = {}
    for head_cell, value_cell in zip(header, row):
        names, values = _tokens(head_cell), _tokens(value_cell)
        if len(values) > len(names) and "Name" in names:
            # A name with spaces: give the extra tokens to 'Name'.
            i = names.index("Name")
            extra = len(values) - len(names)
            values = values[:i] + [" ".join(values[i : i + extra + 1])] + values[i + extra + 1 :]
        if len(values) != len(names):
            raise ValueError(f"npu-smi row {' | '.join(row)!r} does not match header cell {head_cell!r}")
        fields.update(zip(names, values))
    return fields


def _number(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:  # 'NA' and similar placeholders
        return None


def _ratio(value: str | None, what: str) -> tuple[int, int]:
    if value is None:
        raise ValueError(f"npu-smi card table has no {what} column")
    used, _, total = value.partition("/")
    return int(used), int(total)


def parse_npu_smi(text: str) -> list[NpuCard]:
    """Parse ``npu-smi info`` output into one :class:`NpuCard` per card.

    Rows are split on ``|``; each card is a pair of rows matched against the two header
    rows, so older compact and newer wider layouts both work. The process table that
    follows the card table is ignored.
    """
    blocks = _blocks(text)
    header: list[list[str]] | None = None
    cards: list[NpuCard] = []
    for block in blocks:
        flat = " ".join(" ".join(row) for row in block)
        if header is None:
            tokens = flat.split()
            if "Name" in tokens and "Health" in tokens and len(block) >= 2:
                header = block[:2]
            continue
        if "Process" in flat and ("Process id" in flat or "Process name" in flat):
            break  # the process table starts: no more cards
        if len(block) % 2:
            raise ValueError(f"npu-smi card block has {len(block)} rows; expected pairs: {block!r}")
        for first, second in zip(block[::2], block[1::2]):
            fields = _row_fields(header[0], first)
            fields.update(_row_fields(header[1], second))
            used, total = _ratio(fields.get("HBM-Usage(MB)"), "HBM-Usage(MB)")
            cards.append(
                NpuCard(
                    npu_id=int(fields["NPU"]),
                    chip=int(fields.get("Chip", "0")),
                    name=fields.get("Name", ""),
                    health=fields.get("Health", ""),
                    power_w=_number(fields.get("Power(W)")),
                    temp_c=_number(fields.get("Temp(C)")),
                    aicore_percent=_number(fields.get("AICore(%)")),
                    hbm_used_mb=used,
                    hbm_total_mb=total,
                    bus_id=fields.get("Bus-Id", ""),
                )
            )
    if header is None:
        raise ValueError("no npu-smi card table found (expected a header row with 'NPU', 'Name' and 'Health')")
    if not cards:
        raise ValueError("npu-smi card table has a header but no card rows")
    return cards


def read_npu_smi() -> list[NpuCard] | None:
    """Run ``npu-smi info`` and parse it; ``None`` when npu-smi is not on PATH.

    Errors from a present but failing npu-smi (driver problems) propagate.
    """
    exe = shutil.which("npu-smi")
    if exe is None:
        return None
    result = subprocess.run([exe, "info"], capture_output=True, text=True, timeout=60, check=True)
    return parse_npu_smi(result.stdout)


# ---------------------------------------------------------------------------
# Summary for the CLI
# ---------------------------------------------------------------------------


def describe(device: torch.device | str | None = None) -> dict[str, Any]:
    """JSON-able summary of ``device`` (default: :func:`select_device`) for ``python -m batchlab device``."""
    device = _as_device(device)
    # Report torch_npu's version only if it is loaded: describing a CPU run must not import it.
    torch_npu = sys.modules.get("torch_npu")
    return {
        "device": str(device),
        "kind": device.type,
        "name": device_name(device),
        "torch": torch.__version__,
        "torch_npu": getattr(torch_npu, "__version__", None) if torch_npu is not None else None,
        "memory": asdict(memory_info(device)),
    }
