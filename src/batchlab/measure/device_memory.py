"""How much memory a device has in use: :func:`memory_info` and :func:`reset_peak_memory`; :func:`describe`
sums a device and its memory up for ``python -m batchlab device``.

The numbers mean different things on different paths, and chapter 4.3 compares them, so every
:class:`MemoryInfo` says which kind it holds in ``measures``:

* ``"allocator"`` (cuda, npu): ``allocated``/``peak`` are bytes held for live tensors by torch's
  caching allocator in this process, on that one card.
* ``"process_rss"`` (cpu): ``allocated``/``peak`` are the resident set size of the *whole
  process*. That is not allocator bytes: it includes the Python interpreter, torch's libraries,
  every tensor, and memory that malloc kept after tensors were freed.

The device is chosen and resolved by :mod:`batchlab.measure.device`; ``npu-smi``'s card-wide view lives in
:mod:`batchlab.measure.npu_smi`.
"""
from __future__ import annotations

import sys
from dataclasses import asdict, dataclass
from typing import Any, Literal

import torch

from batchlab.measure.device import accelerator_module, as_device, card_index, device_name

__all__ = ["MemoryInfo", "memory_info", "reset_peak_memory", "DeviceReport", "describe"]


@dataclass
class MemoryInfo:
    """Memory counters of one device, in bytes, as returned by :func:`memory_info`.

    What each field measures, per path (``i`` is the card index; an index-less ``cuda``/``npu``
    means the current card):

    =============  =====  ==========================================================================
    field          path   what it measures
    =============  =====  ==========================================================================
    ``allocated``  cpu    ``psutil.Process().memory_info().rss``: resident set size of the whole
                          process (on Windows: its working set), i.e. every page of it now in RAM:
                          interpreter, torch's shared libraries, all tensors, malloc's retained
                          free memory. Not allocator bytes; pages never written do not count yet.
    ``allocated``  cuda   ``torch.cuda.memory_allocated(i)``: bytes of the blocks torch's caching
                          allocator has handed to live tensors of this process on card ``i``
                          (block sizes, rounded up). Excludes the allocator's cached free blocks
                          (``memory_reserved``), the CUDA context, and other processes.
    ``allocated``  npu    ``torch.npu.memory_allocated(i)``: the same as cuda, for torch_npu's
                          caching allocator on NPU ``i``; excludes the CANN runtime and other
                          processes.
    ``peak``       cpu    High-water mark of that RSS, never below ``allocated``. Linux: ``VmHWM``
                          from ``/proc/self/status``, since process start or the last
                          :func:`reset_peak_memory`. macOS: ``getrusage`` ``ru_maxrss``; Windows:
                          psutil ``peak_wset``: both lifetime peaks that cannot be reset.
                          Kernel RSS counters are approximate: VmHWM can sit some KiB below an
                          RSS that an earlier call returned as ``allocated``.
    ``peak``       cuda   ``torch.cuda.max_memory_allocated(i)``: highest ``allocated`` since
                          process start or the last :func:`reset_peak_memory`.
    ``peak``       npu    ``torch.npu.max_memory_allocated(i)``: as for cuda.
    ``free``       cpu    ``psutil.virtual_memory().available``: RAM the whole machine can still
                          give out without swapping (free plus reclaimable cache), all processes.
                          From ``/proc/meminfo`` on Linux: a container's cgroup limit is ignored.
    ``free``       cuda   ``torch.cuda.mem_get_info(i)[0]`` (``cudaMemGetInfo``): free memory of
                          the whole card, all processes. Blocks torch keeps cached count as used,
                          so freeing a tensor does not raise it; ``empty_cache()`` does.
    ``free``       npu    ``torch.npu.mem_get_info(i)[0]`` (CANN runtime): as for cuda.
    ``total``      cpu    ``psutil.virtual_memory().total``: the machine's physical RAM (again
                          not a container's cgroup limit).
    ``total``      cuda   ``torch.cuda.mem_get_info(i)[1]``: the card's memory as the driver
                          reports it.
    ``total``      npu    ``torch.npu.mem_get_info(i)[1]``: as the CANN runtime reports it; this
                          need not equal the HBM total that ``npu-smi info`` prints.
    ``measures``   cpu    ``"process_rss"``.
    ``measures``   cuda   ``"allocator"``.
    ``measures``   npu    ``"allocator"``.
    ``source``     cpu    ``"psutil (process RSS; peak from <where>; system RAM)"``, ``<where>``
                          being ``/proc/self/status VmHWM``, ``getrusage ru_maxrss`` or
                          ``psutil peak_wset``.
    ``source``     cuda   ``"torch.cuda"``.
    ``source``     npu    ``"torch.npu"``.
    =============  =====  ==========================================================================

    So ``allocated`` on CPU and on an accelerator are not comparable numbers: the same model shows
    hundreds of MB of interpreter and libraries in ``process_rss`` that ``allocator`` never sees.
    """

    allocated: int
    peak: int
    free: int
    total: int
    measures: Literal["allocator", "process_rss"]
    source: str


