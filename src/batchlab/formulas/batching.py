"""The batch arithmetic of section 4.1: one place where a batch configuration is validated.

Two formulas describe the same optimizer step:

* **Megatron-LM / DeepSpeed** (Narayanan et al. 2021; DeepSpeed's ``train_batch_size``):
  ``global_batch = micro_batch_size × data_parallel × num_microbatches``. Pipeline stages do not
  appear: every micro-batch passes through *all* stages, so stages hold layers, not samples.
  DeepSpeed calls ``num_microbatches`` its ``gradient_accumulation_steps``, and so does this package
  (``train(num_microbatches=…)`` accumulates that many micro-batches per step).
* **The lecture's formula (原文)**: ``global_batch = micro_batch_size × pipeline_stages ×
  data_parallel × 梯度累积步数``. It agrees with the first only when its 梯度累积步数 counts
  *pipeline fills*: ``num_microbatches = pipeline_stages × pipeline_fills``.

So "梯度累积步数" has two readings. A number stated in a report (``stated_grad_accum``) is checked
against both, and :attr:`BatchPlan.grad_accum_reading` says which one it matched.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from batchlab.formulas.checks import divides, one_of, whole
from batchlab.formulas.pipeline_schedules import bubble_fraction

__all__ = ["BatchPlan", "device_count", "GRAD_ACCUM_READINGS", "LOSS_NORMALIZATIONS", "plan_batch", "token_weights"]

# The two readings of a stated 梯度累积步数, with the labels readers see.
GRAD_ACCUM_READINGS: dict[str, str] = {
    "pipeline_fills": "原文的读法：梯度累积步数 = 填满流水线的次数 m/p",
    "num_microbatches": "Megatron/DeepSpeed 的读法：梯度累积步数 = 微批次数 m",
}

# How accumulated micro-batch losses are normalised (4.6), with the labels readers see.
LOSS_NORMALIZATIONS: dict[str, str] = {
    "global_tokens": "按全局批次的 token 总数归一化",
    "per_microbatch": "每个微批次先求平均，再除以微批次数",
}


@dataclass(frozen=True)
class BatchPlan:
    """A validated batch configuration for one optimizer step."""

    global_batch: int
    micro_batch_size: int
    pipeline_stages: int
    data_parallel: int
    num_microbatches: int
    """Micro-batches each data-parallel replica pushes through the pipeline per step (Megatron's m;
    DeepSpeed's gradient_accumulation_steps)."""
    pipeline_fills: int | None
    """The lecture's 梯度累积步数, ``num_microbatches / pipeline_stages``; None when not whole."""
    grad_accum_reading: str | None = None
    """Which reading a stated 梯度累积步数 matched (a key of :data:`GRAD_ACCUM_READINGS`); None if none
    was stated."""

    @property
    def samples_per_replica(self) -> int:
        """The logical batch (逻辑批次) of one replica: micro_batch_size × num_microbatches."""
        return self.micro_batch_size * self.num_microbatches

    @property
    def devices(self) -> int:
        """Devices the batch is cut across: p × d (:func:`device_count` without tensor or context parallelism)."""
        return device_count(self.pipeline_stages, self.data_parallel)

    @property
    def bubble_fraction(self) -> float:
        """Idle share of a GPipe/1F1B step, (p − 1)/(m + p − 1)."""
        return bubble_fraction(self.pipeline_stages, self.num_microbatches)

    @property
    def enough_microbatches(self) -> bool:
        """1F1B needs at least one micro-batch per stage (m ≥ p)."""
        return self.num_microbatches >= self.pipeline_stages

    def updates_per_epoch(self, dataset_size: int) -> int:
        """Optimizer steps in one pass over ``dataset_size`` samples (the incomplete last batch dropped):
        one update per global batch, however it is split into micro-batches."""
        return whole("dataset_size", dataset_size) // self.global_batch

    def tokens_per_step(self, seq_len: int) -> int:
        """Tokens consumed by one optimizer step."""
        return self.global_batch * whole("seq_len", seq_len)

    def megatron_formula(self) -> str:
        return (
            f"{self.global_batch} = {self.micro_batch_size} (micro) × {self.data_parallel} (DP) "
            f"× {self.num_microbatches} (num_microbatches)"
        )

    def lecture_formula(self) -> str | None:
        """The 原文's product with whole numbers, or None when m is not a multiple of p."""
        if self.pipeline_fills is None:
            return None
        return (
            f"{self.global_batch} = {self.micro_batch_size} (micro) × {self.pipeline_stages} (PP) "
            f"× {self.data_parallel} (DP) × {self.pipeline_fills} (pipeline_fills)"
        )

    def to_dict(self) -> dict:
        out = asdict(self)
        out.update(
            samples_per_replica=self.samples_per_replica,
            devices=self.devices,
            bubble_fraction=self.bubble_fraction,
            enough_microbatches=self.enough_microbatches,
        )
        return out


def _read_grad_accum(stated: int, micro: int, stages: int, dp: int, m: int) -> str:
    """Which reading of a stated 梯度累积步数 fits m, or a ValueError that shows both rules."""
    if stated * stages == m:
        return "pipeline_fills"  # with one stage both readings agree; name the lecture's
    if stated == m:
        return "num_microbatches"
    global_batch = micro * dp * m
    lecture_div = micro * stages * dp
    lecture = (f"pipeline_fills = {global_batch // lecture_div}" if global_batch % lecture_div == 0 else
               f"没有整数解（{global_batch} / {lecture_div} = {global_batch / lecture_div:g}）")
    raise ValueError(
        f"梯度累积步数 = {stated} 两种读法都不成立（global_batch = {global_batch}）："
        f"原文读法要求 micro × PP × DP × 累积步数 = global，即 {lecture}；"
        f"Megatron/DeepSpeed 读法要求累积步数 = num_microbatches = {m}"
    )


def device_count(pipeline_stages: int, data_parallel: int, tensor_parallel: int = 1, context_parallel: int = 1) -> int:
    """Devices of a job: t × p × d × cp (Megatron-LM's world size). Tensor and context parallelism split each
    micro-batch's work, not the batch, so they multiply the devices and leave m = G / (b · d) alone."""
    return tensor_parallel * pipeline_stages * data_parallel * context_parallel


def plan_batch(
    micro_batch_size: int,
    pipeline_stages: int = 1,
    data_parallel: int = 1,
    *,
    global_batch: int | None = None,
    num_microbatches: int | None = None,
    pipeline_fills: int | None = None,
    stated_grad_accum: int | None = None,
) -> BatchPlan:
    """Validate a batch configuration and derive what is missing.

    Fix the step with ``global_batch``, ``num_microbatches`` or ``pipeline_fills`` (any that are
    given must agree). ``stated_grad_accum`` is a 梯度累积步数 as a report states it, reading unknown:
    it is checked against both readings (:data:`GRAD_ACCUM_READINGS`). Raises ``ValueError`` naming
    the offending value and the rule it breaks.
    """
    micro = whole("micro_batch_size", micro_batch_size)
    stages = whole("pipeline_stages", pipeline_stages)
    dp = whole("data_parallel", data_parallel)
    for name, value in (("global_batch", global_batch), ("num_microbatches", num_microbatches),
                        ("pipeline_fills", pipeline_fills), ("stated_grad_accum", stated_grad_accum)):
        if value is not None:
            whole(name, value)

    candidates: list[tuple[str, int]] = []
    if global_batch is not None:
        m = divides("global_batch", global_batch, f"micro_batch_size × data_parallel = {micro} × {dp}", micro * dp)
        candidates.append((f"global_batch / (micro_batch_size × data_parallel) = {global_batch} / {micro * dp}", m))
    if num_microbatches is not None:
        candidates.append(("num_microbatches", num_microbatches))
    if pipeline_fills is not None:
        candidates.append((f"pipeline_fills × pipeline_stages = {pipeline_fills} × {stages}", pipeline_fills * stages))
    if not candidates:
        raise ValueError("条件不足：请给出 global_batch、num_microbatches 或 pipeline_fills 之一")
    m = candidates[0][1]
    for how, value in candidates[1:]:
        if value != m:
            raise ValueError(f"{how} 得到 m = {value}，与 {candidates[0][0]} 得到的 m = {m} 矛盾")

    reading = None if stated_grad_accum is None else _read_grad_accum(stated_grad_accum, micro, stages, dp, m)
    return BatchPlan(
        global_batch=m * micro * dp,
        micro_batch_size=micro,
        pipeline_stages=stages,
        data_parallel=dp,
        num_microbatches=m,
        pipeline_fills=m // stages if m % stages == 0 else None,
        grad_accum_reading=reading,
    )


def token_weights(tokens_per_microbatch: list[int], normalize: str = "global_tokens") -> list[float]:
    """The weight one token of each micro-batch gets in the accumulated loss.

    ``"global_tokens"``: every token 1 / (all tokens of the batch) — the loss of the whole batch at once,
    so accumulation changes nothing. ``"per_microbatch"``: each micro-batch's mean, divided by the number
    of micro-batches, i.e. 1 / (k · n_i) — equal to the former only when all n_i are equal; otherwise the
    tokens of short micro-batches weigh more.
    """
    one_of("normalize", normalize, LOSS_NORMALIZATIONS)
    counts = [whole("tokens_per_microbatch", n) for n in tokens_per_microbatch]
    if not counts:
        raise ValueError("tokens_per_microbatch 为空：至少需要一个微批次")
    if normalize == "global_tokens":
        return [1.0 / sum(counts)] * len(counts)
    return [1.0 / (len(counts) * n) for n in counts]
