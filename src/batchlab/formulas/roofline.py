"""The roofline model of one matrix multiplication, as plain numbers (pure math, no torch).

A matmul ``[M, K] × [K, N]`` does 2·M·K·N floating-point operations (one multiply and one add per
term) and, if each operand is read from memory once and the result written once, moves
``element_bytes·(M·K + K·N + M·N)`` bytes. Their ratio, the *arithmetic intensity* (FLOP per byte),
decides which wall a device hits first (Williams, Waterman & Patterson 2009):

    attainable FLOP/s = min(peak FLOP/s, intensity × memory bandwidth)

Below the *ridge point* peak / bandwidth the matmul waits for memory; above it the compute units are
the limit. With K·N fixed (the weight matrix), intensity grows with M, the rows: in a transformer
M = micro-batch × sequence length (:func:`tokens_per_matmul`), which is why a micro-batch of 2 at
sequence length 1024 already gives M = 2048 rows.

Device peaks are **parameters, not facts**: :data:`DEVICE_PRESETS` carries each figure with its source,
and a range where sources disagree (see :class:`DevicePeak`). Measure your own device with
:func:`batchlab.measure.matmul.measure_ceilings`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol, Sequence

from batchlab.formulas.checks import one_of, positive, whole
from batchlab.formulas.precision import element_bytes
from batchlab.formulas.presets import GPTConfig

__all__ = ["matmul_flops", "matmul_bytes", "arithmetic_intensity", "ridge_point", "roofline_flops",
           "tokens_per_matmul", "MeasuredRate", "RateCurve", "ROOFLINE_ROWS", "roofline_curve", "DevicePeak",
           "DEVICE_PRESETS"]


def matmul_flops(m: int, k: int, n: int) -> int:
    """FLOPs of ``[m, k] × [k, n]``: 2·m·k·n (each of the m·n outputs is k multiplies and k adds)."""
    return 2 * whole("m", m) * whole("k", k) * whole("n", n)


def matmul_bytes(m: int, k: int, n: int, element_bytes: float) -> float:
    """Bytes moved by ``[m, k] × [k, n]`` if each operand is read once and the result written once:
    element_bytes·(m·k + k·n + m·n). A lower bound on the traffic: a kernel that re-reads tiles moves more."""
    m, k, n = whole("m", m), whole("k", k), whole("n", n)
    positive("element_bytes", element_bytes)
    return element_bytes * (m * k + k * n + m * n)


def arithmetic_intensity(m: int, k: int, n: int, element_bytes: float) -> float:
    """FLOP per byte of ``[m, k] × [k, n]``: :func:`matmul_flops` / :func:`matmul_bytes`."""
    return matmul_flops(m, k, n) / matmul_bytes(m, k, n, element_bytes)


def ridge_point(peak_flops: float, bandwidth: float) -> float:
    """The intensity (FLOP/byte) where the memory roof meets the compute roof: peak / bandwidth."""
    return positive("peak_flops", peak_flops) / positive("bandwidth", bandwidth)


def roofline_flops(intensity: float, peak_flops: float, bandwidth: float) -> float:
    """Attainable FLOP/s at ``intensity`` (FLOP/byte): min(peak, intensity × bandwidth (bytes/s))."""
    intensity = positive("intensity", intensity)
    peak, bandwidth = positive("peak_flops", peak_flops), positive("bandwidth", bandwidth)
    return min(peak, intensity * bandwidth)


def tokens_per_matmul(micro_batch_size: int, seq_len: int) -> int:
    """Rows M of a transformer's linear-layer matmuls: micro-batch × sequence length.

    Every token of every sequence of the micro-batch is one row of ``[M, d_model] × [d_model, ·]``, so
    a micro-batch of 2 at sequence length 1024 is already M = 2048 rows, far from the M = 1 of decoding.
    """
    return whole("micro_batch_size", micro_batch_size) * whole("seq_len", seq_len)



class MeasuredRate(Protocol):
    """What :meth:`RateCurve.from_results` reads of one measured matmul: its rows ``m`` and its ``tflops``
    (TFLOP/s). :class:`batchlab.measure.matmul.MatmulTiming` is one; formulas never import it."""

    @property
    def m(self) -> int: ...

    @property
    def tflops(self) -> float: ...


@dataclass(frozen=True)
class RateCurve:
    """Achieved FLOP/s as a function of M (rows of the matmul): measured points, or a roofline's."""

    rows: tuple[int, ...]
    flops_per_second: tuple[float, ...]
    name: str = "measured"

    def __post_init__(self) -> None:
        if len(self.rows) != len(self.flops_per_second) or not self.rows:
            raise ValueError("rows 与 flops_per_second 必须一一对应且非空")
        for m, f in zip(self.rows, self.flops_per_second):
            whole("rows", m)
            positive("flops_per_second", f)
        if list(self.rows) != sorted(set(self.rows)):
            raise ValueError(f"rows = {self.rows}：必须严格递增")

    @classmethod
    def from_results(cls, results: Sequence[MeasuredRate], name: str = "measured") -> "RateCurve":
        """From :func:`batchlab.measure.matmul.bench_matmul`'s ``results`` rows (anything with ``m`` and ``tflops``)."""
        pairs = sorted((int(r.m), float(r.tflops) * 1e12) for r in results)
        return cls(tuple(m for m, _ in pairs), tuple(f for _, f in pairs), name)

    def rate(self, rows: float) -> float:
        """FLOP/s at ``rows`` (> 0): log–log interpolation, held flat beyond the measured ends."""
        ms, fs = self.rows, self.flops_per_second
        if rows <= ms[0]:
            return fs[0]
        if rows >= ms[-1]:
            return fs[-1]
        for (m0, f0), (m1, f1) in zip(zip(ms, fs), zip(ms[1:], fs[1:])):
            if m0 <= rows <= m1:
                t = (math.log(rows) - math.log(m0)) / (math.log(m1) - math.log(m0))
                return math.exp(math.log(f0) + t * (math.log(f1) - math.log(f0)))
        raise AssertionError("unreachable: rows lies inside the measured range")

    @property
    def best(self) -> float:
        return max(self.flops_per_second)

    def efficiency(self, rows: float) -> float:
        """The rate at ``rows`` as a fraction of the best measured rate."""
        return self.rate(rows) / self.best


