"""Beyond the 原文 (原文之外): the case under interleaved 1F1B, and the case re-planned on the same 8 cards with
tensor parallelism (chapter 4.5). Pure arithmetic on :class:`~batchlab.formulas.job.Job`; the criteria are
stated here once, and the tests feed each a contrary input and see it flip.

The 原文's model, gpt2-xl, has 25 attention heads, so the Job refuses t = 2 (Megatron-LM splits whole heads over
the t devices). :data:`REPLAN_MODEL` is the same-size variant with 32 heads of 50 dims: the weight shapes depend
on h, not on how h is cut into heads, so the parameter count is unchanged (a test checks it).
"""
from __future__ import annotations

from dataclasses import replace

from batchlab.formulas.job import Job
from batchlab.formulas.presets import get_config
from batchlab.formulas.roofline import RateCurve
from batchlab.formulas.tune import tune

__all__ = ["REPLAN_MODEL", "ASSUMED_LINK_BANDWIDTHS", "HYPOTHETICAL_CURVE", "replanned", "recommendation_moves"]

REPLAN_MODEL = get_config("gpt2-xl", n_head=32)
"""gpt2-xl with 32 heads (h = 1600 = 32 × 50) instead of 25: same parameters, heads divisible by 2 and 4."""

ASSUMED_LINK_BANDWIDTHS: tuple[float, float] = (50e9, 200e9)
"""Two ASSUMED bytes/s one 910B sends to its tensor-parallel partner, per direction. No source this book
opened gives the 910B's card-to-card bandwidth (its device preset has none), so the chapter shows both ends of
this range and says that they are assumptions, not figures: a reader with a measured value passes it instead.
For scale only: the A100 preset's sourced NVLink figure is 300 GB/s each way."""

HYPOTHETICAL_CURVE = RateCurve((1024, 2048, 4096, 8192), (1.0e14, 2.0e14, 2.24e14, 2.24e14), "假想的速率曲线")
"""A made-up device, neither the 910B nor a measurement: its matmul rate doubles from M = 1024 to 2048 rows and
still grows 12% to 4096. On the case (b = 2 → 4), 1F1B's bubble (15.8% → 27.3%) costs more than 12%, interleaved
1F1B's with v = 2 (8.6% → 15.8%) less: the input on which the recommendation moves (chapter 4.5 and its test)."""


def replanned(job: Job, tensor_parallel: int = 2) -> Job:
    """``job`` on the same devices with ``tensor_parallel`` t taken out of the data parallelism (d → d / t),
    the model and everything else unchanged: the Job refuses it when the heads or d do not divide."""
    if job.data_parallel % tensor_parallel:
        raise ValueError(f"data_parallel = {job.data_parallel} 不能被 tensor_parallel = {tensor_parallel} 整除："
                         "卡数不变时，张量并行的 t 要从数据并行度里分出来")
    return replace(job, tensor_parallel=tensor_parallel, data_parallel=job.data_parallel // tensor_parallel)


def recommendation_moves(job: Job, curve: RateCurve, schedule: str = "interleaved-1f1b",
                         virtual_stages: int = 2) -> dict:
    """Does the tuner's recommendation change when ``job`` runs ``schedule`` with ``virtual_stages``?

    Criterion (stated before the computation): :func:`~batchlab.formulas.tune.tune` recommends, under the job's
    own schedule and under the new one, the fitting micro-batch size with the highest modelled tokens/s; the
    recommendation *moves* when the two sizes differ (or when one schedule fits some size and the other none).
    Returns ``before`` and ``after`` (tune's results) and ``moves``."""
    before = tune(job, curve)
    after = tune(replace(job, schedule=schedule, virtual_stages=virtual_stages), curve)

    def size(result: dict) -> int | None:
        return None if result["recommended"] is None else result["recommended"]["micro_batch_size"]

    return {"before": before, "after": after, "moves": size(before) != size(after)}
