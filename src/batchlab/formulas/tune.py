"""Choosing the micro-batch size (sections 4.3–4.4) as plain numbers: every candidate, its bubble, its
memory and its modelled speed, and the best one that fits (pure math, no torch).

At a fixed global batch, data-parallel degree and pipeline depth, the only free choice is the
micro-batch size b: a divisor of global_batch / data_parallel, giving m = global_batch / (b · dp)
micro-batches (1F1B needs m ≥ p, :func:`batchlab.formulas.pipeline_schedules.check_runnable`). For each, this
module puts side by side what the book computes in separate chapters:

* the bubble (p − 1)/(m + p − 1) and the modelled tokens/s (:func:`batchlab.formulas.throughput.model_step`,
  with a rate curve: measured, or :func:`roofline_curve` from a device's two roofs);
* the worst stage's peak memory against the device (:func:`batchlab.formulas.memory.stage_memory`).

:func:`tune` recommends the fitting candidate with the highest modelled tokens/s. When nothing fits it
tries the usual remedies one at a time — recomputation (selective, then full), then more pipeline
stages — and says which one would make some micro-batch fit.
"""
from __future__ import annotations

from dataclasses import replace

from batchlab.formulas.checks import divides, one_of, positive, whole
from batchlab.formulas.memory import DEVICE_MEMORY_GIB, RECOMPUTE_MODES, MemorySettings, default_precision, stage_memory
from batchlab.formulas.partition import partition_layers
from batchlab.formulas.pipeline_schedules import SCHEDULES, check_runnable
from batchlab.formulas.presets import GPTConfig
from batchlab.formulas.roofline import arithmetic_intensity, element_bytes, roofline_flops
from batchlab.formulas.throughput import RateCurve, model_step

__all__ = ["ROOFLINE_ROWS", "roofline_curve", "tune"]

ROOFLINE_ROWS: tuple[int, ...] = tuple(2**k for k in range(8, 17))
"""M = 256, 512, …, 65536: the rows :func:`roofline_curve` evaluates (held flat beyond them)."""

_RECOMPUTE_ORDER = ("none", "selective", "full")


def roofline_curve(config: GPTConfig, peak_flops: float, bandwidth: float, dtype: str = "bfloat16",
                   name: str | None = None) -> RateCurve:
    """A rate curve from a device's roofline: at each M of :data:`ROOFLINE_ROWS`, the attainable FLOP/s
    min(peak, intensity × bandwidth) of the layer's MLP matmul [M, h] × [h, 4h] in ``dtype``.

    ``peak_flops`` in FLOP/s, ``bandwidth`` in bytes/s (e.g. ``DEVICE_PRESETS["ascend-910b"]``'s
    ``peak_flops[0]`` and ``memory_bandwidth[0]``). An upper bound: real kernels reach less.
    """
    peak, bw = positive("peak_flops", peak_flops), positive("bandwidth", bandwidth)
    h, e = config.d_model, element_bytes(dtype)
    rates = tuple(roofline_flops(arithmetic_intensity(m, h, 4 * h, e), peak, bw) for m in ROOFLINE_ROWS)
    if name is None:
        name = f"屋顶线（{peak / 1e12:g} TFLOPS，{bw / 1e12:g} TB/s，{dtype}）"
    return RateCurve(ROOFLINE_ROWS, rates, name)


def _candidates(config: GPTConfig, seq_len: int, global_batch: int, pipeline_stages: int, data_parallel: int,
                curve: RateCurve, schedule: str, settings: MemorySettings, device_memory_gib: float) -> list[dict]:
    per_replica = global_batch // data_parallel
    rows = []
    for b in (b for b in range(1, per_replica + 1) if per_replica % b == 0):
        m = per_replica // b
        try:
            check_runnable(schedule, pipeline_stages, m)
        except ValueError:
            continue  # 1F1B with m < p: no runtime of 4.4 runs it
        step = model_step(config, seq_len, global_batch, b, pipeline_stages, data_parallel, curve, schedule,
                          recompute=settings.recompute == "full")
        memory = stage_memory(config, pipeline_stages, b, seq_len, m, schedule, settings, device_memory_gib)
        rows.append({
            "micro_batch_size": b,
            "num_microbatches": m,
            "bubble_fraction": step.bubble_fraction,
            "peak_memory_fraction": memory.peak_memory_fraction,
            "fits": memory.fits,
            "tokens_per_second": step.tokens_per_second,
            "matmul_efficiency": step.matmul_efficiency,
            "step_seconds": step.step_seconds,
        })
    return rows


def _first_fit(rows: list[dict]) -> int | None:
    """The largest fitting micro-batch size (memory grows with b, so the largest says most)."""
    fitting = [r["micro_batch_size"] for r in rows if r["fits"]]
    return max(fitting) if fitting else None


