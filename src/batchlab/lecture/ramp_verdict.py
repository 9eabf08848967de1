"""Does a batch-size ramp save steps? The criterion of 4.8's ramp experiment, stated before measuring.

The 原文 says a small batch needs its batch increased step by step later in training; Merrill et al. (2025)
report that a ramp reached the same loss in fewer steps at the same tokens. The book tests the second,
stronger form on its smallest model: at an equal sample budget, on each seed, the ramp must reach the loss
the constant small batch ends with, in at least :data:`RAMP_STEP_SAVING` fewer optimizer steps than the
constant batch needs to first reach it. Pure Python, like every lecture module.
"""
from __future__ import annotations

from typing import Sequence

from batchlab.formulas.checks import whole
from batchlab.lecture.verdicts import verdict_over_seeds

__all__ = ["RAMP_STEP_SAVING", "step_saving", "saves_steps", "ramp_verdict"]

RAMP_STEP_SAVING = 0.10
"""The least share of the constant batch's steps a ramp must save: well above the step resolution (4.8's runs
evaluate every 2 steps, and the constant batch needs a few hundred), well below the ≈43% Merrill et al. report,
so that the test is of the direction, not of their number."""


def step_saving(ramp_steps: int | None, constant_steps: int) -> float | None:
    """1 − ramp steps / constant steps to the target (None if the ramp never reached it)."""
    whole("constant_steps", constant_steps)
    return None if ramp_steps is None else 1 - ramp_steps / constant_steps


def saves_steps(ramp_steps: int | None, constant_steps: int, saving: float = RAMP_STEP_SAVING) -> bool:
    """True if the ramp reached the target in at most (1 − ``saving``) × the constant batch's steps."""
    if step_saving(ramp_steps, constant_steps) is None:
        return False
    # whole steps saved against the share: 270 of 300 saves exactly 10 % (1 − 270/300 rounds below 0.1)
    return constant_steps - ramp_steps >= saving * constant_steps - 1e-9


def ramp_verdict(ramp_steps: Sequence[int | None], constant_steps: Sequence[int], saving: float = RAMP_STEP_SAVING
                 ) -> str:
    """The verdict word over seeds: 成立 if the ramp saves steps (:func:`saves_steps`) on every seed, 不成立 on
    none, 本书无法检验 when the seeds split."""
    if len(ramp_steps) != len(constant_steps):
        raise ValueError(f"ramp_steps 有 {len(ramp_steps)} 个种子、constant_steps 有 {len(constant_steps)} 个：应一一对应")
    return verdict_over_seeds([saves_steps(r, c, saving) for r, c in zip(ramp_steps, constant_steps)])
