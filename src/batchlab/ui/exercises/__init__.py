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
from batchlab.ui.exercises.chapter_4_7 import EXERCISES as _CHAPTER_4_7
from batchlab.ui.exercises.chapter_4_8 import EXERCISES as _CHAPTER_4_8

# Every exercise of the book by id ("4.1-3"); each chapter's set lives in its own module.
EXERCISES: dict[str, Exercise] = {**_CHAPTER_4_1, **_CHAPTER_4_2, **_CHAPTER_4_3, **_CHAPTER_4_4, **_CHAPTER_4_5,
                               **_CHAPTER_4_6, **_CHAPTER_4_7, **_CHAPTER_4_8}

__all__ = ["Exercise", "EXERCISES", "RENAMED", "EXERCISE_CALL", "current_id", "ask", "check", "is_correct", "judge",
           "expected", "answers", "predictions"]

RENAMED: dict[str, str] = {
    "4.4-6": "4.7-1", "4.4-7": "4.7-2", "4.3-7": "4.7-3", "4.5-6": "4.7-4",  # schedules and parallelism (选读)
    "4.2-8": "4.8-1", "4.2-7": "4.8-2", "4.6-7": "4.8-3", "4.6-6": "4.8-4",  # the batch during training (选读)
}
"""Exercise ids that moved to another chapter: old id → its id now. A notebook saved before the move still
checks and grades under the old id (``check("4.6-7", …)`` judges 4.8-3)."""


def current_id(exercise_id: str) -> str:
    """The id an exercise has now (an old id maps through :data:`RENAMED`; any other string is returned as is)."""
    return RENAMED.get(exercise_id, exercise_id) if isinstance(exercise_id, str) else exercise_id

EXERCISE_CALL = re.compile(r"""\b(?:ask|check)\(\s*(["'])(?P<id>[^"']+)\1""")
"""How a code cell names the exercise it works on: ``ask("4.3-1")`` or ``check("4.3-1", …)`` (the chapters'
self-check cells and ``python -m batchlab grade`` read it)."""

# Each exercise's latest answer in this Python process, recorded by is_correct (and so by check).
# `python -m batchlab grade` reads the answers out of a student's kernel as data and judges them in its
# own process with `judge`: what the kernel reports can change an answer, never a verdict.
_ANSWERS: dict[str, Any] = {}
# Each predict-then-run exercise's latest prediction: shown back to the student, never graded.
_PREDICTIONS: dict[str, Any] = {}


def answers() -> dict[str, Any]:
    """Every exercise answered so far in this process (id → its latest answer), as a copy."""
    return dict(_ANSWERS)


def predictions() -> dict[str, Any]:
    """Every prediction written so far in this process (id → its latest prediction), as a copy."""
    return dict(_PREDICTIONS)


def expected(exercise_id: str) -> Any:
    """The answer to ``exercise_id``, computed now by batchlab (for instructors and tests)."""
    return _get(exercise_id).answer()


def _get(exercise_id: str) -> Exercise:
    try:
        return EXERCISES[current_id(exercise_id)]
    except (KeyError, TypeError):
        raise ValueError(f"exercise_id = {exercise_id!r}：没有这道练习，可选 {', '.join(EXERCISES)}") from None


def ask(exercise_id: str) -> None:
    """Print the question (the one text, shared by the notebook and the checker)."""
    print(f"练习 {exercise_id}：{_get(exercise_id).text()}")


def check(exercise_id: str, answer: Any, prediction: Any = None) -> None:
    """Print 正确 or 不对 with a hint for ``answer`` (returns nothing, so a notebook cell shows only the verdict).
    For a predict-then-run exercise, ``prediction`` (written before the run) is recorded and compared with
    the answer; it never changes the verdict."""
    right = is_correct(exercise_id, answer, quiet=False)
    if not _get(exercise_id).predict:
        return
    if prediction is None:
        print("先写下预测（prediction），再运行实验：预测不计分，但它让你看清自己原来的直觉。")
        return
    _PREDICTIONS[current_id(exercise_id)] = prediction
    if right:
        same = judge(exercise_id, prediction)
        print("你的预测与结果一致。" if same else f"你的预测是 {prediction!r}，与结果不同：想一想是哪一步的直觉出了偏差。")


def is_correct(exercise_id: str, answer: Any, quiet: bool = True) -> bool:
    """Whether ``answer`` matches the answer batchlab computes now; prints the verdict unless ``quiet``.
    The answer is recorded for :func:`answers`."""
    verdict = judge(exercise_id, answer, quiet)
    _ANSWERS[current_id(exercise_id)] = answer
    return verdict


def judge(exercise_id: str, answer: Any, quiet: bool = True) -> bool:
    """The one rule that decides an answer (the student's 正确/不对 and the grader's score alike); records nothing."""
    exercise = _get(exercise_id)
    exercise_id = current_id(exercise_id)
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
