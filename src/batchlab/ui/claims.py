"""Claim cards: a claim of the lecture (原文), the criterion stated before measuring, what was measured and
the verdict, as one compact element a notebook cell shows with one call.

The card is plain HTML styled by the ``batchlab-claim`` classes of ``book/_static/page.css`` (readable
unstyled in JupyterLab too); its ``text/plain`` form, which ``print`` and nbval see, says the same in
lines. Values are formatted once, by :mod:`batchlab.page.numbers` (a float the chapter did not format gets
three significant figures), and anything that would print as a Python repr is refused.
"""
from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any, Mapping, Sequence, Union

from batchlab.lecture.claims import Claim
from batchlab.lecture.verdicts import SAME_DISTRIBUTION, UNTESTABLE, VERDICT, VERDICT_LABELS
from batchlab.page.numbers import Formatted, count, estimate
from batchlab.ui.tables import Shown

__all__ = ["HTML_CLASS", "ClaimCard", "claim_card"]

HTML_CLASS = "batchlab-claim"
_MODIFIER = {VERDICT[True]: "holds", VERDICT[False]: "fails", SAME_DISTRIBUTION: "same-distribution",
             UNTESTABLE: "untestable"}

Measurement = Union[str, Mapping[str, Any], Sequence[tuple[str, Any]]]


def _value(value: object) -> str:
    if isinstance(value, bool):
        return "是" if value else "否"
    if isinstance(value, (Formatted, str)):
        return str(value)
    if isinstance(value, int):
        return count(value)
    if isinstance(value, float):
        return estimate(value, 3)
    raise TypeError(f"测量值 {type(value).__name__} 不能直接给读者看：先用 batchlab.page.numbers 格式化成文字")


def _items(measurement: Measurement) -> tuple[tuple[str, str], ...]:
    if isinstance(measurement, str):
        return (("", measurement),)
    pairs = measurement.items() if isinstance(measurement, Mapping) else measurement
    items = tuple((str(label), _value(value)) for label, value in pairs)
    if not items:
        raise ValueError("measurement 为空：卡片必须写出测到了什么")
    return items


def _verdict(verdict: bool | str) -> str:
    word = VERDICT[verdict] if isinstance(verdict, bool) else verdict
    if word not in VERDICT_LABELS:
        raise ValueError(f"结论 {word!r} 不是结论用语之一：{list(VERDICT_LABELS)}")
    return word


@dataclass(frozen=True)
class ClaimCard(Shown):
    """One claim, its criterion, the measured values (label, formatted value) and the verdict word; ``source``
    is who made the claim (the lecture, 原文, unless a card tests a cited paper's)."""

    claim: str
    criterion: str
    measurement: tuple[tuple[str, str], ...]
    verdict: str
    note: str = ""
    source: str = "原文"

    def _measured(self, sep: str = "；") -> str:
        return sep.join(f"{label}：{value}" if label else value for label, value in self.measurement)

    @property
    def text(self) -> str:
        lines = [f"【{self.verdict}】{self.source}：“{self.claim}”", f"  判据：{self.criterion}", f"  测量：{self._measured()}"]
        return "\n".join(lines + ([f"  注：{self.note}"] if self.note else []))

    def html(self) -> str:
        e = html.escape
        items = "；".join(
            f'<span class="{HTML_CLASS}__item">' + (f'{e(label)}：<span class="{HTML_CLASS}__value">{e(value)}</span>'
                                                   if label else e(value)) + "</span>" for label, value in self.measurement)
        rows = [("判据", e(self.criterion)), ("测量", items)] + ([("注", e(self.note))] if self.note else [])
        body = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in rows)
        return (f'<div class="{HTML_CLASS} {HTML_CLASS}--{_MODIFIER[self.verdict]}">'
                f'<p class="{HTML_CLASS}__head"><span class="{HTML_CLASS}__verdict" '
                f'title="{e(VERDICT_LABELS[self.verdict])}">{e(self.verdict)}</span>'
                f'<span class="{HTML_CLASS}__claim">{e(self.source)}：“{e(self.claim)}”</span></p>'
                f'<dl class="{HTML_CLASS}__body">{body}</dl></div>')


def claim_card(claim: str | Claim, measurement: Measurement, verdict: bool | str, *, criterion: str | None = None,
               note: str = "", source: str | None = None) -> ClaimCard:
    """A card for ``claim`` (its words, or a :class:`~batchlab.lecture.claims.Claim` that brings its
    criterion and its source), what was measured (text, or label → value pairs) and the verdict (a bool from a
    criterion of :mod:`batchlab.lecture.verdicts`, or one of its verdict words). A claim given as words is the
    lecture's (原文) unless ``source`` names another."""
    if isinstance(claim, Claim):
        claim, criterion, source = claim.text, criterion or claim.criterion, source or claim.source
    if not criterion:
        raise ValueError(f"“{claim}”没有判据：先写明判据，再测量")
    if source is not None and not source.strip():
        raise ValueError("source 为空：卡片必须写明说法出自谁")
    return ClaimCard(claim=claim, criterion=criterion, measurement=_items(measurement), verdict=_verdict(verdict),
                     note=note, source=source or "原文")
