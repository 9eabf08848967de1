"""Gradient noise: per-sample gradients and how well a mini-batch estimates the full gradient.

The mini-batch gradient G_B is a Monte Carlo estimate of the full-data gradient G. Drawing B of
N samples without replacement, E‖G_B − G‖² = tr(Σ)/B · (N − B)/(N − 1), where Σ is the
per-sample gradient covariance (population form). These functions measure both sides.
"""
from __future__ import annotations

from typing import Callable, Sequence

import torch
from torch import nn
from torch.func import functional_call, grad, vmap
from torch.nn import functional as F

__all__ = ["next_token_loss", "per_sample_grads", "gradient_trace_cov", "expected_sq_error", "minibatch_error"]

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def next_token_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over all positions; logits [..., vocab], targets [...]."""
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))


def per_sample_grads(
    model: nn.Module,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    loss_fn: LossFn = next_token_loss,
    chunk_size: int | None = 64,
) -> torch.Tensor:
    """Gradient of ``loss_fn`` for every sample separately, flattened: shape [N, num_params].

    Uses ``torch.func.vmap(grad(...))``; ``chunk_size`` bounds peak memory. Their mean over the
    N samples equals the ordinary gradient of the mean loss.
    """
    params = {k: v.detach() for k, v in model.named_parameters()}
    buffers = {k: v.detach() for k, v in model.named_buffers()}

    def sample_loss(p: dict, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        out = functional_call(model, (p, buffers), (x.unsqueeze(0),))
        return loss_fn(out, y.unsqueeze(0))

    grads = vmap(grad(sample_loss), in_dims=(None, 0, 0), chunk_size=chunk_size)(params, inputs, targets)
    return torch.cat([g.reshape(g.shape[0], -1) for g in grads.values()], dim=1)


def gradient_trace_cov(per_sample: torch.Tensor) -> float:
    """tr(Σ) = mean_i ‖g_i − G‖², the total per-sample gradient variance (population form)."""
    centred = per_sample.double() - per_sample.double().mean(dim=0, keepdim=True)
    return float(centred.pow(2).sum(dim=1).mean())


def expected_sq_error(trace_cov: float, batch_size: int, num_samples: int) -> float:
    """E‖G_B − G‖² for B drawn without replacement from N: tr(Σ)/B · (N − B)/(N − 1)."""
    if not 1 <= batch_size <= num_samples:
        raise ValueError(f"batch size {batch_size} must lie between 1 and the sample count {num_samples}")
    if num_samples == 1:
        return 0.0
    return trace_cov / batch_size * (num_samples - batch_size) / (num_samples - 1)


def minibatch_error(
    per_sample: torch.Tensor,
    batch_sizes: Sequence[int],
    num_draws: int = 200,
    seed: int = 0,
) -> dict[str, list[float]]:
    """Draw ``num_draws`` mini-batches of each size (without replacement) and compare G_B with G.

    Returns lists aligned with ``batch_sizes``: measured and theoretical squared error, relative
    error ‖G_B − G‖/‖G‖ (root-mean-square over draws) and mean cosine(G_B, G).
    """
    n = per_sample.shape[0]
    # Every quantity below is a quadratic form in the sample weights, so one N×N Gram matrix
    # replaces N-by-num_params products per draw: G_B = w·g, ‖G_B‖² = w M wᵀ, G_B·G = w M 1/N.
    gram = per_sample.double() @ per_sample.double().T
    g_dot = gram.mean(dim=1)                      # g_i · G
    full_sq = float(g_dot.mean())                 # ‖G‖²
    trace = float(gram.diagonal().mean()) - full_sq  # mean ‖g_i‖² − ‖G‖² = tr(Σ)
    gen = torch.Generator().manual_seed(seed)
    out: dict[str, list[float]] = {k: [] for k in ("batch_sizes", "sq_error", "sq_error_theory", "rel_error",
                                                   "rel_error_theory", "cosine")}
    for b in batch_sizes:
        theory = expected_sq_error(trace, b, n)  # validates b
        chosen = torch.rand(num_draws, n, generator=gen).argsort(dim=1)[:, :b]
        w = torch.zeros(num_draws, n, dtype=torch.float64).scatter_(1, chosen, 1.0 / b)
        est_sq = ((w @ gram) * w).sum(dim=1)      # ‖G_B‖²
        est_dot = w @ g_dot                        # G_B · G
        sq = (est_sq - 2 * est_dot + full_sq).clamp_min(0.0)
        cos = est_dot / (est_sq.sqrt() * full_sq ** 0.5)
        out["batch_sizes"].append(int(b))
        out["sq_error"].append(float(sq.mean()))
        out["sq_error_theory"].append(theory)
        out["rel_error"].append(float(sq.mean().sqrt()) / full_sq ** 0.5)
        out["rel_error_theory"].append((theory / full_sq) ** 0.5)
        out["cosine"].append(float(cos.mean()))
    return out
