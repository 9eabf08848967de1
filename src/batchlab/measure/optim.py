"""LAMB, the layer-wise adaptive optimizer of You et al. 2019 ("Large Batch Optimization for Deep
Learning: Training BERT in 76 minutes"), written out so the book can show each of its few lines.

Why our own (checked on PyPI with pip index / pip download --no-deps): torch-optimizer 0.3.0 is
unmaintained since 2021, the PyPI name ``apex`` is an unrelated Pyramid package (NVIDIA's FusedLAMB
needs a CUDA build), and pytorch-optimizer 4.1.0 runs with torch 2.13 but scales its step by
1/(1 − β1^t) outside the trust ratio (first update 10·lr·‖w‖ at β1 = 0.9, not lr·‖w‖) and by default
decays weights outside it.
"""
from __future__ import annotations

from typing import Callable, Iterable

import torch

__all__ = ["Lamb"]


class Lamb(torch.optim.Optimizer):
    """LAMB (You et al. 2019, Algorithm 2), one trust ratio per parameter tensor ("layer").

    For each tensor w with gradient g, at step t:

        m ← β1·m + (1 − β1)·g,        v ← β2·v + (1 − β2)·g²
        m̂ = m / (1 − β1^t),           v̂ = v / (1 − β2^t)          (if ``bias_correction``)
        u = m̂ / (√v̂ + ε) + λ·w                                     (decoupled weight decay, inside u)
        w ← w − lr · φ(‖w‖)/‖u‖ · u

    φ(z) = min(max(z, lo), hi) with ``clamp = (lo, hi)``, or φ(z) = z when ``clamp`` is None. The
    ratio is 1 when ‖w‖ or ‖u‖ is 0 (e.g. a bias initialised at zero), as in the reference code.
    Each update therefore moves w by lr·φ(‖w‖): a fixed *fraction* of the layer's size, whatever
    the gradient's scale, which is what lets the learning rate stay sane at huge batches.
    """

    def __init__(
        self,
        params: Iterable[torch.Tensor] | Iterable[dict],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-6,
        weight_decay: float = 0.0,
        clamp: tuple[float, float] | None = None,
        bias_correction: bool = True,
    ) -> None:
        if not lr > 0.0:
            raise ValueError(f"lr = {lr!r} must be positive")
        for i, beta in enumerate(betas):
            if not 0.0 <= beta < 1.0:
                raise ValueError(f"betas[{i}] = {beta!r} must lie in [0, 1)")
        if not eps >= 0.0:
            raise ValueError(f"eps = {eps!r} must be ≥ 0")
        if not weight_decay >= 0.0:
            raise ValueError(f"weight_decay = {weight_decay!r} must be ≥ 0")
        if clamp is not None:
            lo, hi = clamp
            if not 0.0 <= lo <= hi:
                raise ValueError(f"clamp = {clamp!r} must be (lo, hi) with 0 ≤ lo ≤ hi")
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, clamp=clamp,
                        bias_correction=bias_correction)
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure: Callable[[], torch.Tensor] | None = None) -> torch.Tensor | None:
        """Apply one LAMB update to every parameter that has a gradient."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.grad.is_sparse:
                    raise ValueError("Lamb does not support sparse gradients")
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                state["step"] += 1
                t = state["step"]
                m, v = state["exp_avg"], state["exp_avg_sq"]
                m.mul_(beta1).add_(p.grad, alpha=1.0 - beta1)
                v.mul_(beta2).addcmul_(p.grad, p.grad, value=1.0 - beta2)
                if group["bias_correction"]:
                    m_hat, v_hat = m / (1.0 - beta1 ** t), v / (1.0 - beta2 ** t)
                else:
                    m_hat, v_hat = m, v
                update = m_hat / (v_hat.sqrt() + group["eps"])
                if group["weight_decay"]:
                    update.add_(p, alpha=group["weight_decay"])
                w_norm = float(p.norm())
                u_norm = float(update.norm())
                if w_norm > 0.0 and u_norm > 0.0:
                    phi = w_norm if group["clamp"] is None else min(max(w_norm, group["clamp"][0]),
                                                                     group["clamp"][1])
                    ratio = phi / u_norm
                else:
                    ratio = 1.0
                state["trust_ratio"] = ratio  # kept for inspection: the book plots it per layer
                p.add_(update, alpha=-group["lr"] * ratio)
        return loss
