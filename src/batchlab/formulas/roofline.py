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

**Tensor and context parallelism move the point.** With t-way tensor parallelism each device runs its
share of the MLP, [M, h] × [h, 4h/t] (and [M, 4h/t] × [4h/t, h]: the intensity is symmetric in K and N),
and with cp-way context parallelism each device holds s/cp tokens of each sequence, so M = b·s/cp. Both
lower the intensity at a given micro-batch: the same matmul efficiency needs a larger micro-batch
(:func:`roofline_curve`'s ``tensor_parallel``).

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
           "tokens_per_matmul", "matmul_rows", "MeasuredRate", "RateCurve", "ROOFLINE_ROWS", "roofline_curve", "DevicePeak",
           "CANN_PLATFORM_SOURCE", "CubeSpec", "ASCEND_910B_SOCS", "cube_peak_flops", "hbm_bandwidth",
           "HBM2E_STACK", "HBM2E_STACK_BYTES", "ASCEND_910B_HBM", "DEVICE_PRESETS"]


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


def tokens_per_matmul(micro_batch_size: int, seq_len: int, context_parallel: int = 1) -> int:
    """Rows M of a transformer's linear-layer matmuls on one device: micro-batch × sequence length / cp.

    Every token of every sequence of the micro-batch is one row of ``[M, d_model] × [d_model, ·]``, so
    a micro-batch of 2 at sequence length 1024 is already M = 2048 rows, far from the M = 1 of decoding.
    Context parallelism gives each of its cp devices s/cp tokens of each sequence (rounded down).
    """
    return matmul_rows(whole("micro_batch_size", micro_batch_size), whole("seq_len", seq_len),
                       whole("context_parallel", context_parallel))


