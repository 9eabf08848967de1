"""「梯度累积与大批次完全等价」 qualified by precision: the criterion, stated before any measurement (pure math).

4.6 judges the claim in fp32 and 4.8 measures its precision (:func:`batchlab.lecture.verdicts.same_update`: a relative gap of at most 10⁻⁵).
Under bf16 even the large batch is not exact: its gradient, held in bfloat16, is rounded once, so no
accumulation can be judged against 10⁻⁵. The fair question is whether accumulating m micro-batches costs
anything *beyond* what the precision already costs the large batch.

The criterion (:func:`equivalence_tolerance`), fixed from the arithmetic before measuring:

* One rounding to nearest moves every entry by at most the dtype's unit roundoff u times itself
  (:data:`UNIT_ROUNDOFF`: 2⁻⁸ for bfloat16, 2⁻²⁴ for float32), so the large batch's gradient held in the
  dtype is off by at most u relative to its largest entry (the book's relative gap,
  :func:`batchlab.measure.accumulation.relative_gap`).
* The micro-batch gradients a bf16 backward hands over are themselves rounded: another u of each term. A
  sum that rounds nowhere else (fp32 main gradients, or a compensated sum) stays within these
  :data:`EQUIVALENCE_ROUNDINGS` = 2 roundings at any m; a bf16 buffer rounds again at every addition, by up
  to u of the running sum, and its error grows with m.
* So accumulation counts as equivalent to the large batch *in a precision* when its relative error against
  the exact (float64) sum of the same micro-batch gradients is at most 2u of the gradients' dtype — and never
  stricter than 4.6's fp32 tolerance :data:`~batchlab.lecture.verdicts.SAME_UPDATE_TOLERANCE` (for fp32,
  2u = 1.2·10⁻⁷ is below the rounding noise 4.6 already measures; there the criterion *is* 4.6's).

:data:`ACCUMULATORS` names the four ways the book measures, each with the dtype of the gradients it adds.

What the error does to training is judged apart (:func:`same_loss_curve`): a run whose loss at every step is
within :data:`LOSS_TOLERANCE` of the fp32 run (which is large-batch training, to float rounding) draws the
same loss curve to the two decimals a loss is read at.
"""
from __future__ import annotations

from typing import Mapping, Sequence

from batchlab.formulas.checks import nonnegative, one_of
from batchlab.lecture.verdicts import SAME_UPDATE_TOLERANCE, VERDICT

__all__ = ["UNIT_ROUNDOFF", "ACCUMULATORS", "ACCUMULATOR_LABELS", "EQUIVALENCE_ROUNDINGS", "equivalence_tolerance",
           "accumulation_verdict", "verdicts_by_accumulator", "CRITERION", "LOSS_TOLERANCE", "LOSS_CRITERION",
           "loss_curve_gap", "same_loss_curve"]

UNIT_ROUNDOFF: dict[str, float] = {"float32": 2.0**-24, "bfloat16": 2.0**-8, "float16": 2.0**-11}
"""Unit roundoff u = 2⁻ᵖ of each dtype (p significand bits, the implicit one included: 24, 8, 11): rounding
to nearest changes a value of the dtype's normal range by at most u times its magnitude (half of torch's
``finfo.eps``)."""

ACCUMULATORS: dict[str, str] = {
    "fp32": "float32",
    "bf16": "bfloat16",
    "bf16-kahan": "bfloat16",
    "bf16-fp32-main": "bfloat16",
}
"""Each way of accumulating gradients, with the dtype of the gradients it adds (the training's precision):
``fp32`` fp32 gradients into an fp32 buffer (4.6 today); ``bf16`` bf16 gradients into a bf16 buffer;
``bf16-kahan`` the same with a second bf16 buffer holding Kahan's compensation (4 bytes per parameter in
all); ``bf16-fp32-main`` bf16 gradients into fp32 main gradients (Megatron-LM's default under ``--bf16``)."""

