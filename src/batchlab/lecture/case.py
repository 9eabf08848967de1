"""The lecture's case study (原文 4.5) as data: GPT-2 1.5B on 8 × Ascend 910B, before and after tuning.

Pure math, no torch. Notebooks, exercises, widgets, the CLI and tests import these constants instead
of retyping ``64, 2, 4, 2``. ``reported`` holds what the lecture *says* it measured; the book audits
those numbers (4.5) and never uses them as inputs to its own results.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from batchlab.formulas.batching import BatchPlan
from batchlab.formulas.job import Job
from batchlab.formulas.presets import get_config

__all__ = ["CaseConfig", "CASE_STUDY", "CASE_STUDY_TUNED"]


@dataclass(frozen=True)
class CaseConfig:
    """One training configuration of the case study: the job, and what the lecture says of it."""

    name: str
    job: Job
    stated_grad_accum: int
    """The 梯度累积步数 the lecture states (its reading is what 4.1 works out)."""
    devices: str = "8 × Ascend 910B"
    reported: dict[str, float] = field(default_factory=dict)
    """Figures the lecture reports for this configuration, unverified."""

    def plan(self) -> BatchPlan:
        """The batch arithmetic of this configuration, with the stated 梯度累积步数 read both ways."""
        return self.job.read_grad_accum(self.stated_grad_accum)

    def plan_kwargs(self) -> dict[str, int]:
        """The arguments :func:`batchlab.formulas.batching.plan_batch` (and the calculator widget) take."""
        j = self.job
        return dict(micro_batch_size=j.micro_batch_size, pipeline_stages=j.pipeline_stages,
                    data_parallel=j.data_parallel, global_batch=j.global_batch)


# The lecture names no schedule, precision or optimizer: 1F1B, 16-bit mixed precision and Adam are what a
# GPT-2 run on 910B cards would use (the job's defaults for gpt2-xl), and chapter 4.5 varies each.
CASE_STUDY = CaseConfig(
    name="初始配置",
    job=Job(model=get_config("gpt2-xl"), seq_len=1024, global_batch=64, micro_batch_size=2,
            pipeline_stages=4, data_parallel=2),
    stated_grad_accum=4,
    reported={"npu_utilization": 0.42, "memory_fraction": 0.92, "tokens_per_second": 3200.0},
)
CASE_STUDY_TUNED = CaseConfig(
    name="调整后",
    job=Job(model=get_config("gpt2-xl"), seq_len=1024, global_batch=64, micro_batch_size=4,
            pipeline_stages=4, data_parallel=2),
    stated_grad_accum=2,
    reported={"npu_utilization": 0.68, "memory_fraction": 0.85, "tokens_per_second": 5100.0},
)
