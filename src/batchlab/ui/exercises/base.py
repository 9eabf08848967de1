"""What an exercise is: a question, its answer computed by batchlab at check time, and a hint."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping

__all__ = ["Exercise", "nearest_choice"]


@dataclass(frozen=True)
class Exercise:
    """One self-checked question.

    ``answer`` returns a number, or the letter of the right choice when ``choices`` (letter → text) is
    given. ``decimals`` states the precision the question asks for ("保留两位小数"): any answer within
    half a unit of that last place is right, so 0.47 and 7/15 both pass for 0.4666…; without it a
    relative tolerance ``rel_tol`` applies. Whole-number answers must be exact.

    ``predict``: a predict-then-run exercise. The student writes a prediction before running a cell or
    moving an explorer, then answers with what was seen; ``check`` judges the answer and says whether the
    prediction was right (the prediction is recorded, never graded).
    """

    question: str
    answer: Callable[[], Any]
    hint: str
    rel_tol: float = 1e-3
    decimals: int | None = None
    choices: Mapping[str, str] | None = None
    predict: bool = False

    def text(self) -> str:
        """The question as a terminal shows it (symbols without their Markdown ``$…$``), choices one per line."""
        question = _plain(self.question)
        if not self.choices:
            return question
        return "\n".join([question, *(f"  {letter}. {_plain(text)}" for letter, text in self.choices.items())])


def _plain(markdown: str) -> str:
    # The page typesets $B_\text{noise}$ (batchlab.page.symbols.tex); a terminal shows B_noise.
    def plain(math: str) -> str:
        return re.sub(r"\\text\{([^}]*)\}", r"\1", math).replace("\\times ", "×").replace("\\times", "×")

    return re.sub(r"\$([^$]*)\$", lambda m: plain(m.group(1)), markdown)


def nearest_choice(value: float, options: Mapping[str, float]) -> str:
    """The letter whose number is closest to ``value``: how a choice question's answer is computed."""
    return min(options, key=lambda letter: abs(options[letter] - value))
