"""Does the noise scale grow as training goes on? The criterion, as data, before any measurement (pure Python).

McCandlish et al. 2018 (§3, "An Empirical Model of Large-Batch Training") observe that the gradient noise
scale grows during training as the loss falls: the signal ‖G‖² shrinks faster than the per-sample noise.
A chapter measures B_simple at several points of ONE training run, each point several times (repeats: the
same model state measured on disjoint sets of sequences), and asks :func:`rises` whether that growth is
seen beyond the spread of the repeats. Not a claim of the lecture (原文): the claim card names its source.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Sequence

__all__ = ["MIN_POINTS", "MIN_REPEATS", "Band", "band", "rises", "levels_off", "NOISE_GROWTH_CRITERION"]

MIN_POINTS = 4
"""Points along the run the criterion needs: with fewer, "rising" cannot be told from one jump."""

MIN_REPEATS = 2
"""Repeats per point the criterion needs: a band needs at least two values."""

NOISE_GROWTH_CRITERION = (f"同一次训练中至少 {MIN_POINTS} 个点、每点至少 {MIN_REPEATS} 次重复测量：最后一点的波动带"
                          "（重复测量的最小值到最大值）整个高于第一点的波动带，且没有哪一点的波动带整个低于"
                          "它前一点的波动带（超出波动的下降）")
"""The criterion of :func:`rises`, in the words a claim card shows."""


@dataclass(frozen=True)
class Band:
    """The repeats of one point: their median and their spread (``low`` = min, ``high`` = max)."""

    median: float
    low: float
    high: float


def band(values: Sequence[float]) -> Band:
    """Median and min–max of one point's repeats; at least :data:`MIN_REPEATS` finite values."""
    values = [float(v) for v in values]
    if len(values) < MIN_REPEATS:
        raise ValueError(f"{len(values)} 次重复：至少需要 {MIN_REPEATS} 次才有波动带")
    if any(v != v or v in (float("inf"), float("-inf")) for v in values):
        raise ValueError(f"重复测量中有非有限值：{values}")
    return Band(statistics.median(values), min(values), max(values))


def _bands(points: Sequence[Sequence[float]]) -> list[Band]:
    if len(points) < MIN_POINTS:
        raise ValueError(f"{len(points)} 个测量点：判断“随训练增大”至少需要 {MIN_POINTS} 个")
    return [band(p) for p in points]


def rises(points: Sequence[Sequence[float]]) -> bool:
    """True iff the measured quantity rises along the run beyond the spread of its repeats.

    ``points`` holds, in training order, the repeats measured at each point (at least :data:`MIN_POINTS`
    points, :data:`MIN_REPEATS` repeats each). Both must hold:

    1. the last point's band lies entirely above the first point's (its lowest repeat exceeds the first
       point's highest): the rise over the run is larger than the spread at either end;
    2. no resolved fall on the way: no point's band lies entirely below the previous point's (its highest
       repeat under the previous lowest). A dip the bands overlap on is within the repeats' spread; the
       same disjointness that (1) asks of a rise is what counts as a fall.

    A flat measurement fails (1), a falling one fails both; a rise made of one jump followed by a fall
    beyond the spread fails (2).
    """
    bands = _bands(points)
    if bands[-1].low <= bands[0].high:
        return False
    return all(later.high >= earlier.low for earlier, later in zip(bands, bands[1:]))


def levels_off(points: Sequence[Sequence[float]]) -> bool:
    """True when the last step of the run is not a resolved rise: the last median lies inside (or below)
    the previous point's band. A description of the data, not a claim that a plateau was reached: a
    longer run may rise again."""
    bands = _bands(points)
    return bands[-1].median <= bands[-2].high
