"""What the literature reports about batch size at language-model scale, set against the 原文's 4.2 table
(pure python: the claims and the cited findings as data, and the criterion that judges one by the other).

The 原文's table (four batch-size ranges, each with its gradient noise, convergence and use case) reads like
the large-batch rules of 2017–2019. This module does not re-measure anything at scale: each cited finding is
worded as its source reports it, with the setting it was reported in, and says which claim of the table it
bears on and how — it **supports** the claim, **qualifies** it (the claim holds only under a condition the
原文 does not state: a rule of thumb) or reports the **contrary** within its own setting.

The criterion (:func:`literature_verdict`, stated before the verdicts are computed) asks of each claim whether it
stands *as the 原文 states it* for today's large-model pre-training:

* 成立 — at least one cited finding supports it and none qualifies or contradicts it;
* 不成立 — a cited finding qualifies or contradicts it (the relation column says which);
* 本书无法检验 — no cited finding bears on it (the book's CPU experiments cannot reach that scale).

A finding counts only inside the setting it reports: a claim about a kind of training (fine-tuning, RLHF,
pre-training) is judged only by findings reported in that kind of training, while a claim about training in
general (a convergence property, a learning-rate rule) is judged by every finding that bears on it.

Only the words of :data:`batchlab.lecture.verdicts.VERDICT_LABELS` are used.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from batchlab.lecture.verdicts import UNTESTABLE, VERDICT

__all__ = ["SUPPORTS", "QUALIFIES", "CONTRADICTS", "RELATIONS", "PRETRAINING", "FINE_TUNING", "RLHF", "SMALL_DATA",
           "CV_NLP", "SETTINGS", "counts_for", "TableRow", "LECTURE_TABLE", "TableClaim",
           "TABLE_CLAIMS", "Bearing", "Finding", "SCALING_FINDINGS", "relations_to", "contradicted",
           "literature_verdict", "row_verdict"]

SUPPORTS = "支持"
QUALIFIES = "限定"
CONTRADICTS = "相反"
RELATIONS: tuple[str, ...] = (SUPPORTS, QUALIFIES, CONTRADICTS)
"""How a finding bears on a claim: supports it, adds a condition the 原文 does not state, or reports the
contrary within the finding's own setting."""


@dataclass(frozen=True)
class TableRow:
    """One row of the 原文's 4.2 table, in the book's terms (批次 for Batch)."""

    batch_range: str
    noise: str
    convergence: str
    use_case: str


LECTURE_TABLE: tuple[TableRow, ...] = (
    TableRow("32–64", "高", "前期收敛快，后期震荡", "小数据集、微调、RLHF"),
    TableRow("128–256", "中", "均衡，需配合学习率调度", "常规 CV/NLP 训练"),
    TableRow("512–2048", "低", "稳定，但需线性缩放学习率", "大规模预训练、分布式训练"),
    TableRow("4096+", "极低", "收敛慢，需特殊优化器（如 LAMB）", "超大规模批次训练"),
)
"""The 原文's table, row by row."""


PRETRAINING = "预训练"
FINE_TUNING = "微调"
RLHF = "RLHF"
SMALL_DATA = "小数据集"
CV_NLP = "常规 CV/NLP 训练"
SETTINGS: tuple[str, ...] = (PRETRAINING, FINE_TUNING, RLHF, SMALL_DATA, CV_NLP)
"""The kinds of training a claim or a finding can be about."""


def _check_settings(settings: tuple[str, ...]) -> None:
    unknown = [s for s in settings if s not in SETTINGS]
    if unknown:
        raise ValueError(f"训练类型 {unknown} 不是 {'、'.join(SETTINGS)} 之一")


@dataclass(frozen=True)
class TableClaim:
    """One claim read off the table: the row it sits in, its words, and the kinds of training it speaks of
    (``settings``; empty for a claim about training in general)."""

    batch_range: str
    column: str
    text: str
    settings: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _check_settings(self.settings)


TABLE_CLAIMS: dict[str, TableClaim] = {
    "small-early-fast": TableClaim("32–64", "收敛特性", "小批次前期收敛快（按样本计）"),
    "small-use": TableClaim("32–64", "适用场景", "小数据集、微调、RLHF 用 32–64", (SMALL_DATA, FINE_TUNING, RLHF)),
    "mid-use": TableClaim("128–256", "适用场景", "常规 CV/NLP 训练用 128–256", (CV_NLP,)),
    "large-linear": TableClaim("512–2048", "收敛特性", "大批次需线性缩放学习率"),
    "large-use": TableClaim("512–2048", "适用场景", "大规模预训练、分布式训练用 512–2048", (PRETRAINING,)),
    "huge-optimizer": TableClaim("4096+", "收敛特性", "4096+ 需特殊优化器（如 LAMB）"),
}
"""The claims of the 原文's table the cited literature could bear on, by key. The rest of the table (noise
column, late oscillation, balance, schedules, 'slow convergence') the chapter measures itself; no cited
finding speaks to them."""


@dataclass(frozen=True)
class Bearing:
    """How one finding bears on one claim (a key of :data:`TABLE_CLAIMS`), and why, in one sentence."""

    claim: str
    relation: str
    how: str

    def __post_init__(self) -> None:
        if self.relation not in RELATIONS:
            raise ValueError(f"关系 {self.relation!r} 不是 {RELATIONS} 之一")


