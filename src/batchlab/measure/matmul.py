"""Time ``[M, K] × [K, N]`` matmuls on the reader's device: the rate curve behind "bigger micro-batches
run the device better", and the device's two roofs (compute and memory) for :mod:`batchlab.formulas.roofline`.

* :func:`bench_matmul` — seconds and TFLOP/s per M, best of several samples, each sample calibrated to
  last at least ``min_seconds``; inputs and output are allocated once per shape, so only the matmul is
  timed. :func:`efficiency` turns the rows into fractions of the best rate.
* :func:`measure_ceilings` — the best FLOP/s of a large square matmul and the bandwidth of a large
  tensor copy: this device's measured roofline and ridge point.

Timing goes through :mod:`batchlab.measure.device` (``timed_region``: device events on cuda/npu, synchronised
``perf_counter`` on the CPU), so kernels queued on an accelerator are counted, not just their launch.
"""
from __future__ import annotations

import math
import os
import statistics
from dataclasses import asdict, dataclass
from typing import Any, Callable, Sequence

import torch

from batchlab.formulas.checks import at_most, between, one_of, positive, whole
from batchlab.formulas.precision import ELEMENT_BYTES
from batchlab.formulas.roofline import matmul_flops, ridge_point
from batchlab.measure.device import as_device, device_name, synchronize, timed_region
from batchlab.measure.device_memory import memory_info

__all__ = ["DTYPES", "DEFAULT_MS", "training_dtype", "bench_matmul", "MatmulTiming", "MatmulBench", "efficiency",
           "measure_ceilings", "DeviceCeilings", "BUSY_RATIO", "spread", "too_busy"]

DTYPES: dict[str, torch.dtype] = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
DEFAULT_MS: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128)
"""The rows M of the default sweep: powers of two up to the lecture's 128."""
SEED = 0
MAX_DIM = 65_536
"""The largest m, k or n a benchmark takes."""
MAX_CALL_FLOPS = 10**11
"""The most FLOPs one timed call may take: about a second on a laptop core, far less on an accelerator."""
MAX_REPEATS = 100
"""The most samples per m a benchmark takes."""
MIN_SECONDS_RANGE = (1e-6, 1.0)
"""The shortest and longest a sample may be asked to last (``min_seconds``)."""
MAX_BENCH_SECONDS = 60.0
"""By default, a benchmark whose samples would take longer than this (estimated from one timed call per
m) is refused; the CLI, which answers within seconds, passes a tighter ``max_seconds``."""
_MAX_CALLS = 1 << 20  # a ceiling for the calibration, far above any real need


@dataclass(frozen=True)
class MatmulTiming:
    """One row of :func:`bench_matmul`: ``[m, k] × [k, n]`` took ``seconds`` per call (the best of the samples)
    and ran at ``tflops`` TFLOP/s (2·m·k·n / seconds / 10¹²)."""

    m: int
    k: int
    n: int
    seconds: float
    tflops: float


BUSY_RATIO = 1.5
"""When a benchmark's numbers say nothing about the hardware (:func:`too_busy`): on a quiet machine the repeated
samples of one shape agree within a few per cent, and their median stays within this factor of the best; past
it, most samples lost the cores to other work, so the best one is no reproducible figure either (on a shared
2-core VM the same matmul swung 1000× between runs)."""


def spread(samples: Sequence[float]) -> float:
    """How far the repeated samples of one shape spread: the slowest over the fastest (1.0 when they agree)."""
    return max(samples) / min(samples)