def _cpu_peak_rss(rss: int) -> tuple[int, str]:
    """Peak RSS of this process (never below ``rss``) and where it was read from."""
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
    """Current, peak, free and total memory of ``device`` in bytes (see :class:`MemoryInfo`)."""
    device = as_device(device)
    module = accelerator_module(device)
    if module is None:
        import psutil  # imported lazily: only the CPU path needs it

        rss = int(psutil.Process().memory_info().rss)
        peak, peak_source = _cpu_peak_rss(rss)
        vm = psutil.virtual_memory()
        return MemoryInfo(
            allocated=rss,
            peak=peak,
            free=int(vm.available),
            total=int(vm.total),
            measures="process_rss",
            source=f"psutil (process RSS; peak from {peak_source}; system RAM)",
        )
    index = card_index(device, module)
    free, total = module.mem_get_info(index)
    return MemoryInfo(
        allocated=int(module.memory_allocated(index)),
        peak=int(module.max_memory_allocated(index)),
        free=int(free),
        total=int(total),
        measures="allocator",
        source=f"torch.{device.type}",
    )


def reset_peak_memory(device: torch.device | str) -> bool:
    """Restart the peak counter so the next :func:`memory_info` shows a fresh peak.

    Returns ``False`` where that is impossible: on CPU the peak RSS can only be reset on
    Linux, through ``/proc/self/clear_refs``; where that file is missing or not writable
    (other systems, some sandboxes) the peak stays the lifetime peak.
    """
    device = as_device(device)
    module = accelerator_module(device)
    if module is not None:
        module.reset_peak_memory_stats(card_index(device, module))
        return True
    try:
        # Writing "5" resets the process's VmHWM to its current RSS (Linux >= 4.0).
        with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


@dataclass(frozen=True)
class DeviceReport:
    """A device and its memory, as :func:`describe` found them: ``device`` (e.g. ``"npu:0"``), ``kind``
    (``"npu"``, ``"cuda"``, ``"cpu"``), the card's ``name``, the ``torch`` and ``torch_npu`` versions (None
    unless torch_npu is loaded) and its :class:`MemoryInfo`."""

    device: str
    kind: str
    name: str
    torch: str
    torch_npu: str | None
    memory: MemoryInfo

    def as_record(self) -> dict[str, Any]:
        """JSON-ready: these fields, the memory's as a dict (``python -m batchlab device --json``)."""
        return asdict(self)


def describe(device: torch.device | str | None = None) -> DeviceReport:
    """``device`` (default: :func:`select_device`) and its memory, for ``python -m batchlab device`` and 4.1."""
    device = as_device(device)
    # Report torch_npu's version only if it is loaded: describing a CPU run must not import it.
    torch_npu = sys.modules.get("torch_npu")
    return DeviceReport(device=str(device), kind=device.type, name=device_name(device), torch=torch.__version__,
                        torch_npu=getattr(torch_npu, "__version__", None) if torch_npu is not None else None,
                        memory=memory_info(device))
