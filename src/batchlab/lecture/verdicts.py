"""Criteria that decide whether a claim of the lecture (原文) holds, as plain numbers (pure math, no torch).

A chapter states its criterion in prose *before* the measurement, then calls one of these functions
on the measured numbers; the tests feed each one a contrary measurement and see the verdict flip.
:data:`VERDICT` holds the words readers see.
"""
from __future__ import annotations

from typing import Mapping, Protocol, Sequence

from batchlab.formulas.checks import nonnegative, positive, whole
from batchlab.formulas.fit import least_squares_line

__all__ = ["VERDICT", "straight_line_residual", "loss_at_samples", "loss_after", "lowest_at_budgets", "in_band", "beats",
           "samples_to_target", "holds_in_every_seed", "verdict_over_seeds", "PRESCRIBED", "wins_as_prescribed",
           "late_window", "late_share", "in_late_phase", "late_fluctuation", "fluctuation_ratio", "late_oscillation",
           "LATE_PHASE_SHARE", "OSCILLATION_RATIO", "beats_like_with_like", "wins_per_seed", "unchanged",
           "only_memory_moves", "moved_besides", "same_update", "best_rate_grows", "UNCHANGED_TOLERANCE",
           "SAME_DISTRIBUTION", "UNTESTABLE", "VERDICT_LABELS", "update_verdict", "FLOAT32_ROUNDING_EXPONENT",
           "FLOAT32_ROUNDING", "SAME_UPDATE_TOLERANCE"]

VERDICT: dict[bool, str] = {True: "成立", False: "不成立"}
SAME_DISTRIBUTION = "同分布，非同一次更新"
"""The third label: a random computation whose gap from the reference is of the order of re-drawing its
random numbers (dropout under accumulation) — neither the same update nor a different objective."""
UNTESTABLE = "本书无法检验"
"""The fourth: the criterion needs data, scale or hardware this book's experiments do not have."""
VERDICT_LABELS: dict[str, str] = {
    VERDICT[True]: "先写明的判据被测量满足",
    VERDICT[False]: "先写明的判据未被满足（测量与说法相反，或差异超出判据的容差）",
    SAME_DISTRIBUTION: "两种算法给出同一个随机梯度的不同抽样：差异与只换一个随机种子同量级，不是系统偏差",
    UNTESTABLE: "判据需要本书的小实验没有的数据、规模或硬件；只说明缺什么，不下结论",
}
"""Every verdict word a chapter prints, with its meaning: the glossary's 结论用语 table lists exactly these."""


def loss_at_samples(samples: Sequence[int], losses: Sequence[float], budget: int) -> float:
    """The loss a run had after ``budget`` samples: its last evaluation at or before that many samples.
    Raises if the run was never evaluated by then (so a comparison is never made on missing data)."""
    whole("budget", budget, 0)
    if len(samples) != len(losses):
        raise ValueError(f"samples 有 {len(samples)} 个、losses 有 {len(losses)} 个：必须一一对应")
    seen = [loss for s, loss in zip(samples, losses) if s <= budget]
    if not seen:
        raise ValueError(f"budget = {budget}：这次运行在 {budget} 个样本之前没有任何评估")
    return seen[-1]


class Evaluated(Protocol):
    """A run with its evaluations: samples seen at each, and the loss there (``measure.train.History``)."""
    eval_samples: Sequence[int]
    eval_loss: Sequence[float]


def loss_after(run: Evaluated, budget: int) -> float:
    """:func:`loss_at_samples` of one run: its last evaluated loss at or before ``budget`` samples."""
    return loss_at_samples(run.eval_samples, run.eval_loss, budget)


def lowest_at_budgets(curves: Mapping[int, tuple[Sequence[int], Sequence[float]]], budgets: Sequence[int]) -> bool:
    """True if the run with the smallest batch size (the smallest key of ``curves``, each value a
    (samples seen, eval loss) pair of lists) has the strictly lowest loss at every sample budget."""
    if len(curves) < 2 or not budgets:
        raise ValueError("需要至少两次运行和一个样本预算才能比较")
    smallest = min(curves)
    for budget in budgets:
        at = {b: loss_at_samples(*curves[b], budget) for b in curves}
        if any(at[b] <= at[smallest] for b in at if b != smallest):
            return False
    return True


LATE_PHASE_SHARE = 0.05
"""A run has reached its late phase when at most this share of its whole descent (first evaluation minus
last) is left for its second half by samples: the curve has flattened. Before that no run can show "late"
oscillation, whatever its batch (4.2's runs stop on the way down; 4.6's reach their noise floor)."""

