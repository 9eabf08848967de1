"""What an exercise is: a question, its answer computed by batchlab at check time, and a hint."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["Exercise"]


@dataclass(frozen=True)
class Exercise:
    question: str
    answer: Callable[[], Any]
    hint: str
    rel_tol: float = 1e-3
