"""Argument checks shared by every layer: one wording for one rule (pure Python, no torch)."""
from __future__ import annotations

import math

__all__ = ["whole", "positive"]


def whole(name: str, value: object, minimum: int = 1) -> int:
    """``value`` if it is an int ≥ ``minimum``; else ValueError naming the value and the rule."""
    # bool is an int subclass; True as a count is always a bug.
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} = {value!r} must be a whole number ≥ {minimum}")
    return value


def positive(name: str, value: object) -> float:
    """``value`` as a float if it is a positive finite number; else ValueError."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or not math.isfinite(value):
        raise ValueError(f"{name} = {value!r} must be a positive finite number")
    return float(value)