OSCILLATION_RATIO = 2.0
"""How many times the large batch's late fluctuation (at the same samples) the small batch's must be to count
as oscillating (4.2 and 4.6). An RMS of n residuals varies from run to run by about 1/√(2n) of itself (n is
about 15 in 4.6: some 20 %), so two equally steady runs give a ratio near 1; twice is well outside that."""


def late_window(run: Evaluated) -> tuple[list[int], list[float]]:
    """The evaluations of a run's second half by samples — at or after half the samples of its last
    evaluation — as (samples seen, eval loss). At least 3, so one has two neighbours."""
    samples, losses = list(run.eval_samples), list(run.eval_loss)
    if len(samples) != len(losses) or not samples:
        raise ValueError(f"eval_samples 有 {len(samples)} 个、eval_loss 有 {len(losses)} 个：必须一一对应且非空")
    late = [(s, loss) for s, loss in zip(samples, losses) if 2 * s >= samples[-1]]
    if len(late) < 3:
        raise ValueError(f"后半程只有 {len(late)} 次评估：至少要 3 次，才有一次评估两侧都有相邻的评估")
    return [s for s, _ in late], [loss for _, loss in late]


def late_share(run: Evaluated) -> float:
    """The share of a run's whole descent (its first evaluated loss minus its last) left for its second
    half: from the first evaluation of :func:`late_window` to the last. Near 0 once the curve has flattened."""
    losses = list(run.eval_loss)
    _, late = late_window(run)
    total = losses[0] - losses[-1]
    if total <= 0:
        raise ValueError(f"验证损失从 {losses[0]:.4g} 到 {losses[-1]:.4g} 没有下降：无从区分前期与后期")
    return (late[0] - losses[-1]) / total


def in_late_phase(run: Evaluated, share: float = LATE_PHASE_SHARE) -> bool:
    """The precondition of "late oscillation": at most ``share`` of the run's descent is left for its second
    half (:func:`late_share`)."""
    return late_share(run) <= nonnegative("share", share)


def late_fluctuation(run: Evaluated) -> float:
    """How much the validation loss fluctuates in a run's second half: the root mean square of each late
    evaluation's residual from the smoothed curve, which at an evaluation is the mean of its two neighbours
    (the straight line through them). A smooth curve leaves only its bend (about Δ²·L''/2 for evaluations
    Δ apart), noise of standard deviation σ about 1.22σ — whatever the number of rises."""
    _, losses = late_window(run)
    residuals = [y - (before + after) / 2 for before, y, after in zip(losses, losses[1:], losses[2:])]
    return (sum(r * r for r in residuals) / len(residuals)) ** 0.5


def fluctuation_ratio(small: Evaluated, large: Evaluated) -> float:
    """:func:`late_fluctuation` of ``small`` over that of ``large``, at the same samples: the two runs' late
    windows must be evaluated at the same sample counts (else ValueError). Infinite when only ``large`` is
    perfectly smooth; 1 when both are."""
    samples_small, samples_large = late_window(small)[0], late_window(large)[0]
    if samples_small != samples_large:
        raise ValueError(f"两次运行的后半程不在同样的样本处评估（{samples_small[:3]}… 与 {samples_large[:3]}…）："
                         "波动只能在同样的已见样本处比较")
    a, b = late_fluctuation(small), late_fluctuation(large)
    if b == 0:
        return 1.0 if a == 0 else float("inf")
    return a / b


def late_oscillation(small: Sequence[Evaluated], large: Sequence[Evaluated], ratio: float = OSCILLATION_RATIO,
                     share: float = LATE_PHASE_SHARE) -> str:
    """The book's one verdict on "小批次后期震荡" (4.2 and 4.6), seed by seed (``small[i]`` and ``large[i]``
    share a seed, a learning rate and a sample budget).

    :data:`UNTESTABLE` when a small-batch run has not reached its late phase (:func:`in_late_phase`): its
    second half is still descending and shows no "late" at all. Otherwise 成立 if, on every seed, the small
    batch's :func:`late_fluctuation` is at least ``ratio`` times the large batch's at the same samples
    (:func:`fluctuation_ratio`); else 不成立. A run whose fluctuation decays (a cosine-decayed learning rate)
    fails it however many times its loss rises.
    """
    if len(small) != len(large) or not small:
        raise ValueError(f"小批次与大批次的运行必须按种子一一对应且非空：{len(small)} 次与 {len(large)} 次")
    positive("ratio", ratio)
    if not all(in_late_phase(run, share) for run in small):
        return UNTESTABLE
    return VERDICT[all(fluctuation_ratio(s, b) >= ratio for s, b in zip(small, large))]


