"""Self-checks for the chapters' exercises.

Expected answers are computed by batchlab's own functions at check time, never typed in, so an
exercise and the book's prose cannot drift apart. ``check`` prints a verdict and returns a bool;
a wrong or malformed answer gets a hint, never a traceback.
"""
from __future__ import annotations

import math
from typing import Any

from .base import Exercise
from .chapter_4_1 import EXERCISES as _CHAPTER_4_1
from .chapter_4_2 import EXERCISES as _CHAPTER_4_2
from .chapter_4_3 import EXERCISES as _CHAPTER_4_3

# Every exercise of the book by id ("4.1-3"); each chapter's set lives in its own module.
EXERCISES: dict[str, Exercise] = {**_CHAPTER_4_1, **_CHAPTER_4_2, **_CHAPTER_4_3}

__all__ = ["Exercise", "EXERCISES", "check", "is_correct", "expected"]


def expected(exercise_id: str) -> Any:
    """The answer to ``exercise_id``, computed now by batchlab (for instructors and tests)."""
    return _get(exercise_id).answer()


def _get(exercise_id: str) -> Exercise:
    try:
        return EXERCISES[exercise_id]
    except KeyError:
        raise ValueError(f"exercise_id = {exercise_id!r}：没有这道练习，可选 {', '.join(EXERCISES)}") from None


def check(exercise_id: str, answer: Any) -> None:
    """Print ✅ or ❌ with a hint for ``answer`` (returns nothing, so a notebook cell shows only the verdict)."""
    is_correct(exercise_id, answer, quiet=False)


def is_correct(exercise_id: str, answer: Any, quiet: bool = True) -> bool:
    """Whether ``answer`` matches the answer batchlab computes now; prints the verdict unless ``quiet``."""
    exercise = _get(exercise_id)
    say = (lambda msg: None) if quiet else print
    if answer is None or answer is ...:
        say(f"练习 {exercise_id}：还没有作答。把 None 换成你的答案后重新运行本单元。")
        return False
    if isinstance(answer, bool) or not isinstance(answer, (int, float)):
        say(f"练习 {exercise_id}：请填一个数字，收到的是 {answer!r}（{type(answer).__name__}）。")
        return False
    truth = exercise.answer()
    # Counts (micro-batches, updates) must be exact; rates and fractions get a small tolerance.
    exact = isinstance(truth, int)
    if (answer == truth) if exact else math.isclose(float(answer), float(truth), rel_tol=exercise.rel_tol, abs_tol=1e-9):
        say(f"练习 {exercise_id}：✅ 正确（{truth:g}）。")
        return True
    say(f"练习 {exercise_id}：❌ {answer!r} 不对。提示：{exercise.hint}")
    return False
