"""Batch-size scaling rules as plain numbers: learning-rate scaling, warmup/decay schedules and
McCandlish et al.'s steps-versus-samples trade-off. Pure math, no torch (widgets and exercises use
it directly; :mod:`batchlab.measure.train` follows it). The sampling formulas (E‖G_B − G‖², the two-batch
estimator) live in :mod:`batchlab.formulas.noise`.
"""
from __future__ import annotations

import math
from typing import Literal

from batchlab.formulas.checks import at_most, one_of, positive as _positive, whole as _whole
from batchlab.formulas.fit import least_squares_line

__all__ = ["lr_schedule", "scale_lr", "batch_size_at", "steps_over_min", "samples_over_min", "fit_steps_samples", "LR_RULES",
           "LR_DECAYS"]

# Learning-rate scaling rules in code (keys) and as readers see them (values): widgets and plots read
# this one table.
LR_RULES: dict[str, str] = {"linear": "线性缩放", "sqrt": "平方根缩放", "none": "不缩放"}
LR_DECAYS: dict[str, str] = {"constant": "恒定", "cosine": "余弦衰减"}


def lr_schedule(
    step: int,
    base_lr: float,
    warmup_steps: int = 0,
    total_steps: int | None = None,
    decay: Literal["constant", "cosine"] = "constant",
) -> float:
    """Learning rate of optimizer step ``step``, counted from 1 (the first update is step 1).

    * Warmup, for step ≤ warmup_steps: ``base_lr · step / warmup_steps`` — a straight line from
      base_lr/warmup_steps at step 1 to exactly base_lr at step warmup_steps (Goyal et al. 2017).
    * Then ``"constant"``: base_lr. ``"cosine"`` (needs ``total_steps`` = T, W = warmup_steps):
      ``base_lr · ½(1 + cos(π · (step − W) / (T − W + 1)))``, which would reach 0 at step T + 1, so
      every one of the T updates still moves the weights and the last one is tiny.
    """
    step = _whole("step", step, 1)
    base_lr = _positive("base_lr", base_lr)
    warmup_steps = _whole("warmup_steps", warmup_steps, 0)
    one_of("decay", decay, LR_DECAYS)
    if total_steps is not None:
        total_steps = _whole("total_steps", total_steps, 1)
        at_most("warmup_steps", warmup_steps, total_steps, "total_steps")
        at_most("step", step, total_steps, "total_steps")
    elif decay == "cosine":
        raise ValueError("decay = 'cosine' 需要 total_steps：余弦衰减必须知道在哪一步结束")
    if step <= warmup_steps:
        return base_lr * step / warmup_steps
    if decay == "constant":
        return base_lr
    progress = (step - warmup_steps) / (total_steps - warmup_steps + 1)
    return base_lr * 0.5 * (1.0 + math.cos(math.pi * progress))


def batch_size_at(step: int, batch_size: int, increase: tuple[int, int] | None = None) -> int:
    """Sequences optimizer step ``step`` (counted from 1) takes: ``batch_size``, or with
    ``increase = (at_step, factor)`` ``batch_size × factor`` from step ``at_step`` on. Smith et al. (2018)
    increase the batch by the factor by which a step schedule would have divided the learning rate.
    """
    step = _whole("step", step, 1)
    batch_size = _whole("batch_size", batch_size, 1)
    if increase is None:
        return batch_size
    if not isinstance(increase, tuple) or len(increase) != 2:
        raise ValueError(f"increase = {increase!r}：应为 (从第几步起, 放大倍数)，例如 (65, 4)")
    at_step = _whole("increase[0]（从第几步起）", increase[0], 2)
    factor = _whole("increase[1]（放大倍数）", increase[1], 2)
    return batch_size * factor if step >= at_step else batch_size


def scale_lr(
    base_lr: float,
    base_batch: int,
    batch: int,
    rule: Literal["linear", "sqrt", "none"] = "linear",
) -> float:
    """Learning rate for batch size ``batch``, given one that works at ``base_batch``.

    * ``"linear"``: base_lr · batch/base_batch — Goyal et al. 2017 for SGD (k times the batch, k
      times the step), valid up to a limit and with warmup.
    * ``"sqrt"``: base_lr · √(batch/base_batch) — keeps the variance of the update fixed (Hoffer et
      al. 2017, for SGD); Malladi et al. 2022 derive the square-root rule for Adam-type optimizers
      (with β1, β2 and ε adjusted too, which this function does not do).
    * ``"none"``: base_lr unchanged.
    """
    base_lr = _positive("base_lr", base_lr)
    base_batch = _whole("base_batch", base_batch, 1)
    batch = _whole("batch", batch, 1)
    one_of("rule", rule, LR_RULES)
    if rule == "linear":
        return base_lr * batch / base_batch
    if rule == "sqrt":
        return base_lr * math.sqrt(batch / base_batch)
    return base_lr


def _noise_scale_args(batch_size: float, noise_scale: float) -> None:
    for name, value in (("batch_size", batch_size), ("noise_scale", noise_scale)):
        _positive(name, value)


def steps_over_min(batch_size: float, noise_scale: float) -> float:
    """S / S_min = 1 + B_noise / B: how many more optimizer steps than the fewest possible a batch
    of ``batch_size`` needs to reach a given loss (McCandlish et al. 2018, eq. 2.11)."""
    _noise_scale_args(batch_size, noise_scale)
    return 1.0 + noise_scale / batch_size


def samples_over_min(batch_size: float, noise_scale: float) -> float:
    """E / E_min = 1 + B / B_noise: how many more samples than the fewest possible it needs.
    At B = B_noise (the critical batch) both costs are twice their minimum."""
    _noise_scale_args(batch_size, noise_scale)
    return 1.0 + batch_size / noise_scale


def fit_steps_samples(batch_sizes: list[int], steps: list[float]) -> dict[str, float]:
    """Fit McCandlish et al.'s S = S_min · (1 + B_noise/B) to measured steps-to-target.

    S is linear in 1/B (S = S_min + S_min·B_noise · 1/B), so an ordinary least-squares line gives
    S_min (intercept) and B_noise (slope / intercept); E_min = S_min · B_noise follows from E = B·S.
    Returns ``s_min``, ``e_min`` and ``b_noise``; raises if the fit has no positive intercept (the
    points do not level off, so the model does not describe them).
    """
    xs = [1.0 / _whole("batch_size", b, 1) for b in batch_sizes]
    ys = [_positive("steps", v) for v in steps]
    s_min, slope = least_squares_line(xs, ys)
    if s_min <= 0 or slope <= 0:
        raise ValueError(f"拟合得到 S_min = {s_min:.3g}、斜率 {slope:.3g}：步数没有随 B 增大而趋平，模型不适用")
    return {"s_min": s_min, "e_min": slope, "b_noise": slope / s_min}