def wins_per_seed(candidate: Sequence[float], rival: Sequence[float]) -> list[bool]:
    """Seed by seed (same order in both lists), whether ``candidate``'s loss is strictly lower."""
    if len(candidate) != len(rival) or not candidate:
        raise ValueError(f"两组结果必须按同样的种子一一对应：{len(candidate)} 个与 {len(rival)} 个")
    return [c < r for c, r in zip(candidate, rival)]


PRESCRIBED = "加预热"
"""The condition the 原文 prescribes with linear scaling: 「还需要配合学习率预热」."""


def wins_as_prescribed(candidate: Mapping[str, Sequence[float]], rival: Mapping[str, Sequence[float]],
                       prescribed: str = PRESCRIBED) -> bool:
    """A rule judged as the 原文 prescribes it: ``candidate`` and ``rival`` map conditions (with and without
    warm-up) to per-seed losses, and only the ``prescribed`` condition decides — the candidate's mean is
    strictly lower than the rival's under that same condition (like with like: both warmed up). The other
    conditions are evidence for why the prescription includes them, not part of the verdict."""
    if prescribed not in candidate or prescribed not in rival:
        raise ValueError(f"两组做法都要有原文规定的条件 {prescribed!r}：{sorted(candidate)} 与 {sorted(rival)}")
    return beats_like_with_like({prescribed: candidate[prescribed]}, {prescribed: rival[prescribed]})


def beats_like_with_like(candidate: Mapping[str, Sequence[float]], rival: Mapping[str, Sequence[float]]) -> bool:
    """A like-with-like comparison: ``candidate`` and ``rival`` map the same conditions (e.g. without and
    with warm-up) to per-seed losses. True only if, in every condition, the candidate's mean loss over
    the seeds is strictly lower than the rival's under that same condition — winning one pairing (say,
    with warm-up against a rival without it) is not enough."""
    if not candidate or set(candidate) != set(rival):
        raise ValueError(f"两组做法的条件必须相同且非空：{sorted(candidate)} 与 {sorted(rival)}")
    for condition in candidate:
        wins_per_seed(candidate[condition], rival[condition])  # same seeds on both sides
        if not sum(candidate[condition]) / len(candidate[condition]) < sum(rival[condition]) / len(rival[condition]):
            return False
    return True


def in_band(value: float, low: float, high: float) -> bool:
    """low ≤ value ≤ high."""
    if low > high:
        raise ValueError(f"区间 [{low}, {high}] 的下界大于上界")
    return low <= value <= high


def beats(candidate: float, others: Sequence[float]) -> bool:
    """True if ``candidate`` (a loss) is strictly lower than every one of ``others``."""
    if not others:
        raise ValueError("others 为空：没有可比较的对象")
    return all(candidate < other for other in others)


def samples_to_target(samples: Sequence[int], losses: Sequence[float], target: float) -> int | None:
    """Samples seen at the first evaluation whose loss is at most ``target`` (None if never)."""
    return next((s for s, loss in zip(samples, losses) if loss <= target), None)


def holds_in_every_seed(per_seed: Sequence[bool]) -> bool:
    """A ranking that holds for each random seed tried (and at least one was tried)."""
    if not per_seed:
        raise ValueError("per_seed 为空：至少需要一个随机种子的结果")
    return all(per_seed)


def verdict_over_seeds(per_seed: Sequence[bool]) -> str:
    """A ranking judged seed by seed, which decides only when the seeds agree: 成立 if it held on every seed,
    不成立 if on none. When they split, the effect is smaller than the spread between seeds and the
    experiment cannot tell which way it goes: :data:`UNTESTABLE` (more seeds, or a setting where the
    effect's mechanism is at work, would be needed) — not 不成立, which would say the opposite holds."""
    if not per_seed:
        raise ValueError("per_seed 为空：至少需要一个随机种子的结果")
    if all(per_seed):
        return VERDICT[True]
    return VERDICT[False] if not any(per_seed) else UNTESTABLE