ROOFLINE_ROWS: tuple[int, ...] = tuple(2**k for k in range(8, 17))
"""M = 256, 512, …, 65536: the rows :func:`roofline_curve` evaluates (held flat beyond them)."""


def roofline_curve(config: GPTConfig, peak_flops: float, bandwidth: float, dtype: str = "bfloat16",
                   name: str | None = None) -> RateCurve:
    """A rate curve from a device's roofline: at each M of :data:`ROOFLINE_ROWS`, the attainable FLOP/s
    min(peak, intensity × bandwidth) of the layer's MLP matmul [M, h] × [h, 4h] in ``dtype``.

    ``peak_flops`` in FLOP/s, ``bandwidth`` in bytes/s. An upper bound: real kernels reach less. For a
    preset's ends, :meth:`DevicePeak.curve`.
    """
    peak, bw = positive("peak_flops", peak_flops), positive("bandwidth", bandwidth)
    h, e = config.d_model, element_bytes(dtype)
    rates = tuple(roofline_flops(arithmetic_intensity(m, h, 4 * h, e), peak, bw) for m in ROOFLINE_ROWS)
    if name is None:
        name = f"屋顶线（{peak / 1e12:g} TFLOP/s，{bw / 1e12:g} TB/s，{dtype}）"
    return RateCurve(ROOFLINE_ROWS, rates, name)


def _low_high(name: str, value: float | tuple[float, float]) -> tuple[float, float]:
    pair = tuple(value) if isinstance(value, (tuple, list)) else (value, value)
    if len(pair) != 2:
        raise ValueError(f"{name} = {value!r}：必须是一个正数或 (下限, 上限) 两个正数")
    low, high = pair
    low, high = positive(f"{name} 下限", low), positive(f"{name} 上限", high)
    if low > high:
        raise ValueError(f"{name} = ({low!r}, {high!r})：下限不能大于上限")
    return low, high


