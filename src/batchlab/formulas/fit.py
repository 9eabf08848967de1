"""Least-squares straight lines, the one fit the book needs (pure math, no torch)."""
from __future__ import annotations

from typing import Sequence

__all__ = ["least_squares_line"]


def least_squares_line(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """(intercept, slope) of the ordinary least-squares line through the points (xs[i], ys[i])."""
    if len(xs) != len(ys) or len(xs) < 2:
        raise ValueError(f"需要至少 2 个成对的点，收到 {len(xs)} 个 x 和 {len(ys)} 个 y")
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        raise ValueError("x 全部相同：无法拟合直线")
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return my - slope * mx, slope
