"""Gradient accumulation, measured (4.6, 误区二): when k micro-batches give the update of one batch, and
what breaks it.

:func:`batch_gradients` computes the gradient of one optimizer step over a batch, either at once
(``num_microbatches=1``) or accumulated over k micro-batches, with the loss normalised as
:func:`batchlab.formulas.batching.token_weights` says. With a model whose samples do not interact (the GPT:
LayerNorm normalises each token on its own), no dropout, and the loss normalised per token of the whole
batch, the two agree to float rounding. Three things break the equality, each shown by a function here:

* a layer that mixes the samples of a batch: :class:`BatchNormLM` (BatchNorm's mean and variance are
  taken over the micro-batch, not the batch);
* dropout: each forward draws its masks from the random stream, so a different split consumes it
  differently (the update differs by noise of the same size as between two seeds, not by a bias);
* a loss averaged per micro-batch when micro-batches hold different numbers of real tokens
  (:func:`mask_after`, padding marked with :data:`IGNORE_INDEX`).

A fourth needs no change of model or loss, only of the gradient buffer's precision: summed in bfloat16, every
addition rounds the running sum, and the error grows with the number of micro-batches m.
:func:`accumulation_error` measures it beside fp32, a Kahan-compensated bf16 sum and fp32 main gradients
(:data:`~batchlab.lecture.accumulation_precision.ACCUMULATORS`), :func:`allreduce_error` the same for a
data-parallel all-reduce over d replicas, and :func:`accumulation_training` what it does to a short run;
:mod:`batchlab.lecture.accumulation_precision` states the criterion that judges them.
"""
from __future__ import annotations

from typing import Callable, Sequence

import torch
from torch import nn

from batchlab.formulas.batching import token_weights
from batchlab.formulas.checks import divides, one_of, whole
from batchlab.lecture.accumulation_precision import ACCUMULATORS
from batchlab.measure.model import IGNORE_INDEX, next_token_loss
from batchlab.measure.train import make_optimizer

__all__ = ["BatchNormLM", "mask_after", "batch_gradients", "relative_gap", "microbatch_gradients",
           "accumulate", "accumulation_error", "allreduce_error", "accumulation_training"]


class BatchNormLM(nn.Module):
    """Embedding → BatchNorm over the batch's tokens → linear head: the smallest language model whose
    tokens interact across samples (through BatchNorm's batch statistics)."""

    def __init__(self, vocab_size: int, d_model: int = 32, seed: int = 0) -> None:
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        self.wte = nn.Embedding(vocab_size, d_model)
        self.norm = nn.BatchNorm1d(d_model)
        self.head = nn.Linear(d_model, vocab_size)
        with torch.no_grad():  # every parameter from this generator: nothing depends on torch's global one
            for p in (self.wte.weight, self.head.weight):
                p.copy_(torch.randn(p.shape, generator=gen) * 0.5)
            self.head.bias.zero_()

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.wte(idx)                                       # [B, S, d]
        x = self.norm(x.reshape(-1, x.size(-1))).reshape(x.shape)  # statistics over all B·S tokens
        return self.head(x)


