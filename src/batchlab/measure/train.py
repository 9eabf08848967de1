"""A small, deterministic training loop for the convergence experiments of section 4.2.

One optimizer step consumes ``batch_size`` sequences, pushed through the model as ``num_microbatches``
micro-batches of ``batch_size // num_microbatches`` (gradient accumulation; DeepSpeed calls this count
gradient_accumulation_steps); the gradients of loss/num_microbatches add up to the gradient of the
whole batch's mean loss, so accumulation changes memory, not the mathematics.
Batches come from a private generator: the same ``seed`` gives the same batches, whatever the
accumulation, and nothing global is seeded.

A run of a :class:`~batchlab.formulas.job.Job` (``train(model, data, job=job, ...)``) takes the batch and its
cut from the job — ``job.global_batch`` sequences in ``job.num_microbatches`` micro-batches of
``job.micro_batch_size`` — and a GPT must be the job's (its dropout is the job's: training can have dropout,
drawn from a generator seeded by ``seed``). Any other module (4.2's and 4.6's bigram and BatchNorm models,
which no job describes) is trained with ``batch_size`` and ``num_microbatches``.

The learning-rate rules it follows (``lr_schedule``, ``scale_lr``) live in the torch-free
:mod:`batchlab.formulas.scaling` and are re-exported here.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Callable, Iterable, Literal

import torch
from torch import nn

from batchlab.formulas.checks import at_most, divides, one_of, positive as _positive, whole as _whole
from batchlab.formulas.job import Job
from batchlab.formulas.rampup import Rampup, check_ramp_target
from batchlab.formulas.scaling import LR_RULES, batch_size_at, lr_schedule, scale_lr
from batchlab.measure.model import GPT, LossFn, check_job_model, next_token_loss

__all__ = ["STEPS_TO_TARGET_RTOL", "steps_to_target", "History", "OPTIMIZERS", "make_optimizer", "train", "sweep",
           "BatchAt"]

OPTIMIZERS: tuple[str, ...] = ("sgd", "adam", "adamw", "lamb")
OptimizerFactory = Callable[[Iterable[nn.Parameter], float], torch.optim.Optimizer]
BatchAt = Callable[[int], int]
"""A batch-size ramp as :func:`train` calls it: the batch of the step that starts after n consumed samples."""


@dataclass
class History:
    """What one run recorded. ``step[i]`` is the optimizer step (from 1) whose ``lr[i]`` and
    ``train_loss[i]`` (mean loss of that step's batch, before the update) are listed; evaluation
    losses are at ``eval_step`` (0 = before training)."""

    step: list[int] = field(default_factory=list)
    samples_seen: list[int] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    train_loss: list[float] = field(default_factory=list)
    eval_step: list[int] = field(default_factory=list)
    eval_loss: list[float] = field(default_factory=list)
    config: dict = field(default_factory=dict)

    @property
    def final_eval_loss(self) -> float | None:
        """The last evaluation loss, or None if the run had no ``eval_data``."""
        return self.eval_loss[-1] if self.eval_loss else None

    @property
    def eval_samples(self) -> list[int]:
        """Sequences seen at each evaluation (0 before training): the x axis of "loss against samples"."""
        return [self.samples_seen[s - 1] if s > 0 else 0 for s in self.eval_step]

    @property
    def batch_sizes(self) -> list[int]:
        """Sequences each step took (``samples_seen``'s increments): constant, or what a ramp chose."""
        return [b - a for a, b in zip([0, *self.samples_seen], self.samples_seen)]


def make_optimizer(
    name: str | OptimizerFactory,
    params: Iterable[nn.Parameter],
    lr: float,
    weight_decay: float | None = None,
) -> torch.optim.Optimizer:
    """Build ``"sgd"``, ``"adam"``, ``"adamw"`` or ``"lamb"`` (or call a factory ``f(params, lr)``).

    ``weight_decay`` None keeps each optimizer's own default (torch: SGD and Adam 0, AdamW 0.01;
    our LAMB 0.01, the value You et al. used for BERT).
    """
    if callable(name):
        return name(params, lr)
    wd = {} if weight_decay is None else {"weight_decay": weight_decay}
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr, **wd)
    if name == "adam":
        return torch.optim.Adam(params, lr=lr, **wd)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=lr, **wd)
    if name == "lamb":
        from batchlab.measure.optim import Lamb

        return Lamb(params, lr=lr, weight_decay=0.01 if weight_decay is None else weight_decay)
    raise ValueError(f"optimizer = {name!r}：只能取 {', '.join(OPTIMIZERS)} 之一，或一个 f(params, lr) 函数")


