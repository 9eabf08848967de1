"""The lecture's (原文's) claims that the chapters test, each with the criterion stated before measuring.

A claim card (:func:`batchlab.ui.claims.claim_card`) shows one of these beside what was measured and the
verdict a function of :mod:`batchlab.lecture.verdicts` gave; the thresholds in the criteria are the same
constants those functions use, so the words cannot drift from the rule.
"""
from __future__ import annotations

from dataclasses import dataclass

from batchlab.lecture.noise_growth import NOISE_GROWTH_CRITERION
from batchlab.lecture.verdicts import LATE_PHASE_SHARE, OSCILLATION_RATIO, UNCHANGED_TOLERANCE

__all__ = ["Claim", "CLAIMS"]


@dataclass(frozen=True)
class Claim:
    """One claim: its words (``text``), the criterion that decides it (``criterion``) and who made it
    (``source``: the lecture, 原文, unless a chapter tests a cited paper's claim)."""

    text: str
    criterion: str
    source: str = "原文"


CLAIMS: dict[str, Claim] = {
    # 4.2
    "early-fast": Claim("小批次前期收敛快（按样本计）", "在每个早期样本预算下，最小批次的验证损失都严格低于其他批次"),
    "late-oscillation": Claim("小批次后期震荡",
                              f"小批次已进入后期（后半程的下降不超过全程的 {LATE_PHASE_SHARE:.0%}，否则本书无法检验）时，"
                              f"后半程验证损失相对平滑曲线的波动（均方根）在每个种子上都至少是大批次"
                              f"在同样已见样本处的 {OSCILLATION_RATIO:g} 倍"),
    "balanced": Claim("中等批次均衡（B 与噪声尺度同一量级）",
                      "B 落在 [初始化时简单噪声尺度的一半, 训练后简单噪声尺度的 2 倍] 之内"),
    "needs-schedule": Claim("中等批次需配合学习率调度", "各自调好学习率后，预热 + 余弦的验证损失低于恒定学习率"),
    "needs-linear": Claim("大批次需线性缩放学习率（并配合学习率预热）",
                          "按原文的做法两边都加预热时，线性缩放的平均验证损失低于平方根缩放"),
    "needs-lamb": Claim("超大批次需特殊优化器（如 LAMB）", "各自调好学习率后，LAMB 的验证损失低于 Adam"),
    "noise-grows": Claim("随着训练推进、损失下降，梯度噪声尺度增大", NOISE_GROWTH_CRITERION,
                         source="McCandlish et al. 2018"),
    # 4.3
    "meter-linear": Claim("激活值与 B 近似线性（计量器读数是 B 的直线，且与公式一致）",
                          "计量器读数离最小二乘直线的最大偏差 ≤ 1%，斜率与公式之比在 0.97–1.03"),
    "device-linear": Claim("卡上的激活显存与 B 近似线性", "NPU/GPU 上分配器报告的激活字节数离直线的最大偏差 ≤ 1%"),
    "states-constant": Claim("参数、梯度与优化器状态与 B 无关", "各 B 下逐字节相等"),
    "small-micro-bubble": Claim("微批次过小 → 流水线填充不足 → 气泡", "最小微批次的气泡占比大于最大微批次的"),
    # 4.4
    "matmul-grows": Claim("M 越大，矩阵乘法越快", "最大 M 的 FLOP/s 至少是最小 M 的 3 倍"),
    "case-faster": Claim("微批次 2 → 4 提速",
                         "在 910B 上实测，微批次 4 的吞吐量高于微批次 2（原文报告的是这样一次实测）"),
    # 4.6
    "memory-only": Claim("批大小只影响显存",
                         f"除显存外，每个量的变化都在 ±{UNCHANGED_TOLERANCE:.0%} 以内"),
    "remedy-helps": Claim("小批次后期需要逐步增大批大小或降低学习率",
                          "每个种子上，补救做法的最终验证损失都低于恒定学习率的 B=8"),
    "small-slow": Claim("小批次一定收敛慢", "各自调好学习率后，前期 B=8 并非在每个种子、每个早期样本预算都比 B=64 低"),
    "lr-coupled": Claim("批大小与学习率耦合",
                        "最优学习率随批大小单调不减，且最大批次的严格高于最小批次的"),
    "untuned-degrades": Claim("大批次不调学习率会明显退化",
                              "线性放大 8 倍的平均最终损失低于沿用 B=8 学习率的"),
    "warmup-helps": Claim("预热有帮助", "每个种子上，线性放大 + 预热的最终损失都低于不预热的；"
                                      "每个种子都不低于则不成立，各种子不一致则本书无法检验"),
}
"""Every claim a chapter's card shows, by key."""
