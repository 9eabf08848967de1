"""The names readers see for the codes a job record uses (``"1f1b"``, ``"selective"``, ``"bf16-mixed"``,
``"adam"``…): the glossary's Chinese terms, taken from the label tables of the formulas so that each name
is written once. A table cell gets the short form — the label up to its first explanation (“（…）” or “：…”).
"""
from __future__ import annotations

import re

from batchlab.formulas.job import ATTENTION_KINDS, OPTIMIZER_NAMES, RECOMPUTE_MODES
from batchlab.formulas.partition import PARTITION_METHODS
from batchlab.formulas.pipeline_schedules import SCHEDULES
from batchlab.formulas.precision import PRECISIONS
from batchlab.formulas.scaling import LR_RULES

__all__ = ["LABELS", "name", "CODE_NAMES"]

LABELS: dict[str, dict[str, str]] = {
    "schedule": SCHEDULES, "recompute": RECOMPUTE_MODES, "precision": PRECISIONS, "optimizer": OPTIMIZER_NAMES,
    "attention": ATTENTION_KINDS, "partition": PARTITION_METHODS, "lr_rule": LR_RULES,
}
"""Each kind of code → its label table."""

def name(kind: str, code: str) -> str:
    """The short name readers see for ``code`` of ``kind``: ``name("recompute", "selective")`` → 选择性重计算."""
    labels = LABELS[kind]
    if code not in labels:
        raise ValueError(f"{kind} 没有代码 {code!r}；可选：{list(labels)}")
    return re.split(r"[（：]", labels[code], maxsplit=1)[0].strip()


CODE_NAMES: frozenset[str] = frozenset(code for kind, labels in LABELS.items() for code in labels
                                       if code not in name(kind, code))
"""Every code that its reader name does not contain (what a reader's table must not show)."""
