"""Self-checks for the chapters' exercises.

Expected answers are computed by batchlab's own functions at check time, never typed in, so an
exercise and the book's prose cannot drift apart. ``check`` prints a verdict and returns a bool;
a wrong or malformed answer gets a hint, never a traceback.
"""
from __future__ import annotations

import math
import re
from typing import Any

from batchlab.ui.exercises.base import Exercise
from batchlab.ui.exercises.chapter_4_1 import EXERCISES as _CHAPTER_4_1
from batchlab.ui.exercises.chapter_4_2 import EXERCISES as _CHAPTER_4_2
from batchlab.ui.exercises.chapter_4_3 import EXERCISES as _CHAPTER_4_3
from batchlab.ui.exercises.chapter_4_4 import EXERCISES as _CHAPTER_4_4
from batchlab.ui.exercises.chapter_4_5 import EXERCISES as _CHAPTER_4_5
from batchlab.ui.exercises.chapter_4_6 import EXERCISES as _CHAPTER_4_6

# Every exercise of the book by id ("4.1-3"); each chapter's set lives in its own module.
EXERCISES: dict[str, Exercise] = {**_CHAPTER_4_1, **_CHAPTER_4_2, **_CHAPTER_4_3, **_CHAPTER_4_4, **_CHAPTER_4_5,
                               **_CHAPTER_4_6}

__all__ = ["Exercise", "EXERCISES", "EXERCISE_CALL", "ask", "check", "is_correct", "judge", "expected", "answers"]

EXERCISE_CALL = re.compile(r"""\b(?:ask|check)\(\s*(["'])(?P<id>[^"']+)\1""")
"""How a code cell names the exercise it works on: ``ask("4.3-1")`` or ``check("4.3-1", …)`` (the chapters'
self-check cells and ``python -m batchlab grade`` read it)."""

# Each exercise's latest answer in this Python process, recorded by is_correct (and so by check).
# `python -m batchlab grade` reads the answers out of a student's kernel as data and judges them in its
# own process with `judge`: what the kernel reports can change an answer, never a verdict.
_ANSWERS: dict[str, Any] = {}


def answers() -> dict[str, Any]:
    """Every exercise answered so far in this process (id → its latest answer), as a copy."""
    return dict(_ANSWERS)


def expected(exercise_id: str) -> Any:
    """The answer to ``exercise_id``, computed now by batchlab (for instructors and tests)."""
    return _get(exercise_id).answer()


def _get(exercise_id: str) -> Exercise:
    try:
        return EXERCISES[exercise_id]
    except KeyError:
        raise ValueError(f"exercise_id = {exercise_id!r}：没有这道练习，可选 {', '.join(EXERCISES)}") from None


def ask(exercise_id: str) -> None:
    """Print the question (the one text, shared by the notebook and the checker)."""
    print(f"练习 {exercise_id}：{_get(exercise_id).text()}")


def check(exercise_id: str, answer: Any) -> None:
    """Print 正确 or 不对 with a hint for ``answer`` (returns nothing, so a notebook cell shows only the verdict)."""
    is_correct(exercise_id, answer, quiet=False)


def is_correct(exercise_id: str, answer: Any, quiet: bool = True) -> bool:
    """Whether ``answer`` matches the answer batchlab computes now; prints the verdict unless ``quiet``.
    The answer is recorded for :func:`answers`."""
    verdict = judge(exercise_id, answer, quiet)
    _ANSWERS[exercise_id] = answer
    return verdict


def judge(exercise_id: str, answer: Any, quiet: bool = True) -> bool:
    """The one rule that decides an answer (the student's 正确/不对 and the grader's score alike); records nothing."""
    exercise = _get(exercise_id)
    say = (lambda msg: None) if quiet else print
    if answer is None or answer is ...:
        say(f"练习 {exercise_id}：还没有作答。把 None 换成你的答案后重新运行本单元。")
        return False
    truth = exercise.answer()
    if exercise.choices:
        letters = "、".join(exercise.choices)
        if not isinstance(answer, str) or answer.strip().upper() not in exercise.choices:
            say(f"练习 {exercise_id}：请填选项字母（{letters}）之一，例如 \"A\"，收到的是 {answer!r}。")
            return False
        if answer.strip().upper() == truth:
            say(f"练习 {exercise_id}：正确（{truth}）。")
            return True
        say(f"练习 {exercise_id}：{answer!r} 不对。提示：{exercise.hint}")
        return False
    if isinstance(answer, bool) or not isinstance(answer, (int, float)):
        say(f"练习 {exercise_id}：请填一个数字，收到的是 {answer!r}（{type(answer).__name__}）。")
        return False
    # Counts (micro-batches, updates) must be exact; rates and fractions to the stated precision.
    if isinstance(truth, int):
        right = answer == truth
    elif exercise.decimals is not None:
        right = abs(float(answer) - float(truth)) <= 0.5 * 10 ** -exercise.decimals + 1e-12
    else:
        right = math.isclose(float(answer), float(truth), rel_tol=exercise.rel_tol, abs_tol=1e-9)
    if right:
        say(f"练习 {exercise_id}：正确（{truth:g}）。")
        return True
    say(f"练习 {exercise_id}：{answer!r} 不对。提示：{exercise.hint}")
    return False
