"""Sampling formulas of mini-batch gradients as plain numbers (pure math, no torch).

A mini-batch gradient G_B averages B per-sample gradients g_i; G is their mean over all N samples and
Σ their covariance (population form, tr Σ = mean_i ‖g_i − G‖²). Then

    E‖G_B‖² = ‖G‖² + tr(Σ) · c_B,      E‖G_B − G‖² = tr(Σ) · c_B,

with c_B = 1/B for i.i.d. draws (McCandlish et al. 2018 assume this) and c_B = (N − B)/((N − 1)·B) when
the B samples are drawn without replacement from N — the finite-population correction, the book's
addition, which makes the error vanish at B = N. :mod:`batchlab.measure.noise` measures both sides with torch;
this module holds the algebra once.
"""
from __future__ import annotations

import math

from batchlab.formulas.checks import nonnegative, whole

__all__ = ["finite_population_factor", "expected_sq_error", "two_batch_estimates"]


def finite_population_factor(batch_size: int, num_samples: int | None = None) -> float:
    """c_B: 1/B for i.i.d. draws (``num_samples`` None), (N − B)/((N − 1)·B) without replacement."""
    b = whole("batch_size", batch_size)
    if num_samples is None:
        return 1.0 / b
    n = whole("num_samples", num_samples)
    if b > n:
        raise ValueError(f"batch_size = {b}：不能超过样本总数 num_samples = {n}")
    return 0.0 if n == 1 else (n - b) / ((n - 1) * b)


def expected_sq_error(trace_cov: float, batch_size: int, num_samples: int | None = None) -> float:
    """E‖G_B − G‖² = tr(Σ) · c_B (see :func:`finite_population_factor`)."""
    return nonnegative("trace_cov", trace_cov) * finite_population_factor(batch_size, num_samples)


def two_batch_estimates(small_sq: float, big_sq: float, b_small: int, b_big: int,
                        num_samples: int | None = None) -> tuple[float, float, float]:
    """Unbiased (‖G‖², tr Σ) from E‖G_b‖² = ‖G‖² + tr(Σ)·c_b measured at two batch sizes, and their
    ratio B_simple (McCandlish et al. 2018, Appendix A). ``small_sq`` and ``big_sq`` are ‖G_small‖²
    and ‖G_big‖²; with i.i.d. draws this is

        ‖G‖² ≈ (B_big‖G_big‖² − B_small‖G_small‖²) / (B_big − B_small)
        tr Σ ≈ (‖G_small‖² − ‖G_big‖²) / (1/B_small − 1/B_big)

    One pair is very noisy (‖G‖² can even come out negative): average the first two numbers over
    many pairs before dividing. B_simple is NaN when the ‖G‖² estimate is exactly 0.
    """
    whole("b_small", b_small)
    whole("b_big", b_big)
    if b_small >= b_big:
        raise ValueError(f"b_small = {b_small}：必须小于 b_big = {b_big}")
    c_small = finite_population_factor(b_small, num_samples)
    c_big = finite_population_factor(b_big, num_samples)
    trace_cov = (small_sq - big_sq) / (c_small - c_big)
    g_sq = big_sq - trace_cov * c_big
    return g_sq, trace_cov, (trace_cov / g_sq if g_sq != 0.0 else math.nan)