def too_busy(samples: Sequence[Sequence[float]], load_average: float | None, cores: int) -> str | None:
    """Why the machine was too busy to measure, in one Chinese line, or None when it was not.

    ``samples`` holds each shape's per-call seconds, one per repeat; ``load_average`` the system's one-minute load
    when the benchmark started (None where the system gives none) and ``cores`` its CPU count. Too busy when
    other work already kept every core busy at the start (load ≥ cores), or when for some shape the median
    sample is more than :data:`BUSY_RATIO` times the best (the samples disagree: most were interrupted)."""
    if load_average is not None and load_average >= cores:
        return (f"机器太忙，测不准：开始时的负载 {load_average:.1f} 已占满 {cores} 个 CPU 核，"
                "这些数字反映的是别的进程，不是硬件；请在空闲时重测")
    worst = max((statistics.median(row) / min(row) for row in samples if len(row) > 1), default=1.0)
    if worst > BUSY_RATIO:
        return (f"机器太忙，测不准：同一形状各次采样的中位数是最快一次的 {worst:.1f} 倍（超过 {BUSY_RATIO:g} 倍），"
                "多数采样被别的进程打断；请在空闲时重测")
    return None


@dataclass(frozen=True)
class MatmulBench:
    """What :func:`bench_matmul` measured: on ``device`` (its ``device_name``) in ``dtype`` with ``threads`` CPU
    threads, each row the best of ``repeats`` samples of at least ``min_seconds``; ``results`` holds one
    :class:`MatmulTiming` per m, in the order asked."""

    device: str
    device_name: str
    dtype: str
    threads: int
    repeats: int
    min_seconds: float
    results: tuple[MatmulTiming, ...]
    samples: tuple[tuple[float, ...], ...] = ()
    """Per row, every sample's seconds per call (the row's ``seconds`` is their minimum)."""
    load_average: float | None = None
    """The system's one-minute load when a CPU benchmark started (None on an accelerator, or where the system
    gives none)."""
    cores: int = 1

    @property
    def spreads(self) -> list[float]:
        """Per row, how far its samples spread (:func:`spread`)."""
        return [spread(row) for row in self.samples]

    @property
    def busy(self) -> str | None:
        """Why the machine was too busy to measure (:func:`too_busy`), or None."""
        return too_busy(self.samples, self.load_average, self.cores)

    def as_record(self) -> dict[str, Any]:
        """JSON-ready: these fields, ``results`` as a list of dicts (``python -m batchlab bench-matmul --json``),
        ``spread`` per row and the ``busy`` verdict."""
        return {**asdict(self), "results": [asdict(row) for row in self.results], "samples": [list(r) for r in self.samples],
                "spread": self.spreads, "busy": self.busy}


@dataclass(frozen=True)
class DeviceCeilings:
    """This device's two roofs as :func:`measure_ceilings` measured them: ``peak_flops`` (FLOP/s) from a square
    matmul of side ``matmul_size`` taking ``matmul_seconds``, ``memory_bandwidth`` (bytes/s) from a copy moving
    ``copy_bytes`` (read + write) in ``copy_seconds``, and their ``ridge_point`` (FLOP/byte)."""

    device: str
    device_name: str
    dtype: str
    matmul_size: int
    matmul_seconds: float
    peak_flops: float
    copy_bytes: int
    copy_seconds: float
    memory_bandwidth: float
    ridge_point: float

    def as_record(self) -> dict[str, Any]:
        """JSON-ready: these fields as a dict."""
        return asdict(self)


def _torch_dtype(dtype: str) -> torch.dtype:
    return DTYPES[one_of("dtype", dtype, DTYPES)]


def _cpu_has_fp16_kernel() -> bool:
    # Private oneDNN probe; if a future torch drops it, assume yes and let the probe matmul decide.
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_fp16_supported())
    except Exception:
        return True


def _check_dtype_runs(dtype: str, device: torch.device) -> torch.dtype:
    """The torch dtype of ``dtype`` after checking ``device`` can multiply matrices in it; else ValueError."""
    torch_dtype = _torch_dtype(dtype)
    if device.type == "cpu" and torch_dtype is torch.float16 and not _cpu_has_fp16_kernel():
        # torch does run fp16 matmuls here, through a generic loop about 1000× slower than fp32
        # (0.3 GFLOP/s measured on an AVX-512 EPYC): a curve of that loop says nothing about the hardware.
        raise ValueError("dtype = 'float16'：这台 CPU 没有 float16 矩阵乘法内核（oneDNN 不支持），"
                         "torch 只能退回到慢上千倍的通用循环，测不出硬件的曲线；请改用 float32 或 bfloat16")
    try:
        probe = torch.ones(2, 2, dtype=torch_dtype, device=device)
        torch.matmul(probe, probe)
        synchronize(device)
    except (RuntimeError, TypeError) as err:
        first_line = (str(err).splitlines() or [type(err).__name__])[0]
        raise ValueError(f"dtype = {dtype!r}：设备 {device} 上不能做矩阵乘法（{first_line}）") from err
    return torch_dtype