@dataclass(frozen=True)
class Finding:
    """A cited result, worded as its source reports it (``reported``), the setting it was reported in
    (``setting``: the scale it holds for, not re-measured here), the kinds of training that setting is
    (``settings``) and the claims it bears on."""

    key: str
    source: str
    reported: str
    setting: str
    bearings: tuple[Bearing, ...]
    settings: tuple[str, ...] = (PRETRAINING,)

    def __post_init__(self) -> None:
        _check_settings(self.settings)
        if not self.settings:
            raise ValueError(f"{self.source}：必须写明它报告的训练类型（{'、'.join(SETTINGS)}）")


def counts_for(finding: Finding, claim: TableClaim) -> bool:
    """Whether ``finding`` may judge ``claim``: always for a claim about training in general, otherwise only
    when the finding was reported in one of the kinds of training the claim speaks of."""
    return not claim.settings or any(s in claim.settings for s in finding.settings)


SCALING_FINDINGS: tuple[Finding, ...] = (
    Finding(
        "merrill2025critical", "Merrill et al. 2025",
        "直接测量的临界批大小在初始化时接近 0，先迅速增大、再趋于平稳；批大小先小后大，"
        "OLMo 1B 以少 43% 的梯度步数训练到略好的损失",
        "OLMo 1B、7B 语言模型预训练",
        (Bearing("small-early-fast", SUPPORTS, "训练初期临界批大小接近 0：此时小批次每个样本都不浪费"),
         Bearing("small-use", QUALIFIES, "合适的批大小在同一次训练中先小后大，不由任务类型固定为一档"),
         Bearing("large-use", QUALIFIES, "预训练也宜从小批次起步，随临界批大小增大再加大批次")),
    ),
    Finding(
        "zhang2024critical", "Zhang et al. 2024",
        "临界批大小主要随数据量增大，而不是随模型规模增大",
        "8500 万–12 亿参数的自回归语言模型，在 C4 上预训练",
        (Bearing("small-use", SUPPORTS, "数据量小，临界批大小也小：与“小数据集用小批次”方向一致，但论文只测了预训练"),
         Bearing("large-use", QUALIFIES, "决定临界批大小的主要是数据量（训练的 token 数），不是模型规模")),
    ),
    Finding(
        "deepseek2024llm", "DeepSeek-AI 2024",
        "7B、67B 用 AdamW 在 2 万亿 token 上预训练，序列长 4096，批大小 2304 与 4608（未注明单位，按序列计）",
        "DeepSeek LLM 7B、67B 预训练（仓库 README 报告的设置）",
        (Bearing("huge-optimizer", CONTRADICTS, "67B 以批大小 4608、用普通的 AdamW 完成了预训练"),
         Bearing("large-use", QUALIFIES, "这样规模的预训练，批大小（2304、4608）已超出 512–2048")),
    ),
    Finding(
        "li2024surge", "Li et al. 2024",
        "Adam 类优化器的最优学习率随批大小先升后降，峰值随训练推进移向更大的批大小；"
        "SGD 类的线性缩放结论不适用于 Adam 类",
        "Adam 类优化器：理论在梯度符号近似下，实验为若干 CV 与 NLP 任务",
        (Bearing("large-linear", QUALIFIES, "线性缩放只对 SGD 类优化器适用：Adam 类的最优学习率不随批大小线性增大，过了峰值反而下降"),),
        settings=(PRETRAINING, CV_NLP),
    ),
)
"""The four cited findings the chapter sets against the table (see references.bib for what was opened)."""

def _check_claim(claim: str) -> None:
    if claim not in TABLE_CLAIMS:
        raise KeyError(f"没有说法 {claim!r}；可选：{list(TABLE_CLAIMS)}")


def contradicted(claim: str, findings: Sequence[Finding] = SCALING_FINDINGS) -> bool:
    """Whether some finding reports the contrary of ``claim`` within its own setting."""
    return any(relation == CONTRADICTS for _, relation in relations_to(claim, findings))


def relations_to(claim: str, findings: Sequence[Finding] = SCALING_FINDINGS) -> list[tuple[str, str]]:
    """(source, relation) for every finding that bears on ``claim``, in the findings' order."""
    _check_claim(claim)
    return [(f.source, b.relation) for f in findings for b in f.bearings
            if b.claim == claim and counts_for(f, TABLE_CLAIMS[claim])]


def literature_verdict(claim: str, findings: Sequence[Finding] = SCALING_FINDINGS) -> str:
    """The verdict of the module's criterion on one claim: 成立 if some finding supports it and none qualifies or
    contradicts it, 不成立 if one does, 本书无法检验 if none bears on it."""
    relations = [relation for _, relation in relations_to(claim, findings)]
    if not relations:
        return UNTESTABLE
    return VERDICT[all(relation == SUPPORTS for relation in relations)]


def row_verdict(batch_range: str, findings: Sequence[Finding] = SCALING_FINDINGS) -> str:
    """Whether a row of the table survives as stated: 不成立 if any of its claims does not, 成立 if every one
    of its claims holds, otherwise 本书无法检验 (some claim no cited finding may judge)."""
    claims = [key for key, c in TABLE_CLAIMS.items() if c.batch_range == batch_range]
    if not claims:
        raise KeyError(f"表中没有区间 {batch_range!r}；可选：{[r.batch_range for r in LECTURE_TABLE]}")
    verdicts = [literature_verdict(key, findings) for key in claims]
    if VERDICT[False] in verdicts:
        return VERDICT[False]
    return VERDICT[True] if all(v == VERDICT[True] for v in verdicts) else UNTESTABLE
