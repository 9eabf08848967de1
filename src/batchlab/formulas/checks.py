"""Argument checks shared by every layer: one wording for one rule (pure Python, no torch).

Readers meet these messages in widgets and notebook outputs, so they are Chinese; each names the
argument, the value it got and the rule it breaks. ``ValueError`` throughout, so a widget or the CLI
catches one kind of error.
"""
from __future__ import annotations

import math
from typing import Iterable, TypeVar

__all__ = ["whole", "positive", "nonnegative", "fraction", "between", "one_of", "at_most", "divides"]

T = TypeVar("T")


def _is_number(value: object) -> bool:
    # bool is an int subclass; True as a count or a size is always a bug.
    return not isinstance(value, bool) and isinstance(value, (int, float))


def _plain(x: float) -> str:
    """A bound as people write it: 1,000,000 and 0.001, not 1e+06."""
    return f"{int(x):,}" if float(x).is_integer() else f"{x:g}"


def whole(name: str, value: object, minimum: int = 1) -> int:
    """``value`` if it is an int ≥ ``minimum``; else ValueError naming the value and the rule."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} = {value!r}：必须是 ≥ {minimum} 的整数")
    return value


def positive(name: str, value: object) -> float:
    """``value`` as a float if it is a positive finite number; else ValueError."""
    if not _is_number(value) or not value > 0 or not math.isfinite(value):
        raise ValueError(f"{name} = {value!r}：必须是有限的正数")
    return float(value)


def nonnegative(name: str, value: object) -> float:
    """``value`` as a float if it is a finite number ≥ 0; else ValueError."""
    if not _is_number(value) or not value >= 0 or not math.isfinite(value):
        raise ValueError(f"{name} = {value!r}：必须是有限的非负数")
    return float(value)


def fraction(name: str, value: object, *, closed: bool = False) -> float:
    """``value`` as a float in [0, 1) (or [0, 1] with ``closed``); else ValueError."""
    ok = _is_number(value) and 0.0 <= value and (value <= 1.0 if closed else value < 1.0)
    if not ok:
        raise ValueError(f"{name} = {value!r}：必须在 [0, 1{']' if closed else ')'} 之内")
    return float(value)


def between(name: str, value: object, low: float, high: float) -> float:
    """``value`` as a float if it is a number from ``low`` to ``high``; else ValueError naming the range."""
    if not _is_number(value) or not low <= value <= high:
        raise ValueError(f"{name} = {value!r}：必须在 {_plain(low)} 到 {_plain(high)} 之间")
    return float(value)


def one_of(name: str, value: T, choices: Iterable[T]) -> T:
    """``value`` if it is one of ``choices``; else ValueError listing them."""
    options = list(choices)
    if value not in options:
        raise ValueError(f"{name} = {value!r}：只能取 {', '.join(map(repr, options))} 之一")
    return value


def at_most(name: str, value: int, limit: int, limit_name: str) -> int:
    """``value`` if it is ≤ ``limit``; else ValueError naming both."""
    if value > limit:
        raise ValueError(f"{name} = {value} 超过了 {limit_name} = {limit}")
    return value


def divides(total_name: str, total: int, part_name: str, part: int) -> int:
    """``total // part`` if ``part`` divides ``total``; else ValueError naming both."""
    if total % part:
        raise ValueError(f"{total_name} = {total} 不能被 {part_name} = {part} 整除")
    return total // part
