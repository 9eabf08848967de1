"""Batch-size ramp-up measured: the noise-driven ramp (the batch follows the measured noise scale) and the runner
that trains constant batches and ramps at equal samples over several seeds (4.8, 选读: beyond the 原文).

The rule "which batch at consumed sample n" is :mod:`batchlab.formulas.rampup`'s — Megatron-LM's linear
:class:`~batchlab.formulas.rampup.Rampup`, or :func:`~batchlab.formulas.rampup.noise_batch` applied to a
measured B_simple — and :func:`batchlab.measure.train.train` asks it before every step.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

from torch import nn

from batchlab.formulas.checks import whole
from batchlab.formulas.rampup import Rampup, noise_batch
from batchlab.measure.model import LossFn, next_token_loss
from batchlab.measure.noise import noise_scale_from_batches
from batchlab.measure.train import History, train

__all__ = ["NoiseRule", "NoiseReading", "NoiseRamp", "RampRuns", "ramp_runs"]


@dataclass(frozen=True)
class NoiseRule:
    """A noise-driven ramp's settings: the batch sizes it may take (``allowed``), how many consumed samples
    pass between two measurements (``every``), and the two-batch estimator's sizes and pairs
    (:func:`~batchlab.measure.noise.noise_scale_from_batches`)."""

    allowed: tuple[int, ...]
    every: int = 256
    b_small: int = 8
    b_big: int = 32
    num_pairs: int = 4

    def __post_init__(self) -> None:
        if not self.allowed:
            raise ValueError("allowed 为空：至少给出一个可用的批大小")
        for b in self.allowed:
            whole("allowed", b)
        for name in ("every", "b_small", "b_big", "num_pairs"):
            whole(name, getattr(self, name))


@dataclass(frozen=True)
class NoiseReading:
    """One measurement of a noise-driven ramp: after ``consumed`` samples, B_simple and the batch it chose."""

    consumed: int
    b_simple: float
    batch: int


@dataclass
class NoiseRamp:
    """``batch_at(consumed)`` for :func:`~batchlab.measure.train.train`: every ``rule.every`` samples it measures
    B_simple on ``model`` (the one being trained, at its current weights) and takes
    :func:`~batchlab.formulas.rampup.noise_batch` of it; once at the largest allowed size it stops measuring
    (the ramp only grows). Each measurement draws from its own generator (``seed`` and its index)."""

    model: nn.Module
    data: object
    rule: NoiseRule
    seed: int = 0
    loss_fn: LossFn = next_token_loss
    readings: list[NoiseReading] = field(default_factory=list)
    _batch: int | None = None
    _next: int = 0

    def __call__(self, consumed: int) -> int:
        """The batch of the step that starts after ``consumed`` samples."""
        if self._batch != max(self.rule.allowed) and consumed >= self._next:
            est = noise_scale_from_batches(self.model, self.data, self.rule.b_small, self.rule.b_big,
                                           self.rule.num_pairs, seed=self.seed * 1_000 + len(self.readings),
                                           loss_fn=self.loss_fn)
            self._batch = noise_batch(est.b_simple, self.rule.allowed, self._batch)
            self._next = (consumed // self.rule.every + 1) * self.rule.every
            self.readings.append(NoiseReading(consumed, est.b_simple, self._batch))
        assert self._batch is not None
        return self._batch


Plan = int | Rampup | NoiseRule
"""One way to size the batch: a constant batch, Megatron-LM's linear ramp, or a noise-driven ramp."""


@dataclass
class RampRuns:
    """What :func:`ramp_runs` trained: ``histories[name][i]`` is plan ``name`` on ``seeds[i]``, and
    ``readings[name][i]`` a noise-driven ramp's measurements there (empty for the other plans)."""

    seeds: tuple[int, ...]
    samples: int
    histories: dict[str, list[History]]
    readings: dict[str, list[list[NoiseReading]]]


def ramp_runs(make_model: Callable[[], nn.Module], data, eval_data, plans: Mapping[str, Plan | tuple[Plan, str]], *,
              samples: int,
              lr: float, seeds: Sequence[int] = (0, 1, 2), optimizer: str = "sgd", eval_every: int = 1,
              loss_fn: LossFn = next_token_loss) -> RampRuns:
    """Train a fresh ``make_model()`` under each plan on each seed, every run on exactly ``samples`` sequences
    at learning rate ``lr``, evaluating every ``eval_every`` steps. A plan is a batch rule, or ``(rule, lr_rule)``
    to say how the learning rate follows the growing batch (``"none"`` by default, as Megatron-LM; ``"sqrt"``,
    ``"linear"``: :func:`~batchlab.measure.train.train`'s ``lr_rule``). The same seed gives every plan the
    same order of samples."""
    if not plans:
        raise ValueError("plans 为空：至少给出一种定批次的做法")
    if not seeds:
        raise ValueError("seeds 为空：至少给出一个随机种子")
    histories: dict[str, list[History]] = {name: [] for name in plans}
    readings: dict[str, list[list[NoiseReading]]] = {name: [] for name in plans}
    for seed in seeds:
        for name, given in plans.items():
            plan, lr_rule = given if isinstance(given, tuple) else (given, "none")
            model = make_model()
            kw: dict = dict(optimizer=optimizer, lr=lr, samples=samples, eval_data=eval_data, eval_every=eval_every,
                            seed=seed, loss_fn=loss_fn, lr_rule=lr_rule)
            ramp = None
            if isinstance(plan, NoiseRule):
                ramp = NoiseRamp(model, data, plan, seed=seed, loss_fn=loss_fn)
                kw["ramp"] = ramp
            elif isinstance(plan, Rampup):
                kw["ramp"] = plan
            elif isinstance(plan, int) and not isinstance(plan, bool):
                kw["batch_size"] = plan
            else:
                raise ValueError(f"plans[{name!r}] = {plan!r}：应为批大小（整数）、Rampup 或 NoiseRule")
            histories[name].append(train(model, data, **kw))
            readings[name].append(list(ramp.readings) if ramp is not None else [])
    return RampRuns(tuple(seeds), samples, histories, readings)