def _random(shape: tuple[int, ...], generator: torch.Generator, dtype: torch.dtype,
            device: torch.device) -> torch.Tensor:
    # Drawn on the CPU, then moved: a CPU generator works for every backend (npu included) and
    # gives the same numbers everywhere.
    return torch.randn(shape, generator=generator).to(device=device, dtype=dtype)


def _seconds_per_call(fn: Callable[[], object], device: torch.device, repeats: int,
                      min_seconds: float) -> tuple[float, int]:
    """(seconds per call, calls per sample): the best of ``repeats`` samples, each calling ``fn`` often
    enough to last ≥ ``min_seconds``, so timer resolution and launch jitter stay small against it."""
    samples, calls = _samples_per_call(fn, device, repeats, min_seconds)
    return min(samples), calls


def _samples_per_call(fn: Callable[[], object], device: torch.device, repeats: int,
                      min_seconds: float) -> tuple[list[float], int]:
    """(every sample's seconds per call, calls per sample) of :func:`_seconds_per_call`."""

    def run(calls: int) -> float:
        with timed_region(device) as timing:
            for _ in range(calls):
                fn()
        return timing.seconds

    fn()  # warm-up: the first call pays for kernel selection, lazy initialisation, page faults
    synchronize(device)
    # Calibrate on the *fastest* per-call time seen, over at least three runs at the final count: on a
    # busy machine one parallel matmul can lose a whole scheduler slice (~16 ms measured on a shared
    # 2-core VM for a 15 µs matmul), and trusting that one run would leave samples of a single call.
    runs: list[tuple[int, float]] = []
    calls, fastest = 1, math.inf
    while True:
        seconds = run(calls)
        runs.append((calls, seconds))
        fastest = min(fastest, seconds / calls)
        needed = min(_MAX_CALLS, math.ceil(min_seconds / max(fastest, 1e-12)))
        if calls < needed:
            # aim 20% past the target so the next runs usually land; at least double to converge fast
            calls = min(_MAX_CALLS, max(2 * calls, math.ceil(1.2 * needed)))
        elif sum(c == calls for c, _ in runs) >= min(3, repeats):
            break
    # Runs at the final count are already samples; time the rest.
    samples = [seconds for c, seconds in runs if c == calls]
    samples += [run(calls) for _ in range(repeats - len(samples))]
    return [seconds / calls for seconds in samples], calls


def training_dtype(device: torch.device | str | None = None) -> str:
    """The dtype a training job multiplies in on ``device``: ``bfloat16`` on an NPU or GPU (16-bit mixed
    precision), ``float32`` on a CPU (where bf16 matmuls are often emulated, two orders of magnitude slower)."""
    return "float32" if as_device(device).type == "cpu" else "bfloat16"


PROBE_ROWS = 64
"""Rows of the first, small timed call that every duration estimate starts from."""
RATE_GROWTH = 64
"""How much faster per FLOP a larger M may run than the probe, at most, when bounding a duration from
below (a CPU gains 2–10× from M = 64 upwards, an accelerator more; a generous bound only delays a refusal)."""