@dataclass(frozen=True)
class DevicePeak:
    """A device's two roofs, each as a range (low, high) because published figures disagree.

    ``peak_flops`` in FLOP/s and ``memory_bandwidth`` in bytes/s take a ``(low, high)`` pair or a single
    number (low = high); ``source`` says where each figure comes from; ``precision`` is the dtype the
    peak refers to. These are parameters to reason with, not measurements.
    """

    name: str
    peak_flops: tuple[float, float]
    memory_bandwidth: tuple[float, float]
    source: str
    precision: str = "fp16"

    def __post_init__(self) -> None:
        # frozen: normalise through object.__setattr__ so a single number becomes (value, value)
        object.__setattr__(self, "peak_flops", _low_high("peak_flops", self.peak_flops))
        object.__setattr__(self, "memory_bandwidth", _low_high("memory_bandwidth", self.memory_bandwidth))
        if not str(self.source).strip():
            raise ValueError(f"{self.name} 的 source = {self.source!r}：必须写明数据来源")

    @property
    def ridge_range(self) -> tuple[float, float]:
        """The smallest and largest ridge point the ranges allow: (peak_low / bw_high, peak_high / bw_low)."""
        return (ridge_point(self.peak_flops[0], self.memory_bandwidth[1]),
                ridge_point(self.peak_flops[1], self.memory_bandwidth[0]))

    def curve(self, config: GPTConfig, end: str = "low") -> RateCurve:
        """The rate curve of ``config``'s MLP matmul under this device's ``"low"`` (both roofs at their
        low ends) or ``"high"`` roofline, in bf16: what the book's 910B tables and tuner assume."""
        i = ("low", "high").index(one_of("end", end, ("low", "high")))
        return roofline_curve(config, self.peak_flops[i], self.memory_bandwidth[i],
                              name=f"{self.name} 屋顶线（{'低端' if end == 'low' else '高端'}）")

    def attainable(self, intensity: float) -> tuple[float, float]:
        """Attainable FLOP/s at ``intensity`` with both roofs low, and with both high."""
        return (roofline_flops(intensity, self.peak_flops[0], self.memory_bandwidth[0]),
                roofline_flops(intensity, self.peak_flops[1], self.memory_bandwidth[1]))


DEVICE_PRESETS: dict[str, DevicePeak] = {
    # Huawei publishes no 910B datasheet. The compute peak keeps a range because the 910B ships in variants
    # (910B1–B4) whose quoted peaks differ; the bandwidth keeps one because secondary sources quote 1.2 and
    # 1.6 TB/s. The 0.4 TB/s some articles give is one HBM2e stack, not four: dropped (a 64 GB card is four
    # 16 GB stacks). Replace the preset with your card's figures or with measure_ceilings() on the card.
    "ascend-910b": DevicePeak(
        name="Ascend 910B",
        peak_flops=(280e12, 376e12),
        memory_bandwidth=(1.2e12, 1.6e12),
        precision="fp16/bf16 dense",
        source=("no official datasheet; figures for the 64 GB variants. Peak, fp16/bf16 dense: 280 TFLOPS (Gitee AI "
                "compute docs, ai.gitee.com, 910B4) to ~376 TFLOPS per die (Huawei's CloudMatrix384 — 384 Ascend 910C, "
                "each two 910B-class dies — is quoted at ~300 PFLOPS dense BF16, i.e. ~390 TFLOPS per die; Zuo et al. "
                "2025, arXiv:2506.12708). Not 256 TFLOPS: that is the original Ascend 910's 2019 launch figure (preset "
                "'ascend-910'). HBM2e bandwidth: 1.2 TB/s (oryoy.com; awesomeagents.ai) to 1.6 TB/s (half of the 910C's "
                "reported 3.2 TB/s; four HBM2e stacks at JEDEC's ~410 GB/s each). Treat as parameters."),
    ),
    "ascend-910": DevicePeak(
        name="Ascend 910 (910A, 2019)",
        peak_flops=256e12,
        memory_bandwidth=1.2e12,
        precision="fp16 dense",
        source=("Huawei, Hot Chips 31 (2019) and the Ascend 910 launch: 256 TFLOPS fp16, 32 GB HBM2 in four stacks "
                "(≈ 1.2 TB/s: 4 × 1024 pins × 2.4 Gb/s, JEDEC HBM2); no bf16 cube"),
    ),
    "generic": DevicePeak(
        name="generic accelerator",
        peak_flops=100e12,
        memory_bandwidth=1e12,
        precision="fp16",
        source="round numbers for teaching (100 TFLOP/s, 1 TB/s, ridge 100 FLOP/byte), not a real device",
    ),
    "a100-sxm-80gb": DevicePeak(
        name="NVIDIA A100 SXM 80GB",
        peak_flops=312e12,
        memory_bandwidth=2.039e12,
        precision="fp16/bf16 tensor core, dense",
        source="NVIDIA A100 datasheet: 312 TFLOPS FP16/BF16 tensor (dense), 2,039 GB/s HBM2e (80GB SXM)",
    ),
}
"""Published peaks by preset name, each with its source. Parameters, not facts: where sources disagree
(the 910B) the preset holds the whole range, and the ridge point becomes a range too."""