def _suggest(config: GPTConfig, seq_len: int, global_batch: int, pipeline_stages: int, data_parallel: int,
             curve: RateCurve, schedule: str, settings: MemorySettings,
             device_memory_gib: float) -> tuple[str, dict | None]:
    """When nothing fits: the first single change (recompute, then more stages) that makes some
    micro-batch fit, as a sentence and as the changed arguments; then the two together."""
    stronger = _RECOMPUTE_ORDER[_RECOMPUTE_ORDER.index(settings.recompute) + 1:]
    deeper = [p for p in range(pipeline_stages + 1, config.n_layer + 1) if config.n_layer % p == 0]

    def fits_with(mode: str, p: int) -> int | None:
        try:
            rows = _candidates(config, seq_len, global_batch, p, data_parallel, curve, schedule,
                               replace(settings, recompute=mode), device_memory_gib)
        except ValueError:
            return None
        return _first_fit(rows)

    for mode in stronger:
        b = fits_with(mode, pipeline_stages)
        if b is not None:
            return f"用 {mode} 重计算后微批次大小 {b} 放得下", {"recompute": mode}
    for p in deeper:
        b = fits_with(settings.recompute, p)
        if b is not None:
            return (f"把流水线阶段数从 {pipeline_stages} 增大到 {p}（设备数 {p} × {data_parallel} = "
                    f"{p * data_parallel}）后微批次大小 {b} 放得下"), {"pipeline_stages": p}
    for mode in stronger:
        for p in deeper:
            b = fits_with(mode, p)
            if b is not None:
                return (f"用 {mode} 重计算并把流水线阶段数从 {pipeline_stages} 增大到 {p}（设备数 "
                        f"{p * data_parallel}）后微批次大小 {b} 放得下"), {"recompute": mode, "pipeline_stages": p}
    return ("重计算和更多流水线阶段（到 n_layer = "
            f"{config.n_layer}）都不够：需要更大的显存、ZeRO-1、更低的精度或更短的序列"), None


def tune(config: GPTConfig, seq_len: int, global_batch: int, pipeline_stages: int, data_parallel: int,
         curve: RateCurve, *, schedule: str = "1f1b", recompute: str = "none",
         device_memory_gib: float = DEVICE_MEMORY_GIB, settings: MemorySettings | None = None) -> dict:
    """Every runnable micro-batch size of this configuration, and the recommended one.

    Candidates: each divisor b of global_batch / data_parallel, except (1F1B) those with fewer
    micro-batches than stages. Each is a dict with ``micro_batch_size``, ``num_microbatches``,
    ``bubble_fraction``, ``peak_memory_fraction`` (worst stage / device), ``fits``, ``tokens_per_second``
    (whole job, :func:`batchlab.formulas.throughput.model_step` on ``curve``; full recomputation adds a forward),
    ``matmul_efficiency`` and ``step_seconds``.

    ``settings`` (precision, optimizer, ZeRO-1, attention, dropout) defaults to the model's default
    precision with Adam; its ``recompute`` and ``data_parallel`` are replaced by this function's
    arguments. Returns ``candidates``, ``recommended`` (the fitting candidate with the highest modelled
    tokens/s, or None), ``suggestion`` (None when something fits; else a Chinese sentence naming the
    first change that makes some micro-batch fit) and ``suggested_change`` (that change as the
    arguments to pass to ``tune`` again, e.g. ``{"recompute": "selective"}``; None if none helps or
    nothing needed). Raises ValueError on invalid input.
    """
    if not isinstance(config, GPTConfig):
        raise ValueError(f"config = {config!r}：必须是 GPTConfig（batchlab.formulas.presets.get_config）")
    if not isinstance(curve, RateCurve):
        raise ValueError(f"curve = {curve!r}：必须是 RateCurve（实测点，或 roofline_curve 的屋顶线）")
    seq_len = whole("seq_len", seq_len)
    if seq_len > config.n_positions:
        raise ValueError(f"seq_len = {seq_len}：必须在 1 到 {config.name} 的 n_positions = {config.n_positions} 之间")
    g, dp = whole("global_batch", global_batch), whole("data_parallel", data_parallel)
    p = whole("pipeline_stages", pipeline_stages)
    per_replica = divides("global_batch", g, "data_parallel", dp)
    partition_layers(config, p)  # every stage needs a layer
    one_of("schedule", schedule, SCHEDULES)
    one_of("recompute", recompute, RECOMPUTE_MODES)
    positive("device_memory_gib", device_memory_gib)
    if settings is None:
        settings = MemorySettings(precision=default_precision(config))
    elif not isinstance(settings, MemorySettings):
        raise ValueError(f"settings = {settings!r}：必须是 MemorySettings 或 None")
    settings = replace(settings, recompute=recompute, data_parallel=dp)

    rows = _candidates(config, seq_len, g, p, dp, curve, schedule, settings, device_memory_gib)
    if not rows:
        raise ValueError(f"每个数据并行副本只有 global_batch / data_parallel = {g} / {dp} = {per_replica} 条序列，"
                         f"凑不出 {SCHEDULES[schedule]} 要求的 ≥ pipeline_stages = {p} 个微批次：没有可运行的微批次大小")
    fitting = [r for r in rows if r["fits"]]
    recommended = max(fitting, key=lambda r: r["tokens_per_second"]) if fitting else None
    suggestion = change = None
    if recommended is None:
        suggestion, change = _suggest(config, seq_len, g, p, dp, curve, schedule, settings, device_memory_gib)
    return {"candidates": rows, "recommended": recommended, "suggestion": suggestion, "suggested_change": change}