def _check_duration(weight: torch.Tensor, ms: Sequence[int], generator: torch.Generator, dtype: torch.dtype,
                    device: torch.device, repeats: int, min_seconds: float, max_seconds: float) -> None:
    """Refuse a benchmark whose samples would run past ``max_seconds``, without running it first.

    A probe call of :data:`PROBE_ROWS` rows gives a lower bound for every m at least that large: no less
    time than the probe, and no more than :data:`RATE_GROWTH` times its rate. The m are then timed once
    each, smallest first,
    and the estimate — (repeats + 1) × Σ max(min_seconds, one call), measured where timed, bounded below
    elsewhere — is checked after each, so a hopeless request (bf16 on a CPU without bf16 units) is refused
    within about a probe's time instead of after minutes of calibration.
    """
    k = weight.shape[0]
    a = _random((PROBE_ROWS, k), generator, dtype, device)
    torch.matmul(a, weight)  # the first call pays for kernel selection
    with timed_region(device) as timing:
        torch.matmul(a, weight)
    probe = timing.seconds
    # Below the probe's rows nothing bounds a call from below but min_seconds; from there up, a call
    # takes no less than the probe and runs at most RATE_GROWTH times its rate.
    seconds = {m: max(probe, probe * m / PROBE_ROWS / RATE_GROWTH) if m >= PROBE_ROWS else 0.0 for m in set(ms)}

    def check(estimate: float) -> None:
        if estimate > max_seconds:
            raise ValueError(f"(repeats + 1) × Σ max(min_seconds, 一次调用的时间) ≈ {estimate:.3g} s（至少）："
                             f"超过了上限 {max_seconds:g} s，请减少 repeats、m 的个数或 min_seconds，或换一种 dtype/设备")

    def estimate() -> float:
        # each m: its samples plus the calibration that finds how many calls fill min_seconds (≈ one sample)
        return (repeats + 1) * sum(max(min_seconds, seconds[m]) for m in ms)

    check(estimate())
    for m in sorted(seconds):
        a = _random((m, k), generator, dtype, device)
        with timed_region(device) as timing:
            torch.matmul(a, weight)
        seconds[m] = timing.seconds
        check(estimate())