ACCUMULATOR_LABELS: dict[str, str] = {
    "fp32": "fp32 训练：fp32 梯度累加到 fp32 缓冲",
    "bf16": "bf16 梯度累加到 bf16 缓冲",
    "bf16-kahan": "bf16 梯度累加到 bf16 缓冲 + bf16 补偿项（Kahan 求和）",
    "bf16-fp32-main": "bf16 梯度累加到 fp32 主梯度（Megatron-LM 在 bf16 下的默认）",
}
"""What a reader sees for each of :data:`ACCUMULATORS`."""

EQUIVALENCE_ROUNDINGS = 2
"""How many roundings of the gradients' dtype an accumulation may cost and still count as the large batch in
that precision: the terms' own rounding and the result's (see the module's docstring)."""

CRITERION = (f"相对 float64 精确和的相对误差 ≤ {EQUIVALENCE_ROUNDINGS} 倍梯度数据类型的单位舍入 u"
             f"（bf16：u = 2⁻⁸，即 ≤ {EQUIVALENCE_ROUNDINGS * UNIT_ROUNDOFF['bfloat16']:.1e}；"
             f"fp32 沿用 4.6 节的 ≤ {SAME_UPDATE_TOLERANCE:.0e}），在测量的每个 m 上都满足")
"""The criterion in the words a claim card shows, built from the same constants the verdict uses."""


def equivalence_tolerance(dtype: str) -> float:
    """The largest relative error an accumulation of ``dtype`` gradients may have and still give the large
    batch's update in that precision: :data:`EQUIVALENCE_ROUNDINGS` × u, at least
    :data:`~batchlab.lecture.verdicts.SAME_UPDATE_TOLERANCE`."""
    u = UNIT_ROUNDOFF[one_of("dtype", dtype, UNIT_ROUNDOFF)]
    return max(EQUIVALENCE_ROUNDINGS * u, SAME_UPDATE_TOLERANCE)


def accumulation_verdict(errors: Mapping[int, float], dtype: str) -> str:
    """成立 if the relative error at every measured count m (``errors``: m → error) is within
    :func:`equivalence_tolerance` of ``dtype``; else 不成立. One m beyond it is enough: the claim says
    "完全" (always)."""
    if not errors:
        raise ValueError("errors 为空：至少需要一个 m 的测量")
    tolerance = equivalence_tolerance(dtype)
    return VERDICT[all(nonnegative("error", e) <= tolerance for e in errors.values())]


def verdicts_by_accumulator(errors: Mapping[str, Mapping[int, float]]) -> dict[str, str]:
    """:func:`accumulation_verdict` of each accumulator of ``errors`` (name in :data:`ACCUMULATORS` → m → error),
    judged against its gradients' dtype."""
    return {name: accumulation_verdict(by_m, ACCUMULATORS[one_of("accumulator", name, ACCUMULATORS)])
            for name, by_m in errors.items()}


LOSS_TOLERANCE = 0.01
"""The largest difference of per-step training loss (per token) that still reads as the same curve: the
book reads a loss to two decimals."""

LOSS_CRITERION = f"每一步的训练损失与 fp32 训练（即一次处理整批）相差都小于 {LOSS_TOLERANCE}（损失读到两位小数）"
"""The criterion of :func:`same_loss_curve` in a reader's words."""


def loss_curve_gap(curve: Sequence[float], reference: Sequence[float]) -> float:
    """The largest absolute difference between two runs' losses at the same steps."""
    if not curve or len(curve) != len(reference):
        raise ValueError(f"两条损失曲线应同样长且非空：{len(curve)} 与 {len(reference)} 步")
    return max(abs(a - b) for a, b in zip(curve, reference))


def same_loss_curve(curve: Sequence[float], reference: Sequence[float], tolerance: float = LOSS_TOLERANCE) -> bool:
    """``curve`` and ``reference`` (per-step losses of two runs on the same batches) differ by less than
    ``tolerance`` at every step (:func:`loss_curve_gap`)."""
    return loss_curve_gap(curve, reference) < nonnegative("tolerance", tolerance)
