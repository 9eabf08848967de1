"""The batch arithmetic of section 4.1: one place where a batch configuration is validated.

Two conventions describe the same optimizer step:

* **Megatron-LM / DeepSpeed** (Narayanan et al. 2021; DeepSpeed's ``train_batch_size``):
  ``global_batch = micro_batch_size × data_parallel × num_microbatches``. Pipeline stages do not
  appear: every micro-batch passes through *all* stages, so stages hold layers, not samples.
  DeepSpeed calls ``num_microbatches`` its ``gradient_accumulation_steps``.
* **The seed text's formula**: ``global_batch = micro_batch_size × pipeline_stages × data_parallel
  × grad_accum_steps``. It agrees with the first only when ``grad_accum_steps`` counts *pipeline
  fills*, i.e. ``num_microbatches = pipeline_stages × grad_accum_steps``.

:func:`plan_batch` accepts either description, derives the rest and reports which convention a
given ``grad_accum_steps`` matched.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

from .schedules import bubble_fraction

__all__ = ["BatchPlan", "plan_batch", "Convention"]

Convention = Literal["megatron", "seed"]


@dataclass(frozen=True)
class BatchPlan:
    """A validated batch configuration for one optimizer step."""

    global_batch: int
    micro_batch_size: int
    pipeline_stages: int
    data_parallel: int
    num_microbatches: int
    """Micro-batches each data-parallel replica pushes through the pipeline per step (Megatron's m)."""
    grad_accum_steps: int | None
    """The seed's count, ``num_microbatches / pipeline_stages``; None when that is not whole."""
    convention: str
    """Which formula the given ``grad_accum_steps`` matched: "seed", "megatron", or "derived"."""

    @property
    def samples_per_replica(self) -> int:
        return self.micro_batch_size * self.num_microbatches

    @property
    def devices(self) -> int:
        return self.pipeline_stages * self.data_parallel

    @property
    def bubble_fraction(self) -> float:
        """Idle share of a GPipe/1F1B step, (p − 1)/(m + p − 1)."""
        return bubble_fraction(self.pipeline_stages, self.num_microbatches)

    @property
    def fills_pipeline(self) -> bool:
        """1F1B needs at least one micro-batch per stage (m ≥ p)."""
        return self.num_microbatches >= self.pipeline_stages

    def updates_per_epoch(self, dataset_size: int) -> int:
        """Optimizer steps in one pass over ``dataset_size`` samples (the incomplete last batch dropped):
        one update per global batch, however it is split into micro-batches."""
        return _check_positive("dataset_size", dataset_size) // self.global_batch

    def tokens_per_step(self, seq_len: int) -> int:
        """Tokens consumed by one optimizer step."""
        return self.global_batch * _check_positive("seq_len", seq_len)

    def megatron_formula(self) -> str:
        return (
            f"{self.global_batch} = {self.micro_batch_size} (micro) × {self.data_parallel} (DP) "
            f"× {self.num_microbatches} (num_microbatches)"
        )

    def seed_formula(self) -> str | None:
        if self.grad_accum_steps is None:
            return None
        return (
            f"{self.global_batch} = {self.micro_batch_size} (micro) × {self.pipeline_stages} (PP) "
            f"× {self.data_parallel} (DP) × {self.grad_accum_steps} (grad_accum)"
        )

    def to_dict(self) -> dict:
        out = asdict(self)
        out.update(
            samples_per_replica=self.samples_per_replica,
            devices=self.devices,
            bubble_fraction=self.bubble_fraction,
            fills_pipeline=self.fills_pipeline,
        )
        return out


def _check_positive(name: str, value: object) -> int:
    # bool is an int subclass; True as a batch size is always a bug.
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} = {value!r} must be a whole number")
    if value < 1:
        raise ValueError(f"{name} = {value} must be at least 1")
    return value