def _device_of(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


@torch.no_grad()
def evaluate(model: nn.Module, data, batch_size: int = 256, loss_fn: LossFn = next_token_loss) -> float:
    """Mean loss over every sequence of ``data`` (in eval mode; the model's mode is restored)."""
    was_training = model.training
    model.eval()
    device = _device_of(model)
    total, count = 0.0, 0
    try:
        for start in range(0, len(data), batch_size):
            x = data.inputs[start:start + batch_size].to(device)
            y = data.targets[start:start + batch_size].to(device)
            total += float(loss_fn(model(x), y)) * x.shape[0]
            count += x.shape[0]
    finally:
        model.train(was_training)
    return total / count


def train(
    model: nn.Module,
    data,
    *,
    batch_size: int | None = None,
    steps: int | None = None,
    optimizer: str | OptimizerFactory = "adam",
    lr: float,
    weight_decay: float | None = None,
    warmup_steps: int = 0,
    decay: Literal["constant", "cosine"] = "constant",
    num_microbatches: int | None = None,
    job: Job | None = None,
    batch_increase: tuple[int, int] | None = None,
    ramp: Rampup | BatchAt | None = None,
    samples: int | None = None,
    lr_rule: Literal["none", "sqrt", "linear"] = "none",
    eval_data=None,
    eval_every: int | None = None,
    seed: int = 0,
    progress: bool = False,
    loss_fn: LossFn = next_token_loss,
) -> History:
    """Train ``model`` in place for ``steps`` optimizer steps (or until ``samples`` sequences) and return its
    :class:`History`.

    ``data`` is a :class:`batchlab.measure.data.TokenDataset` (anything with ``.inputs``/``.targets``).
    Batches are drawn like a shuffling data loader that drops the last incomplete batch: each epoch
    is a fresh permutation from a generator seeded by ``seed``. Each step's ``batch_size`` sequences
    go through the model as ``num_microbatches`` micro-batches of ``batch_size // num_microbatches``.
    ``batch_increase = (at_step, factor)`` multiplies the batch by ``factor`` from step ``at_step`` on
    (:func:`batchlab.formulas.scaling.batch_size_at`; the optimizer keeps its state; ``samples_seen`` counts the
    sequences actually used). The learning rate follows :func:`lr_schedule` (``total_steps`` = ``steps``). With ``eval_data``,
    the eval loss is recorded before training, every ``eval_every`` steps (default: steps // 10)
    and after the last step.

    ``job``: the batch arithmetic from a :class:`~batchlab.formulas.job.Job` instead — ``batch_size`` =
    ``job.global_batch``, ``num_microbatches`` = ``job.num_microbatches`` (give neither); one process
    accumulates the micro-batches in turn, so the job has one stage and no data parallel, and a GPT ``model``
    must be the job's (:func:`~batchlab.measure.model.check_job_model`).

    ``ramp``: the batch grows during training — a :class:`~batchlab.formulas.rampup.Rampup` (Megatron-LM's
    rule, :meth:`~batchlab.formulas.rampup.Rampup.global_batch_at`) or any ``batch_at(consumed_samples)``
    (e.g. :class:`batchlab.measure.ramp.NoiseRamp`), asked before every step as Megatron-LM's training loop
    asks its calculator; give no ``batch_size``. Each step cuts its batch into ``num_microbatches``
    micro-batches, or, with a ``job``, into micro-batches of ``job.micro_batch_size`` (m = G_n / b, as
    Megatron-LM does; the ramp's target must be the job's batch). ``lr_rule`` says how the learning rate
    follows a changing batch (ramp or ``batch_increase``): ``"none"`` (default) keeps :func:`lr_schedule`'s
    value, as Megatron-LM does (its scheduler counts consumed samples and never looks at the batch);
    ``"sqrt"`` or ``"linear"`` multiply it by :func:`scale_lr` from the first step's batch to this step's.
    ``samples``: stop when that many sequences have been used (instead of ``steps``; the last step takes only
    the rest, so runs compare at exactly equal samples); ``decay`` must then be ``"constant"`` (the step count
    a cosine needs is not known in advance) and ``eval_every`` defaults to 1.
    """
    n = len(data)
    batch_at, batch_size, num_microbatches, micro_size = _batch_rule(model, job, batch_size, num_microbatches,
                                                                     batch_increase, ramp)
    if (steps is None) == (samples is None):
        raise ValueError("steps 与 samples 恰好给一个：训练多少步，或用完多少条样本")
    if steps is not None:
        steps = _whole("steps", steps, 1)
    else:
        samples = _whole("samples", samples, 1)
        if decay != "constant":
            raise ValueError(f"decay = {decay!r}：按样本数（samples）训练时步数事先未知，只能用 \"constant\"")
    lr = _positive("lr", lr)
    one_of("lr_rule", lr_rule, LR_RULES)
    if ramp is None:
        largest = batch_size_at(steps or 1, batch_size, batch_increase)  # also validates batch_increase
        at_most("batch_size", largest, n, "len(data)")
        # each optimizer step splits its batch into num_microbatches equal micro-batches
        divides("batch_size", batch_size, "num_microbatches", num_microbatches)
        divides("batch_size", largest, "num_microbatches", num_microbatches)
    if eval_every is not None:
        eval_every = _whole("eval_every", eval_every, 1)
    lr_schedule(steps or 1, lr, warmup_steps, steps, decay)  # validates the schedule before any work
    opt = make_optimizer(optimizer, [p for p in model.parameters() if p.requires_grad], lr, weight_decay)
    device = _device_of(model)
    gen = torch.Generator().manual_seed(seed)
    history = History(config=dict(batch_size=batch_size, steps=steps, lr=lr, warmup_steps=warmup_steps,
                                  decay=decay, num_microbatches=num_microbatches, seed=seed,
                                  batch_increase=batch_increase, ramp=ramp, samples=samples, lr_rule=lr_rule,
                                  optimizer=optimizer if isinstance(optimizer, str) else getattr(
                                      optimizer, "__name__", repr(optimizer))))
    every = eval_every or (max(1, steps // 10) if steps is not None else 1)
    if eval_data is not None:
        history.eval_step.append(0)
        history.eval_loss.append(evaluate(model, eval_data, loss_fn=loss_fn))

    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=steps or samples, desc=f"B={batch_size or 'ramp'}", leave=False)
    order, cursor = torch.randperm(n, generator=gen), 0
    # Dropout, if the model has any, draws from torch's global generator: fork it so the run is
    # reproducible without changing the caller's random state.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model.train()
        samples_seen, step, first_batch = 0, 0, None
        while (step < steps) if steps is not None else (samples_seen < samples):
            step += 1
            step_batch = batch_at(step, samples_seen)
            if samples is not None:
                step_batch = min(step_batch, samples - samples_seen)
            micro_batch_size, step_micro = _cut(step, step_batch, num_microbatches, micro_size, n)
            first_batch = first_batch or step_batch
            if cursor + step_batch > n:  # epoch over: drop the incomplete rest, reshuffle
                order, cursor = torch.randperm(n, generator=gen), 0
            batch = order[cursor:cursor + step_batch]
            cursor += step_batch
            samples_seen += step_batch
            current_lr = scale_lr(lr_schedule(step, lr, warmup_steps, steps, decay), first_batch, step_batch, lr_rule)
            for group in opt.param_groups:
                group["lr"] = current_lr
            opt.zero_grad(set_to_none=True)
            step_loss = 0.0
            for k in range(step_micro):
                idx = batch[k * micro_batch_size:(k + 1) * micro_batch_size]
                x, y = data.inputs[idx].to(device), data.targets[idx].to(device)
                # Dividing by the micro-batch count makes the summed gradient that of the batch's mean loss.
                loss = loss_fn(model(x), y) / step_micro
                loss.backward()
                step_loss += float(loss.detach())
            opt.step()
            history.step.append(step)
            history.samples_seen.append(samples_seen)
            history.lr.append(current_lr)
            history.train_loss.append(step_loss)
            last = step == steps if steps is not None else samples_seen >= samples
            if eval_data is not None and (step % every == 0 or last):
                history.eval_step.append(step)
                history.eval_loss.append(evaluate(model, eval_data, loss_fn=loss_fn))
            if bar is not None:
                bar.update(1 if steps is not None else step_batch)
                bar.set_postfix(loss=f"{step_loss:.3f}", refresh=False)
    if bar is not None:
        bar.close()
    return history


def _batch_rule(model: nn.Module, job: Job | None, batch_size: int | None, num_microbatches: int | None,
                batch_increase: tuple[int, int] | None, ramp: Rampup | BatchAt | None,
                ) -> tuple[Callable[[int, int], int], int | None, int, int | None]:
    """How a :func:`train` run sizes its steps: ``batch_at(step, consumed)``, the constant batch (None with a
    ramp), the micro-batch count and, for a job's ramp, the fixed micro-batch size (None otherwise)."""
    if ramp is None:
        batch_size, num_microbatches = _batch_arithmetic(model, job, batch_size, num_microbatches)
        batch_size = _whole("batch_size", batch_size, 1)
        num_microbatches = _whole("num_microbatches", num_microbatches, 1)
        return (lambda step, _consumed: batch_size_at(step, batch_size, batch_increase)), batch_size, \
            num_microbatches, None
    if batch_increase is not None:
        raise ValueError("batch_increase 与 ramp 只能给一种：两者都是训练中改变批大小的规则")
    if batch_size is not None:
        raise ValueError("ramp 与 batch_size 只能给一种：每步的批大小由爬升规则决定")
    if isinstance(ramp, Rampup):
        rule: BatchAt = ramp.global_batch_at  # the one rule: Megatron-LM's, in formulas/rampup.py
    elif callable(ramp):
        rule = ramp
    else:
        raise ValueError(f"ramp = {type(ramp).__name__}：应为 Rampup，或函数 batch_at(已消耗样本数) → 批大小")
    micro_size = None
    if job is not None:
        _batch_arithmetic(model, job, None, num_microbatches)
        if isinstance(ramp, Rampup):
            check_ramp_target(ramp, job)
        micro_size = job.micro_batch_size
    num_microbatches = _whole("num_microbatches", 1 if num_microbatches is None else num_microbatches, 1)
    return (lambda _step, consumed: rule(consumed)), None, num_microbatches, micro_size


def _cut(step: int, batch: int, num_microbatches: int, micro_size: int | None, n: int) -> tuple[int, int]:
    """(micro-batch size, micro-batch count) of one step's ``batch``, refused in the step's own line."""
    _whole(f"第 {step} 步的批大小", batch, 1)
    at_most(f"第 {step} 步的批大小", batch, n, "len(data)")
    if micro_size is not None:  # a job's ramp: fixed micro-batches, m = G_n / b
        divides(f"第 {step} 步的批大小", batch, "micro_batch_size", micro_size)
        return micro_size, batch // micro_size
    divides(f"第 {step} 步的批大小", batch, "num_microbatches", num_microbatches)
    return batch // num_microbatches, num_microbatches


def _batch_arithmetic(model: nn.Module, job: Job | None, batch_size: int | None,
                      num_microbatches: int | None) -> tuple[int, int]:
    """(batch size, micro-batch count) of a :func:`train` run: the job's, or the ones given (count default 1)."""
    if job is None:
        if batch_size is None:
            raise ValueError("batch_size：请给出每步的序列数，或给出 job")
        return batch_size, 1 if num_microbatches is None else num_microbatches
    if not isinstance(job, Job):
        raise ValueError(f"job = {type(job).__name__}：必须是 Job（batchlab.formulas.job.Job）")
    if batch_size is not None or num_microbatches is not None:
        raise ValueError("job 与 batch_size/num_microbatches 只能给一种：作业已经说了批大小和微批次数")
    if job.pipeline_stages != 1 or job.data_parallel != 1:
        raise ValueError(f"job：train 在一个进程里依次累积微批次，作业须是 pipeline_stages = 1、data_parallel = 1"
                         f"（现在是 {job.pipeline_stages} 和 {job.data_parallel}）")
    if isinstance(model, GPT):
        check_job_model(job, model)
    return job.global_batch, job.num_microbatches


STEPS_TO_TARGET_RTOL = 1e-5
"""Relative slack of "reached the target": float32 runs that are equal in exact arithmetic (a batch and
its accumulated micro-batches, 4.6) differ by about 1e-7, and which side of a shared target they land on
depends on the CPU's rounding, not on the training."""


def steps_to_target(history: History, target: float, rtol: float = STEPS_TO_TARGET_RTOL) -> int | None:
    """First evaluated step whose eval loss is at most ``target`` × (1 + ``rtol``) (None if the run never
    got there).

    Multiply by the run's batch size for the samples it took: the two axes of McCandlish et al.'s
    steps-versus-samples trade-off.
    """
    if not history.eval_loss:
        raise ValueError("history 没有验证损失：训练时给出 eval_data 才能测到达目标所需的步数")
    bound = target * (1 + rtol)
    return next((s for s, loss in zip(history.eval_step, history.eval_loss) if loss <= bound), None)


def sweep(configs: list[dict], *, progress: bool = False, **common) -> list[History]:
    """Run :func:`train` once per config (``{**common, **config}``) and return the histories.

    ``model`` (in ``common`` or a config) is either a module, copied afresh for every run so all
    runs start from the same weights, or a zero-argument callable that builds one. ``progress``
    shows one bar over the runs.
    """
    if not configs:
        raise ValueError("configs 为空：至少给出一次运行")
    runs = range(len(configs))
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(configs), desc="runs")
    histories = []
    for i in runs:
        kwargs = {**common, **configs[i]}
        if "model" not in kwargs or "data" not in kwargs:
            raise ValueError(f"第 {i} 次运行缺少 'model' 或 'data'：在公共参数或该配置中给出")
        model = kwargs.pop("model")
        model = copy.deepcopy(model) if isinstance(model, nn.Module) else model()
        data = kwargs.pop("data")
        histories.append(train(model, data, **kwargs))
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    return histories
