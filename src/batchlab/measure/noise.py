"""Gradient noise: per-sample gradients and how well a mini-batch estimates the full gradient.

The mini-batch gradient G_B is a Monte Carlo estimate of the full-data gradient G. Drawing B of
N samples without replacement, E‖G_B − G‖² = tr(Σ)/B · (N − B)/(N − 1), where Σ is the
per-sample gradient covariance (population form). The formulas live in :mod:`batchlab.formulas.noise`;
these functions measure both sides.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import torch
from torch import nn
from torch.func import functional_call, grad, vmap

from batchlab.formulas.checks import whole
from batchlab.formulas.noise import expected_sq_error, finite_population_factor, two_batch_estimates
from batchlab.lecture.noise_growth import Band, band
from batchlab.measure.model import LossFn, next_token_loss
from batchlab.measure.train import evaluate, train

if TYPE_CHECKING:
    import numpy as np

__all__ = ["per_sample_grads", "gradient_trace_cov", "minibatch_error", "MinibatchError",
           "noise_scale_simple", "noise_scale_from_batches", "NoiseScaleEstimate", "gradient_cloud", "GradientCloud",
           "noise_over_training", "NoiseTrajectory"]


@dataclass(frozen=True)
class MinibatchError:
    """How well mini-batches of each size estimate the full gradient G (:func:`minibatch_error`), one entry
    per batch size, in the order of ``batch_sizes``: measured and theoretical E‖G_B − G‖² (``sq_error``,
    ``sq_error_theory`` with the finite-population factor, ``sq_error_iid`` = tr(Σ)/B without it), relative
    error ‖G_B − G‖/‖G‖ measured (root-mean-square over draws) and in theory, and the mean cosine(G_B, G)."""

    batch_sizes: tuple[int, ...]
    sq_error: tuple[float, ...]
    sq_error_theory: tuple[float, ...]
    sq_error_iid: tuple[float, ...]
    rel_error: tuple[float, ...]
    rel_error_theory: tuple[float, ...]
    cosine: tuple[float, ...]


@dataclass(frozen=True)
class NoiseScaleEstimate:
    """B_simple from ordinary gradients at two batch sizes (:func:`noise_scale_from_batches`): the pair-averaged
    estimates of ‖G‖² (``g_sq``) and tr Σ (``trace_cov``), their ratio ``b_simple`` (nan when ``g_sq`` is 0),
    and the settings used."""

    g_sq: float
    trace_cov: float
    b_simple: float
    b_small: int
    b_big: int
    num_pairs: int


@dataclass(frozen=True, eq=False)  # identity equality: == on numpy arrays has no single truth value
class GradientCloud:
    """Mini-batch gradient estimates G_B in the plane (e1, e2) of :func:`gradient_cloud`: ``points`` holds one
    ``[num_draws, 2]`` array per entry of ``batch_sizes``, ``center`` is G's coordinates (‖G‖, 0),
    ``num_samples`` the N drawn from, ``captured`` the share of tr Σ lying in the plane."""

    batch_sizes: tuple[int, ...]
    points: tuple[np.ndarray, ...]
    center: np.ndarray
    num_samples: int
    captured: float



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
    # Trainable parameters only (frozen ones keep their module values through functional_call), in the
    # same order as `[p for p in model.parameters() if p.requires_grad]`, which the two-batch route uses.
    params = {k: v.detach() for k, v in model.named_parameters() if v.requires_grad}
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


def _check_draws(num_samples: int, batch_sizes: Sequence[int], num_draws: int) -> None:
    """Shared by every function that draws mini-batches of ``batch_sizes`` from N samples."""
    whole("num_draws", num_draws)
    for b in batch_sizes:
        finite_population_factor(b, num_samples)  # the one check of 1 ≤ B ≤ N (a whole number)


class _Gram:
    """Inner products of N per-sample gradients, all the draws below need: the N×N Gram matrix
    M = g gᵀ, g_i·G (row means), ‖G‖² and tr(Σ) = mean ‖g_i‖² − ‖G‖². Mini-batch quantities are
    quadratic forms in the draw weights, so no N-by-num_params product is needed per draw."""

    def __init__(self, per_sample: torch.Tensor) -> None:
        self.gram = per_sample.double() @ per_sample.double().T
        self.g_dot = self.gram.mean(dim=1)                              # g_i · G
        self.full_sq = float(self.g_dot.mean())                         # ‖G‖²
        self.trace = float(self.gram.diagonal().mean()) - self.full_sq  # tr(Σ)


def _draw_weights(gen: torch.Generator, num_draws: int, n: int, batch_size: int) -> torch.Tensor:
    """[num_draws, N] weights 1/B on B samples drawn without replacement, 0 elsewhere: row r · g is
    the r-th mini-batch gradient."""
    chosen = torch.rand(num_draws, n, generator=gen).argsort(dim=1)[:, :batch_size]
    return torch.zeros(num_draws, n, dtype=torch.float64).scatter_(1, chosen, 1.0 / batch_size)


def minibatch_error(
    per_sample: torch.Tensor,
    batch_sizes: Sequence[int],
    num_draws: int = 200,
    seed: int = 0,
) -> MinibatchError:
    """Draw ``num_draws`` mini-batches of each size (without replacement) and compare G_B with G.

    Returns a :class:`MinibatchError`, its fields aligned with ``batch_sizes``: measured and theoretical
    squared error (with the finite-population factor, and ``sq_error_iid`` = tr(Σ)/B without it, the
    infinite-data law), relative error ‖G_B − G‖/‖G‖ (root-mean-square over draws) and mean cosine(G_B, G).
    """
    n = per_sample.shape[0]
    _check_draws(n, batch_sizes, num_draws)
    # G_B = w·g, ‖G_B‖² = w M wᵀ, G_B·G = w M 1/N.
    g = _Gram(per_sample)
    gram, g_dot, full_sq, trace = g.gram, g.g_dot, g.full_sq, g.trace
    gen = torch.Generator().manual_seed(seed)
    out: dict[str, list] = {k: [] for k in ("batch_sizes", "sq_error", "sq_error_theory", "sq_error_iid",
                                            "rel_error", "rel_error_theory", "cosine")}
    for b in batch_sizes:
        theory = expected_sq_error(trace, b, n)
        w = _draw_weights(gen, num_draws, n, b)
        est_sq = ((w @ gram) * w).sum(dim=1)      # ‖G_B‖²
        est_dot = w @ g_dot                        # G_B · G
        sq = (est_sq - 2 * est_dot + full_sq).clamp_min(0.0)
        cos = est_dot / (est_sq.sqrt() * full_sq ** 0.5)
        out["batch_sizes"].append(int(b))
        out["sq_error"].append(float(sq.mean()))
        out["sq_error_theory"].append(theory)
        out["sq_error_iid"].append(expected_sq_error(trace, b))
        out["rel_error"].append(float(sq.mean().sqrt()) / full_sq ** 0.5)
        out["rel_error_theory"].append((theory / full_sq) ** 0.5)
        out["cosine"].append(float(cos.mean()))
    return MinibatchError(**{key: tuple(values) for key, values in out.items()})


# ── Noise scale (McCandlish et al. 2018, "An Empirical Model of Large-Batch Training") ──────────────
# B_simple = tr(Σ)/‖G‖² is the batch size at which the mini-batch noise E‖G_B − G‖² = tr(Σ)/B equals
# the signal ‖G‖². Below it a bigger batch buys almost proportionally faster progress per step; far
# above it, extra samples are mostly wasted. Appendix A of the paper estimates it without per-sample
# gradients, from the squared norms of two gradients taken at two batch sizes.

def noise_scale_simple(per_sample: torch.Tensor) -> float:
    """B_simple = tr(Σ)/‖G‖² from per-sample gradients [N, num_params] (population form of Σ)."""
    if per_sample.dim() != 2 or per_sample.shape[0] < 2:
        raise ValueError(f"per_sample 的形状是 {tuple(per_sample.shape)}：需要 [N, num_params]，且 N ≥ 2")
    g_sq = float(per_sample.double().mean(dim=0).pow(2).sum())
    if g_sq == 0.0:
        raise ValueError("‖G‖² = 0（驻点）：噪声尺度 tr(Σ)/‖G‖² 没有定义")
    return gradient_trace_cov(per_sample) / g_sq


def _flat_grad(model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor, loss_fn: LossFn) -> torch.Tensor:
    params = [p for p in model.parameters() if p.requires_grad]
    # autograd.grad rather than backward(): leaves the caller's .grad fields untouched.
    grads = torch.autograd.grad(loss_fn(model(inputs), targets), params)
    return torch.cat([g.reshape(-1) for g in grads])


def noise_scale_from_batches(
    model: nn.Module,
    data,
    b_small: int,
    b_big: int,
    num_pairs: int = 20,
    seed: int = 0,
    loss_fn: LossFn = next_token_loss,
    finite_population: bool = True,
) -> NoiseScaleEstimate:
    """Estimate B_simple with ordinary gradients only, the way a data-parallel job can.

    Each pair draws ``b_big`` distinct samples from ``data`` (a :class:`batchlab.measure.data.TokenDataset`,
    or anything with ``.inputs`` and ``.targets``), splits them into ``b_big // b_small`` disjoint
    "replicas" of ``b_small``, takes each replica's gradient and their mean (the all-reduce, which
    is exactly the gradient of the big batch). ‖G_small‖² is averaged over the replicas (each is an
    unbiased estimate of the same expectation). The ‖G‖² and tr Σ estimates are averaged over
    pairs before dividing, as McCandlish et al. recommend, since a ratio of noisy numbers is biased.
    ``finite_population`` corrects for drawing without replacement from ``len(data)`` samples.

    Returns a :class:`NoiseScaleEstimate`: ``g_sq``, ``trace_cov``, ``b_simple`` and the settings used.
    """
    n = len(data)
    for name, value in (("b_small", b_small), ("b_big", b_big), ("num_pairs", num_pairs)):
        whole(name, value)
    if b_big <= b_small or b_big % b_small:
        raise ValueError(f"b_big = {b_big}：必须是 b_small = {b_small} 的倍数且大于它（大批次由整数个副本组成）")
    if b_big > n:
        raise ValueError(f"b_big = {b_big} 超过了 data 的样本数 {n}")
    replicas = b_big // b_small
    device = next(model.parameters()).device
    gen = torch.Generator().manual_seed(seed)
    g_sq_sum = trace_sum = 0.0
    for _ in range(num_pairs):
        chosen = torch.randperm(n, generator=gen)[:b_big]
        small = []
        for r in range(replicas):
            idx = chosen[r * b_small:(r + 1) * b_small]
            small.append(_flat_grad(model, data.inputs[idx].to(device), data.targets[idx].to(device), loss_fn))
        stacked = torch.stack(small).double()
        big = stacked.mean(dim=0)
        small_sq = float(stacked.pow(2).sum(dim=1).mean())  # ‖G_small‖², averaged over replicas
        g_sq, trace, _ = two_batch_estimates(small_sq, float(big.pow(2).sum()), b_small, b_big,
                                             n if finite_population else None)
        g_sq_sum += g_sq
        trace_sum += trace
    g_sq_mean, trace_mean = g_sq_sum / num_pairs, trace_sum / num_pairs
    return NoiseScaleEstimate(g_sq=g_sq_mean, trace_cov=trace_mean,
                              b_simple=trace_mean / g_sq_mean if g_sq_mean != 0.0 else math.nan,
                              b_small=b_small, b_big=b_big, num_pairs=num_pairs)


def gradient_cloud(
    per_sample: torch.Tensor,
    batch_sizes: Sequence[int],
    num_draws: int = 200,
    seed: int = 0,
) -> GradientCloud:
    """Mini-batch gradient estimates G_B seen in a fixed plane, precomputed for every batch size.

    The plane is spanned by e1 = G/‖G‖ and e2, the top principal direction of the per-sample
    gradients once their e1 component is removed: the direction in which estimates scatter most
    sideways. e2 comes from the N×N Gram matrix of those centred gradients, never a P×P covariance.
    Projection is linear, so G_B's coordinates are the mean of its samples' coordinates.

    Returns a :class:`GradientCloud`: ``batch_sizes``, ``points`` (one ``[num_draws, 2]`` array per size),
    ``center`` (G's coordinates, (‖G‖, 0)), ``num_samples`` and ``captured`` (the share of tr Σ in the plane).
    """
    if per_sample.dim() != 2 or per_sample.shape[0] < 2:
        raise ValueError(f"per_sample 的形状是 {tuple(per_sample.shape)}：需要 [N, num_params]，且 N ≥ 2")
    n = per_sample.shape[0]
    _check_draws(n, batch_sizes, num_draws)
    # Everything below is an inner product of samples, so the N×N Gram matrix M = g gᵀ suffices.
    g = _Gram(per_sample)
    gram, g_dot, full_sq = g.gram, g.g_dot, g.full_sq
    if full_sq <= 0.0:
        raise ValueError("‖G‖ = 0：方向 e1 = G/‖G‖ 没有定义")
    full_norm = full_sq ** 0.5
    along_e1 = (g_dot - full_sq) / full_norm        # a_i = (g_i − G) · e1
    centred = gram - g_dot[:, None] - g_dot[None, :] + full_sq   # (g_i − G) · (g_j − G)
    sideways = centred - along_e1[:, None] * along_e1[None, :]   # the same with the e1 parts removed
    eigvals, eigvecs = torch.linalg.eigh(sideways)  # ascending: the last pair is the top direction
    top, u = float(eigvals[-1]), eigvecs[:, -1]
    u = u * torch.sign(u[int(u.abs().argmax())])    # eigenvectors have no sign: fix one, for reproducibility
    x = g_dot / full_norm                            # g_i · e1
    if top > 1e-12 * max(float(centred.diagonal().mean()), 1e-300):
        # e2 = Σ_j u_j d_j / √λ, d_j the sideways part of g_j. G and e1 are orthogonal to every d_j, so
        # g_i · e2 = d_i · e2 = (sideways @ u)_i / √λ = λ u_i / √λ.
        y = top ** 0.5 * u
    else:
        y = torch.zeros_like(x)                      # every sample lies on the line through G
    coords = torch.stack([x, y], dim=1)              # [N, 2] per-sample coordinates
    trace = g.trace
    along = float(along_e1.pow(2).mean()) + float(y.pow(2).mean())
    gen = torch.Generator().manual_seed(seed)
    points = []
    for b in batch_sizes:
        points.append((_draw_weights(gen, num_draws, n, b) @ coords).numpy())
    return GradientCloud(batch_sizes=tuple(int(b) for b in batch_sizes), points=tuple(points),
                         center=coords.mean(dim=0).numpy(), num_samples=n,
                         captured=float(along) / trace if trace > 0 else 1.0)


# ── The noise scale along one training run (McCandlish et al. 2018 §3: it grows as the loss falls) ──────────

@dataclass(frozen=True)
class NoiseTrajectory:
    """B_simple at several points of one training run (:func:`noise_over_training`): per point the optimizer
    ``steps`` taken, ``samples_seen`` (sequences), the mean ``loss`` on all probe sequences, and ``b_simple``,
    one value per disjoint probe subset of ``subset_size`` sequences (the repeats); ``batch_size`` and
    ``lr`` of the run."""

    steps: tuple[int, ...]
    samples_seen: tuple[int, ...]
    loss: tuple[float, ...]
    b_simple: tuple[tuple[float, ...], ...]
    subset_size: int
    batch_size: int
    lr: float

    @property
    def bands(self) -> tuple[Band, ...]:
        """Median and min–max of the repeats at each point (:func:`batchlab.lecture.noise_growth.band`)."""
        return tuple(band(values) for values in self.b_simple)


def noise_over_training(
    model: nn.Module,
    data,
    probe,
    *,
    steps: Sequence[int] = (0, 8, 16, 32, 64, 128),
    num_subsets: int = 4,
    batch_size: int = 32,
    lr: float = 3e-3,
    optimizer: str = "adam",
    seed: int = 0,
    loss_fn: LossFn = next_token_loss,
) -> NoiseTrajectory:
    """Measure B_simple (:func:`noise_scale_simple`) at the given ``steps`` of ONE training run of ``model``.

    The run is :func:`batchlab.measure.train.train` on ``data`` at constant ``lr`` (no warm-up, no decay),
    with ``batch_size`` and ``seed``; ``model`` is left untouched (each point trains a copy). Training is
    deterministic and nothing in it depends on the run's length, so the state after k steps of a copy trained
    for k steps IS the state after k steps of the longest run (same weights, batches and optimizer state):
    every point belongs to one run. At each point the per-sample gradients of ``probe`` (sequences the run
    never trains on) are split into ``num_subsets`` disjoint subsets of ``len(probe) // num_subsets``
    sequences; B_simple of each subset is one repeat. The repeats' spread shows how much the number depends on
    which sequences measure it, not how much another training seed would move it.

    Returns a :class:`NoiseTrajectory`.
    """
    points = [whole("step", k, 0) for k in steps]
    if points != sorted(set(points)):
        raise ValueError(f"steps = {list(steps)}：必须严格递增")
    whole("num_subsets", num_subsets, 2)
    size = len(probe) // num_subsets
    if size < 2:
        raise ValueError(f"probe 只有 {len(probe)} 条序列：分成 {num_subsets} 份后每份不足 2 条")
    losses, values = [], []
    for k in points:
        state = copy.deepcopy(model)
        if k:
            train(state, data, batch_size=batch_size, steps=k, optimizer=optimizer, lr=lr, seed=seed,
                  loss_fn=loss_fn)
        grads = per_sample_grads(state, probe.inputs[:size * num_subsets], probe.targets[:size * num_subsets],
                                 loss_fn).double()   # once, not once per subset
        values.append(tuple(noise_scale_simple(grads[i * size:(i + 1) * size]) for i in range(num_subsets)))
        losses.append(evaluate(state, probe, loss_fn=loss_fn))
    return NoiseTrajectory(steps=tuple(points), samples_seen=tuple(k * batch_size for k in points),
                           loss=tuple(losses), b_simple=tuple(values), subset_size=size, batch_size=batch_size,
                           lr=lr)
