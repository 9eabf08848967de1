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
"""
from __future__ import annotations

import torch
from torch import nn

from batchlab.formulas.batching import token_weights
from batchlab.formulas.checks import divides, whole
from batchlab.measure.model import IGNORE_INDEX, next_token_loss

__all__ = ["BatchNormLM", "mask_after", "random_lengths", "batch_gradients", "relative_gap"]


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


def random_lengths(batch: int, seq_len: int, shortest: int = 1, seed: int = 0) -> torch.Tensor:
    """``batch`` sequence lengths drawn uniformly from [shortest, seq_len] (a seeded generator)."""
    whole("batch", batch)
    whole("seq_len", seq_len)
    whole("shortest", shortest)
    if shortest > seq_len:
        raise ValueError(f"shortest = {shortest} 大于 seq_len = {seq_len}")
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(shortest, seq_len + 1, (batch,), generator=gen)


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