def plan_batch(
    micro_batch_size: int,
    pipeline_stages: int = 1,
    data_parallel: int = 1,
    *,
    global_batch: int | None = None,
    grad_accum_steps: int | None = None,
    num_microbatches: int | None = None,
    convention: Convention = "seed",
) -> BatchPlan:
    """Validate a batch configuration and derive what is missing.

    Give ``global_batch`` (then ``grad_accum_steps`` / ``num_microbatches`` are optional and
    checked), or give ``num_microbatches``, or ``grad_accum_steps`` read in ``convention``
    ("seed": counts pipeline fills; "megatron": equals ``num_microbatches`` as in DeepSpeed).
    Raises ``ValueError`` naming the offending value and the rule it breaks.
    """
    micro = _check_positive("micro_batch_size", micro_batch_size)
    stages = _check_positive("pipeline_stages", pipeline_stages)
    dp = _check_positive("data_parallel", data_parallel)
    if convention not in ("seed", "megatron"):
        raise ValueError(f"convention = {convention!r} must be 'seed' or 'megatron'")
    for name, value in (("global_batch", global_batch), ("grad_accum_steps", grad_accum_steps),
                        ("num_microbatches", num_microbatches)):
        if value is not None:
            _check_positive(name, value)

    per_pass = micro * dp  # samples consumed when every replica runs one micro-batch
    matched = "derived"
    if global_batch is not None:
        if global_batch % per_pass:
            raise ValueError(
                f"global batch {global_batch} is not divisible by "
                f"micro_batch_size × data_parallel = {micro} × {dp} = {per_pass}"
            )
        m = global_batch // per_pass
        if num_microbatches is not None and num_microbatches != m:
            raise ValueError(
                f"num_microbatches {num_microbatches} contradicts global batch {global_batch}: "
                f"global_batch / (micro_batch_size × data_parallel) = {global_batch} / {per_pass} = {m}"
            )
        if grad_accum_steps is not None:
            if micro * stages * dp * grad_accum_steps == global_batch:
                matched = "seed"
            elif grad_accum_steps == m:
                matched = "megatron"
            else:
                seed_div = micro * stages * dp
                seed_rule = (f"grad_accum = {global_batch // seed_div}" if global_batch % seed_div == 0 else
                             f"no whole grad_accum fits ({global_batch} / {seed_div} = {global_batch / seed_div:g})")
                raise ValueError(
                    f"grad_accum_steps {grad_accum_steps} fits neither convention for global batch "
                    f"{global_batch}: the seed's rule needs micro × stages × DP × grad_accum = global, "
                    f"i.e. {seed_rule}; Megatron/DeepSpeed need grad_accum = num_microbatches = {m}"
                )
    elif num_microbatches is not None:
        m = num_microbatches
        if grad_accum_steps is not None and grad_accum_steps * stages != m and grad_accum_steps != m:
            seed_rule = f"{m // stages}" if m % stages == 0 else f"no whole number (m / pipeline_stages = {m / stages:g})"
            raise ValueError(
                f"grad_accum_steps {grad_accum_steps} contradicts num_microbatches {m}: expected "
                f"{seed_rule} (seed: m / pipeline_stages) or {m} (Megatron/DeepSpeed: m)"
            )
        if grad_accum_steps is not None:
            # With one stage both conventions coincide; call it "seed", as the global-batch branch does.
            matched = "seed" if grad_accum_steps * stages == m else "megatron"
    elif grad_accum_steps is not None:
        m = grad_accum_steps * stages if convention == "seed" else grad_accum_steps
        matched = convention
    else:
        raise ValueError(
            "not enough to fix the batch: give global_batch, num_microbatches or grad_accum_steps"
        )

    return BatchPlan(
        global_batch=m * per_pass,
        micro_batch_size=micro,
        pipeline_stages=stages,
        data_parallel=dp,
        num_microbatches=m,
        grad_accum_steps=m // stages if m % stages == 0 else None,
        convention=matched,
    )
