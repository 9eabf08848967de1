"""The GPT cut into pipeline stages, run in one process replaying a schedule (4.4).

The formulas (:mod:`batchlab.formulas.pipeline_schedules`) say in which order a schedule runs its
forward (F) and backward (B) passes and what bubble that leaves. This module runs those orders on
the GPT of :mod:`batchlab.measure.model` and measures them:

* :func:`split_model` cuts a :class:`~batchlab.measure.model.GPT` into stage modules, using
  :func:`batchlab.formulas.partition.partition_layers` (the first stage holds the embeddings, the last the
  final LayerNorm and the head, as in Megatron-LM);
* :func:`run_pipeline_local` runs steps of a :class:`~batchlab.formulas.job.Job` — the job the formulas
  model, the same record — with every stage in this process, one op after the other, in an order that
  respects the pipeline's dependencies, with real autograd across the stage boundaries. It returns a
  :class:`LocalPipelineRun`: gradients equal to plain gradient accumulation's, and per-op times that,
  replayed under the dependencies (``replayed``), show the bubble that p devices with free communication
  would have. ``warmup`` steps are run and discarded (the first backward of a stage allocates autograd's
  buffers and is tens of times slower than the next), and with several timed ``steps`` each op takes its
  median duration (:func:`~batchlab.formulas.measured_timeline.median_durations`), so that the replay
  shows a typical step, not one slow op of one step.

**Dropout.** A pipeline run takes its dropout from the job, and refuses any above 0
(:func:`check_no_dropout`): what a pipeline run promises — and what 4.4, 4.6 and the tests check — is that
its gradients *are* gradient accumulation's, and with dropout the two draw their random masks in a
different order (op by op here, rank by rank on p processes), so they would differ by the masks' noise.
Runs that compare nothing with another run can have dropout: :func:`batchlab.measure.train.train` and the
memory runs of :mod:`batchlab.measure.memory` (whose bytes then include the masks, as the memory model's do).

**Schedules.** The replay runs GPipe and 1F1B: one stage module per stage, each backward whole. Interleaved
1F1B (several chunks per device) and the zero-bubble schedules (the backward split into input and weight
gradients, which autograd in one process cannot time apart without recomputing) are refused here
(:func:`check_local_schedule`); :mod:`batchlab.measure.pipeline_distributed` runs every schedule.

One process per stage, communication and all, is :mod:`batchlab.measure.pipeline_distributed`.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from batchlab.formulas.checks import one_of, whole
from batchlab.formulas.job import Job
from batchlab.formulas.measured_timeline import median_durations
from batchlab.formulas.partition import PARTITION_METHODS, Stage, partition_layers
from batchlab.formulas.pipeline_schedules import (SCHEDULES, Op, Timeline, schedule_order,
                                                  simulate)
from batchlab.formulas.presets import check_seq_len
from batchlab.measure.data import MARKOV_MAX_VOCAB, make_corpus, random_tokens
from batchlab.measure.device import as_device, synchronize
from batchlab.measure.model import GPT, build_model, check_job_model, check_runnable_job, next_token_loss, run_blocks

__all__ = ["StageModule", "split_model", "pipeline_batch", "check_pipeline_job", "check_no_dropout",
           "LOCAL_SCHEDULES", "check_local_schedule", "LocalPipelineRun", "run_pipeline_local"]


# ---------------------------------------------------------------------------
# Splitting the model
# ---------------------------------------------------------------------------


class StageModule(nn.Module):
    """One pipeline stage of a :class:`~batchlab.measure.model.GPT`, made of that GPT's own submodules.

    ``forward(x, targets=None)``: the first stage takes token ids [batch, seq], the others the hidden
    state [batch, seq, d_model]; every stage but the last returns the hidden state, the last returns
    the logits, or the mean cross-entropy when ``targets`` are given. Parameter names are the GPT's
    (``blocks.5.attn.c_attn.weight`` stays ``blocks.5...`` on whichever stage holds layer 5).
    """

    def __init__(self, model: GPT, stage: Stage) -> None:
        super().__init__()
        self.index, self.layers = stage.index, stage.layers
        self.has_embedding, self.has_head = stage.has_embedding, stage.has_head
        self.config, self.recompute = model.config, model.recompute
        self.tied = model.lm_head is None
        if stage.has_embedding or (stage.has_head and self.tied):
            self.wte = model.wte  # the lookup table on the first stage, the tied head on the last
        if stage.has_embedding:
            self.wpe, self.drop = model.wpe, model.drop
        # Keyed by the GPT's layer index, so that parameter names match the GPT's.
        self.blocks = nn.ModuleDict({str(i): model.blocks[i] for i in stage.layers})
        if stage.has_head:
            self.ln_f = model.ln_f
            if not self.tied:
                self.lm_head = model.lm_head

    def forward(self, x: torch.Tensor, targets: torch.Tensor | None = None) -> torch.Tensor:
        if self.has_embedding:
            t = check_seq_len(self.config, x.shape[-1])
            x = self.drop(self.wte(x) + self.wpe(torch.arange(t, device=x.device)))
        x = run_blocks(self.blocks.values(), x, self.recompute)
        if not self.has_head:
            return x
        logits = F.linear(self.ln_f(x), self.wte.weight if self.tied else self.lm_head.weight)
        return logits if targets is None else next_token_loss(logits, targets)


def split_model(model: GPT, pipeline_stages: int, method: str = "uniform") -> list[StageModule]:
    """Cut ``model`` into ``pipeline_stages`` :class:`StageModule` s along
    :func:`~batchlab.formulas.partition.partition_layers` (``method``: one of :data:`~batchlab.formulas.partition.PARTITION_METHODS`).

    The stages share the GPT's modules (no copy): training a stage trains the GPT.

    **The tied head.** GPT-2's head is the token-embedding matrix ``wte.weight``, needed by the first
    stage (lookup) and the last (logits). The last stage reuses it, as Megatron-LM does: in one
    process both stages hold the *same* parameter, so autograd adds the two stages' gradients into one
    ``.grad``; with one process per stage each rank builds its own GPT, so the last rank holds a *copy*,
    and the gradient of the tied weight is the **sum** of the first stage's gradient (from the lookup) and
    the last stage's (from the head). Megatron-LM all-reduces the two after every step so that both
    copies take the same update; :func:`run_pipeline_distributed` adds them when it merges the ranks'
    gradients. Untied, the last stage holds ``lm_head`` alone and nothing is shared.
    """
    if not isinstance(model, GPT):
        raise ValueError(f"model = {type(model).__name__}：必须是 batchlab.measure.model.GPT")
    one_of("method", method, PARTITION_METHODS)
    return [StageModule(model, stage) for stage in partition_layers(model.config, pipeline_stages, method)]


def pipeline_batch(job: Job, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """The batch one replica of ``job`` trains on in one step: ``job.num_microbatches`` ×
    ``job.micro_batch_size`` sequences of ``job.seq_len`` tokens, ``(inputs, targets)`` from
    :func:`batchlab.measure.data.make_corpus` (the same on every rank, and for the same ``seed``); above
    :data:`~batchlab.measure.data.MARKOV_MAX_VOCAB` (GPT-2's vocabulary), uniform ids from
    :func:`~batchlab.measure.data.random_tokens`, since the Markov chain is dense and the run checks
    gradients and times, not what is learnt."""
    m, b = job.num_microbatches, job.micro_batch_size
    seed = whole("seed", seed, minimum=0)
    if job.model.vocab_size > MARKOV_MAX_VOCAB:
        return random_tokens(m * b, job.seq_len, job.model.vocab_size, seed=seed)
    data = make_corpus(m * b, job.seq_len, vocab_size=job.model.vocab_size, seed=seed)
    return data.inputs, data.targets


def check_no_dropout(job: Job) -> Job:
    """``job`` if its dropout is 0; else ValueError. A pipeline run's gradients must be gradient accumulation's
    (4.4 and 4.6 compare them), which needs the same random masks, and a pipeline draws them in another order."""
    if job.dropout != 0:
        raise ValueError(f"dropout = {job.dropout!r}：流水线实测要求 dropout = 0（它的梯度要与梯度累积逐一比对，"
                         "而各段抽取随机掩码的顺序不同）；训练（train）和显存实测可以有 dropout")
    return job


def check_pipeline_job(job: Job) -> Job:
    """``job`` if a pipeline run can run it as written: a :class:`~batchlab.formulas.job.Job` (validated when it
    was made), in fp32 with the attention written out (:func:`~batchlab.measure.model.check_runnable_job`), no
    dropout (:func:`check_no_dropout`); else ValueError. Both runtimes call it before any work."""
    if not isinstance(job, Job):
        raise ValueError(f"job = {type(job).__name__}：必须是 Job（batchlab.formulas.job.Job）")
    return check_no_dropout(check_runnable_job(job))


# ---------------------------------------------------------------------------
# One process
# ---------------------------------------------------------------------------

LOCAL_SCHEDULES = ("gpipe", "1f1b")
"""The schedules :func:`run_pipeline_local` replays (one stage module per stage, the backward whole)."""


def check_local_schedule(job: Job) -> Job:
    """``job`` if :func:`run_pipeline_local` replays its schedule (:data:`LOCAL_SCHEDULES`); else ValueError, one
    line saying which schedule and why, and what runs it."""
    if job.schedule not in LOCAL_SCHEDULES:
        raise ValueError(f"schedule = {job.schedule!r}：单进程回放只重放 GPipe 和 1F1B（每段一个模块、反向不拆分），"
                         f"{SCHEDULES[job.schedule]} 请用多进程的 run_pipeline_distributed")
    return job



@dataclass(frozen=True)
class LocalPipelineRun:
    """What :func:`run_pipeline_local` measured for ``job``: set it beside the modelled figures of the same job
    (``job.plan.bubble_fraction``, :func:`~batchlab.formulas.pipeline_schedules.pipeline_timeline`,
    :func:`~batchlab.formulas.comm.p2p_bytes`)."""

    job: Job
    timeline: Timeline
    """The last timed step's measured start/end times, seconds after its first op: one process runs one op at
    a time, so its idle share is about 1 − 1/p whatever the schedule."""
    replayed: Timeline
    """The measured op durations (each op's median over the timed steps) replayed under the dependencies:
    what p devices with free communication do."""
    loss: float
    """The mean loss over the step's micro-batches."""
    grads: dict[str, torch.Tensor]
    """{parameter name: gradient}, the GPT's names: those of the mean loss, i.e. gradient accumulation's (the
    last step's; no optimizer step runs, so every step's are the same)."""
    p2p_messages: int
    """Tensors that crossed a stage boundary in one step: activations forward, their gradients backward."""
    p2p_bytes: int
    """Their bytes: what devices would send each other (:func:`batchlab.formulas.comm.p2p_bytes`)."""
    durations: tuple[dict[tuple[str, int, int], float], ...] = ()
    """Per timed step, each op's seconds, keyed ``(kind, stage, microbatch)``; ``replayed`` uses their medians."""
    warmup: int = 0
    """Steps run before the timed ones and discarded."""


def run_pipeline_local(job: Job, model: GPT | None = None, *, seed: int = 0,
                       device: torch.device | str | None = None, steps: int = 1,
                       warmup: int = 0) -> LocalPipelineRun:
    """Run ``warmup`` discarded and then ``steps`` timed pipelined steps of ``job`` in this process, timing
    every op; the replay takes each op's median over the timed steps.

    The job says everything the step is: the model's shape, its dropout and recompute mode, the sequence
    length, the micro-batch size, the micro-batch count (``job.num_microbatches``: one replica's), the
    stages, how they are cut (``job.partition``) and the schedule (GPipe or 1F1B: :func:`check_local_schedule`).
    What only a measurement has: ``model``, the GPT instance to run (default :func:`~batchlab.measure.model.build_model` ``(job, seed)``; one given
    must be the job's, and holds this step's gradients in ``.grad`` afterwards), ``seed`` (the weights when
    built here, and the data, :func:`pipeline_batch` ``(job, seed)``) and ``device`` (``None`` keeps the model
    where it is, anything else moves it there).

    The ops of :func:`~batchlab.formulas.pipeline_schedules.schedule_order` run one at a time, in the order of
    their simulated start times (which respects F(s, i) after F(s−1, i) and B(s, i) after B(s+1, i)).
    Each stage boundary is cut (``detach().requires_grad_()``), and a stage's backward feeds the
    gradient received from the next stage into its output, as between two devices. Each micro-batch's
    loss is divided by m, so the gradients are those of the mean loss: they equal gradient accumulation.
    Every step starts from zeroed gradients and the same weights and data (no optimizer step), so the
    gradients returned, the last step's, are each step's.
    """
    check_local_schedule(check_pipeline_job(job))
    steps, warmup = whole("steps", steps), whole("warmup", warmup, minimum=0)
    model = build_model(job, seed) if model is None else check_job_model(job, model)
    schedule, p, m = job.schedule, job.pipeline_stages, job.num_microbatches
    stages = split_model(model, p, job.partition)
    inputs, targets = pipeline_batch(job, seed)
    if device is None:
        device = next(model.parameters()).device
    else:
        device = as_device(device)
        model.to(device)
    xs = inputs.to(device).tensor_split(m)
    ys = targets.to(device).tensor_split(m)
    orders = schedule_order(schedule, p, m)
    issue = sorted(simulate(orders), key=lambda op: (op.start, op.stage))
    timed = []
    for _ in range(warmup + steps):
        model.zero_grad(set_to_none=True)
        timed.append(_one_step(stages, issue, xs, ys, device))
    timed = timed[warmup:]
    times, loss_sum, p2p_messages, p2p_bytes = timed[-1]
    durations = tuple({key: end - start for key, (start, end) in step[0].items()} for step in timed)

    first = min(start for start, _ in times.values())
    ops = tuple(Op(stage=s, microbatch=i, kind=kind, start=start - first, end=end - first)
                for (kind, s, i), (start, end) in sorted(times.items(), key=lambda kv: kv[1][0]))
    return LocalPipelineRun(
        job=job,
        timeline=Timeline(schedule, p, m, ops),
        replayed=Timeline(schedule, p, m, simulate(orders, durations=median_durations(durations))),
        loss=float(loss_sum) / m,
        grads={name: param.grad.detach().clone() for name, param in model.named_parameters()
               if param.grad is not None},
        p2p_messages=p2p_messages,
        p2p_bytes=p2p_bytes,
        durations=durations,
        warmup=warmup,
    )


def _one_step(stages: list[StageModule], issue: list[Op], xs: tuple[torch.Tensor, ...],
              ys: tuple[torch.Tensor, ...], device: torch.device
              ) -> tuple[dict[tuple[str, int, int], tuple[float, float]], torch.Tensor, int, int]:
    """One pipelined step: the ops of ``issue`` in order (the caller zeroes the gradients). Returns each op's
    (start, end) ``perf_counter`` times, the summed loss, and the p2p message count and bytes."""
    p, m = len(stages), len(xs)
    stage_in: dict[tuple[int, int], torch.Tensor] = {}   # (s, i): stage s's input (a leaf for s > 0)
    stage_out: dict[tuple[int, int], torch.Tensor] = {}  # (s, i): its output, or the last stage's loss / m
    loss_sum = torch.zeros((), device=device)
    times: dict[tuple[str, int, int], tuple[float, float]] = {}
    p2p_messages = p2p_bytes = 0
    synchronize(device)
    for op in issue:
        s, i, kind = op.stage, op.microbatch, op.kind
        start = time.perf_counter()
        if kind == "F":
            x = xs[i] if s == 0 else stage_out[(s - 1, i)].detach().requires_grad_()
            if s > 0:  # activations received from stage s − 1
                p2p_messages, p2p_bytes = p2p_messages + 1, p2p_bytes + x.numel() * x.element_size()
            stage_in[(s, i)] = x
            if s == p - 1:
                loss = stages[s](x, ys[i])
                loss_sum += loss.detach()
                stage_out[(s, i)] = loss / m
            else:
                stage_out[(s, i)] = stages[s](x)
        else:
            out = stage_out.pop((s, i))
            if s == p - 1:
                out.backward()
            else:  # the gradient of its output, received from stage s + 1
                grad = stage_in.pop((s + 1, i)).grad
                p2p_messages, p2p_bytes = p2p_messages + 1, p2p_bytes + grad.numel() * grad.element_size()
                out.backward(grad)
            if s == 0:
                stage_in.pop((s, i))
        synchronize(device)
        times[(kind, s, i)] = (start, time.perf_counter())

    return times, loss_sum, p2p_messages, p2p_bytes