def mask_after(targets: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """A copy of ``targets`` [batch, seq] whose positions at or beyond each sequence's length are padding."""
    if targets.dim() != 2 or lengths.shape != targets.shape[:1]:
        raise ValueError(f"targets {tuple(targets.shape)} 应为 [batch, seq]，lengths {tuple(lengths.shape)} 应为 [batch]")
    positions = torch.arange(targets.size(1)).unsqueeze(0)
    return targets.masked_fill(positions >= lengths.unsqueeze(1), IGNORE_INDEX)


def batch_gradients(model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor, num_microbatches: int = 1,
                    normalize: str = "global_tokens", seed: int = 0) -> dict[str, torch.Tensor]:
    """The gradient of one optimizer step over ``inputs``/``targets`` [batch, seq], accumulated over
    ``num_microbatches`` equal micro-batches; ``normalize`` weighs each token as
    :func:`batchlab.formulas.batching.token_weights` says. The model runs in training mode (dropout and
    BatchNorm active) with torch's random stream seeded by ``seed`` and restored afterwards.
    Returns {parameter name: gradient}; the model's ``.grad`` are cleared again.
    """
    k = whole("num_microbatches", num_microbatches)
    divides("batch", inputs.shape[0], "num_microbatches", k)
    xs, ys = inputs.tensor_split(k), targets.tensor_split(k)
    weights = token_weights([int((y != IGNORE_INDEX).sum()) for y in ys], normalize)
    params = dict(model.named_parameters())
    model.zero_grad(set_to_none=True)
    model.train()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for x, y, w in zip(xs, ys, weights):
            logits = model(x)
            loss = next_token_loss(logits, y, reduction="sum")
            (loss * w).backward()
    grads = {name: p.grad.detach().clone() for name, p in params.items() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    return grads


def relative_gap(grads: dict[str, torch.Tensor], reference: dict[str, torch.Tensor]) -> float:
    """Largest absolute difference over all gradient entries, divided by the largest absolute entry of
    ``reference``."""
    if grads.keys() != reference.keys():
        raise ValueError(f"两组梯度的参数名不同：{sorted(set(grads) ^ set(reference))}")
    diff = max(float((grads[n] - reference[n]).abs().max()) for n in reference)
    scale = max(float(reference[n].abs().max()) for n in reference)
    return diff / scale if scale > 0 else diff


# ── Accumulation in bf16 (4.8 beside 4.3's bytes): what the fp32 main gradients buy ─────────────────────────

def microbatch_gradients(model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor,
                         num_microbatches: int) -> tuple[torch.Tensor, list[int]]:
    """Each micro-batch's gradient, computed once in the model's dtype (fp32 here): a [num_microbatches, P]
    tensor whose row i is micro-batch i's :func:`batch_gradients` (the mean over its real tokens), every
    parameter flattened in ``named_parameters`` order, and the number of real tokens of each micro-batch.
    The batch goes to the model's device (cpu, cuda or npu), and the rows stay there."""
    k = whole("num_microbatches", num_microbatches)
    divides("batch", inputs.shape[0], "num_microbatches", k)
    device = next(model.parameters()).device
    inputs, targets = inputs.to(device), targets.to(device)
    rows, tokens = [], []
    for x, y in zip(inputs.tensor_split(k), targets.tensor_split(k)):
        grads = batch_gradients(model, x, y)
        rows.append(torch.cat([g.reshape(-1) for g in grads.values()]))
        tokens.append(int((y != IGNORE_INDEX).sum()))
    return torch.stack(rows), tokens


def _weighted(rows: torch.Tensor, tokens: list[int]) -> torch.Tensor:
    """Micro-batch mean gradients (rows) as the terms of the batch's gradient: row i times its tokens' share,
    n_i × :func:`~batchlab.formulas.batching.token_weights` (1/m for m equal micro-batches: exact in binary
    when m is a power of two)."""
    shares = [w * n for w, n in zip(token_weights(tokens), tokens)]
    return rows * torch.tensor(shares, dtype=rows.dtype, device=rows.device).unsqueeze(1)


def _add(total: torch.Tensor, compensation: torch.Tensor | None, term: torch.Tensor) -> torch.Tensor | None:
    """``total += term`` in ``total``'s dtype (one rounding per entry); with ``compensation``, Kahan's
    compensated step in that same dtype. Returns the new compensation."""
    if compensation is None:
        total.add_(term)
        return None
    y = term - compensation
    new = total + y
    compensation = (new - total) - y   # what the rounding of total + y lost, with its sign flipped
    total.copy_(new)
    return compensation


def accumulate(terms: torch.Tensor, accumulator: str, order: str = "sequential") -> torch.Tensor:
    """The sum of the rows of ``terms`` [n, P] (float32) as ``accumulator`` computes it
    (:data:`~batchlab.lecture.accumulation_precision.ACCUMULATORS`): each term is first rounded to the
    accumulator's gradient dtype (what a bf16 backward hands over), then added in the buffer's dtype.
    ``order``: ``"sequential"`` adds row 0, 1, …, n−1 (accumulation over micro-batches); ``"ring"`` cuts
    the P entries into n chunks and sums chunk j around a ring of n ranks starting at rank j+1, as a ring
    all-reduce's reduce-scatter does (its all-gather only copies). Returns the buffer's value in float32
    (fp32 and bf16 are exact in it)."""
    one_of("accumulator", accumulator, ACCUMULATORS)
    one_of("order", order, ("sequential", "ring"))
    gradient_dtype = getattr(torch, ACCUMULATORS[accumulator])
    buffer_dtype = torch.float32 if accumulator in ("fp32", "bf16-fp32-main") else torch.bfloat16
    terms = terms.to(gradient_dtype).to(buffer_dtype)       # the term's rounding, then exact in the buffer
    n = terms.shape[0]
    total = torch.zeros(terms.shape[1], dtype=buffer_dtype, device=terms.device)
    kahan = accumulator == "bf16-kahan"
    if order == "sequential":
        chunks = [(slice(None), list(range(n)))]
    else:
        bounds = torch.arange(terms.shape[1]).tensor_split(n)
        chunks = [(slice(int(b[0]), int(b[-1]) + 1), [(j + 1 + r) % n for r in range(n)])
                  for j, b in enumerate(bounds) if len(b)]
    for where, ranks in chunks:
        part = total[where]
        compensation = torch.zeros_like(part) if kahan else None
        for rank in ranks:
            compensation = _add(part, compensation, terms[rank, where])
    return total.float()


def accumulation_error(model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor,
                       counts: Sequence[int] = (1, 2, 4, 8, 16, 32, 64), order: str = "sequential",
                       accumulators: Sequence[str] = tuple(ACCUMULATORS)) -> dict[str, dict[int, float]]:
    """The relative error (:func:`relative_gap`) of each accumulator's sum of m micro-batch gradients against
    the float64 sum of the same float32 gradients, for m in ``counts``.

    ``inputs``/``targets`` [batch, seq] are cut into max(counts) equal micro-batches whose gradients are
    computed once in float32 (:func:`microbatch_gradients`); the batch of m micro-batches is the first m of
    them, each weighed by :func:`batchlab.formulas.batching.token_weights` (1/m apiece when they hold equal
    tokens). Only the summation differs between accumulators: the forward and backward passes' own
    rounding is the same for all and left out on purpose. ``order="ring"`` measures a data-parallel
    all-reduce over d = m replicas instead (:func:`accumulate`). Returns {accumulator: {m: error}}.
    """
    counts = [whole("count", m) for m in counts]
    if not counts:
        raise ValueError("counts 为空：至少需要一个微批次数")
    rows, tokens = microbatch_gradients(model, inputs, targets, max(counts))
    errors: dict[str, dict[int, float]] = {name: {} for name in accumulators}
    for m in counts:
        terms = _weighted(rows[:m], tokens[:m])
        exact = {"g": terms.double().sum(0)}
        for name in accumulators:
            errors[name][m] = relative_gap({"g": accumulate(terms, name, order)}, exact)
    return errors


def allreduce_error(model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor,
                    replicas: Sequence[int] = (1, 2, 4, 8, 16, 32, 64),
                    accumulators: Sequence[str] = tuple(ACCUMULATORS)) -> dict[str, dict[int, float]]:
    """:func:`accumulation_error` of a data-parallel all-reduce: d replicas, each with one micro-batch's
    gradient (already divided by d, as Megatron-LM scales before reducing), summed in a ring's order."""
    return accumulation_error(model, inputs, targets, replicas, order="ring", accumulators=accumulators)


def accumulation_training(model_factory: Callable[[], nn.Module], inputs: torch.Tensor, targets: torch.Tensor,
                          num_microbatches: int, micro_batch_size: int, steps: int, lr: float, optimizer: str = "adam",
                          accumulators: Sequence[str] = tuple(ACCUMULATORS)) -> dict[str, list[float]]:
    """A short training run per accumulator, alike in everything but the gradient buffer: the same model
    (``model_factory()``, fp32 weights), the same batches (step s takes the s-th run of
    ``num_microbatches`` × ``micro_batch_size`` rows of ``inputs``/``targets``, wrapping around), each
    micro-batch's fp32 gradient rounded and added as :func:`accumulate` says, the buffer's value (in fp32)
    handed to the optimizer.
    Returns {accumulator: the loss of each step's batch, before its update}."""
    k, steps = whole("num_microbatches", num_microbatches), whole("steps", steps)
    batch = k * whole("micro_batch_size", micro_batch_size)
    curves: dict[str, list[float]] = {}
    for name in accumulators:
        model = model_factory()
        params = [p for p in model.parameters() if p.requires_grad]
        opt = make_optimizer(optimizer, params, lr)
        curves[name] = []
        for step in range(steps):
            start = (step * batch) % inputs.shape[0]
            rows = torch.arange(start, start + batch) % inputs.shape[0]
            x, y = inputs[rows].to(params[0].device), targets[rows].to(params[0].device)
            grads, tokens = microbatch_gradients(model, x, y, k)
            terms = _weighted(grads, tokens)
            with torch.no_grad():
                curves[name].append(float(next_token_loss(model(x), y)))
                flat = accumulate(terms, name)
                for p, g in zip(params, flat.split([p.numel() for p in params])):
                    p.grad = g.view_as(p).to(p.dtype)
            opt.step()
            opt.zero_grad(set_to_none=True)
    return curves
