"""The GPT cut into pipeline stages, run in one process replaying a schedule (4.4).

The formulas (:mod:`batchlab.formulas.pipeline_schedules`) say in which order a schedule runs its
forward (F) and backward (B) passes and what bubble that leaves. This module runs those orders on
the GPT of :mod:`batchlab.measure.model` and measures them:

* :func:`split_model` cuts a :class:`~batchlab.measure.model.GPT` into stage modules, using
  :func:`batchlab.formulas.partition.partition_layers` (the first stage holds the embeddings, the last the
  final LayerNorm and the head, as in Megatron-LM);
* :func:`run_pipeline_local` runs every stage in this process, one op after the other, in an order
  that respects the pipeline's dependencies, with real autograd across the stage boundaries. Its
  gradients equal plain gradient accumulation; its per-op times, replayed under the dependencies
  (``"replayed"``), show the bubble that p devices with free communication would have.

One process per stage, communication and all, is :mod:`batchlab.measure.pipeline_distributed`.
"""
from __future__ import annotations

import time
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from batchlab.formulas.checks import divides, one_of, whole
from batchlab.formulas.partition import PARTITION_METHODS, Stage, partition_layers
from batchlab.formulas.pipeline_schedules import Op, Timeline, check_runnable, schedule_order, simulate
from batchlab.formulas.presets import GPTConfig, check_seq_len
from batchlab.measure.data import make_corpus
from batchlab.measure.device import as_device, synchronize
from batchlab.measure.model import GPT, next_token_loss, run_blocks

__all__ = ["StageModule", "split_model", "pipeline_batch", "check_stage_batch", "check_no_dropout", "run_pipeline_local"]


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


def pipeline_batch(config: GPTConfig, num_microbatches: int, micro_batch_size: int, seq_len: int,
                   seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """The global batch (m × b sequences of ``seq_len`` tokens) the pipelines of this module train on:
    ``(inputs, targets)`` from :func:`batchlab.measure.data.make_corpus`, the same on every rank."""
    m, b = check_stage_batch(config, num_microbatches, micro_batch_size, seq_len)
    data = make_corpus(m * b, seq_len, vocab_size=config.vocab_size, seed=seed)
    return data.inputs, data.targets


def check_stage_batch(config: GPTConfig, num_microbatches: int, micro_batch_size: int, seq_len: int) -> tuple[int, int]:
    """(m, b) if ``seq_len`` fits the model and both counts are whole; else ValueError (both runtimes)."""
    check_seq_len(config, seq_len)
    return whole("num_microbatches", num_microbatches), whole("micro_batch_size", micro_batch_size)


def check_no_dropout(config: GPTConfig) -> None:
    """ValueError unless ``config``'s dropout is 0 (both runtimes compare gradients with accumulation)."""
    if config.dropout != 0:
        raise ValueError(f"dropout = {config.dropout!r}：流水线运行要求 dropout = 0"
                         "（各段的随机数与单进程不同，梯度就无法和梯度累积逐一比对）")


# ---------------------------------------------------------------------------
# One process
# ---------------------------------------------------------------------------


def run_pipeline_local(
    model: GPT,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    pipeline_stages: int,
    num_microbatches: int,
    schedule: str = "1f1b",
    device: torch.device | str | None = None,
    *,
    method: str = "uniform",
) -> dict[str, Any]:
    """Run one pipelined step of ``model`` in this process and time every op.

    ``inputs`` and ``targets`` ([batch, seq]) are cut into ``num_microbatches`` equal micro-batches.
    The ops of :func:`~batchlab.formulas.pipeline_schedules.schedule_order` run one at a time, in the order of
    their simulated start times (which respects F(s, i) after F(s−1, i) and B(s, i) after B(s+1, i)).
    Each stage boundary is cut (``detach().requires_grad_()``), and a stage's backward feeds the
    gradient received from the next stage into its output, as between two devices. Each micro-batch's
    loss is divided by m, so the gradients are those of the mean loss: they equal gradient accumulation.

    ``device``: where to run; ``None`` keeps the model where it is, anything else moves it there.
    ``method``: how :func:`split_model` cuts the layers. The model's ``.grad`` are cleared first and hold this step's gradients afterwards.

    Returns a dict: ``"timeline"`` (:class:`~batchlab.formulas.pipeline_schedules.Timeline` of the measured
    start/end times, seconds after the first op: one process runs one op at a time, so its idle share
    is about 1 − 1/p whatever the schedule), ``"replayed"`` (the measured op durations replayed under
    the dependencies: what p devices with free communication would do), ``"loss"`` (the mean loss),
    ``"grads"`` ({parameter name: gradient}, the GPT's names), ``"p2p_messages"`` and ``"p2p_bytes"``
    (the tensors that crossed a stage boundary, activations forward and their gradients backward:
    what devices would send each other, :func:`batchlab.formulas.comm.p2p_bytes`).
    """
    check_runnable(schedule, pipeline_stages, num_microbatches)
    p, m = pipeline_stages, num_microbatches
    stages = split_model(model, p, method)
    check_no_dropout(model.config)
    if inputs.shape != targets.shape or inputs.dim() != 2:
        raise ValueError(f"inputs {tuple(inputs.shape)} 与 targets {tuple(targets.shape)}：必须是形状相同的 [batch, seq]")
    divides("batch", inputs.shape[0], "num_microbatches", m)
    if device is None:
        device = next(model.parameters()).device
    else:
        device = as_device(device)
        model.to(device)
    xs = inputs.to(device).tensor_split(m)
    ys = targets.to(device).tensor_split(m)
    model.zero_grad(set_to_none=True)

    orders = schedule_order(schedule, p, m)
    issue = sorted(simulate(orders), key=lambda op: (op.start, op.stage))
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

    first = min(start for start, _ in times.values())
    ops = tuple(Op(stage=s, microbatch=i, kind=kind, start=start - first, end=end - first)
                for (kind, s, i), (start, end) in sorted(times.items(), key=lambda kv: kv[1][0]))
    durations = {key: end - start for key, (start, end) in times.items()}
    return {
        "timeline": Timeline(schedule, p, m, ops),
        "replayed": Timeline(schedule, p, m, simulate(orders, durations=durations)),
        "loss": float(loss_sum) / m,
        "grads": {name: param.grad.detach().clone() for name, param in model.named_parameters()
                  if param.grad is not None},
        "p2p_messages": p2p_messages,
        "p2p_bytes": p2p_bytes,
    }