def bench_matmul(ms: Sequence[int] = DEFAULT_MS, k: int = 4096, n: int = 8192, dtype: str = "float32",
                 device: torch.device | str | None = None, repeats: int = 5, min_seconds: float = 0.01,
                 max_seconds: float = MAX_BENCH_SECONDS) -> MatmulBench:
    """Time ``[m, k] × [k, n]`` for every ``m`` in ``ms`` on ``device`` (default: :func:`select_device`).

    Returns a :class:`MatmulBench` (device, dtype, threads, settings) with one :class:`MatmulTiming` row
    (``m``, ``k``, ``n``, ``seconds``, ``tflops``) per ``m``: ``seconds`` per matmul, the best of ``repeats``
    samples. The ``[k, n]`` matrix (the weight) is shared by all rows, as in a layer.

    Raises:
        ValueError: a size, ``repeats`` or ``min_seconds`` out of range, shapes that do not fit half the
            device's free memory or exceed MAX_CALL_FLOPS, an estimated duration over ``max_seconds``, a dtype
            other than ``float32``/``bfloat16``/``float16``, or one the device cannot multiply in.
    """
    one_of("dtype", dtype, DTYPES)  # before touching the device: a typo answers instantly
    ms = [at_most("m", whole("m", m), MAX_DIM, "上限") for m in ms]
    if not ms:
        raise ValueError("ms = []：至少要给一个 m")
    k, n = (at_most(name, whole(name, v), MAX_DIM, "上限") for name, v in (("k", k), ("n", n)))
    repeats = at_most("repeats", whole("repeats", repeats), MAX_REPEATS, "上限")
    min_seconds = between("min_seconds", min_seconds, *MIN_SECONDS_RANGE)
    at_most("2·m·k·n（最大的 m）", matmul_flops(max(ms), k, n), MAX_CALL_FLOPS, "一次计时调用的上限")
    device = as_device(device)
    torch_dtype = _check_dtype_runs(dtype, device)
    # Shapes against the device's memory before anything is allocated (weight, largest input and output).
    needed = ELEMENT_BYTES[dtype] * (k * n + max(ms) * (k + n))
    at_most("矩阵占用的字节数", needed, memory_info(device).free // 2, "设备可用显存（内存）的一半")

    # other work on the CPU cores, before ours starts (an accelerator's own queue is not the host's load)
    load = os.getloadavg()[0] if device.type == "cpu" and hasattr(os, "getloadavg") else None
    generator = torch.Generator().manual_seed(SEED)
    weight = _random((k, n), generator, torch_dtype, device)
    _check_duration(weight, ms, generator, torch_dtype, device, repeats, min_seconds, max_seconds)
    results, samples = [], []
    for m in ms:
        a = _random((m, k), generator, torch_dtype, device)
        out = torch.empty((m, n), dtype=torch_dtype, device=device)
        row, _ = _samples_per_call(lambda: torch.matmul(a, weight, out=out), device, repeats, min_seconds)
        seconds = min(row)
        results.append(MatmulTiming(m=m, k=k, n=n, seconds=seconds, tflops=matmul_flops(m, k, n) / seconds / 1e12))
        samples.append(tuple(row))
        del a, out  # free this shape before the next one is allocated
    return MatmulBench(device=str(device), device_name=device_name(device), dtype=dtype,
                       threads=torch.get_num_threads(), repeats=repeats, min_seconds=min_seconds,
                       results=tuple(results), samples=tuple(samples), load_average=load, cores=os.cpu_count() or 1)


def efficiency(results: Sequence[MatmulTiming]) -> list[float]:
    """Each row's TFLOP/s as a fraction of the best row's (1.0 for the best); ``results`` as in
    :attr:`MatmulBench.results`."""
    if not results:
        raise ValueError("results = []：至少要有一行测量结果")
    best = max(positive("tflops", row.tflops) for row in results)
    return [row.tflops / best for row in results]


def measure_ceilings(device: torch.device | str | None = None, dtype: str = "float32", size: int = 2048,
                     copy_mib: int = 128, repeats: int = 5, min_seconds: float = 0.01) -> DeviceCeilings:
    """This device's two roofs, measured: FLOP/s of a square matmul of side ``size`` and bytes/s of a tensor copy.

    The copy moves ``copy_mib`` MiB (``dst.copy_(src)``), counted as read + write = 2 × size bytes;
    pick it well above the last-level cache, or the "memory" roof is the cache's. Both are best of
    ``repeats`` calibrated samples. Returns a :class:`DeviceCeilings` (``peak_flops`` in FLOP/s,
    ``memory_bandwidth`` in bytes/s, ``ridge_point`` in FLOP/byte, and what they came from); about 1 s on a
    2-core CPU.
    """
    one_of("dtype", dtype, DTYPES)
    size, copy_mib, repeats = whole("size", size), whole("copy_mib", copy_mib), whole("repeats", repeats)
    min_seconds = positive("min_seconds", min_seconds)
    device = as_device(device)
    torch_dtype = _check_dtype_runs(dtype, device)

    generator = torch.Generator().manual_seed(SEED)
    a, b = (_random((size, size), generator, torch_dtype, device) for _ in range(2))
    out = torch.empty((size, size), dtype=torch_dtype, device=device)
    matmul_seconds, _ = _seconds_per_call(lambda: torch.matmul(a, b, out=out), device, repeats, min_seconds)
    peak = matmul_flops(size, size, size) / matmul_seconds
    del a, b, out

    elements = copy_mib * 2**20 // ELEMENT_BYTES["float32"]
    # ones/zeros, not empty: touch every page before timing, or the first copies time page faults
    src = torch.ones(elements, dtype=torch.float32, device=device)
    dst = torch.zeros(elements, dtype=torch.float32, device=device)
    copy_seconds, _ = _seconds_per_call(lambda: dst.copy_(src), device, repeats, min_seconds)
    copy_bytes = 2 * src.numel() * src.element_size()
    bandwidth = copy_bytes / copy_seconds
    del src, dst
    return DeviceCeilings(device=str(device), device_name=device_name(device), dtype=dtype,
                          matmul_size=size, matmul_seconds=matmul_seconds, peak_flops=peak,
                          copy_bytes=copy_bytes, copy_seconds=copy_seconds, memory_bandwidth=bandwidth,
                          ridge_point=ridge_point(peak, bandwidth))