def straight_line_residual(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Largest distance of the points from their least-squares straight line, relative to the largest
    absolute y: 0 for points exactly on a line. The criterion behind "activations grow linearly in B" (4.3)."""
    if len(xs) < 3:
        raise ValueError(f"需要至少 3 个点才能判断是不是直线，收到 {len(xs)} 个")
    intercept, slope = least_squares_line(xs, ys)
    scale = max(abs(y) for y in ys) or 1.0
    return max(abs(y - (intercept + slope * x)) for x, y in zip(xs, ys)) / scale


UNCHANGED_TOLERANCE = 0.05
"""How far (±, as a fraction) a quantity may move and still count as unchanged (4.6, 误区一)."""


def unchanged(ratio: float, tolerance: float = UNCHANGED_TOLERANCE) -> bool:
    """A quantity that moved by the factor ``ratio`` (new / old) stayed within ±``tolerance`` of itself."""
    nonnegative("tolerance", tolerance)
    return abs(positive("ratio", ratio) - 1.0) <= tolerance


def only_memory_moves(ratios: Mapping[str, float], memory: str, tolerance: float = UNCHANGED_TOLERANCE) -> bool:
    """The claim "batch size only affects memory" (原文 4.6, 误区一) for one change of batch: every quantity
    in ``ratios`` (new / old) other than the ``memory`` one stayed within ±``tolerance``."""
    if memory not in ratios:
        raise ValueError(f"memory = {memory!r} 不在 ratios 的键 {list(ratios)} 中")
    others = {name: r for name, r in ratios.items() if name != memory}
    if not others:
        raise ValueError("ratios 里除了显存没有别的量：无从判断“只影响显存”")
    return all(unchanged(r, tolerance) for r in others.values())


def moved_besides(ratios: Mapping[str, float], memory: str, tolerance: float = UNCHANGED_TOLERANCE) -> list[str]:
    """The quantities of ``ratios`` other than ``memory`` that moved by more than ±``tolerance``: what
    refutes "batch size only affects memory" (empty when :func:`only_memory_moves` holds)."""
    only_memory_moves(ratios, memory, tolerance)  # the same checks on its arguments
    return [name for name, r in ratios.items() if name != memory and not unchanged(r, tolerance)]


FLOAT32_ROUNDING_EXPONENT = -6
FLOAT32_ROUNDING = 10.0**FLOAT32_ROUNDING_EXPONENT
"""The largest relative gap float32 rounding alone leaves between two orders of the same sums (4.6
measures 1e-7 to 2e-7; the digits change with the CPU's vector instructions). Below it a gap is noise:
readers see "< 10⁻⁶（float32 舍入）" (:func:`batchlab.page.numbers.float_gap`), not its digits."""
SAME_UPDATE_TOLERANCE = 10.0**(FLOAT32_ROUNDING_EXPONENT + 1)  # 1e-5, exactly
"""How large a relative gradient gap still counts as the same update: ten times the rounding level, so no
CPU's rounding flips the verdict, and far below any systematic gap (4.6's are 10⁻² and more)."""


def same_update(relative_gap: float, tolerance: float = SAME_UPDATE_TOLERANCE) -> bool:
    """Two ways of computing one update agree: their largest gradient difference, relative to the
    largest gradient entry, is at most ``tolerance`` (ten times :data:`FLOAT32_ROUNDING`)."""
    return nonnegative("relative_gap", relative_gap) <= nonnegative("tolerance", tolerance)


def update_verdict(relative_gap: float, reseeded_gap: float, tolerance: float = SAME_UPDATE_TOLERANCE) -> str:
    """Verdict on "these two computations give the same update" when one of them draws random numbers.

    :func:`same_update` within ``tolerance`` → 成立; otherwise, a gap at most twice ``reseeded_gap`` (the
    gap between the same whole-batch computation under two random seeds) → :data:`SAME_DISTRIBUTION`;
    a larger gap is systematic → 不成立.
    """
    if same_update(relative_gap, tolerance):
        return VERDICT[True]
    return SAME_DISTRIBUTION if relative_gap <= 2 * nonnegative("reseeded_gap", reseeded_gap) else VERDICT[False]


def best_rate_grows(best_lr: Mapping[int, float]) -> bool:
    """The best learning rate (value) never falls as the batch size (key) grows, and the largest batch's
    is strictly higher than the smallest's: the coupling of 原文 4.6 误区四."""
    if len(best_lr) < 2:
        raise ValueError("需要至少两个批大小的最优学习率才能比较")
    rates = [positive("best_lr", best_lr[b]) for b in sorted(best_lr)]
    return all(a <= b for a, b in zip(rates, rates[1:])) and rates[-1] > rates[0]