def matmul_rows(micro_batch_size: int, seq_len: int, context_parallel: int = 1) -> int:
    """:func:`tokens_per_matmul` on numbers already checked (a validated job's): b · s // cp."""
    return micro_batch_size * seq_len // context_parallel



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
    tensor_parallel: int = 1
    """The t of the matmul the rates are for, [M, h] × [h, 4h/t]; a measured curve is t = 1."""
    link_bandwidth: float | None = None
    """Bytes/s one device sends to the others of its tensor-parallel group (a device preset's
    :attr:`DevicePeak.link_bandwidth`); None where no source gives it."""

    def __post_init__(self) -> None:
        whole("tensor_parallel", self.tensor_parallel)
        if self.link_bandwidth is not None:
            positive("link_bandwidth", self.link_bandwidth)
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
                   name: str | None = None, tensor_parallel: int = 1,
                   link_bandwidth: float | None = None) -> RateCurve:
    """A rate curve from a device's roofline: at each M of :data:`ROOFLINE_ROWS`, the attainable FLOP/s
    min(peak, intensity × bandwidth) of one device's share of the layer's MLP matmul, [M, h] × [h, 4h/t]
    under ``tensor_parallel`` t, in ``dtype``.

    ``peak_flops`` in FLOP/s, ``bandwidth`` in bytes/s. An upper bound: real kernels reach less. For a
    preset's ends, :meth:`DevicePeak.curve`. ``link_bandwidth`` (bytes/s) is carried for the tensor-parallel
    communication of :func:`batchlab.formulas.throughput.model_step`.
    """
    peak, bw = positive("peak_flops", peak_flops), positive("bandwidth", bandwidth)
    h, e = config.d_model, element_bytes(dtype)
    t = whole("tensor_parallel", tensor_parallel)
    rates = tuple(roofline_flops(arithmetic_intensity(m, h, 4 * h // t, e), peak, bw) for m in ROOFLINE_ROWS)
    if name is None:
        name = f"屋顶线（{peak / 1e12:g} TFLOP/s，{bw / 1e12:g} TB/s，{dtype}）"
    return RateCurve(ROOFLINE_ROWS, rates, name, tensor_parallel=t, link_bandwidth=link_bandwidth)


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
    link_bandwidth: float | None = None
    """Bytes/s one device sends to another in its node (one direction), what a tensor-parallel collective
    runs over; None where no source opened gives it (then pass it to the model yourself)."""
    link_source: str = ""

    def __post_init__(self) -> None:
        # frozen: normalise through object.__setattr__ so a single number becomes (value, value)
        object.__setattr__(self, "peak_flops", _low_high("peak_flops", self.peak_flops))
        object.__setattr__(self, "memory_bandwidth", _low_high("memory_bandwidth", self.memory_bandwidth))
        if not str(self.source).strip():
            raise ValueError(f"{self.name} 的 source = {self.source!r}：必须写明数据来源")
        if self.link_bandwidth is not None:
            positive("link_bandwidth", self.link_bandwidth)
            if not str(self.link_source).strip():
                raise ValueError(f"{self.name} 的 link_source = {self.link_source!r}：卡间带宽也必须写明数据来源")

    @property
    def ridge_range(self) -> tuple[float, float]:
        """The smallest and largest ridge point the ranges allow: (peak_low / bw_high, peak_high / bw_low)."""
        return (ridge_point(self.peak_flops[0], self.memory_bandwidth[1]),
                ridge_point(self.peak_flops[1], self.memory_bandwidth[0]))

    def curve(self, config: GPTConfig, end: str = "low", tensor_parallel: int = 1) -> RateCurve:
        """The rate curve of ``config``'s MLP matmul (one device's share under ``tensor_parallel``) under this
        device's ``"low"`` (both roofs at their low ends) or ``"high"`` roofline, in bf16: what the book's
        910B tables and tuner assume. It carries :attr:`link_bandwidth`."""
        i = ("low", "high").index(one_of("end", end, ("low", "high")))
        return roofline_curve(config, self.peak_flops[i], self.memory_bandwidth[i],
                              name=f"{self.name} 屋顶线（{'低端' if end == 'low' else '高端'}）",
                              tensor_parallel=tensor_parallel, link_bandwidth=self.link_bandwidth)

    def attainable(self, intensity: float) -> tuple[float, float]:
        """Attainable FLOP/s at ``intensity`` with both roofs low, and with both high."""
        return (roofline_flops(intensity, self.peak_flops[0], self.memory_bandwidth[0]),
                roofline_flops(intensity, self.peak_flops[1], self.memory_bandwidth[1]))

    def compute_bound_above(self, intensity: float) -> float:
        """The memory bandwidth (bytes/s) above which a matmul of ``intensity`` (FLOP/byte) is compute-bound at
        every peak of the range: peak_high / intensity. A conclusion that rests on "compute-bound" holds for
        any bandwidth above it, whatever the card's true bandwidth."""
        return self.peak_flops[1] / positive("intensity", intensity)


# ---------------------------------------------------------------------------
# The 910B's peaks, from the CANN toolkit's per-SoC platform configuration
# ---------------------------------------------------------------------------

CANN_PLATFORM_SOURCE = ("CANN 8.1.RC1 platform configuration, "
                        "Ascend/ascend-toolkit/8.1.RC1/aarch64-linux/data/platform_config/<SoC>.ini "
                        "(mirrored at github.com/leideng/CANN-8.1.RC1, commit 4332a013)")
"""Where :data:`ASCEND_910B_SOCS` comes from: the files CANN's compiler reads for each SoC."""


def cube_peak_flops(cube_cores: int, cube_mhz: float, cube_mkn: tuple[int, int, int] = (16, 16, 16)) -> float:
    """Dense peak FLOP/s of a Da Vinci cube array: cores × clock × M·N·K multiply-adds per cycle × 2 FLOP.

    ``cube_cores`` is a platform file's ``cube_core_cnt``, ``cube_mhz`` its ``cube_freq`` and ``cube_mkn`` its
    ``cube_m_size``/``cube_n_size``/``cube_k_size`` (16 each: ``[DtypeMKN] Default=16,16,16``, the fp16 shape)."""
    m, n, k = (whole("cube_mkn", x) for x in cube_mkn)
    return whole("cube_cores", cube_cores) * positive("cube_mhz", cube_mhz) * 1e6 * m * n * k * 2


@dataclass(frozen=True)
class CubeSpec:
    """One SoC's fields from its CANN platform file (:data:`CANN_PLATFORM_SOURCE`) and the peak they give."""

    soc: str
    cube_cores: int
    """``[SoCInfo] cube_core_cnt``."""
    cube_mhz: int
    """``[AICoreSpec] cube_freq``."""
    memory_bytes: int | None
    """``[SoCInfo] memory_size`` (None where the file leaves it empty)."""

    @property
    def peak_flops(self) -> float:
        """:func:`cube_peak_flops` of the file's fields (cube 16 × 16 × 16)."""
        return cube_peak_flops(self.cube_cores, self.cube_mhz)


ASCEND_910B_SOCS: tuple[CubeSpec, ...] = (
    CubeSpec("Ascend910B1", 24, 1850, 68719476736),
    CubeSpec("Ascend910B2", 24, 1800, 68719476736),
    CubeSpec("Ascend910B2C", 24, 1800, None),
    CubeSpec("Ascend910B3", 20, 1800, 68719476736),
    CubeSpec("Ascend910B4", 20, 1500, 34359738368),
)
"""The 910B variants' platform files as opened (:data:`CANN_PLATFORM_SOURCE`): every one has cube 16/16/16. The
book's preset uses the 64 GiB ones (``memory_size = 68719476736``), the cards of the 原文's case; the 910B4's
file says 32 GiB and the 910B2C's gives no size."""


def hbm_bandwidth(stacks: int, gbit_per_pin: float, pins: int = 1024) -> float:
    """Bytes/s of ``stacks`` HBM stacks: stacks × pins × pin rate (Gb/s) / 8 (an HBM stack's interface is
    1024 bits wide, JEDEC JESD235)."""
    return whole("stacks", stacks) * whole("pins", pins) * positive("gbit_per_pin", gbit_per_pin) * 1e9 / 8


HBM2E_STACK = {"dies": 8, "gbit_per_die": 16, "gbit_per_pin": 3.2}
"""A 16 GB HBM2E stack (eight 16 Gb dies) at 3.2 Gb/s per pin, 410 GB/s: Samsung's Flashbolt announcement
(eeNews Europe, 2020-02-06, "Samsung packs eight 16Gb DRAM dies into 16GB packages for HPC")."""
HBM2E_STACK_BYTES = HBM2E_STACK["dies"] * HBM2E_STACK["gbit_per_die"] * 2**30 // 8

_64_GIB = [soc for soc in ASCEND_910B_SOCS if soc.memory_bytes == 64 * 2**30]
_LOW_SOC = min(_64_GIB, key=lambda soc: soc.peak_flops)
_HIGH_SOC = max(_64_GIB, key=lambda soc: soc.peak_flops)

ASCEND_910B_HBM = {"stacks": 64 * 2**30 // HBM2E_STACK_BYTES, "pins": 1024, "gbit_per_pin": HBM2E_STACK["gbit_per_pin"]}
"""The bandwidth assumption of the 910B preset, as :func:`hbm_bandwidth`'s arguments: the 64 GiB of the platform files
as 16 GiB HBM2E stacks (four), each 1024 pins at 3.2 Gb/s. No source opened gives the 910B's own figure."""


DEVICE_PRESETS: dict[str, DevicePeak] = {
    # Huawei publishes no 910B datasheet. The peak is derived from CANN's platform files (ASCEND_910B_SOCS); the
    # bandwidth is arithmetic on an assumption (four 16 GB HBM2E stacks), and 4.4 shows that the conclusions
    # drawn from it hold for any bandwidth above DevicePeak.compute_bound_above. Replace the preset with your
    # card's figures or with measure_ceilings() on the card. No link bandwidth: no source opened gives the
    # 910B's HCCS figure, so a tensor-parallel step on it needs link_bandwidth from the reader (model_step).
    "ascend-910b": DevicePeak(
        name="Ascend 910B",
        peak_flops=(_LOW_SOC.peak_flops, _HIGH_SOC.peak_flops),
        memory_bandwidth=hbm_bandwidth(**ASCEND_910B_HBM),
        precision="fp16/bf16 dense",
        source=(f"no official datasheet; the 64 GiB variants. Peak = cube cores × cube_freq × 16³ multiply-adds "
                f"× 2 FLOP from {CANN_PLATFORM_SOURCE}: low {_LOW_SOC.soc} ({_LOW_SOC.cube_cores} × "
                f"{_LOW_SOC.cube_mhz} MHz), high {_HIGH_SOC.soc} ({_HIGH_SOC.cube_cores} × {_HIGH_SOC.cube_mhz} MHz); "
                "the files list no separate bf16 cube shape, so bf16 is taken at the fp16 rate (an assumption). "
                f"Bandwidth: an assumption stated as arithmetic, 64 GiB (the files' memory_size) as {ASCEND_910B_HBM['stacks']} "
                f"HBM2E stacks of {HBM2E_STACK_BYTES // 2**30} GiB at {ASCEND_910B_HBM['gbit_per_pin']} Gb/s per pin × "
                f"{ASCEND_910B_HBM['pins']} pins "
                "(Samsung Flashbolt, eeNews Europe 2020-02-06); the files' [AICoreMemoryRates] ddr_rate = 32 states "
                "no unit and is not used. No source opened gives the 910B's bandwidth."),
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
        link_bandwidth=300e9,
        link_source=("NVIDIA NVLink page (nvidia.com/de-de/data-center/nvlink): one A100 has up to twelve "
                     "third-generation NVLink links, 600 GB/s in total; both directions together, so 300 GB/s "
                     "each way, what one device sends in a ring collective"),
    ),
}
"""Published peaks by preset name, each with its source. Parameters, not facts: where sources disagree
(the 910B) the preset holds the whole range, and the ridge point becomes a range too."""
